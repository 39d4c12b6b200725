"""Access to the JSON Schemas in `schemas/`: the contract of every file Orchard writes or reads."""
from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any, Iterator

import jsonschema
from jsonschema import Draft202012Validator

from .errors import ConfigError


def schema_dir() -> Path:
    """`schemas/` of a source checkout, else the copy packaged into the wheel."""
    repo = Path(__file__).resolve().parents[1] / "schemas"
    if repo.is_dir():
        return repo
    return Path(str(resources.files("orchard_build") / "_data" / "schemas"))


@lru_cache(maxsize=None)
def load_schema(name: str) -> dict[str, Any]:
    return json.loads((schema_dir() / name).read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def _validator(name: str) -> Draft202012Validator:
    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def json_path(error: jsonschema.ValidationError) -> str:
    parts = []
    for p in error.absolute_path:
        parts.append(f"[{p}]" if isinstance(p, int) else (f".{p}" if parts else str(p)))
    return "".join(parts)


def iter_errors(instance: Any, schema_name: str) -> Iterator[tuple[str, str]]:
    """Every schema violation as (field path, reason), in a stable order."""
    errors = sorted(_validator(schema_name).iter_errors(instance), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    for e in errors:
        yield json_path(e), e.message


def validate_instance(instance: Any, schema_name: str, file: str | Path) -> None:
    """Raise ConfigError naming file, field and reason for the first violation."""
    for field, reason in iter_errors(instance, schema_name):
        raise ConfigError(file, field, reason)
