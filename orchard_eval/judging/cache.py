"""Content-addressed, persistent cache of judge replies.

Key: SHA-256 over a canonical JSON description of everything that determines the judge's answer —
the judge kind, the endpoint's base URL and model, the generation settings, the prompt template
digest and rendered text, and the SHA-256 of every attached image's bytes (the PNG actually sent).
API keys are never part of a key or an entry. Entries are JSON files `<dir>/<k[:2]>/<k>.json`
written atomically (temporary file in the same directory, fsync, `os.replace`), so concurrent writers
and crashes leave either the old entry or the new one, never a torn file. A corrupt entry reads as a
miss.
"""
from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path
from typing import Any, Mapping

from ..atomic import write_bytes_atomic

CACHE_VERSION = 1


def cache_key(parts: Mapping[str, Any]) -> str:
    blob = json.dumps({"cache_version": CACHE_VERSION, **parts}, sort_keys=True, ensure_ascii=True,
                      separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class JudgeCache:
    """`get(key)` → stored dict or None; `put(key, value)` stores a JSON-serialisable dict."""

    def __init__(self, directory: str | Path):
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def path(self, key: str) -> Path:
        if len(key) != 64 or any(c not in "0123456789abcdef" for c in key):
            raise ValueError("cache keys are SHA-256 hex digests")
        return self.dir / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        p = self.path(key)
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            with self._lock:
                self.misses += 1
            return None
        if not isinstance(doc, dict) or doc.get("key") != key:
            with self._lock:
                self.misses += 1
            return None
        with self._lock:
            self.hits += 1
        return doc

    def put(self, key: str, value: Mapping[str, Any]) -> Path:
        p = self.path(key)
        p.parent.mkdir(parents=True, exist_ok=True)
        doc = {"key": key, **value}
        data = json.dumps(doc, sort_keys=True, ensure_ascii=False, indent=1).encode("utf-8")
        write_bytes_atomic(p, data)
        return p
