"""What an answer truly shows, and the metric values a perfect segmenter would report for it.

An answer's truth is known because the fidelity benchmark made the answer: every frame comes from a
rendered source frame (the case's GT or a counterfactual re-render) through known transforms. Per
answer frame it holds the instance map of what the frame shows (in the canonical frame: the answer
resized to the GT resolution, as `orchard-eval run` sees it), the pixels a drawn layer hides
(unobservable: an overlay the model left on, an answer arrow), and each object's true image centre.

Answers whose camera differs from the case's (shake, zoom, a crop) also carry a *registered* truth:
the same content in the condition frame's camera, with the pixels the answer does not show marked
unobservable. An evaluator that registers the answer to the scene measures against that one.

The ideal values are computed from the truth with the evaluator's own metric functions and the same
frame choice, so reported − ideal isolates what the segmentation gets wrong.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import cv2
import numpy as np

from .. import metrics as M
from ..canonical import DeductionPacket, gt_deduction
from ..cases import EvalCase
from ..objective import GRAPHIC_ROLE, HIDDEN_SHARE, _resolve_alike, deduction_mask_ious, sampled_velocity
from ..segment.classical import alike_groups
from ..segment.registration import opencv_affine
from ..segment.shape_prior import MIN_BLOB_PX

DEDUCTION_MASK_METRICS = ("spatial_iou", "spatiotemporal_iou", "weighted_spatial_iou")
DEDUCTION_METRICS = DEDUCTION_MASK_METRICS + ("velocity",)
GRAPHIC_METRIC = "mask_iou"


@dataclass
class FrameTruth:
    instances: np.ndarray                         # (H, W) instance ids of the case's objects, 0 elsewhere
    unobservable: np.ndarray | None = None        # (H, W) bool: pixels a drawn layer hides
    centres: dict[str, tuple[float, float] | None] = field(default_factory=dict)  # true image centres

    def masks(self, case: EvalCase) -> dict[str, np.ndarray]:
        return {o.id: self.instances == o.instance_id for o in case.objects}


@dataclass
class Truth:
    """Per answer frame (a video) or one frame (an image); `registered` where the camera moved."""
    frames: list[FrameTruth]
    registered: list[FrameTruth] | None = None

    def view(self, registered: bool) -> list[FrameTruth]:
        return self.registered if registered and self.registered is not None else self.frames


def warp_instances(instances: np.ndarray, affine: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """The instance map of a frame warped by `affine` (2×3, source pixel → target pixel, pixel
    centres at +0.5) to `size` = (width, height). Each object's mask is warped as a coverage field
    (bilinear) and kept where at least half covered: a sub-pixel shift moves the outline by the
    shift, which nearest-neighbour sampling of the id map would round to whole pixels."""
    out = np.zeros((size[1], size[0]), instances.dtype)
    A = opencv_affine(affine)
    for iid in np.unique(instances):
        if iid == 0:
            continue
        out[warp_mask((instances == iid).astype(np.float32), A, size)] = iid
    return out


def warp_mask(cover: np.ndarray, A: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """One object's mask (as float32 coverage) warped by the OpenCV affine `A` to `size` = (width,
    height), bilinearly, and kept where at least half covered (`warp_instances`' rule)."""
    return cv2.warpAffine(cover, A, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=0.0) >= 0.5


def field_of_view(affine: np.ndarray, src_size: tuple[int, int], dst_size: tuple[int, int]) -> np.ndarray:
    """Pixels of the target (dst) that `affine` fills from inside the source frame."""
    A = opencv_affine(affine)
    ones = np.ones((src_size[1], src_size[0]), np.float32)
    return cv2.warpAffine(ones, A, dst_size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=0.0) >= 0.999


def apply_affine(uv: tuple[float, float] | None, affine: np.ndarray) -> tuple[float, float] | None:
    if uv is None:
        return None
    A = np.asarray(affine, float).reshape(2, 3)
    p = A[:, :2] @ np.asarray(uv, float) + A[:, 2]
    return float(p[0]), float(p[1])


# ---------------------------------------------------------------------------------------------
# Persistence: one compressed NPZ per answer
# ---------------------------------------------------------------------------------------------
def save_truth(path: Path, truth: Truth, object_ids: Sequence[str], keep: Sequence[int] | None = None) -> None:
    """Write `truth` (only the answer frames in `keep`, all when None) atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    idx = list(range(len(truth.frames))) if keep is None else sorted(set(keep))
    arrays: dict[str, np.ndarray] = {"index": np.asarray(idx, np.int32), "n_frames": np.asarray(len(truth.frames)),
                                     "object_ids": np.asarray(list(object_ids))}
    for tag, frames in (("", truth.frames), ("reg_", truth.registered)):
        if frames is None:
            continue
        arrays[tag + "instances"] = np.stack([frames[i].instances for i in idx]).astype(np.uint8)
        if any(frames[i].unobservable is not None for i in idx):
            arrays[tag + "unobservable"] = np.stack([
                np.zeros(frames[i].instances.shape, bool) if frames[i].unobservable is None
                else frames[i].unobservable for i in idx])
        arrays[tag + "centres"] = np.array([[frames[i].centres.get(o) or (np.nan, np.nan) for o in object_ids]
                                            for i in idx], np.float64).reshape(len(idx), len(object_ids), 2)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path)


def load_truth(path: Path) -> tuple[Truth, list[int]]:
    """The truth saved by `save_truth` (frames not kept are None) and the kept answer-frame indices."""
    with np.load(path, allow_pickle=False) as z:
        idx = [int(i) for i in z["index"]]
        n = int(z["n_frames"])
        ids = [str(o) for o in z["object_ids"]]
        views = {}
        for tag in ("", "reg_"):
            if tag + "instances" not in z:
                continue
            inst, cent = z[tag + "instances"], z[tag + "centres"]
            unobs = z[tag + "unobservable"] if tag + "unobservable" in z else None
            frames: list = [None] * n
            for k, i in enumerate(idx):
                c = {o: (None if np.isnan(cent[k, j]).any() else (float(cent[k, j, 0]), float(cent[k, j, 1])))
                     for j, o in enumerate(ids)}
                frames[i] = FrameTruth(inst[k], None if unobs is None else unobs[k], c)
            views[tag] = frames
    return Truth(views[""], views.get("reg_")), idx


# ---------------------------------------------------------------------------------------------
# Ideal values
# ---------------------------------------------------------------------------------------------
def graphic_ideal(case: EvalCase, subtrack: str, frame: FrameTruth) -> float | None:
    """Mask IoU of the true masks against the reference masks, the truly hidden pixels left out of
    both (the evaluator's rule for unobservable pixels), objects that look alike matched by the best
    assignment (their identity is not in the answer; `segment.classical.alike_groups`)."""
    gt = case.reference_object_masks(GRAPHIC_ROLE[subtrack])
    if not gt:
        return None
    return M.object_mask_iou(frame.masks(case), gt, ignore=frame.unobservable, alike=alike_groups(case),
                             hidden_share=HIDDEN_SHARE).value


def deduction_ideal(case: EvalCase, frames: list[FrameTruth | None], pred_indices: Sequence[int | None],
                    n_video_frames: int, rule: str = "paper") -> dict[str, float | None]:
    """The Deduction mask IoUs and velocity a perfect segmentation of the answer would give: the true
    masks of the answer frames the evaluator sampled (`pred_indices`, from its record) against the GT
    masks at the timestamps, and the velocity from the true centres of those frames."""
    times = tuple(case.timestamps)
    gt = gt_deduction(case, times, rgb=False)
    picked = [None if j is None or j >= len(frames) else frames[j] for j in pred_indices]
    if any(f is None for f, j in zip(picked, pred_indices) if j is not None):
        raise ValueError("the truth lacks a frame the evaluator sampled")
    shape = (case.frame_size[1], case.frame_size[0])
    ids = [o.instance_id for o in case.objects]
    pred_union, gt_union, hidden = [], [], []
    for f, inst in zip(picked, gt.instances):
        g = np.zeros(shape, bool) if inst is None else np.isin(inst, ids)
        gt_union.append(g)
        pred_union.append(np.zeros(shape, bool) if f is None else np.isin(f.instances, ids))
        hidden.append(None if f is None else f.unobservable)
    out: dict[str, float | None] = dict(deduction_mask_ious(pred_union, gt_union, hidden))
    dummy = np.zeros((1, 1, 3), np.uint8)
    packet = DeductionPacket("video", times, list(pred_indices), [None if f is None else dummy for f in picked],
                             n_video_frames=n_video_frames)
    alike = alike_groups(case)
    where = [{} if f is None else _resolve_alike(case, {k: v for k, v in f.centres.items() if v is not None},
                                                 alike, t) for f, t in zip(picked, times)]
    unseen = [set() if f is None else _hidden_objects(case, f) for f in picked]
    out["velocity"], _ = sampled_velocity(case, packet, [], rule, where, hidden, unseen)
    return out


def _hidden_objects(case: EvalCase, f: FrameTruth) -> set[str]:
    """The objects the answer frame's drawn layers hide all but a sliver of (fewer than MIN_BLOB_PX
    of their true pixels show: a label left on over a body): what the answer shows cannot place
    them, a perfect segmentation either, and their velocity pairs are left, as their hidden pixels
    count in no IoU. A body partly shown is placed from what shows."""
    if f.unobservable is None:
        return set()
    out = set()
    for o in case.objects:
        own = f.instances == o.instance_id
        if own.any() and int((own & ~f.unobservable).sum()) < MIN_BLOB_PX:
            out.add(o.id)
    return out
