"""The transition score of Deduction answers: per response (for the record) and per run (for the
summary and the tables' "Trans." column).

Per response: the answer's object tracks come from the segmentations the Deduction metrics already
computed at the timestamps T_c (`ObjectiveResult.segmentations`) plus one more, the answer's own
frame 0 at t = 0 (a motion that starts at t = 0 — a breakaway, a launch — has no "before" without
it), so the run's cost grows by one segmented frame per answer at most (per case when the answers
start on the condition frame, see `_frame0_segmentation`). `detect.detect_transitions` reads
the chain off those tracks and `matching.match_chains` scores it against the events of the case's
events.json that a video at its frame rate shows (`observable`), on body ids (fixtures are not
tracked): same type, same bodies, within ±200 ms, one-to-one; a detection that only an unsure event
(a real transition a video may not show) takes is excused, neither a hit nor a false alarm.

A response whose transition score cannot be computed (no events.json, no camera or GT tracks, too
few located frames, a segmenter error) has `transitions: null` and a note saying why; it never fails
the response. The paper's score does not use any of this unless the run fuses it (`--fuse-transitions`,
see `rubrics.with_transitions`).
"""
from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from ..cases import EvalCase
from .detect import bodies_only, detect_transitions
from .matching import Counts, match_chains, without_excused
from .observable import case_observable

log = logging.getLogger("orchard_eval")

TRANSITION_F1 = "transition_f1"   # the objective key under which a fused run feeds F1 to the Deduction rubric
SAME_FRAME_DB = 35.0   # an answer frame 0 this close (PSNR) to the GT frame 0 shows the same scene


def _frame0_segmentation(case: EvalCase, packet, segmenter, cache: dict | None = None,
                         answer_cache: dict | None = None):
    """The answer's own frame 0 segmented in the metrics' context (at t = 0, beside the GT frame 0,
    with what the metrics worked out once for the answer, `answer_cache`, reused rather than worked
    out again); None when the packet carries no frame 0. Most answers start on the condition frame they were
    given: a frame 0 within SAME_FRAME_DB of the GT frame 0 shows the same scene, and the GT frame
    0's segmentation (made once per case and kept in `cache`) stands for it — that is the one
    segmentation the transition score adds to a run, paid once per case instead of per answer."""
    if packet.condition_frame is None:
        return None
    from ..canonical import gt_deduction
    from ..metrics import psnr
    from ..objective import deduction_context

    gt0 = gt_deduction(case, [0.0]).frames[0]
    same = (gt0 is not None and gt0.shape == packet.condition_frame.shape
            and psnr(packet.condition_frame, gt0) >= SAME_FRAME_DB)
    if same and cache is not None and case.case_id in cache:
        return cache[case.case_id]
    frame = gt0 if same else packet.condition_frame
    ctx = deduction_context(case, packet.frames, packet.condition_frame, packet.source_size, answer_cache)
    ctx.time = 0.0
    ctx.gt_frame = gt0
    s = segmenter.segment(frame, ctx)
    if same and cache is not None:
        if len(cache) > 64:
            cache.clear()
        cache[case.case_id] = s
    return s


def sample_times(case: EvalCase, packet, rule: str = "paper") -> list[float]:
    """The physical time of the answer frame shown at each timestamp: a video answer's frame j is at
    j·T/N (`objective.frame_time`, as the velocity metric times it), not at the timestamp it was
    chosen for (two timestamps on one frame would otherwise give a body two places at one instant
    or, worse, one place at two); keyframes are at their timestamps."""
    from ..objective import frame_time

    idx = packet.pred_indices
    if packet.protocol != "video" or packet.n_video_frames is None or not idx or len(idx) != len(packet.times):
        return [float(t) for t in packet.times]
    return [float(t) if j is None else frame_time(j, packet.n_video_frames, case.physics_duration, rule)
            for j, t in zip(idx, packet.times)]


def score_answer(case: EvalCase, packet, segmentations: Sequence | None, segmenter, rule: str = "paper",
                 frame0_cache: dict | None = None, answer_cache: dict | None = None
                 ) -> tuple[dict[str, Any] | None, str | None]:
    """(the record's `transitions` object, None) or (None, the reason it is not applicable).
    `answer_cache`: the metrics' per-answer store (`ObjectiveResult.answer_cache`), reused by the
    frame-0 segmentation."""
    from ..tracks import tracks_from_segmentations

    if case.events is None:
        return None, "transition score not applicable: the case has no events.json"
    if segmentations is None:
        return None, "transition score not applicable: the answer was not segmented"
    segs, times = list(segmentations), sample_times(case, packet, rule)
    if len(segs) != len(times):
        return None, f"transition score not applicable: {len(segs)} segmentations for {len(times)} timestamps"
    if not times or min(times) > 0:
        try:
            s0 = _frame0_segmentation(case, packet, segmenter, frame0_cache, answer_cache)
        except Exception as exc:  # noqa: BLE001 - one unsegmentable frame 0 costs only the t = 0 sample
            log.info("%s: frame 0 not segmented for the transition score: %s", case.case_id, exc)
            s0 = None
        if s0 is not None:
            segs, times = [s0] + segs, [0.0] + times
    tracks = tracks_from_segmentations(case, segs, times)
    if tracks is None:
        return None, "transition score not applicable: no camera or GT tracks, or fewer than three located frames"
    ids = [o.id for o in case.objects]
    pred = bodies_only(detect_transitions(case, tracks), ids)
    ob = case_observable(case)
    shown, unsure = bodies_only(ob.shown, ids), bodies_only(ob.unsure, ids)
    scored = without_excused(pred, shown, unsure, match_objects=True)
    r = match_chains(scored, shown, match_objects=True)
    out = {**r.overall.as_dict(),
           "per_type": {k: v.as_dict() for k, v in sorted(r.per_type.items())},
           "detected": [{"type": p.type, "t": round(p.t, 4), "objects": list(p.objects)} for p in pred],
           "n_excused": len(pred) - len(scored), "n_unsure": len(unsure),
           "n_frames": int(tracks.times.size)}
    return out, None


def with_events(case: EvalCase | None) -> bool:
    """The case has events a video of it shows (`observable`): its transition F1 enters the mean."""
    if case is None or not case.events:
        return False
    ob = case_observable(case)
    return ob is not None and bool(ob.shown)


def summarise(records: Iterable[Mapping[str, Any]], cases: Mapping[str, EvalCase], num_rollouts: int
              ) -> dict[str, Any]:
    """The run's transition figures from its Deduction records.

    `mean_f1` (the "Trans." column): over the cases with at least one GT event, the mean over the R
    expected rollouts of the response F1, a missing or invalid response counting 0 (it detects
    nothing of what is there), as the paper's rollout mean counts it. Cases without events are left
    out of the mean (a perfect answer and a frozen one both find nothing there) but their spurious
    detections do enter the pooled counts. `pooled`: hits, predictions and truths summed over every
    scored response, overall and per type (micro average). None when no Deduction response has one.
    """
    by_case: dict[str, dict[int, Mapping[str, Any]]] = {}
    for r in records:
        if r.get("subtrack") == "deduction":
            by_case.setdefault(str(r["case_id"]), {})[int(r["rollout"])] = r
    pooled: dict[str, Counts] = {"overall": Counts()}
    case_f1: list[float] = []
    seen = False
    for cid in sorted(cases):
        recs = by_case.get(cid, {})
        f1s = []
        for k in range(num_rollouts):
            tr = recs.get(k, {}).get("transitions") if recs.get(k, {}).get("valid", False) else None
            if isinstance(tr, Mapping):
                seen = True
                pooled["overall"].add(Counts(int(tr["tp"]), int(tr["n_pred"]), int(tr["n_gt"])))
                for t, c in tr.get("per_type", {}).items():
                    pooled.setdefault(t, Counts()).add(Counts(int(c["tp"]), int(c["n_pred"]), int(c["n_gt"])))
                f1s.append(float(tr["f1"]))
            elif k not in recs or not recs[k].get("valid", False):
                f1s.append(0.0)
            # a valid response with no transition score (not applicable) leaves the case's mean
        if with_events(cases[cid]) and f1s:
            case_f1.append(float(np.mean(f1s)))
    if not seen:
        return {"mean_f1": None, "n_cases": 0, "pooled": None}
    return {"mean_f1": float(np.mean(case_f1)) if case_f1 else None, "n_cases": len(case_f1),
            "pooled": {k: v.as_dict() for k, v in sorted(pooled.items())}}
