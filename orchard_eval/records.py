"""Per-response evaluation records: one JSON object per line in `<out>/records.jsonl`, appended
atomically, and the provenance stored with every record.

Crash safety. Each record is serialised to a single line and written with one `write` on a file
descriptor opened with O_APPEND, then `fsync`ed before the next record is written, so after a crash
(even `kill -9`) the file holds every record that was reported as written plus at most one torn last
line. `RecordLog.open` reads the existing records, cuts a torn or unparsable last line off the file,
and reports the keys (case, subtrack, rollout) already done, so a rerun skips them: no response is
lost and none is written twice. A record whose key is already present is never appended again.

Provenance. `provenance(...)` collects what makes scores comparable: the orchard-eval version, the
versions of the libraries that decode and measure (numpy, scipy, OpenCV, PyAV, Pillow), the Python
version, the judge (name and non-secret config), the alignment/fusion rule, the segmenter, the
dataset (path and SHA-256 of its `dataset.json`), and the prompts the predictions answered
(`prompts`: the source submission.json's prompt_version stands for, see `prompts.prompt_source`),
and whether the transition score was fused into Deduction (`fuse_transitions`).
Resuming into a directory whose records were made under a different scoring setup (`scoring_key`) is
refused instead of silently mixing them.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import platform
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from . import __version__

RECORD_VERSION = 1
RECORDS_FILE = "records.jsonl"
Key = tuple[str, str, int]

# the parts of the provenance that change scores; versions of libraries are recorded but a resumed
# run may continue across a patch upgrade of them
SCORING_FIELDS = ("judge", "rule", "segmenter", "dataset_sha256", "protocol", "num_rollouts", "fuse_transitions")
# what a scoring field means when a record predates it (records made before the transition score
# was fused never fused it, so they resume under a run that does not either)
SCORING_DEFAULTS = {"fuse_transitions": False}


class RecordLogError(RuntimeError):
    """The record file cannot be resumed (corrupt in the middle, or made under another setup)."""


def record_key(rec: Mapping[str, Any]) -> Key:
    return (str(rec["case_id"]), str(rec["subtrack"]), int(rec["rollout"]))


def key_str(key: Key) -> str:
    return f"{key[0]}/{key[1]}/rollout_{key[2]:02d}"


def sha256_file(path: str | Path, chunk: int = 1 << 20) -> str | None:
    p = Path(path)
    if not p.is_file():
        return None
    h = hashlib.sha256()
    with open(p, "rb") as fh:
        while True:
            b = fh.read(chunk)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


DEPENDENCIES = {"numpy": "numpy", "scipy": "scipy", "opencv": "opencv-python-headless", "pyav": "av",
                "pillow": "pillow", "jsonschema": "jsonschema"}


def dependency_versions() -> dict[str, str | None]:
    from importlib import metadata

    out: dict[str, str | None] = {"python": platform.python_version()}
    for name, dist in DEPENDENCIES.items():
        try:
            out[name] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[name] = None
    if out.get("opencv") is None:
        try:
            import cv2

            out["opencv"] = str(cv2.__version__)
        except ImportError:  # pragma: no cover
            pass
    return out


def provenance(dataset_root: str | Path, judge: Mapping[str, Any], rule: str, segmenter: str,
               protocol: str | None = None, num_rollouts: int | None = None,
               prompt_version: str | None = None, fuse_transitions: bool = False) -> dict[str, Any]:
    from .prompts import prompt_provenance

    root = Path(dataset_root)
    index = root / "dataset.json"
    return {
        "orchard_eval": __version__,
        "dependencies": dependency_versions(),
        "judge": dict(judge),
        "rule": rule,
        "segmenter": segmenter,
        "dataset": str(root.resolve()),
        "dataset_sha256": sha256_file(index) if index.is_file() else None,
        "protocol": protocol,
        "num_rollouts": num_rollouts,
        "prompts": prompt_provenance(prompt_version),
        "fuse_transitions": bool(fuse_transitions),
    }


def scoring_key(prov: Mapping[str, Any]) -> dict[str, Any]:
    return {k: prov.get(k, SCORING_DEFAULTS.get(k)) for k in SCORING_FIELDS}


def _clean(x: Any) -> Any:
    """JSON-safe copy: NaN/inf become None, numpy scalars/arrays become Python values, tuples lists."""
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if isinstance(x, (str, int, bool)) or x is None:
        return x
    if isinstance(x, Mapping):
        return {str(k): _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return _clean(x.item())
        if isinstance(x, np.ndarray):
            return _clean(x.tolist())
    except ImportError:  # pragma: no cover
        pass
    return str(x)


def dumps_record(rec: Mapping[str, Any]) -> str:
    line = json.dumps(_clean(rec), sort_keys=True, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    if "\n" in line:  # impossible with ensure_ascii, kept as a guard for the one-line contract
        raise ValueError("a record must serialise to one line")
    return line


@dataclass
class RecordLog:
    """Append-only JSONL of records with resume support. Use `RecordLog.open(path)`."""
    path: Path
    records: dict[Key, dict[str, Any]] = field(default_factory=dict)
    dropped_tail: str | None = None         # what was cut off the end when opening (a torn line)
    skipped_duplicates: int = 0
    _fd: int | None = None

    @classmethod
    def open(cls, path: str | Path) -> "RecordLog":
        log = cls(Path(path))
        log._load()
        return log

    # -- reading ------------------------------------------------------------------------------
    def _load(self) -> None:
        p = self.path
        if not p.exists():
            return
        data = p.read_bytes()
        good_end = 0
        pos = 0
        n = len(data)
        while pos < n:
            nl = data.find(b"\n", pos)
            if nl < 0:  # last line without newline: torn by a crash
                self.dropped_tail = data[pos:].decode("utf-8", "replace")[:200]
                break
            line = data[pos:nl]
            pos = nl + 1
            if not line.strip():
                good_end = pos
                continue
            try:
                rec = json.loads(line)
                key = record_key(rec)
            except (ValueError, KeyError, TypeError) as exc:
                if pos >= n:  # unparsable complete last line: treat it as torn as well
                    self.dropped_tail = line.decode("utf-8", "replace")[:200]
                    break
                raise RecordLogError(f"{p}: line ending at byte {nl} is not a record ({exc}); "
                                     "the file is corrupt beyond a torn last line") from exc
            if key in self.records:
                self.skipped_duplicates += 1
            else:
                self.records[key] = rec
            good_end = pos
        if good_end < n:
            with open(p, "r+b") as fh:
                fh.truncate(good_end)
                fh.flush()
                os.fsync(fh.fileno())

    def done(self) -> set[Key]:
        return set(self.records)

    def __contains__(self, key: Key) -> bool:
        return key in self.records

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter(self.records.values())

    def check_provenance(self, prov: Mapping[str, Any]) -> None:
        """Refuse to continue a record file made under another scoring setup."""
        want = scoring_key(prov)
        for rec in self.records.values():
            have = scoring_key(rec.get("provenance", {}))
            if have != want:
                diff = {k: (have.get(k), want.get(k)) for k in want if have.get(k) != want.get(k)}
                raise RecordLogError(
                    f"{self.path}: existing records were scored under another setup "
                    f"({', '.join(f'{k}: {a!r} now {b!r}' for k, (a, b) in diff.items())}); "
                    "use another --out directory or --restart")
            return

    # -- writing ------------------------------------------------------------------------------
    def append(self, rec: Mapping[str, Any]) -> bool:
        """Write one record (one line, then fsync). Returns False when its key is already present."""
        key = record_key(rec)
        if key in self.records:
            self.skipped_duplicates += 1
            return False
        line = (dumps_record(rec) + "\n").encode("utf-8")
        if self._fd is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        view = memoryview(line)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)
        self.records[key] = json.loads(line)
        return True

    def extend(self, recs: Iterable[Mapping[str, Any]]) -> int:
        return sum(int(self.append(r)) for r in recs)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> "RecordLog":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """Records of a finished (or interrupted) run, in file order, without modifying the file."""
    p = Path(path)
    if p.is_dir():
        p = p / RECORDS_FILE
    out, seen = [], set()
    if not p.exists():
        return out
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            rec = json.loads(line)
            key = record_key(rec)
        except (ValueError, KeyError, TypeError):
            continue
        if key not in seen:
            seen.add(key)
            out.append(rec)
    return out
