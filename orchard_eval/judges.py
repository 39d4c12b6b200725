"""The judge protocol. A judge scores one response against its rubric and returns a value in [0, 1]
for every criterion key of the rubric, or −1 for a criterion that does not apply to the case, plus
free-text feedback. `NoneJudge` scores nothing: results are then objective-only (see fusion).

Concrete MLLM judges (and their prompts, caching and retries) live outside this module and only need
to implement `Judge.score`.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping, Protocol, runtime_checkable

import numpy as np

from .rubrics import Rubric

NOT_APPLICABLE = -1.0


class JudgeParseError(ValueError):
    """A judge reply that is not a JSON object with a valid value for every rubric criterion."""


@dataclass
class JudgeRequest:
    """What a judge sees: the rubric, the answer images (or video frames), the references, and case
    facts the prompt templates need (correct letter and formula, annotation text, time point)."""
    case_id: str
    subtrack: str
    rubric: Rubric
    answer: list[np.ndarray]                         # one image, or the frames of a video / keyframe
    references: dict[str, np.ndarray] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)


@dataclass
class JudgeResult:
    scores: dict[str, float]   # criterion key -> value in [0, 1] or −1
    feedback: str = ""
    judge: str = ""


@runtime_checkable
class Judge(Protocol):
    name: str

    def score(self, request: JudgeRequest) -> JudgeResult | None: ...


class NoneJudge:
    """No judge: every response is scored by the objective metrics alone ("objective-only")."""

    name = "none"

    def score(self, request: JudgeRequest) -> JudgeResult | None:
        return None


def validate_scores(scores: Mapping[str, Any], rubric: Rubric) -> dict[str, float]:
    """Check that `scores` has every criterion of the rubric, each a finite number in [0, 1] or −1."""
    out: dict[str, float] = {}
    missing = [k for k in rubric.criteria if k not in scores]
    if missing:
        raise JudgeParseError(f"missing criteria: {', '.join(missing)}")
    for k in rubric.criteria:
        v = scores[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise JudgeParseError(f"{k}: not a number: {v!r}")
        v = float(v)
        if not math.isfinite(v):
            raise JudgeParseError(f"{k}: not finite")
        if v == NOT_APPLICABLE:
            out[k] = NOT_APPLICABLE
        elif 0.0 <= v <= 1.0:
            out[k] = v
        else:
            raise JudgeParseError(f"{k}: {v} is neither in [0, 1] nor −1")
    return out


def parse_judge_reply(text: str, rubric: Rubric) -> JudgeResult:
    """Parse a judge's JSON reply (tolerating a fenced code block around it)."""
    m = re.search(r"\{.*\}", text, flags=re.DOTALL)
    if m is None:
        raise JudgeParseError("no JSON object in the reply")
    try:
        doc = json.loads(m.group(0))
    except ValueError as exc:
        raise JudgeParseError(f"invalid JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise JudgeParseError("the reply is not a JSON object")
    return JudgeResult(validate_scores(doc, rubric), str(doc.get("feedback", "")))
