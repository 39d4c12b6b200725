"""Deterministic, atomic file output: canonical JSON, NPZ without timestamps, directory swaps."""
from __future__ import annotations

import io
import json
import math
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

_UMASK = os.umask(0)
os.umask(_UMASK)
FILE_MODE = 0o666 & ~_UMASK  # what open() would give; mkstemp alone makes files private (0600)
FLOAT_DIGITS = 12  # significant digits: far below any physical tolerance, and stable across platforms


def canonical(value: Any) -> Any:
    """Plain-JSON form with floats rounded and -0.0 folded, so equal physics gives equal bytes."""
    if isinstance(value, dict):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, np.ndarray):
        return canonical(value.tolist())
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        x = float(value)
        if not math.isfinite(x):
            raise ValueError(f"refusing to write a non-finite number ({x})")
        x = float(f"{x:.{FLOAT_DIGITS}g}")
        return 0.0 if x == 0 else x
    return value


def dumps(value: Any) -> str:
    return json.dumps(canonical(value), indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def write_text_atomic(path: str | Path, text: str) -> None:
    write_bytes_atomic(path, text.encode("utf-8"))


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
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


def write_json(path: str | Path, value: Any) -> None:
    write_text_atomic(path, dumps(value))


def read_json(path: str | Path) -> Any:
    return json.loads(Path(path).read_text(encoding="utf-8"))


def npz_bytes(arrays: dict[str, np.ndarray], compress: bool = True) -> bytes:
    """An .npz archive whose bytes depend only on the arrays (fixed member timestamps)."""
    buf = io.BytesIO()
    method = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    with zipfile.ZipFile(buf, "w", compression=method) as zf:
        for name in sorted(arrays):
            member = io.BytesIO()
            np.lib.format.write_array(member, np.ascontiguousarray(arrays[name]), allow_pickle=False)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = method
            info.external_attr = 0o644 << 16
            zf.writestr(info, member.getvalue())
    return buf.getvalue()


def write_npz(path: str | Path, arrays: dict[str, np.ndarray], compress: bool = True) -> None:
    write_bytes_atomic(path, npz_bytes(arrays, compress))


def replace_dir(staged: Path, final: Path) -> None:
    """Move a fully written staging directory into place; an existing directory is swapped out whole."""
    final.parent.mkdir(parents=True, exist_ok=True)
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.replace(final, old)
        os.replace(staged, final)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(staged, final)


def safe_relative(path: str) -> bool:
    """True if a path from a manifest stays inside its root (no absolute paths, no '..')."""
    p = Path(path)
    return bool(path) and not p.is_absolute() and ".." not in p.parts and "\\" not in path
