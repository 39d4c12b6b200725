"""Objective scoring of one canonical answer: the glue between canonicalisation, segmentation and the
pure metrics, so that a scoring command is a thin loop over cases, subtracks and rollouts.

* `graphic_iou` — P-G / F-G: segment the answer, compare with the reference object masks (D.5). In an
  F-G answer the overlay the prompt requires (orange velocity arrows drawn from the object centres
  and `v = X.XX` labels, found by `segment.overlay.answer_overlay_mask`: strokes of the answer
  colour) hides part of the objects; those pixels are unobservable and left out of the IoU, for the
  prediction and the GT alike and the same way for every model.
* `deduction_metrics` — PSNR, masked PSNR and the three IoUs at the timestamp set; velocity (when the
  case has a camera and GT object tracks) either from the frames sampled at T_c themselves
  ("sampled", the default: E.2's "sampled frames", no extra segmentation; see `sampled_velocity`) or
  from a dense packet (every GT frame time) when one is passed.

Missing frames (a keyframe that was not delivered) count as total misses at their timestamp: PSNR
0 dB and an empty predicted mask. Metrics that cannot be computed for the case (no clean plate for
in-scene segmentation, no GT tracks or camera for velocity) are None, i.e. not applicable, and the
reason is returned in `notes`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from . import metrics as M
from .canonical import DeductionPacket, gt_deduction
from .cases import EvalCase
from .segment import ClassicalSegmenter, Segmenter, context_for_case
from .segment.overlay import answer_overlay_mask

HIDDEN_SHARE = 0.5   # an object whose GT mask is hidden beyond this share cannot be located in the answer
GRAPHIC_ROLE = {"perception_graphic": "perception_graphic", "formulation_graphic": "formulation_graphic"}


@dataclass
class ObjectiveResult:
    values: dict[str, float | None]
    details: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    low_confidence: bool = False
    # Deduction: the Segmentation of every answer frame (None where the frame is missing), kept in
    # memory for the judge; not part of a record
    segmentations: list | None = None
    # Deduction: what the segmenter worked out once for the whole answer (its own frame 0 read as a
    # render of the case, its colour models, its bodies' drawn sizes), for another frame of the same
    # answer segmented later (the transition score's frame 0) to reuse; not part of a record
    answer_cache: dict | None = None


def graphic_iou(case: EvalCase, subtrack: str, answer: np.ndarray, segmenter: Segmenter | None = None,
                source_size: tuple[int, int] | None = None) -> ObjectiveResult:
    seg = segmenter or ClassicalSegmenter()
    gt = case.reference_object_masks(GRAPHIC_ROLE[subtrack])
    if not gt:
        return ObjectiveResult({"mask_iou": None},
                               notes=["the case has no reference object masks"])
    try:
        ctx = context_for_case(case, subtrack)
    except ValueError as exc:
        return ObjectiveResult({"mask_iou": None}, notes=[str(exc)])
    ctx.answer_size = source_size
    out = seg.segment(answer, ctx)
    details: dict = {}
    # what the answer does not show (the answer overlay the prompt requires, the input's labels left
    # on, pixels outside a reframed view) is not scored, for the prediction and the GT alike; a
    # segmenter that does not report it still has the answer overlay left out
    ignore = out.unobservable
    if ignore is None and ctx.exclude_rgb:
        ignore = answer_overlay_mask(answer, ctx.exclude_rgb)
    if ignore is not None:
        details["unobservable_px"] = int(ignore.sum())
    r = M.object_mask_iou(out.masks, gt, ignore=ignore, alike=out.alike, hidden_share=HIDDEN_SHARE)
    details.update({"per_object": r.per_object, "matching": r.matching})
    return ObjectiveResult({"mask_iou": r.value}, details, list(out.notes), out.low_confidence)


def _resolve_alike(case: EvalCase, where: dict, alike: list[list[str]], t: float | None) -> dict:
    """Objects that look alike carry no identity of their own: within each such group the located
    positions are given to the GT objects by Hungarian matching on image distance to the GT centres
    at time t (the rule for objects whose identity is unknown), squared distance: between two
    assignments of equal total distance the one with the closer pairs wins."""
    if not alike or t is None:
        return where
    expected = case.image_centres(t)
    if not expected:
        return where
    from scipy.optimize import linear_sum_assignment

    out = dict(where)
    for group in alike:
        keys = [k for k in group if where.get(k) is not None and k in expected]
        if len(keys) < 2:
            continue
        gt_uv = np.array([expected[k] for k in keys])
        # in a fixed order (by image position), so that a tie — both far from where the GT puts
        # them — breaks the same way whatever labels the segmenter happened to give them
        got = np.array(sorted(tuple(where[k]) for k in keys), float)
        cost = np.sum((got[:, None, :] - gt_uv[None, :, :]) ** 2, axis=2)
        rows, cols = linear_sum_assignment(cost)
        for r, c in zip(rows, cols):
            out[keys[c]] = tuple(got[r])
    return out


def segmentation_positions(case: EvalCase, s, t: float | None) -> dict:
    """Where each object is in one Segmentation (its fitted centre or mask centroid, None where not
    located), look-alike identities resolved at time t as the Deduction metrics resolve them."""
    return _resolve_alike(case, s.positions(), s.alike, t)


def deduction_mask_ious(pred_union: Sequence[np.ndarray], gt_union: Sequence[np.ndarray],
                        hidden: Sequence[np.ndarray | None] | None = None) -> dict[str, float | None]:
    """The three Deduction IoUs of the per-timestamp object unions. `hidden`: per timestamp the
    pixels the answer does not show (a layer drawn over the scene, the border a reframed view
    lacks; `Segmentation.unobservable`), left out of the prediction and the GT alike, as for the F-G
    answer overlay. A timestamp whose GT objects are hidden beyond HIDDEN_SHARE is left out: the
    answer does not show what it would be measured on (None when that leaves nothing)."""
    pu, gu = [], []
    for k, (p, g) in enumerate(zip(pred_union, gt_union)):
        h = None if hidden is None else hidden[k]
        if h is not None:
            if g.any() and (g & h).sum() > HIDDEN_SHARE * g.sum():
                continue
            p, g = p & ~h, g & ~h
        pu.append(p)
        gu.append(g)
    if not pu:
        return {"spatial_iou": None, "spatiotemporal_iou": None, "weighted_spatial_iou": None}
    pu, gu = np.stack(pu), np.stack(gu)
    return {"spatial_iou": M.spatial_iou(pu, gu), "spatiotemporal_iou": M.spatiotemporal_iou(pu, gu),
            "weighted_spatial_iou": M.weighted_spatial_iou(pu, gu)}


def answer_segmentations(case: EvalCase, frames, seg: Segmenter, times, condition=None, source_size=None) -> list:
    """The Segmentation of every answer frame exactly as `deduction_metrics` computes it (same
    context, same chaining of priors); for a judge that was not handed the metrics' own."""
    keep: list = []
    gt = gt_deduction(case, list(times))
    _segment_sequence(case, frames, seg, list(times), gt.frames, condition, source_size, keep=keep)
    return keep


def deduction_context(case: EvalCase, frames, condition=None, source_size=None, answer_cache: dict | None = None):
    """The segmentation context of one Deduction answer (its frames, its own frame 0, its source size);
    the caller sets `time` and `gt_frame` per frame. The judge segments with the same context.
    `answer_cache`: the per-answer store of an earlier context for the same answer, shared (what it
    holds depends on the answer alone, not on the frame being segmented)."""
    ctx = context_for_case(case, "deduction")
    if answer_cache is not None:
        ctx.answer_cache = answer_cache
    ctx.answer_condition = condition
    ctx.answer_frames = [f for f in frames if f is not None]
    ctx.answer_size = source_size
    return ctx


def _segment_sequence(case: EvalCase, frames, seg: Segmenter, times=None, gt_frames=None, condition=None,
                      source_size=None, keep: list | None = None, answer_cache: dict | None = None):
    """Masks per frame, low-confidence flag, notes, where each object is per frame (its fitted
    centre or mask centroid, `Segmentation.positions`) and the pixels each frame does not show
    (`Segmentation.unobservable`, None where nothing is hidden). `gt_frames`: the GT frames at
    `times`, when the caller has decoded them (`SegmentContext.gt_frame`); `condition`: the
    answer's own frame 0 (`SegmentContext.answer_condition`); `keep`, when given, receives the
    Segmentation of every frame (None for a missing one); `answer_cache`, when given, is the
    context's per-answer store (`deduction_context`)."""
    ctx = deduction_context(case, frames, condition, source_size, answer_cache)
    shape = (case.frame_size[1], case.frame_size[0])
    out, low, notes = [], False, []
    where: list[dict] = []
    hidden: list[np.ndarray | None] = []
    done: dict[int, object] = {}       # the same frame (two timestamps on one video frame) is segmented once
    for k, f in enumerate(frames):
        if f is None:
            out.append({o.id: np.zeros(shape, bool) for o in case.objects})
            where.append({})
            hidden.append(None)
            if keep is not None:
                keep.append(None)
            continue
        ctx.time = None if times is None else float(times[k])
        ctx.gt_frame = None if gt_frames is None else gt_frames[k]
        s = done.get(id(f))
        if s is None:
            s = done[id(f)] = seg.segment(f, ctx)
            low |= s.low_confidence
            notes.extend(s.notes)
            ctx.priors = {k: c for k, c in s.centroids().items() if c is not None} or ctx.priors
        where.append(_resolve_alike(case, s.positions(), s.alike, ctx.time))
        if keep is not None:
            keep.append(s)
        out.append(s.masks)
        hidden.append(s.unobservable if s.unobservable is not None and s.unobservable.any() else None)
    return out, low, notes, where, hidden


def deduction_metrics(case: EvalCase, packet: DeductionPacket, segmenter: Segmenter | None = None,
                      dense: DeductionPacket | None = None, rule: str = "paper") -> ObjectiveResult:
    seg = segmenter or ClassicalSegmenter()
    res = ObjectiveResult({k: None for k in ("psnr", "masked_psnr", "spatial_iou", "spatiotemporal_iou",
                                             "weighted_spatial_iou", "velocity")})
    gt = gt_deduction(case, packet.times)
    ids = [o.id for o in case.objects]
    psnrs, mpsnrs, gt_union = [], [], []
    for f, g, inst in zip(packet.frames, gt.frames, gt.instances):
        region = np.zeros(g.shape[:2], bool) if inst is None else np.isin(inst, [o.instance_id for o in case.objects])
        gt_union.append(region)
        if f is None:
            psnrs.append(0.0)
            mpsnrs.append(0.0 if region.any() else None)
            continue
        psnrs.append(M.psnr(f, g))
        mpsnrs.append(M.masked_psnr(f, g, region))
    res.values["psnr"] = M.psnr_score(M.mean_defined(psnrs))
    res.values["masked_psnr"] = M.psnr_score(M.mean_defined(mpsnrs))
    res.details["psnr_db"], res.details["masked_psnr_db"] = psnrs, mpsnrs
    if all(i is None for i in gt.instances):
        res.notes.append("no GT instance masks: mask metrics not applicable")
        return res
    res.segmentations, res.answer_cache = [], {}
    try:
        pred_masks, low, notes, where, hidden = _segment_sequence(case, packet.frames, seg, packet.times, gt.frames,
                                                                  packet.condition_frame, packet.source_size,
                                                                  keep=res.segmentations, answer_cache=res.answer_cache)
    except ValueError as exc:
        res.segmentations = None
        res.notes.append(f"mask metrics not applicable: {exc}")
        return res
    res.low_confidence, res.notes = low, res.notes + sorted(set(notes))
    pu = [np.any([m[i] for i in ids], axis=0) if ids else np.zeros_like(gt_union[0]) for m in pred_masks]
    res.values.update(deduction_mask_ious(pu, gt_union, hidden))
    if any(h is not None for h in hidden):
        res.details["unobservable_px"] = [0 if h is None else int(h.sum()) for h in hidden]
    if dense is not None:
        res.values["velocity"], vnote = velocity_metric(case, dense, seg)
    else:
        res.values["velocity"], vnote = sampled_velocity(case, packet, pred_masks, rule, where, hidden)
    if vnote:
        res.notes.append(vnote)
    return res


def frame_time(index: int, n_video_frames: int, duration: float, rule: str = "paper") -> float:
    """Physical time of prediction video frame `index` (0 = condition frame) when its N physics frames
    span [0, T]: index·T/N (paper), or (index − 1)·T/N under the published pairing."""
    n = max(n_video_frames - 1, 1)
    return (index - (1 if rule == "published" else 0)) * duration / n


def sampled_velocity(case: EvalCase, packet: DeductionPacket, masks: list[dict[str, np.ndarray]],
                     rule: str = "paper", where: list[dict] | None = None,
                     hidden: list[np.ndarray | None] | None = None,
                     hidden_objects: list[set[str]] | None = None) -> tuple[float | None, str | None]:
    """S_vel from the frames already sampled at T_c (video protocol): the distinct prediction frames
    chosen for the timestamps, each at its own physical time index·T/N, give centroid tracks; the
    velocity over each consecutive pair of them is compared with the GT displacement over the same
    times (`metrics.velocity_error`). Needs no segmentation beyond the one done for the IoUs.
    `hidden`: per timestamp the pixels the answer does not show; where they cover most of an
    object's GT mask, or most of where its located centres before and after put an object the
    answer does not show (`_hidden_on_track`), the answer cannot show the object there and that
    time leaves its pairs. `hidden_objects`: per timestamp the objects known to be hidden so (the
    fidelity benchmark's ideal, which knows the answer's true masks)."""
    if packet.protocol != "video":
        return None, "velocity is not evaluated for keyframe answers"
    tracks = case.object_tracks()
    if tracks is None or case.intrinsic is None or case.extrinsic is None:
        return None, "no GT object tracks or camera: velocity not applicable"
    if packet.n_video_frames is None:
        return None, "velocity not applicable: unknown frame count"
    chosen: dict[int, int] = {}
    for k, j in enumerate(packet.pred_indices):
        if j is not None and packet.frames[k] is not None and j not in chosen:
            chosen[j] = k
    order = sorted(chosen)
    if len(order) < 2:
        return None, "velocity not applicable: fewer than two distinct sampled frames"
    times = np.array([frame_time(j, packet.n_video_frames, case.physics_duration, rule) for j in order])
    # where the GT video does not show an object (out of view, hidden) it cannot be located in an
    # answer either: those times leave the object's velocity pairs instead of costing a lost object
    from .canonical import gt_index

    n_gt = case.n_gt_frames()
    gt_inst = [case.gt_instances(gt_index(t, case.gt_fps, n_gt)) for t in times]
    uv, planes, gpos = {}, {}, {}
    for o in case.objects:
        if o.id not in tracks.positions:
            continue
        cents = ([where[chosen[j]].get(o.id) for j in order] if where is not None
                 else [M.mask_centroid(masks[chosen[j]][o.id]) for j in order])
        uv[o.id] = np.array([[np.nan, np.nan] if c is None else c for c in cents])
        planes[o.id] = M.motion_plane(tracks.positions[o.id], case.extrinsic)
        gpos[o.id] = np.stack([tracks.at(t)[0][o.id] for t in times])
        for k, inst in enumerate(gt_inst):
            if inst is None:
                continue
            own = inst == o.instance_id
            h = None if hidden is None else hidden[chosen[order[k]]]
            if not own.any() or (h is not None and h.shape == own.shape and (own & h).sum() > HIDDEN_SHARE * own.sum()):
                gpos[o.id][k] = np.nan
            elif (hidden_objects is not None and o.id in hidden_objects[chosen[order[k]]]) or (
                    h is not None and h.shape == own.shape and _hidden_on_track(uv[o.id], times, k, h, own.sum())):
                gpos[o.id][k] = np.nan
    e = M.velocity_error(uv, times, case.intrinsic, case.extrinsic, planes, gt_positions=gpos)
    return M.velocity_score(e), None


def _hidden_on_track(uv: np.ndarray, times: np.ndarray, k: int, hidden: np.ndarray, area: float) -> bool:
    """Whether an object the answer's frame k does not show (`uv[k]` NaN) lies where that frame's
    unobservable pixels hide it: a disc of the object's area (`area`, pixels) centred where its
    located centres at the nearest earlier and later times put it then (linear in time; the one
    side where only one is located), hidden beyond HIDDEN_SHARE. An answer whose body moves
    otherwise than the GT's can be hidden away from the GT's place (a label left on over a body
    that started elsewhere)."""
    if np.all(np.isfinite(uv[k])):
        return False
    found = np.flatnonzero(np.all(np.isfinite(uv), axis=1))
    before, after = found[found < k], found[found > k]
    if not before.size and not after.size:
        return False
    if before.size and after.size:
        a, b = before[-1], after[0]
        share = (times[k] - times[a]) / (times[b] - times[a])
        c = (1.0 - share) * uv[a] + share * uv[b]
    else:
        c = uv[before[-1] if before.size else after[0]]
    r = float(np.sqrt(max(area, 1.0) / np.pi))
    height, width = hidden.shape
    x0, x1 = int(max(np.floor(c[0] - r), 0)), int(min(np.ceil(c[0] + r) + 1, width))
    y0, y1 = int(max(np.floor(c[1] - r), 0)), int(min(np.ceil(c[1] + r) + 1, height))
    if x1 <= x0 or y1 <= y0:
        return False
    yy, xx = np.mgrid[y0:y1, x0:x1]
    disc = (xx + 0.5 - c[0]) ** 2 + (yy + 0.5 - c[1]) ** 2 <= r * r
    return bool(disc.any() and hidden[y0:y1, x0:x1][disc].mean() > HIDDEN_SHARE)


def velocity_metric(case: EvalCase, dense: DeductionPacket, segmenter: Segmenter | None = None
                    ) -> tuple[float | None, str | None]:
    """S_vel from a packet sampled at every GT frame time (video protocol)."""
    if dense.protocol != "video":
        return None, "velocity is not evaluated for keyframe answers"
    tracks = case.object_tracks()
    if tracks is None or case.intrinsic is None or case.extrinsic is None:
        return None, "no GT object tracks or camera: velocity not applicable"
    seg = segmenter or ClassicalSegmenter()
    try:
        masks, _, _, where, _ = _segment_sequence(case, dense.frames, seg, dense.times, condition=dense.condition_frame,
                                                  source_size=dense.source_size)
    except ValueError as exc:
        return None, f"velocity not applicable: {exc}"
    times = np.asarray(dense.times)
    uv, planes, gpos = {}, {}, {}
    for o in case.objects:
        if o.id not in tracks.positions:
            continue
        cents = [w.get(o.id) for w in where]
        uv[o.id] = np.array([[np.nan, np.nan] if c is None else c for c in cents])
        planes[o.id] = M.motion_plane(tracks.positions[o.id], case.extrinsic)
        gpos[o.id] = np.stack([tracks.at(t)[0][o.id] for t in times])
    e = M.velocity_error(uv, times, case.intrinsic, case.extrinsic, planes, gt_positions=gpos)
    return M.velocity_score(e), None
