"""Per-subtrack fusion of judge criteria and objective metrics, and rollout aggregation (App. E.1,
E.3, D.6).

Rule (the paper's, E.1): a criterion that is not applicable (−1 from the judge, or an objective
metric that is undefined for the case, e.g. velocity for keyframe answers) leaves its group's mean;
a group with nothing applicable leaves the weighted sum and the remaining group weights renormalise:

    S = Σ_g w_g · mean(applicable members of g) / Σ_{g applicable} w_g

Differences from the published evaluator, decided here in favour of the paper:
* its Perception-Text fusion keeps the fixed weights 0.5/0.3/0.2 and counts an empty group as 0
  (available as `rule="published"` for comparison only);
* App. E.1 eq. (6) writes the F-G object-match group as ½·appearance + ½·IoU, while the group rule of
  E.1.1 (which the appendix names as the exact aggregation) averages position match, appearance
  match and IoU; we follow E.1.1.

Judged and objective-only results are kept apart: without a judge (`judge_scores=None`) only the
objective members count, the result is labelled "objective-only", and a subtrack with no objective
metric has no score at all (None) rather than a zero. Mixing the two modes in one mean raises.

Rollouts (D.6): the case score of a subtrack is the mean over the expected rollouts; a rollout with
no decodable artifact (or whose judge reply could not be parsed after retries) scores 0 and is
logged, never dropped from the denominator.
"""
from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

from .judges import NOT_APPLICABLE
from .rubrics import Rubric, rubric_for

log = logging.getLogger("orchard_eval")

JUDGED = "judged"
OBJECTIVE_ONLY = "objective-only"


class ModeMixError(ValueError):
    """Judged and objective-only scores were about to be averaged together."""


def _applicable(v: Any) -> bool:
    if v is None:
        return False
    v = float(v)
    if v == NOT_APPLICABLE:
        return False
    if not math.isfinite(v) or not (0.0 <= v <= 1.0):
        raise ValueError(f"criterion value {v} is neither in [0, 1] nor −1")
    return True


@dataclass
class FusionResult:
    subtrack: str
    rubric: str
    mode: str                                  # "judged" or "objective-only"
    score: float | None                        # None: nothing applicable (objective-only P-T, F-T)
    groups: dict[str, float | None] = field(default_factory=dict)
    weights: dict[str, float] = field(default_factory=dict)   # renormalised weights actually used
    inputs: dict[str, float | None] = field(default_factory=dict)


def fuse(rubric: Rubric | str, judge_scores: Mapping[str, float] | None,
         objective: Mapping[str, float | None] | None = None, rule: str = "paper",
         protocol: str = "video") -> FusionResult:
    """Combine judge criteria (`None`: no judge) and objective metrics into the subtrack score."""
    if isinstance(rubric, str):
        rubric = rubric_for(rubric, protocol)
    objective = dict(objective or {})
    unknown = set(objective) - set(rubric.objective)
    if unknown:
        raise KeyError(f"{rubric.name}: objective metrics {sorted(unknown)} have no group")
    mode = OBJECTIVE_ONLY if judge_scores is None else JUDGED
    if judge_scores is not None:
        missing = [k for k in rubric.criteria if k not in judge_scores]
        if missing:
            raise KeyError(f"{rubric.name}: judge scores lack {missing}")
    groups: dict[str, float | None] = {}
    inputs: dict[str, float | None] = {}
    for g in rubric.groups:
        vals = []
        if judge_scores is not None:
            for k in g.criteria:
                inputs[k] = judge_scores[k]
                if _applicable(judge_scores[k]):
                    vals.append(float(judge_scores[k]))
        for k in g.objective:
            v = objective.get(k)
            inputs[k] = v
            if _applicable(v):
                vals.append(float(v))
        groups[g.name] = sum(vals) / len(vals) if vals else None
    if rule == "published" and rubric.name == "perception_text" and mode == JUDGED:
        weights = {g.name: g.weight for g in rubric.groups}
        score = sum(g.weight * (groups[g.name] or 0.0) for g in rubric.groups)
        return FusionResult(rubric.subtrack, rubric.name, mode, float(score), groups, weights, inputs)
    if rule not in ("paper", "published"):
        raise ValueError(f"unknown fusion rule {rule!r}")
    live = [g for g in rubric.groups if groups[g.name] is not None]
    total = sum(g.weight for g in live)
    if not live or total <= 0:
        return FusionResult(rubric.subtrack, rubric.name, mode, None, groups, {}, inputs)
    weights = {g.name: g.weight / total for g in live}
    score = sum(weights[g.name] * groups[g.name] for g in live)
    return FusionResult(rubric.subtrack, rubric.name, mode, float(min(max(score, 0.0), 1.0)), groups, weights, inputs)


def keyframe_criteria(per_timestamp: Sequence[Mapping[str, float]], rubric: Rubric | None = None) -> dict[str, float]:
    """Average keyframe-judge criteria over the timestamps (−1 values left out; a criterion that is
    −1 everywhere stays −1), then use `object_position_match` as `motion_smoothness` so the result
    can be fused with the video-level Deduction groups."""
    from .rubrics import DEDUCTION_KEYFRAME

    rubric = rubric or DEDUCTION_KEYFRAME
    out: dict[str, float] = {}
    for k in rubric.criteria:
        vals = [float(s[k]) for s in per_timestamp if k in s and _applicable(s[k])]
        out[k] = sum(vals) / len(vals) if vals else NOT_APPLICABLE
    out["motion_smoothness"] = out.pop("object_position_match")
    return out


def fuse_deduction_keyframes(per_timestamp: Sequence[Mapping[str, float]] | None,
                             objective: Mapping[str, float | None] | None = None,
                             rubric: Rubric | None = None) -> FusionResult:
    """`rubric`: the keyframe rubric in use (its groups, e.g. with the transition F1 fused); the
    averaged criteria are fused under the video rubric's criterion names."""
    from .rubrics import DEDUCTION_VIDEO

    judged = None if per_timestamp is None else keyframe_criteria(per_timestamp)
    video = DEDUCTION_VIDEO if rubric is None else Rubric(DEDUCTION_VIDEO.name, "deduction", DEDUCTION_VIDEO.criteria,
                                                          rubric.groups)
    res = fuse(video, judged, objective)
    res.rubric = "deduction_keyframe"
    return res


# ---------------------------------------------------------------------------------------------
# Rollouts
# ---------------------------------------------------------------------------------------------
@dataclass
class RolloutScore:
    case_id: str
    subtrack: str
    rollout: int
    mode: str
    score: float | None            # None: not applicable in this mode (objective-only P-T, F-T)
    valid: bool = True             # False: no decodable artifact / persistent judge failure -> scores 0
    reason: str = ""
    fusion: FusionResult | None = None

    @classmethod
    def invalid(cls, case_id: str, subtrack: str, rollout: int, mode: str, reason: str) -> "RolloutScore":
        return cls(case_id, subtrack, rollout, mode, 0.0, valid=False, reason=reason)


@dataclass
class CaseSubtrackScore:
    case_id: str
    subtrack: str
    mode: str
    score: float | None
    rollouts: list[RolloutScore]
    invalid: list[str] = field(default_factory=list)


def rollout_mean(case_id: str, subtrack: str, rollouts: Iterable[RolloutScore], num_rollouts: int,
                 mode: str | None = None) -> CaseSubtrackScore:
    """S_{c,k} = (1/R) Σ_r s_r over the R expected rollouts (D.6). Missing or invalid rollouts score 0
    and are logged. When every valid rollout is "not applicable" (None) the case has no score."""
    rs = list(rollouts)
    modes = {r.mode for r in rs}
    if mode is not None:
        modes.add(mode)
    if len(modes) > 1:
        raise ModeMixError(f"{case_id}/{subtrack}: rollouts mix {sorted(modes)}")
    mode = modes.pop() if modes else (mode or JUDGED)
    by_r = {r.rollout: r for r in rs}
    invalid = []
    for r in range(num_rollouts):
        if r not in by_r:
            by_r[r] = RolloutScore.invalid(case_id, subtrack, r, mode, "missing rollout")
        if not by_r[r].valid:
            invalid.append(f"rollout_{r:02d}: {by_r[r].reason or 'invalid'}")
            log.warning("%s/%s rollout_%02d scores 0: %s", case_id, subtrack, r, by_r[r].reason or "invalid")
    ordered = [by_r[r] for r in range(num_rollouts)]
    valid_scores = [r.score for r in ordered if r.valid]
    if ordered and valid_scores and all(s is None for s in valid_scores):
        return CaseSubtrackScore(case_id, subtrack, mode, None, ordered, invalid)
    if ordered and not valid_scores and mode == OBJECTIVE_ONLY and subtrack in ("perception_text", "formulation_text"):
        return CaseSubtrackScore(case_id, subtrack, mode, None, ordered, invalid)
    total = sum(0.0 if (not r.valid or r.score is None) else float(r.score) for r in ordered)
    return CaseSubtrackScore(case_id, subtrack, mode, total / max(num_rollouts, 1), ordered, invalid)
