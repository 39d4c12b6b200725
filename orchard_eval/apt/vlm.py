"""`orchard-eval apt run`: ask an OpenAI-compatible vision-language endpoint for each clip's chain.

The request is the exported one (`export.py`): the prompt, then every frame as a PNG data URL after
its time marker. The transport is the judge's (`judging.openai.OpenAIJudge.complete`: temperature 0,
retries with backoff on 429 / 5xx / timeouts, the API key only from the environment); replies are
cached by content (`judging.cache.JudgeCache`, key over endpoint, model, settings, prompt text and the
SHA-256 of every frame), so a rerun makes no request for a clip already answered. Replies are written
to `replies.jsonl` (the format `apt score` reads) as they arrive, and a rerun skips the clips it holds.
"""
from __future__ import annotations

import base64
import json
import logging
from pathlib import Path
from typing import Any, Callable

from ..judging.cache import JudgeCache, cache_key, sha256_bytes
from ..judging.openai import JudgeFailure, OpenAIJudge
from ..paths import safe_join
from .prompt import PROMPT_VERSION

log = logging.getLogger("orchard_eval.apt")


def messages_for(folder: Path, request: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    content: list[dict[str, Any]] = [{"type": "text", "text": request["prompt"]}]
    digests = []
    for f in request["frames"]:
        data = safe_join(folder, f["file"]).read_bytes()
        digests.append(sha256_bytes(data))
        content.append({"type": "text", "text": f["marker"]})
        content.append({"type": "image_url",
                        "image_url": {"url": "data:image/png;base64," + base64.b64encode(data).decode("ascii")}})
    return [{"role": "user", "content": content}], digests


def _done(path: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue   # a line torn by an interrupted run: that clip is asked again
            if isinstance(doc, dict) and isinstance(doc.get("case_id"), str):
                out[doc["case_id"]] = doc
    return out


def ask_all(export_dir: str | Path, out: str | Path, model: str, base_url: str | None = None,
            cache_dir: str | Path | None = None, max_tokens: int = 2048, timeout: float = 120.0,
            max_retries: int = 5, backoff: float = 1.0, progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Ask for every clip of an export; returns {"replies": path, "asked": n, "cached": n, "failed": {id: reason}}."""
    root = Path(export_dir)
    manifest = json.loads((root / "apt_manifest.json").read_text(encoding="utf-8"))
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    replies_path = out / "replies.jsonl"
    done = _done(replies_path)
    client = OpenAIJudge(model=model, base_url=base_url, max_tokens=max_tokens, timeout=timeout,
                         max_retries=max_retries, backoff=backoff)
    cache = JudgeCache(cache_dir or out / "cache")
    asked = cached = 0
    failed: dict[str, str] = {}
    torn = replies_path.is_file() and replies_path.stat().st_size and not replies_path.read_bytes().endswith(b"\n")
    with open(replies_path, "a", encoding="utf-8") as fh:
        if torn:   # an interrupted write: end its line so the next record starts clean
            fh.write("\n")
        for entry in manifest["cases"]:
            cid = entry["case_id"]
            if cid in done:
                if progress:
                    progress(1)
                continue
            folder = safe_join(root, entry["path"])
            request = json.loads((folder / "request.json").read_text(encoding="utf-8"))
            messages, digests = messages_for(folder, request)
            key = cache_key({"benchmark": "orchard-apt", "base_url": base_url or "", "model": model, "temperature": 0,
                             "max_tokens": max_tokens, "prompt_version": PROMPT_VERSION, "text": request["prompt"],
                             "markers": [f["marker"] for f in request["frames"]], "images": digests})
            hit = cache.get(key)
            if hit is not None and isinstance(hit.get("reply"), str):
                reply = hit["reply"]
                cached += 1
            else:
                try:
                    reply = client.complete(messages)
                except JudgeFailure as exc:
                    failed[cid] = str(exc)
                    log.warning("%s: %s", cid, exc)
                    if progress:
                        progress(1)
                    continue
                asked += 1
                cache.put(key, {"benchmark": "orchard-apt", "model": model, "case_id": cid, "reply": reply})
            fh.write(json.dumps({"case_id": cid, "model": model, "reply": reply}, ensure_ascii=False) + "\n")
            fh.flush()
            if progress:
                progress(1)
    return {"replies": str(replies_path), "asked": asked, "cached": cached, "failed": failed}
