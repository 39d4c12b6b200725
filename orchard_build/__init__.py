"""Orchard authoring: deterministic case configs → schema-valid benchmark case directories."""

__version__ = "0.1.0"
