"""Tolerant reading of a judge's reply into rubric scores.

Accepted, in order of repair:
* the JSON object may be wrapped in prose or a Markdown code fence (```json … ```);
* trailing commas before `}`/`]`, `//` line comments, and Python literals (True/False/None,
  single-quoted strings when the object has no double quotes at all) are repaired;
* a truncated object (the reply stopped mid-string or mid-value, e.g. at a token limit) is closed:
  an unterminated string is ended, a dangling key or `"key":` is dropped, brackets are closed. The
  criteria that were complete are kept; if any rubric criterion is still missing the reply is rejected.

Values (documented policy):
* numbers and numeric strings ("0.8") are read as floats; `true`/`false` as 1.0/0.0;
* −1 (also `null`, "n/a", "na", "not applicable") means not applicable;
* values within 0.05 outside [0, 1] (e.g. 1.02, −0.01) are clamped to the nearest bound — rounding
  slop of the judge;
* anything else (e.g. 7 on a 0–10 scale, 85 as a percentage, −0.5, NaN) is REJECTED with
  `JudgeParseError` naming the criterion: rescaling a reply that ignored the instructions would be a
  guess.
"""
from __future__ import annotations

import json
import math
import re
from typing import Any

from ..judges import NOT_APPLICABLE, JudgeParseError, JudgeResult
from ..rubrics import Rubric

CLAMP_SLACK = 0.05
_NA_STRINGS = {"n/a", "na", "not applicable", "none", "null", "-1", "-1.0"}


def _strip_fence(text: str) -> str:
    m = re.search(r"```(?:json|JSON)?\s*(.*?)(```|$)", text, flags=re.DOTALL)
    if m and "{" in m.group(1):
        return m.group(1)
    return text


def _close_truncated(s: str) -> str:
    """Close an object cut off part-way: end an open string, drop a dangling key, close brackets."""
    stack: list[str] = []
    in_str = False
    esc = False
    last_safe = 0  # index after the last complete value inside the top-level object
    for i, ch in enumerate(s):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if stack:
                stack.pop()
            if not stack:
                return s[: i + 1]
        elif ch == ",":
            last_safe = i
    out = s
    if in_str:
        out += '"'
    # decide whether the tail is a complete "key": value pair; if not, cut back to the last comma
    tail = out[last_safe + 1:] if last_safe else out[out.find("{") + 1:]
    if not re.match(r'^\s*"(?:[^"\\]|\\.)*"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)\s*$',
                    tail, flags=re.DOTALL):
        out = out[:last_safe] if last_safe else out[: out.find("{") + 1]
    return out + "".join(reversed(stack))


def _repair(s: str) -> str:
    s = re.sub(r"//[^\n]*", "", s)
    s = re.sub(r",\s*([}\]])", r"\1", s)
    s = re.sub(r"\bTrue\b", "true", s)
    s = re.sub(r"\bFalse\b", "false", s)
    s = re.sub(r"\bNone\b", "null", s)
    s = re.sub(r"\bNaN\b", '"NaN"', s)
    if '"' not in s and "'" in s:
        s = s.replace("'", '"')
    return s


def extract_json_object(text: str) -> tuple[dict[str, Any], list[str]]:
    """The reply's JSON object and the repairs that were needed."""
    notes: list[str] = []
    body = _strip_fence(text)
    if body is not text:
        notes.append("code fence")
    start = body.find("{")
    if start < 0:
        raise JudgeParseError("no JSON object in the reply")
    s = body[start:]
    for attempt in ("plain", "repaired", "closed"):
        cand = s
        if attempt != "plain":
            cand = _repair(cand)
        if attempt == "closed":
            cand = _repair(_close_truncated(cand))
        else:
            # cut at the matching closing brace when there is one
            cand = _close_truncated(cand) if cand.count("{") <= cand.count("}") else cand
        try:
            doc = json.loads(cand)
        except ValueError:
            continue
        if not isinstance(doc, dict):
            raise JudgeParseError("the reply is not a JSON object")
        if attempt != "plain":
            notes.append("truncated object closed" if attempt == "closed" else "syntax repaired")
        return doc, notes
    raise JudgeParseError("invalid JSON that could not be repaired")


def coerce_value(key: str, v: Any) -> float:
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if v is None:
        return NOT_APPLICABLE
    if isinstance(v, str):
        t = v.strip().lower()
        if t in _NA_STRINGS:
            return NOT_APPLICABLE
        try:
            v = float(t)
        except ValueError as exc:
            raise JudgeParseError(f"{key}: not a number: {v!r}") from exc
    if not isinstance(v, (int, float)):
        raise JudgeParseError(f"{key}: not a number: {v!r}")
    v = float(v)
    if not math.isfinite(v):
        raise JudgeParseError(f"{key}: not finite")
    if v == NOT_APPLICABLE:
        return NOT_APPLICABLE
    if 0.0 <= v <= 1.0:
        return v
    if 1.0 < v <= 1.0 + CLAMP_SLACK:
        return 1.0
    if -CLAMP_SLACK <= v < 0.0:
        return 0.0
    raise JudgeParseError(f"{key}: {v} is outside [0, 1] and not −1 (rejected, not rescaled)")


def parse_reply(text: str, rubric: Rubric) -> tuple[JudgeResult, list[str]]:
    """A `JudgeResult` with exactly the rubric's criteria, and the repair notes."""
    doc, notes = extract_json_object(text)
    missing = [k for k in rubric.criteria if k not in doc]
    if missing:
        raise JudgeParseError(f"missing criteria: {', '.join(missing)}")
    scores = {k: coerce_value(k, doc[k]) for k in rubric.criteria}
    fb = doc.get("feedback", "")
    return JudgeResult(scores, fb if isinstance(fb, str) else json.dumps(fb)), notes
