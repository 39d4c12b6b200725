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

import numpy as np

from . import metrics as M
from .canonical import DeductionPacket, gt_deduction
from .cases import EvalCase
from .segment import ClassicalSegmenter, Segmenter, context_for_case
from .segment.overlay import answer_overlay_mask

GRAPHIC_ROLE = {"perception_graphic": "perception_graphic", "formulation_graphic": "formulation_graphic"}


@dataclass
class ObjectiveResult:
    values: dict[str, float | None]
    details: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    low_confidence: bool = False


def graphic_iou(case: EvalCase, subtrack: str, answer: np.ndarray, segmenter: Segmenter | None = None
                ) -> ObjectiveResult:
    seg = segmenter or ClassicalSegmenter()
    gt = case.reference_object_masks(GRAPHIC_ROLE[subtrack])
    if not gt:
        return ObjectiveResult({"mask_iou": None},
                               notes=["the case has no reference object masks"])
    try:
        ctx = context_for_case(case, subtrack)
    except ValueError as exc:
        return ObjectiveResult({"mask_iou": None}, notes=[str(exc)])
    out = seg.segment(answer, ctx)
    details: dict = {}
    ignore = None
    if ctx.exclude_rgb:
        # the answer overlay the prompt requires hides part of the objects: unobservable, not scored
        # (the segmenter found it already when it reports it; the rule is the same either way)
        ignore = out.unobservable if out.unobservable is not None else answer_overlay_mask(answer, ctx.exclude_rgb)
        details["unobservable_px"] = int(ignore.sum())
    r = M.object_mask_iou(out.masks, gt, ignore=ignore, alike=out.alike)
    details.update({"per_object": r.per_object, "matching": r.matching})
    return ObjectiveResult({"mask_iou": r.value}, details, list(out.notes), out.low_confidence)


def _resolve_alike(case: EvalCase, where: dict, alike: list[list[str]], t: float | None) -> dict:
    """Objects that look alike carry no identity of their own: within each such group the located
    positions are given to the GT objects by Hungarian matching on image distance to the GT centres
    at time t (the rule for objects whose identity is unknown)."""
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
        got = np.array([where[k] for k in keys], float)
        cost = np.linalg.norm(got[:, None, :] - gt_uv[None, :, :], axis=2)
        rows, cols = linear_sum_assignment(cost)
        for r, c in zip(rows, cols):
            out[keys[c]] = tuple(got[r])
    return out


def _segment_sequence(case: EvalCase, frames, seg: Segmenter, times=None, gt_frames=None):
    """Masks per frame, low-confidence flag, notes, and where each object is per frame (its fitted
    centre or mask centroid, `Segmentation.positions`). `gt_frames`: the GT frames at `times`, when
    the caller has decoded them (`SegmentContext.gt_frame`)."""
    ctx = context_for_case(case, "deduction")
    shape = (case.frame_size[1], case.frame_size[0])
    out, low, notes = [], False, []
    where: list[dict] = []
    done: dict[int, object] = {}       # the same frame (two timestamps on one video frame) is segmented once
    for k, f in enumerate(frames):
        if f is None:
            out.append({o.id: np.zeros(shape, bool) for o in case.objects})
            where.append({})
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
        out.append(s.masks)
    return out, low, notes, where


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
    try:
        pred_masks, low, notes, where = _segment_sequence(case, packet.frames, seg, packet.times, gt.frames)
    except ValueError as exc:
        res.notes.append(f"mask metrics not applicable: {exc}")
        return res
    res.low_confidence, res.notes = low, res.notes + sorted(set(notes))
    pu = np.stack([np.any([m[i] for i in ids], axis=0) if ids else np.zeros_like(gt_union[0]) for m in pred_masks])
    gu = np.stack(gt_union)
    res.values["spatial_iou"] = M.spatial_iou(pu, gu)
    res.values["spatiotemporal_iou"] = M.spatiotemporal_iou(pu, gu)
    res.values["weighted_spatial_iou"] = M.weighted_spatial_iou(pu, gu)
    if dense is not None:
        res.values["velocity"], vnote = velocity_metric(case, dense, seg)
    else:
        res.values["velocity"], vnote = sampled_velocity(case, packet, pred_masks, rule, where)
    if vnote:
        res.notes.append(vnote)
    return res


def frame_time(index: int, n_video_frames: int, duration: float, rule: str = "paper") -> float:
    """Physical time of prediction video frame `index` (0 = condition frame) when its N physics frames
    span [0, T]: index·T/N (paper), or (index − 1)·T/N under the published pairing."""
    n = max(n_video_frames - 1, 1)
    return (index - (1 if rule == "published" else 0)) * duration / n


def sampled_velocity(case: EvalCase, packet: DeductionPacket, masks: list[dict[str, np.ndarray]],
                     rule: str = "paper", where: list[dict] | None = None) -> tuple[float | None, str | None]:
    """S_vel from the frames already sampled at T_c (video protocol): the distinct prediction frames
    chosen for the timestamps, each at its own physical time index·T/N, give centroid tracks; the
    velocity over each consecutive pair of them is compared with the GT displacement over the same
    times (`metrics.velocity_error`). Needs no segmentation beyond the one done for the IoUs."""
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
            if inst is not None and not (inst == o.instance_id).any():
                gpos[o.id][k] = np.nan
    e = M.velocity_error(uv, times, case.intrinsic, case.extrinsic, planes, gt_positions=gpos)
    return M.velocity_score(e), None


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
        masks, _, _, where = _segment_sequence(case, dense.frames, seg, dense.times)
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
