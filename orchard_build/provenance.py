"""Tool and dependency versions recorded with every case, so a number can be traced to its code."""
from __future__ import annotations

import hashlib
import platform
from pathlib import Path
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


@lru_cache(maxsize=1)
def code_sha256() -> str:
    """Hash of the authoring code and its data (engine calibration, fonts excluded): a build made by other
    code is never taken for an up-to-date case."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in sorted(list(root.rglob("*.py")) + list(root.rglob("*.json"))):
        if "__pycache__" in path.parts:
            continue
        h.update(path.relative_to(root).as_posix().encode())
        h.update(path.read_bytes())
    return h.hexdigest()


def provenance(backend: str | None = None, playback: str | None = None) -> dict:
    prov = {"tool": "orchard-build", "tool_version": __version__, "code_sha256": code_sha256(),
            "python": platform.python_version(), "dependencies": dependency_versions()}
    if backend:
        prov["backend"] = backend
    if playback:
        prov["playback"] = playback
    return prov
