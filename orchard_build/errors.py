"""Errors that name the file, the field and the reason, so bad input is fixable at a glance."""
from __future__ import annotations


class OrchardError(Exception):
    """Base class of every error Orchard raises on purpose."""


class ConfigError(OrchardError):
    def __init__(self, file: str, field: str, reason: str):
        self.file, self.field, self.reason = str(file), field, reason
        super().__init__(f"{self.file}: {field or '<root>'}: {reason}")


class PhysicsError(OrchardError):
    """A configuration asks for a motion the analytic model cannot represent honestly."""
