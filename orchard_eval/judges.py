"""The judge protocol. A judge scores one response against its rubric and returns a value in [0, 1]
for every criterion key of the rubric, or −1 for a criterion that does not apply to the case, plus
free-text feedback. `NoneJudge` scores nothing: results are then objective-only (see fusion).

Concrete MLLM judges (and their prompts, caching and retries) live outside this module and only need
to implement `Judge.score`.

Judges are found by name through a small registry: `@register_judge("name")` on a judge class (or any
factory taking keyword options) and `get_judge("name", **options)` to build one. Names that are not
registered yet are looked up lazily as a module `orchard_eval.judging.<name>` which registers itself
on import (so optional dependencies such as an HTTP client are only imported when that judge is used).
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol, TypeVar, runtime_checkable

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
    # what the evaluator already computed about the same answer and a judge may reuse instead of
    # redoing it (`segmentations`: the objective metrics' Segmentation per answer frame; the answer's
    # own `condition_frame` and `source_size`); never part of a prompt or a cache key
    context: dict[str, Any] = field(default_factory=dict)


@dataclass
class JudgeResult:
    scores: dict[str, float]   # criterion key -> value in [0, 1] or −1
    feedback: str = ""
    judge: str = ""


@runtime_checkable
class Judge(Protocol):
    name: str

    def score(self, request: JudgeRequest) -> JudgeResult | None: ...


# ---------------------------------------------------------------------------------------------
# Registry
# ---------------------------------------------------------------------------------------------
_JUDGES: dict[str, Callable[..., Any]] = {}
_F = TypeVar("_F", bound=Callable[..., Any])
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")


class UnknownJudgeError(KeyError):
    """No judge of that name is registered or importable."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def register_judge(name: str) -> Callable[[_F], _F]:
    """Class/factory decorator: `get_judge(name, **options)` will call `factory(**options)`."""
    if not _NAME_RE.match(name):
        raise ValueError(f"judge names are lower-case identifiers, got {name!r}")

    def deco(factory: _F) -> _F:
        _JUDGES[name] = factory
        return factory

    return deco


def available_judges() -> list[str]:
    """Registered judge names, plus the modules present in `orchard_eval.judging` (not imported)."""
    names = set(_JUDGES)
    try:
        import importlib.util
        import pkgutil

        spec = importlib.util.find_spec("orchard_eval.judging")
        if spec is not None and spec.submodule_search_locations:
            names |= {m.name for m in pkgutil.iter_modules(spec.submodule_search_locations)
                      if not m.name.startswith("_")}
    except (ImportError, ValueError):
        pass
    return sorted(names)


def get_judge(name: str, **options: Any) -> "Judge":
    """Build the judge registered as `name` with keyword `options` (e.g. model, base_url). A name not
    registered yet is imported from `orchard_eval.judging.<name>` first."""
    if name not in _JUDGES and _NAME_RE.match(name or ""):
        import importlib

        try:
            importlib.import_module(f"orchard_eval.judging.{name}")
        except ModuleNotFoundError as exc:
            if exc.name not in (f"orchard_eval.judging.{name}", "orchard_eval.judging"):
                raise  # the judge module exists but one of its dependencies is missing
    if name not in _JUDGES:
        raise UnknownJudgeError(f"unknown judge {name!r}; known: {', '.join(available_judges())}")
    return _JUDGES[name](**options)


def judge_config(judge: Any) -> dict[str, Any]:
    """What identifies a judge's scoring for provenance: its name plus its `config` (a dict) or
    `config()` result when it has one. Secrets must not be part of a judge's config."""
    cfg = getattr(judge, "config", None)
    if callable(cfg):
        cfg = cfg()
    out = {"name": str(getattr(judge, "name", type(judge).__name__))}
    if isinstance(cfg, Mapping):
        out["config"] = {str(k): v for k, v in cfg.items()
                         if not any(s in str(k).lower() for s in ("key", "secret", "token", "password"))}
    return out


@register_judge("none")
class NoneJudge:
    """No judge: every response is scored by the objective metrics alone ("objective-only")."""

    name = "none"

    def __init__(self, **options: Any):
        if options:
            raise TypeError(f"the 'none' judge takes no options, got {sorted(options)}")

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
