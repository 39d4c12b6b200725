"""MLLM judge over any OpenAI-compatible chat-completions endpoint (`get_judge("openai", ...)`).

Configuration (options, else environment):
    base_url   ORCHARD_JUDGE_BASE_URL (else OPENAI_BASE_URL; else the SDK default)
    model      ORCHARD_JUDGE_MODEL (required)
    API key    only from the environment: ORCHARD_JUDGE_API_KEY, else OPENAI_API_KEY (the name of the
               variable can be changed with `api_key_env`); it is never stored in the judge's
               config, a cache key, a cache entry, a result or a log line.
    cache_dir  ORCHARD_JUDGE_CACHE (default: no cache); prompts: a YAML file/directory of templates.

Requests: temperature 0; the system and user messages of the rubric prompt (`prompts.py`); images as
base64 PNG data URLs, each preceded by its caption; a Deduction video as `max_frames` evenly sampled
frames (first and last included) plus the reference images, and GT frames when the request carries
them (`references["gt_frames"]`, a (T, H, W, 3) array).

Failures: HTTP 429, 5xx, timeouts and connection errors are retried with exponential backoff (the
server's Retry-After is honoured up to `max_backoff`); a reply that cannot be parsed (see
`replies.py`) is asked again; other HTTP errors (400, 401, 403, 404) fail at once. When every attempt
fails `score` raises `JudgeFailure` with the reason; the evaluator then scores the response 0 and
logs the reason (App. D.6). Only successful parses are cached; a cache hit makes no request and
returns the identical scores.

Concurrency: at most `concurrency` requests are in flight per judge object, however many threads
call `score`; `score_many` runs a list of requests on that many threads.
"""
from __future__ import annotations

import base64
import io
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np

from ..judges import JudgeParseError, JudgeRequest, JudgeResult, register_judge
from .cache import JudgeCache, cache_key, sha256_bytes
from .prompts import PromptSet, load_prompts, prompt_values
from .replies import parse_reply

log = logging.getLogger("orchard_eval.judging.openai")

KEY_ENV_DEFAULT = ("ORCHARD_JUDGE_API_KEY", "OPENAI_API_KEY")


class JudgeFailure(RuntimeError):
    """The judge could not produce a valid reply after all retries (the response scores 0)."""


def encode_png(img: np.ndarray) -> bytes:
    """Deterministic PNG bytes of an RGB uint8 image (same pixels → same bytes → same cache key)."""
    from PIL import Image

    a = np.asarray(img)
    if a.dtype != np.uint8:
        a = np.clip(a, 0, 255).astype(np.uint8)
    if a.ndim == 2:
        a = np.repeat(a[..., None], 3, axis=2)
    buf = io.BytesIO()
    Image.fromarray(np.ascontiguousarray(a[..., :3])).save(buf, format="PNG", compress_level=6, optimize=False)
    return buf.getvalue()


def sample_indices(n: int, k: int) -> list[int]:
    """k indices spread evenly over 0…n−1 (first and last included), without repeats."""
    if n <= 0:
        return []
    if n <= k:
        return list(range(n))
    return sorted({int(round(x)) for x in np.linspace(0, n - 1, k)})


def _redact(text: str, secret: str | None) -> str:
    return text.replace(secret, "[redacted]") if secret else text


@register_judge("openai")
class OpenAIJudge:
    name = "openai"

    def __init__(self, model: str | None = None, base_url: str | None = None, api_key_env: str | None = None,
                 cache_dir: str | None = None, prompts: str | PromptSet | None = None, max_frames: int = 8,
                 max_retries: int = 5, parse_retries: int = 2, timeout: float = 120.0, concurrency: int = 4,
                 backoff: float = 1.0, max_backoff: float = 60.0, max_tokens: int = 1024,
                 image_detail: str | None = None, client: Any = None, **unknown: Any):
        if unknown:
            raise TypeError(f"unknown options for the openai judge: {sorted(unknown)}")
        self.model = model or os.environ.get("ORCHARD_JUDGE_MODEL")
        if not self.model:
            raise ValueError("the openai judge needs a model (option `model` or ORCHARD_JUDGE_MODEL)")
        self.base_url = base_url or os.environ.get("ORCHARD_JUDGE_BASE_URL") or os.environ.get("OPENAI_BASE_URL")
        self._key_envs = (api_key_env,) if api_key_env else KEY_ENV_DEFAULT
        self._api_key = next((os.environ[e] for e in self._key_envs if os.environ.get(e)), None)
        self.prompts = prompts if isinstance(prompts, PromptSet) else load_prompts(prompts)
        cache_dir = cache_dir or os.environ.get("ORCHARD_JUDGE_CACHE")
        self.cache = JudgeCache(cache_dir) if cache_dir else None
        self.max_frames = int(max_frames)
        self.max_retries = int(max_retries)
        self.parse_retries = int(parse_retries)
        self.timeout = float(timeout)
        self.concurrency = max(1, int(concurrency))
        self.backoff = float(backoff)
        self.max_backoff = float(max_backoff)
        self.max_tokens = int(max_tokens)
        self.image_detail = image_detail
        self._sem = threading.BoundedSemaphore(self.concurrency)
        self._client = client
        self._client_lock = threading.Lock()
        self.requests_sent = 0

    # -- provenance (no secrets) ----------------------------------------------------------------
    def config(self) -> dict[str, Any]:
        return {"model": self.model, "base_url": self.base_url, "temperature": 0, "max_frames": self.max_frames,
                "max_tokens": self.max_tokens, "prompt_versions": self.prompts.versions(),
                "image_detail": self.image_detail}

    def _get_client(self):
        with self._client_lock:
            if self._client is None:
                from openai import OpenAI  # the SDK, not this module (absolute import)

                # retries are ours (deterministic, logged), so the SDK's own are off
                self._client = OpenAI(api_key=self._api_key or "not-set", base_url=self.base_url,
                                      max_retries=0, timeout=self.timeout)
            return self._client

    # -- request building -------------------------------------------------------------------------
    def build_messages(self, request: JudgeRequest) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """(messages, cache-key parts). Every image is encoded once; its SHA-256 enters the key."""
        rp = self.prompts[request.rubric.name]
        facts = dict(request.facts or {})
        if "annotation" not in facts and "annotation_text" in facts:
            facts["annotation"] = facts["annotation_text"]
        answer = list(request.answer)
        video = request.rubric.name == "deduction_video"
        if video:
            answer = [answer[i] for i in sample_indices(len(answer), self.max_frames)]
            facts.setdefault("n_frames", len(answer))
        gt_frames = request.references.get("gt_frames")
        if gt_frames is not None and video:
            gt_list = list(np.asarray(gt_frames))
            gt_frames = [gt_list[i] for i in sample_indices(len(gt_list), self.max_frames)]
        text = rp.render(prompt_values(facts), with_gt=bool(gt_frames is not None and video))
        content: list[dict[str, Any]] = []
        digests: list[list[str]] = []

        def add_image(caption: str, img: np.ndarray, tag: str) -> None:
            data = encode_png(img)
            digests.append([tag, sha256_bytes(data)])
            url = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
            part: dict[str, Any] = {"type": "image_url", "image_url": {"url": url}}
            if self.image_detail:
                part["image_url"]["detail"] = self.image_detail
            if caption:
                content.append({"type": "text", "text": caption})
            content.append(part)

        for slot in rp.images:
            if slot.role == "answer":
                for i, img in enumerate(answer):
                    cap = slot.caption if i == 0 else ""
                    if len(answer) > 1:
                        cap = (cap + "\n" if cap else "") + f"(generated frame {i + 1} of {len(answer)})"
                    add_image(cap, img, f"answer[{i}]")
            elif slot.role == "gt_frames":
                if gt_frames is None or not video:
                    continue
                for i, img in enumerate(gt_frames):
                    cap = (slot.caption + "\n" if i == 0 else "") + f"(reference frame {i + 1} of {len(gt_frames)})"
                    add_image(cap, img, f"gt_frames[{i}]")
            else:
                role = slot.role.split(":", 1)[1] if slot.role.startswith("reference:") else slot.role
                img = request.references.get(role)
                if img is None and role == "annotated_first_frame":
                    img = request.references.get("condition_frame")
                if img is None:
                    if not slot.optional:
                        content.append({"type": "text", "text": slot.caption + " (not available for this case)"})
                    continue
                add_image(slot.caption, img, role)
        content.append({"type": "text", "text": text})
        messages = [{"role": "system", "content": rp.system}, {"role": "user", "content": content}]
        parts = {"judge": "openai-chat", "base_url": self.base_url or "", "model": self.model, "temperature": 0,
                 "max_tokens": self.max_tokens, "image_detail": self.image_detail or "", "rubric": rp.rubric,
                 "prompt_version": rp.version, "prompt_digest": rp.digest, "system": rp.system, "text": text,
                 "images": digests, "captions": [c["text"] for c in content if c["type"] == "text"]}
        return messages, parts

    # -- the call ---------------------------------------------------------------------------------
    def _delay(self, attempt: int, retry_after: float | None) -> float:
        d = min(self.max_backoff, self.backoff * (2 ** attempt))
        if retry_after is not None:
            d = min(self.max_backoff, max(d, retry_after))
        return d

    def _call(self, messages: list[dict[str, Any]]) -> str:
        import openai as sdk

        client = self._get_client()
        last = "no attempt"
        for attempt in range(self.max_retries + 1):
            retry_after = None
            try:
                with self._sem:
                    self.requests_sent += 1
                    resp = client.chat.completions.create(model=self.model, messages=messages, temperature=0,
                                                          max_tokens=self.max_tokens)
                choice = resp.choices[0] if resp.choices else None
                text = None if choice is None else choice.message.content
                if not text:
                    last = "empty reply"
                else:
                    return text
            except sdk.RateLimitError as exc:
                last = "HTTP 429 (rate limited)"
                retry_after = _retry_after(exc)
            except sdk.APITimeoutError:
                last = "timeout"
            except sdk.APIConnectionError as exc:
                last = f"connection error: {type(exc).__name__}"
            except sdk.APIStatusError as exc:
                code = getattr(exc, "status_code", None)
                last = f"HTTP {code}"
                if code is None or code < 500:
                    raise JudgeFailure(_redact(f"{last}: {exc.message}"[:500], self._api_key)) from None
                retry_after = _retry_after(exc)
            if attempt < self.max_retries:
                d = self._delay(attempt, retry_after)
                log.warning("judge request failed (%s); retry %d/%d in %.2fs", last, attempt + 1, self.max_retries, d)
                time.sleep(d)
        raise JudgeFailure(f"judge endpoint failed after {self.max_retries + 1} attempts: {last}")

    def complete(self, messages: list[dict[str, Any]]) -> str:
        """Send prepared chat messages with this judge's transport (retries, backoff, concurrency
        limit, key from the environment, `max_tokens`) and return the reply text; raises
        `JudgeFailure`. Used by other question kinds (the APT chain runner), so there is one client."""
        return self._call(messages)

    def score(self, request: JudgeRequest) -> JudgeResult:
        messages, parts = self.build_messages(request)
        key = cache_key(parts)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("scores"), dict):
                return JudgeResult(dict(hit["scores"]), str(hit.get("feedback", "")), judge=f"openai:{self.model}")
        errors = []
        for attempt in range(self.parse_retries + 1):
            reply = self._call(messages)
            try:
                res, notes = parse_reply(reply, request.rubric)
            except JudgeParseError as exc:
                errors.append(str(exc))
                log.warning("%s/%s: unparsable judge reply (%s); asking again", request.case_id, request.subtrack, exc)
                continue
            res.judge = f"openai:{self.model}"
            if self.cache is not None:
                self.cache.put(key, {"judge": "openai", "model": self.model, "base_url": self.base_url or "",
                                     "rubric": request.rubric.name, "prompt_version": parts["prompt_version"],
                                     "case_id": request.case_id, "subtrack": request.subtrack,
                                     "scores": res.scores, "feedback": res.feedback, "repairs": notes,
                                     "reply": _redact(reply, self._api_key)})
            return res
        raise JudgeFailure(f"unparsable judge reply after {self.parse_retries + 1} attempts: {errors[-1]}")

    def score_many(self, requests: Sequence[JudgeRequest]) -> list[JudgeResult | Exception]:
        """Score several requests with at most `concurrency` in flight; failures are returned in place."""
        def one(r: JudgeRequest):
            try:
                return self.score(r)
            except Exception as exc:  # noqa: BLE001
                return exc

        with ThreadPoolExecutor(max_workers=self.concurrency) as ex:
            return list(ex.map(one, requests))


def _retry_after(exc: Any) -> float | None:
    try:
        v = exc.response.headers.get("retry-after")
        return None if v is None else max(0.0, float(v))
    except Exception:  # noqa: BLE001
        return None
