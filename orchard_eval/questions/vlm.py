"""The VLM answerer of the balanced questions (`orchard-eval questions ask`): each question goes to an
OpenAI-compatible vision-language endpoint with the case's structured prior and its question-aware
frames, and the yes/no reply becomes the answer.

One request per question: a text with the prior (laws, expected events, observable signatures, common
failures) and the question, then every frame of the question's window as a PNG data URL after a text
marker with its time; temperature 0. Frames come from the case's GT video (the benchmark for
video-understanding models) or, with `predictions`, from a model's Deduction answer at the same
physical times (the VLM as a judge of a generated video). The truth is never sent. The transport is
the judge's (`OpenAIJudge.complete`: retries, backoff, key from the environment only), and replies are
cached in the judge's content-addressed cache (key: endpoint, model, settings, texts and the SHA-256 of
every image), so a rerun asks nothing it has asked before and an interrupted run resumes. A reply
without a clear yes or no, or a request that fails for good, leaves the question unanswered (scored
wrong) and is listed in the report.
"""
from __future__ import annotations

import base64
import io
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from ..cases import EvalCase, load_dataset
from ..judging.cache import JudgeCache, cache_key, sha256_bytes

log = logging.getLogger("orchard_eval.questions")
PROMPT_VERSION = "orchard-questions-vlm-1"
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def prior_text(prior: dict) -> str:
    lines = ["Physical prior for this scene:"]
    if prior.get("laws"):
        lines.append("- governing law(s): " + ", ".join(prior["laws"]))
    if prior.get("expected_events"):
        lines.append("- expected events: " + "; ".join(
            f"{e['label']} of {', '.join(e['objects']) or 'the scene'} at t = {e['t']:.2f} s" for e in prior["expected_events"]))
    if prior.get("signatures"):
        lines.append("- what the motion should look like: " + "; ".join(prior["signatures"]))
    if prior.get("common_failures"):
        lines.append("- common ways a generated video gets it wrong: " + "; ".join(prior["common_failures"]))
    return "\n".join(lines)


def question_text(q: dict) -> str:
    return (f"{q['text']}\nAnswer from what the frames show. Reply with one JSON object and nothing else: "
            '{"answer": "yes"} or {"answer": "no"}.')


def parse_answer(reply: str | None) -> bool | None:
    """yes → True, no → False; the JSON form first, else the first bare yes/no; None when unclear."""
    if not reply:
        return None
    m = re.search(r'"answer"\s*:\s*"?\s*(yes|no|true|false)', reply, re.IGNORECASE)
    if m:
        return m.group(1).lower() in ("yes", "true")
    words = {w.lower() for w in _YES_NO.findall(reply)}
    return None if len(words) != 1 else words == {"yes"}


def _png(img: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(img[..., :3])).save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def _gt_frames(case: EvalCase, indices: list[int]) -> dict[int, np.ndarray]:
    from ..media import read_video_frames

    src = case.gt_video_file()
    if src is not None:
        frames, _ = read_video_frames(src, indices)
        return frames
    return case.gt_frames(indices)


def _answer_frames(case: EvalCase, sub, times: list[float]) -> dict[float, np.ndarray]:
    """The frames of the model's Deduction answer (rollout 0) at the physical times, at GT size (an
    image-protocol answer has keyframes at the case's timestamps only: other times are missing)."""
    from ..canonical import canonical_deduction
    from ..predictions import rollout_path

    pk = canonical_deduction(case, rollout_path(sub, case.case_id, "deduction", 0), sub.protocol, times=times)
    if pk.error:
        raise ValueError(pk.error)
    return {t: f for t, f in zip(pk.times, pk.frames) if f is not None}


def build_messages(q: dict, prior: dict, frames: list[tuple[float, bytes]]) -> list[dict[str, Any]]:
    content: list[dict[str, Any]] = [{"type": "text", "text": prior_text(prior)}]
    for t, png in frames:
        content.append({"type": "text", "text": f"Frame at t = {t:.3f} s:"})
        content.append({"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(png).decode("ascii")}})
    content.append({"type": "text", "text": question_text(q)})
    return [{"role": "user", "content": content}]


def ask_all(cases: str, docs: dict[str, dict], out: str | Path, model: str, base_url: str | None = None,
            predictions: str | Path | None = None, cache_dir: str | Path | None = None, jobs: int = 4,
            timeout: float = 120.0, max_retries: int = 5, backoff: float = 1.0, api_key_env: str | None = None,
            max_tokens: int = 64) -> dict:
    """Ask every question of `docs`; returns the answers document (also written to OUT/answers.json)."""
    from ..atomic import write_json_atomic
    from ..judging.openai import JudgeFailure, OpenAIJudge

    out = Path(out)
    client = OpenAIJudge(model=model, base_url=base_url, api_key_env=api_key_env, max_tokens=max_tokens,
                         timeout=timeout, max_retries=max_retries, backoff=backoff, concurrency=max(1, int(jobs)))
    cache = JudgeCache(cache_dir if cache_dir is not None else out / "cache")
    ds = load_dataset(cases, case_ids=sorted(docs))
    source = "gt" if predictions is None else f"predictions:{Path(predictions).name}"
    if predictions is not None:
        from ..predictions import load_submission

        sub = load_submission(predictions)   # read once, not per case
    answers: dict[str, dict[str, bool | None]] = {}
    problems: list[str] = []
    jobs_list = []
    for cid, doc in sorted(docs.items()):
        case = ds.cases.get(cid)
        answers[cid] = {q["id"]: None for q in doc["questions"]}
        if case is None:
            problems.append(f"{cid}: not in the dataset")
            continue
        try:
            if predictions is None:
                need = sorted({i for q in doc["questions"] for i in q["frames"]})
                got = _gt_frames(case, need)
                pngs = {i: _png(got[i]) for i in need if i in got}
                per_q = {q["id"]: [(round(i / case.gt_fps, 4), pngs[i]) for i in q["frames"] if i in pngs]
                         for q in doc["questions"]}
            else:
                need_t = sorted({t for q in doc["questions"] for t in q["times"]})
                got = _answer_frames(case, sub, need_t)
                pngs = {t: _png(img) for t, img in got.items() if img is not None}
                per_q = {q["id"]: [(t, pngs[t]) for t in q["times"] if t in pngs] for q in doc["questions"]}
        except Exception as exc:   # noqa: BLE001 - one unreadable case must not stop the others
            problems.append(f"{cid}: frames unreadable ({type(exc).__name__}: {exc})")
            continue
        for q in doc["questions"]:
            if not per_q[q["id"]]:
                problems.append(f"{cid}/{q['id']}: no frame to show")
                continue
            jobs_list.append((cid, q, doc.get("prior") or {}, per_q[q["id"]]))

    def ask(job) -> tuple[str, str, bool | None, str | None]:
        cid, q, prior, frames = job
        messages = build_messages(q, prior, frames)
        parts = {"kind": "question", "prompt_version": PROMPT_VERSION, "base_url": client.base_url or "",
                 "model": client.model, "temperature": 0, "max_tokens": client.max_tokens,
                 "texts": [prior_text(prior), question_text(q)] + [f"{t:.3f}" for t, _ in frames],
                 "images": [sha256_bytes(p) for _, p in frames]}
        key = cache_key(parts)
        hit = cache.get(key)
        if hit is not None and isinstance(hit.get("reply"), str):
            reply = hit["reply"]
        else:
            try:
                reply = client.complete(messages)
            except JudgeFailure as exc:
                return cid, q["id"], None, f"request failed: {exc}"
            cache.put(key, {"kind": "question", "model": client.model, "case_id": cid, "question": q["id"],
                            "prompt_version": PROMPT_VERSION, "reply": reply})
        ans = parse_answer(reply)
        return cid, q["id"], ans, None if ans is not None else f"no clear yes/no in the reply: {reply[:80]!r}"

    with ThreadPoolExecutor(max_workers=max(1, int(jobs))) as ex:
        for cid, qid, ans, err in ex.map(ask, jobs_list):
            answers[cid][qid] = ans
            if err:
                problems.append(f"{cid}/{qid}: {err}")
    doc = {"answerer": f"vlm:{client.model}", "frames": source, "prompt_version": PROMPT_VERSION,
           "answers": answers, "problems": problems,
           "run": {"requests_sent": client.requests_sent, "cache_hits": cache.hits, "questions": len(jobs_list)}}
    write_json_atomic(out / "answers.json", doc, sort_keys=True)
    for p in problems:
        log.warning("%s", p)
    return doc
