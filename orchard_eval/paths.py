"""Safe resolution of relative paths read from manifests (case.json, metadata.json, dataset.json).

Every path a manifest names must stay inside the directory that manifest describes: absolute paths,
drive letters, backslashes, empty components and `..` are refused before the file system is touched,
and the resolved path is checked once more against symlinks that lead outside.
"""
from __future__ import annotations

from pathlib import Path, PurePosixPath


class UnsafePathError(ValueError):
    """A manifest named a path outside its own directory (or one that is malformed)."""


def check_relpath(rel: object) -> PurePosixPath:
    """Validate a manifest path lexically and return it as a POSIX path."""
    if not isinstance(rel, str) or not rel.strip():
        raise UnsafePathError(f"not a non-empty string path: {rel!r}")
    if "\\" in rel or "\x00" in rel:
        raise UnsafePathError(f"backslash or NUL in path: {rel!r}")
    if rel.startswith("/") or (len(rel) > 1 and rel[1] == ":"):
        raise UnsafePathError(f"absolute path refused: {rel!r}")
    parts = rel.split("/")
    for part in parts:
        if part == "..":
            raise UnsafePathError(f"'..' refused in path: {rel!r}")
    cleaned = [p for p in parts if p not in ("", ".")]
    if not cleaned:
        raise UnsafePathError(f"path names no file: {rel!r}")
    return PurePosixPath(*cleaned)


def safe_join(base: str | Path, rel: object) -> Path:
    """`base / rel` after `check_relpath`; refuses results that resolve outside `base`."""
    base = Path(base)
    p = base.joinpath(*check_relpath(rel).parts)
    try:
        real_base = base.resolve()
        real = p.resolve()
    except OSError as exc:  # pragma: no cover - symlink loops and the like
        raise UnsafePathError(f"cannot resolve {rel!r}: {exc}") from exc
    if real != real_base and real_base not in real.parents:
        raise UnsafePathError(f"path {rel!r} resolves outside {base}")
    return p
