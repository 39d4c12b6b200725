"""`orchard-eval apt run`: ask an OpenAI-compatible video-language model for each case's APT chain,
then score the replies.

The cases are exported first (`export.export_dataset`, into OUT/export, resumable). Each request is
one user message: the exported prompt's parts in order, every frame as a base64 PNG data URL (the
exported file's bytes) right after its text marker; temperature 0. The transport is the judge's
(`judging.openai.OpenAIJudge.complete`: retries with backoff on 429/5xx/timeouts, the API key only
from the environment, never stored), and replies are cached in the judge's content-addressed cache
(key: endpoint, model, settings, prompt text and the SHA-256 of every image), so a rerun asks nothing
it has asked before. Replies are appended to OUT/predictions.jsonl (one fsynced line per case), so an
interrupted run resumes where it stopped. A case whose request fails for good is recorded with its
error and scores as an empty chain.
"""
from __future__ import annotations

import base64
import json
import logging
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..judging.cache import JudgeCache, cache_key, sha256_bytes
from ..paths import safe_join
from .export import export_dataset
from .prompt import DEFAULT_FRAMES

log = logging.getLogger("orchard_eval.apt")


def build_messages(export_root: Path, entry: dict) -> tuple[list[dict[str, Any]], list[str], list[str]]:
    """(messages, texts, image digests) for one exported case."""
    case_root = safe_join(export_root, entry["dir"])
    prompt = json.loads((case_root / entry["prompt"]).read_text(encoding="utf-8"))
    files = {f["number"]: f["file"] for f in entry["frames"]}
    content: list[dict[str, Any]] = []
    texts, digests = [], []
    for part in prompt["parts"]:
        if "text" in part:
            content.append({"type": "text", "text": part["text"]})
            texts.append(part["text"])
        else:
            data = safe_join(case_root, files[int(part["frame"])]).read_bytes()
            digests.append(sha256_bytes(data))
            content.append({"type": "image_url",
                            "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode("ascii")}})
    return [{"role": "user", "content": content}], texts, digests


def _done(pred_path: Path) -> set[str]:
    done = set()
    if pred_path.is_file():
        for line in pred_path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                continue   # a line torn by a crash: that case is asked again
            if isinstance(rec, dict) and isinstance(rec.get("case_id"), str) and "error" not in rec:
                done.add(rec["case_id"])
    return done


def run_vlm(cases: str | Path, out: str | Path, model: str, base_url: str | None = None,
            n_frames: int = DEFAULT_FRAMES, cache_dir: str | Path | None = None, max_tokens: int = 2048,
            jobs: int = 4, timeout: float = 120.0, max_retries: int = 5, backoff: float = 1.0,
            max_backoff: float = 60.0, api_key_env: str | None = None) -> dict:
    """Export, ask, score; returns the report (also written to OUT/report.json and OUT/report.md)."""
    from ..judging.openai import JudgeFailure, OpenAIJudge
    from .score import read_predictions, score, write_report

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    export_root = out / "export"
    manifest, notes = export_dataset(cases, export_root, n_frames=n_frames)
    client = OpenAIJudge(model=model, base_url=base_url, api_key_env=api_key_env, max_tokens=max_tokens,
                         timeout=timeout, max_retries=max_retries, backoff=backoff, max_backoff=max_backoff,
                         concurrency=max(1, int(jobs)))
    cache = JudgeCache(cache_dir if cache_dir is not None else out / "cache")
    pred_path = out / "predictions.jsonl"
    done = _done(pred_path)
    todo = [e for e in manifest["cases"] if e["case_id"] not in done]
    fd = os.open(pred_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    import threading

    lock = threading.Lock()

    def append(rec: dict) -> None:
        line = (json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
        with lock:
            os.write(fd, line)
            os.fsync(fd)

    def ask(entry: dict) -> None:
        messages, texts, digests = build_messages(export_root, entry)
        parts = {"kind": "apt-chain", "base_url": client.base_url or "", "model": client.model, "temperature": 0,
                 "max_tokens": client.max_tokens, "prompt_version": manifest["prompt_version"], "texts": texts,
                 "images": digests}
        key = cache_key(parts)
        hit = cache.get(key)
        if hit is not None and isinstance(hit.get("reply"), str):
            reply, cached = hit["reply"], True
        else:
            try:
                reply = client.complete(messages)
            except JudgeFailure as exc:
                log.warning("%s: %s", entry["case_id"], exc)
                append({"case_id": entry["case_id"], "reply": "", "error": str(exc), "model": client.model})
                return
            cache.put(key, {"kind": "apt-chain", "model": client.model, "base_url": client.base_url or "",
                            "case_id": entry["case_id"], "prompt_version": manifest["prompt_version"],
                            "reply": reply})
            cached = False
        append({"case_id": entry["case_id"], "reply": reply, "model": client.model, "cached": cached})

    try:
        with ThreadPoolExecutor(max_workers=max(1, int(jobs))) as ex:
            list(ex.map(ask, todo))
    finally:
        os.close(fd)
    preds, more = read_predictions(pred_path)
    rep = score(cases, preds, n_frames=n_frames)
    rep["notes"] = list(notes) + more + rep["notes"]
    rep["run"] = {"model": client.model, "base_url": client.base_url, "requests_sent": client.requests_sent,
                  "cache_hits": cache.hits, "asked": len(todo), "resumed": len(done),
                  "failed": sorted(c for c, r in preds.items() if r.get("error"))}
    write_report(rep, out)
    return rep
