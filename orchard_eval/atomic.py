"""Atomic file writes for everything orchard_eval writes: a temporary file in the target's folder,
flushed and fsynced, then `os.replace`d over the target, so a crash or a concurrent writer leaves the
old file or the new one, never a torn one."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

FILE_MODE = 0o644   # mkstemp's 0600 would make results unreadable to the rest of a group


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def write_json_atomic(path: str | Path, doc: Any, **dumps: Any) -> Path:
    """`doc` as JSON (indent 1, UTF-8 unescaped, a final newline unless `dumps` say otherwise)."""
    opts = {"indent": 1, "ensure_ascii": False, **dumps}
    return write_bytes_atomic(path, (json.dumps(doc, **opts) + "\n").encode("utf-8"))
