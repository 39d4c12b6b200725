"""Atomic file writes for everything orchard_eval writes: the build's own writer (a temporary file in
the target's folder, flushed and fsynced, then `os.replace`d over the target), so a crash or a
concurrent writer leaves the old file or the new one, never a torn one; plus JSON on top of it."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchard_build.io import write_bytes_atomic

__all__ = ["write_bytes_atomic", "write_json_atomic"]


def write_json_atomic(path: str | Path, doc: Any, **dumps: Any) -> Path:
    """`doc` as JSON (indent 1, UTF-8 unescaped, a final newline unless `dumps` say otherwise)."""
    opts = {"indent": 1, "ensure_ascii": False, **dumps}
    write_bytes_atomic(path, (json.dumps(doc, **opts) + "\n").encode("utf-8"))
    return Path(path)
