"""What a lossy codec leaves of where the bodies are: a reader that knows every body's exact look.

A Deduction answer made of the GT video re-encoded (a codec family, nothing else changed) has the
GT's masks for truth. A heavy codec may draw a moving body away from there: a B-frame predicted
from a later frame, a block copied by a motion vector with too little residual to correct it. No
segmentation can then read the truth off the frame, and its error says nothing about the
evaluator. This reader bounds what can be read: each object's own GT pixels (from the GT frame the
answer frame was made from), laid over the clean plate with the other objects as the GT shows
them, are moved to where they explain the decoded frame best — a robust sum of squared
differences, over whole-pixel offsets within `SEARCH_PX`, then quarter-pixel steps around the
best — and the object's GT mask moved there is its mask. It knows more than any evaluator can (the
body's exact pixels, its true attitude and size, where to look), so its metric values against the
ideal are what the frames still say about the masks; a codec family where it misses a target is beyond what the
frames show.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import cv2
import numpy as np

from ..canonical import gt_deduction
from ..cases import EvalCase
from ..objective import deduction_mask_ious
from .families import Family, Spec
from .truth import DEDUCTION_MASK_METRICS, FrameTruth, warp_mask

SEARCH_PX = 6            # whole-pixel offsets searched each way from the true place
FINE_STEPS = np.arange(-0.75, 0.76, 0.25)   # then these offsets (pixels) around the best whole one
CAP = 3 * 40.0 ** 2      # a pixel differing by more than 40 levels per channel costs no more (robust)
MARGIN_PX = 8            # pixels around the searched reach that the comparison reads
MIN_PX = 20              # an object showing fewer pixels is not placed
METRICS = DEDUCTION_MASK_METRICS     # the mask metrics only (see `metrics`)


def applies(fam: Family) -> bool:
    """Whether the reader's assumption holds: a Deduction answer that is the GT video through a codec
    and nothing else."""
    return fam.subtrack == "deduction" and fam.spec == Spec(codec=fam.spec.codec)


@dataclass
class Read:
    masks: dict[str, np.ndarray]                 # per object, its GT mask moved where its look fits best
    offsets: dict[str, tuple[float, float]]      # ... by this (dx, dy) in pixels


def read_frame(frame: np.ndarray, gt: np.ndarray, instances: np.ndarray, plate: np.ndarray,
               objects: dict[str, int]) -> Read:
    """Place each object (`objects`: id → instance id in `instances`) of the GT frame `gt` on the
    answer frame `frame` (both at the GT resolution) as described in the module docstring."""
    frame, gt, plate = (a.astype(np.float32) for a in (frame, gt, plate))
    h, w = instances.shape
    masks, offsets = {}, {}
    for oid, iid in objects.items():
        mask = instances == iid
        if int(mask.sum()) < MIN_PX:
            masks[oid], offsets[oid] = mask, (0.0, 0.0)
            continue
        ys, xs = np.nonzero(mask)
        pad = SEARCH_PX + MARGIN_PX
        y0, y1 = max(int(ys.min()) - pad, 0), min(int(ys.max()) + pad + 1, h)
        x0, x1 = max(int(xs.min()) - pad, 0), min(int(xs.max()) + pad + 1, w)
        m = mask[y0:y1, x0:x1].astype(np.float32)
        body, seen = gt[y0:y1, x0:x1], frame[y0:y1, x0:x1]
        base = gt[y0:y1, x0:x1].copy()          # the other objects as the GT shows them ...
        base[mask[y0:y1, x0:x1]] = plate[y0:y1, x0:x1][mask[y0:y1, x0:x1]]   # ... this one taken off
        size = (x1 - x0, y1 - y0)

        def cost(dx: float, dy: float) -> tuple[float, np.ndarray]:
            A = np.float32([[1, 0, dx], [0, 1, dy]])
            cover = warp_mask(m, A, size)
            moved = cv2.warpAffine(body, A, size, flags=cv2.INTER_LINEAR)
            model = base.copy()
            model[cover] = moved[cover]
            d = np.minimum(np.einsum("ijk,ijk->ij", model - seen, model - seen), CAP)
            return float(d.sum()), cover

        whole = min(((cost(dx, dy)[0], dx, dy) for dy in range(-SEARCH_PX, SEARCH_PX + 1)
                     for dx in range(-SEARCH_PX, SEARCH_PX + 1)))
        best = min(((cost(whole[1] + fx, whole[2] + fy)[0], whole[1] + fx, whole[2] + fy)
                    for fy in FINE_STEPS for fx in FINE_STEPS))
        out = np.zeros((h, w), bool)
        out[y0:y1, x0:x1] = cost(best[1], best[2])[1]
        masks[oid], offsets[oid] = out, (float(best[1]), float(best[2]))
    return Read(masks, offsets)


def metrics(case: EvalCase, frames: Sequence[np.ndarray | None], truth: Sequence[FrameTruth | None],
            pred_indices: Sequence[int | None]) -> dict[str, float | None]:
    """The Deduction mask metrics of the reader's masks (not velocity: its quarter-pixel steps read a
    centre more coarsely than the evaluator does): `frames` the answer's frames the evaluator
    sampled (at the GT resolution, `canonical.canonical_deduction`), `truth` the answer's truth by
    answer-frame index, each answer frame made from the GT frame of the same index."""
    gt = gt_deduction(case, tuple(case.timestamps), rgb=False)
    idx = sorted({j for j in pred_indices if j is not None})
    gt_rgb = case.gt_frames(idx)
    plate = case.image("clean_plate")
    objects = {o.id: o.instance_id for o in case.objects}
    shape = (case.frame_size[1], case.frame_size[0])
    ids = list(objects.values())
    pred_union, gt_union, hidden = [], [], []
    for f, j, inst in zip(frames, pred_indices, gt.instances):
        gt_union.append(np.zeros(shape, bool) if inst is None else np.isin(inst, ids))
        t = None if j is None else truth[j]
        if f is None or t is None:
            pred_union.append(np.zeros(shape, bool))
            hidden.append(None)
            continue
        r = read_frame(f, gt_rgb[j], t.instances, plate, objects)
        pred_union.append(np.any(list(r.masks.values()), axis=0) if r.masks else np.zeros(shape, bool))
        hidden.append(t.unobservable)
    return dict(deduction_mask_ious(pred_union, gt_union, hidden))
