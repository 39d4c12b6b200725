"""Tool and dependency versions recorded with every case, so a number can be traced to its code."""
from __future__ import annotations

import platform
from functools import lru_cache
from importlib import metadata

from . import __version__

_DEPENDENCIES = ("numpy", "scipy", "sympy", "jsonschema", "PyYAML", "trimesh", "mujoco", "av", "pillow",
                 "opencv-python-headless")


@lru_cache(maxsize=1)
def dependency_versions() -> dict[str, str]:
    out = {}
    for name in _DEPENDENCIES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def provenance(backend: str | None = None, playback: str | None = None) -> dict:
    prov = {"tool": "orchard-build", "tool_version": __version__, "python": platform.python_version(),
            "dependencies": dependency_versions()}
    if backend:
        prov["backend"] = backend
    if playback:
        prov["playback"] = playback
    return prov
