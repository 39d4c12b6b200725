"""Orchard evaluation: score model outputs on the five Apple-π subtracks."""

__version__ = "0.1.0"
