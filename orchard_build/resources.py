"""Locations of the data that ships with Orchard (scenes, schemas, fonts)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path

_REPO = Path(__file__).resolve().parents[1]


def _shipped(name: str) -> Path:
    local = _REPO / name
    if local.is_dir():
        return local
    return Path(str(resources.files("orchard_build") / "_data" / name))


def scenes_dir() -> Path:
    return _shipped("scenes")
