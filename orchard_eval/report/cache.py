"""On-disk cache of the per-answer visual data of the case pages (thumbnail PNGs, mask-centroid
paths, velocities), so that a report built again (after a resumed run, for another set of runs
that share a prediction dir) decodes and segments each answer once, and byte-identical answers
(a baseline's rollouts) are drawn once per build.

An entry is keyed by the SHA-256 of: the code version (the source of every module that shapes the
data, so an edit of the segmenter or of the drawing invalidates it), the kind of entry, the SHA-256
of the answer file, the SHA-256 of the case's files (a rebuilt case invalidates it) and the
parameters the data depends on (e.g. the chosen frame indices). One JSON file per entry, written to
a temporary file and renamed into place: a killed build leaves no torn entry, and two workers that
write the same key write the same bytes. An entry that cannot be read is a miss, never an error."""
from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

# the modules whose code decides what an entry holds (relative to the orchard_eval package)
CODE_FILES = ("__init__.py", "media.py", "objective.py", "canonical.py", "cases.py", "metrics.py",
              "report/cache.py", "report/visuals.py", "segment/*.py", "readers/*.py")
FORMAT = 1  # bump when the layout of an entry changes without a code change in CODE_FILES


@lru_cache(maxsize=1)
def code_version() -> str:
    pkg = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(f"format {FORMAT}".encode())
    for pattern in CODE_FILES:
        for p in sorted(pkg.glob(pattern)):
            h.update(str(p.relative_to(pkg)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


@lru_cache(maxsize=64)
def case_sha256(case_dir: str) -> str:
    """SHA-256 over every file of a case directory (relative path and bytes, in sorted order)."""
    root = Path(case_dir)
    h = hashlib.sha256()
    for p in sorted(x for x in root.rglob("*") if x.is_file()):
        h.update(str(p.relative_to(root)).encode() + b"\0")
        h.update(file_sha256(p).encode())
    return h.hexdigest()


def png_to_text(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def text_to_png(text: str) -> bytes:
    return base64.b64decode(text.encode("ascii"))


class VisualCache:
    """Entries are read from `write_dir` first, then from `read_dirs` (the cache of the report that
    --out replaces); an entry found there is linked (or copied) into `write_dir`, so the new report's
    cache keeps everything it used. `write_dir=None` disables the cache."""

    def __init__(self, write_dir: str | Path | None, read_dirs: tuple[str | Path, ...] = ()):
        self.write_dir = Path(write_dir) if write_dir is not None else None
        self.read_dirs = tuple(Path(d) for d in read_dirs)
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(kind: str, answer_sha: str, case_sha: str, params: Any) -> str:
        blob = json.dumps([code_version(), kind, answer_sha, case_sha, params], sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _path(self, root: Path, key: str) -> Path:
        return root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict | None:
        if self.write_dir is None:
            return None
        for root in (self.write_dir, *self.read_dirs):
            p = self._path(root, key)
            try:
                data = json.loads(p.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if not isinstance(data, dict) or data.get("key") != key:
                continue
            if root != self.write_dir:
                self._adopt(p, key)
            self.hits += 1
            return data
        self.misses += 1
        return None

    def _adopt(self, src: Path, key: str) -> None:
        dst = self._path(self.write_dir, key)
        if dst.exists():
            return
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f".{dst.name}.{os.getpid()}.tmp")
        try:
            try:
                os.link(src, tmp)
            except OSError:
                shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        except OSError:
            tmp.unlink(missing_ok=True)

    def put(self, key: str, data: dict) -> None:
        if self.write_dir is None:
            return
        dst = self._path(self.write_dir, key)
        try:
            dst.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{key[:8]}.", suffix=".tmp", dir=dst.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({**data, "key": key}, f)
            os.replace(tmp, dst)
        except OSError:  # a full or read-only cache dir costs speed, not the report
            try:
                os.unlink(tmp)
            except (OSError, UnboundLocalError):
                pass
