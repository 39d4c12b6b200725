"""The 1+2 review protocol of App. B.5 and the review record (review.json).

One primary annotation, then two independent secondary reviews. The open-source Label Studio has no
reviewer role and shows every annotation to every member, so independence is enforced here: the two
reviewers must be distinct users and neither may be the primary annotator. A case is marked reviewed
only when both reviews exist, pass every checklist item, and leave the primary masks and measured
values unchanged (within the instrument precision). Everything else is listed as a disagreement
with the resolution order of App. B.5: the analytic physical backstop when one exists for the item,
then senior arbitration (visual or measurement ambiguities), then domain-expert escalation
(formula-choice ambiguity).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

CHECKLIST = ("initial_frame", "annotation_legibility", "physics_duration", "target_time", "mask_identity",
             "velocity_labels", "formula_candidates", "source_metadata")
# items an analytic model of the case can arbitrate (durations, times, and labels follow from the law)
ANALYTIC_BACKSTOP = {"physics_duration", "target_time", "velocity_labels", "measurement:height", "measurement:v0"}
MASK_IOU_AGREE = 0.999  # a reviewer who left the pre-annotated mask alone reproduces it exactly


@dataclass
class Pass:
    """One annotation of a case as the protocol sees it."""
    user: str
    user_id: int | None
    annotation_id: int | None
    measurements: dict[str, float] = field(default_factory=dict)   # field key → value
    masks: dict[int, np.ndarray] = field(default_factory=dict)       # frame → instance map
    checks: dict[str, str] = field(default_factory=dict)             # checklist item → pass | fail
    comment: str = ""


def resolution_order(item: str) -> list[str]:
    order = ["analytic_backstop"] if item in ANALYTIC_BACKSTOP else []
    if item == "formula_candidates":
        return order + ["senior_arbitration", "domain_expert"]
    return order + ["senior_arbitration", "domain_expert"]


def _iou(a: np.ndarray, b: np.ndarray) -> float:
    u = np.count_nonzero(a | b)
    return 1.0 if u == 0 else np.count_nonzero(a & b) / u


def evaluate(case_id: str, primary: Pass | None, reviews: list[Pass], precisions: Mapping[str, float | None],
             object_ids: Mapping[int, str]) -> dict[str, Any]:
    """The review record (review.schema.json)."""
    problems: list[str] = []
    violation = False  # a protocol violation (self-review, duplicate reviewer, extra reviewer), not just missing work
    disagreements: list[dict[str, Any]] = []
    if primary is None:
        problems.append("no primary annotation")
    if primary is not None:
        own = [r for r in reviews if r.user == primary.user]
        violation = violation or bool(own)
        for r in own:
            problems.append(f"review {r.annotation_id} is by the primary annotator {r.user}: reviews must be independent")
        reviews_ok = [r for r in reviews if r.user != primary.user]
    else:
        reviews_ok = list(reviews)
    users = [r.user for r in reviews_ok]
    dup = sorted({u for u in users if users.count(u) > 1})
    violation = violation or bool(dup)
    for u in dup:
        problems.append(f"reviewer {u} reviewed more than once: the two reviews must come from distinct users")
    distinct = list(dict.fromkeys(users))
    if len(distinct) < 2:
        problems.append(f"needs two independent reviews by distinct users other than the primary annotator, "
                        f"got {len(distinct)}")
    elif len(distinct) > 2:
        violation = True
        problems.append(f"expected exactly two reviewers, got {len(distinct)}: {', '.join(distinct)}")
    used = []
    for u in distinct[:2]:
        used.append(next(r for r in reviews_ok if r.user == u))

    if primary is not None and used:
        for item in CHECKLIST:
            verdicts = {r.user: r.checks.get(item) for r in used}
            if any(v != "pass" for v in verdicts.values()):
                kind = "reviewers_disagree" if len(set(verdicts.values())) > 1 else "reviewers_fail"
                disagreements.append({"item": item, "kind": kind, "values": verdicts,
                                      "comments": {r.user: r.comment for r in used if r.comment},
                                      "resolution_order": resolution_order(item)})
        for key, pval in sorted(primary.measurements.items()):
            prec = precisions.get(key)
            tol = (prec if prec else 0.0) + 1e-12
            vals = {r.user: r.measurements.get(key) for r in used}
            off = {u: v for u, v in vals.items() if v is None or abs(float(v) - float(pval)) > tol}
            if off:
                item = f"measurement:{key.split('/')[0]}"
                disagreements.append({"item": f"measurement:{key}", "kind": "value_changed",
                                      "values": {"primary": pval, **vals}, "tolerance": prec,
                                      "resolution_order": resolution_order(item)})
        frames = sorted(set(primary.masks) | {f for r in used for f in r.masks})
        for f in frames:
            for iid, oid in object_ids.items():
                pm = primary.masks.get(f)
                pmask = (pm == iid) if pm is not None else None
                ious = {}
                for r in used:
                    rm = r.masks.get(f)
                    if pmask is None or rm is None:
                        if (pmask is not None and pmask.any()) or (rm is not None and np.any(rm == iid)):
                            ious[r.user] = 0.0
                        continue
                    ious[r.user] = _iou(pmask, rm == iid)
                bad = {u: v for u, v in ious.items() if v < MASK_IOU_AGREE}
                if bad:
                    disagreements.append({"item": "mask_identity", "kind": "mask_changed", "frame": f, "object": oid,
                                          "values": {u: round(v, 6) for u, v in ious.items()},
                                          "resolution_order": resolution_order("mask_identity")})
    if problems:
        status = "invalid" if violation else "incomplete"
    elif disagreements:
        status = "disagreement"
    else:
        status = "reviewed"
    return {
        "schema_version": 1, "case_id": case_id, "protocol": "1+2", "status": status, "reviewed": status == "reviewed",
        "primary": None if primary is None else {"annotator": primary.user, "user_id": primary.user_id,
                                                 "annotation_id": primary.annotation_id},
        "reviewers": [{"annotator": r.user, "user_id": r.user_id, "annotation_id": r.annotation_id,
                       "checks": {k: r.checks.get(k) for k in CHECKLIST}, "comment": r.comment} for r in used],
        "checklist": list(CHECKLIST),
        "problems": problems,
        "disagreements": disagreements,
        "resolution_policy": ["analytic_backstop (when available)", "senior_arbitration", "domain_expert"],
    }
