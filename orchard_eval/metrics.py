"""Objective metrics as pure numpy functions (App. D.5 and E.2).

Every function takes arrays and returns a float in a stated range (or None where the metric is not
defined for the input, e.g. masked PSNR over an empty region); none returns NaN and none raises on
empty masks. Conventions:

* masks are boolean-like arrays; a sequence is (T, H, W);
* IoU of two empty masks is 1.0 (nothing to find, nothing found), for the per-object mask IoU and for
  the three Physics-IQ-style IoUs alike; otherwise |A∩B| / |A∪B| exactly (the paper's ε only guards
  the empty union, which is handled explicitly);
* PSNR is capped at `PSNR_CAP_DB` = 40 dB, so identical images give 40 dB, not infinity; the score is
  min(PSNR/40, 1);
* masked PSNR is computed over the union of the GT object masks (the paper's definition). The published
  evaluator instead crops each object by its bounding box and uses the intersection of predicted and GT
  masks, and crashes on an empty predicted mask / yields NaN on an empty intersection. Here an empty GT
  region is "not applicable" (None) and an object missing from the prediction simply shows up as
  error inside the GT region.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Hashable, Mapping, Sequence

import cv2
import numpy as np

PSNR_CAP_DB = 40.0
LOST_OBJECT_ERROR = 100.0  # m/s: the error charged for a frame pair in which an object cannot be located


# ---------------------------------------------------------------------------------------------
# IoU family
# ---------------------------------------------------------------------------------------------
def _b(a) -> np.ndarray:
    return np.asarray(a) > 0 if np.asarray(a).dtype != bool else np.asarray(a)


def iou(a, b) -> float:
    """|A∩B| / |A∪B| of two binary masks; 1.0 when both are empty."""
    a, b = _b(a), _b(b)
    if a.shape != b.shape:
        raise ValueError(f"mask shapes differ: {a.shape} vs {b.shape}")
    union = np.count_nonzero(a | b)
    if union == 0:
        return 1.0
    return float(np.count_nonzero(a & b) / union)


def _seq(x) -> np.ndarray:
    x = _b(x)
    if x.ndim == 2:
        x = x[None]
    if x.ndim != 3 or x.shape[0] == 0:
        raise ValueError(f"expected a (T, H, W) mask sequence with T ≥ 1, got shape {x.shape}")
    return x


def spatial_iou(pred_seq, gt_seq) -> float:
    """Where does action happen: IoU of the time-collapsed (max) masks."""
    p, g = _seq(pred_seq), _seq(gt_seq)
    if p.shape != g.shape:
        raise ValueError(f"sequence shapes differ: {p.shape} vs {g.shape}")
    return iou(p.any(axis=0), g.any(axis=0))


def spatiotemporal_iou(pred_seq, gt_seq) -> float:
    """Where and when: mean over timestamps of the per-frame IoU."""
    p, g = _seq(pred_seq), _seq(gt_seq)
    if p.shape != g.shape:
        raise ValueError(f"sequence shapes differ: {p.shape} vs {g.shape}")
    return float(np.mean([iou(p[k], g[k]) for k in range(p.shape[0])]))


def weighted_spatial_iou(pred_seq, gt_seq) -> float:
    """Where and how much: Σ min(W_gen, W_gt) / Σ max(W_gen, W_gt) of the time-averaged masks."""
    p, g = _seq(pred_seq), _seq(gt_seq)
    if p.shape != g.shape:
        raise ValueError(f"sequence shapes differ: {p.shape} vs {g.shape}")
    wp, wg = p.mean(axis=0, dtype=np.float64), g.mean(axis=0, dtype=np.float64)
    den = float(np.maximum(wp, wg).sum())
    if den == 0.0:
        return 1.0
    return float(np.minimum(wp, wg).sum() / den)


# ---------------------------------------------------------------------------------------------
# Per-object mask IoU with matching (App. D.5)
# ---------------------------------------------------------------------------------------------
def _box(mask: np.ndarray) -> tuple[float, float, float, float] | None:
    ys, xs = np.nonzero(mask)
    if ys.size == 0:
        return None
    return float(xs.min()), float(ys.min()), float(xs.max() + 1), float(ys.max() + 1)


def box_iou(a, b) -> float:
    if a is None or b is None:
        return 0.0
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return 0.0 if union <= 0 else inter / union


def mask_centroid(mask) -> tuple[float, float] | None:
    """Centroid in continuous pixel coordinates ((0, 0) = top-left corner of the top-left pixel)."""
    m = _b(mask)
    if m.size == 0:
        return None
    # image moments: the exact integer sums of the pixel indices, the same mean as np.nonzero's
    # indices give, without building them; read on the mask's bounding box (the sums shifted back
    # by its corner stay exact integers)
    u8 = np.ascontiguousarray(m).view(np.uint8)
    x0, y0, w, h = cv2.boundingRect(u8)
    if w == 0 or h == 0:
        return None
    mo = cv2.moments(u8[y0:y0 + h, x0:x0 + w], binaryImage=True)
    n = mo["m00"]
    return float((mo["m10"] + x0 * n) / n + 0.5), float((mo["m01"] + y0 * n) / n + 0.5)


def hungarian_match(pred: Mapping[Hashable, np.ndarray], gt: Mapping[Hashable, np.ndarray]) -> dict:
    """Assign predicted masks to GT masks minimising (centre distance / image diagonal) + (1 − box IoU).
    Returns {gt_key: pred_key}; GT objects left over (more GT than predictions) are absent. Empty
    predicted masks are never assigned."""
    from scipy.optimize import linear_sum_assignment

    gk = list(gt)
    pk = [k for k in pred if np.any(_b(pred[k]))]
    if not gk or not pk:
        return {}
    shape = np.asarray(next(iter(gt.values()))).shape
    diag = math.hypot(shape[0], shape[1]) or 1.0
    gbox = {k: _box(_b(gt[k])) for k in gk}
    pbox = {k: _box(_b(pred[k])) for k in pk}
    gcen = {k: mask_centroid(gt[k]) for k in gk}
    pcen = {k: mask_centroid(pred[k]) for k in pk}
    cost = np.zeros((len(gk), len(pk)))
    for i, g in enumerate(gk):
        for j, p in enumerate(pk):
            if gcen[g] is None:
                cost[i, j] = 3.0
                continue
            d = math.hypot(gcen[g][0] - pcen[p][0], gcen[g][1] - pcen[p][1]) / diag
            cost[i, j] = d + (1.0 - box_iou(gbox[g], pbox[p]))
    rows, cols = linear_sum_assignment(cost)
    return {gk[r]: pk[c] for r, c in zip(rows, cols)}


@dataclass
class MaskIoUResult:
    value: float                        # mean over GT objects, missing objects 0
    per_object: dict = field(default_factory=dict)   # gt key -> IoU
    matching: dict = field(default_factory=dict)     # gt key -> pred key (None: missing)
    mode: str = "identity"


def object_mask_iou(pred: Mapping[Hashable, np.ndarray], gt: Mapping[Hashable, np.ndarray],
                    match: str = "auto", ignore=None, alike=(), hidden_share: float | None = None) -> MaskIoUResult:
    """Case-level mask IoU (D.5): per-object IoU after matching, mean over GT objects, a GT object
    without a prediction scores 0. `match`: "identity" (same keys), "hungarian", or "auto" (identity
    when every predicted key is a GT key, Hungarian otherwise). With no GT object at all the value is
    1.0 when nothing was predicted either, else 0.0.

    `ignore`: pixels that are unobservable in the answer (the F-G answer overlay the prompt requires:
    orange arrows drawn from the object centres and their labels, `segment.overlay`); they are removed
    from the predicted and the GT masks alike before matching and IoU, for every model the same way.

    `alike`: groups of object keys that look the same (the segmenter could not tell them apart by
    colour); identity within a group is unknown, so its members are matched by the assignment with
    the largest total IoU.

    `hidden_share`: a GT object whose mask `ignore` covers beyond this share is left out of the mean
    (the answer does not show what it would be measured on), unless that leaves no object."""
    gt = {k: _b(v) for k, v in gt.items()}
    pred = {k: _b(v) for k, v in pred.items()}
    if ignore is not None:
        keep = ~_b(ignore)
        if hidden_share is not None:
            shown = {k for k, v in gt.items() if not v.any() or (v & keep).sum() >= (1.0 - hidden_share) * v.sum()}
            if shown:
                gt = {k: v for k, v in gt.items() if k in shown}
        gt = {k: v & keep for k, v in gt.items()}
        pred = {k: v & keep for k, v in pred.items()}
    if match == "auto":
        match = "identity" if pred and set(pred) <= set(gt) else "hungarian"
    if not gt:
        anything = any(np.any(v) for v in pred.values())
        return MaskIoUResult(0.0 if anything else 1.0, {}, {}, match)
    if match == "identity":
        pairing = {k: (k if k in pred else None) for k in gt}
    elif match == "hungarian":
        m = hungarian_match(pred, gt)
        pairing = {k: m.get(k) for k in gt}
    else:
        raise ValueError(f"unknown matching mode {match!r}")
    for group in alike or ():
        keys = [k for k in group if k in gt and pairing.get(k) is not None]
        if len(keys) < 2:
            continue
        preds = [pairing[k] for k in keys]
        scores = np.array([[iou(pred[p], gt[g]) for p in preds] for g in keys])
        from scipy.optimize import linear_sum_assignment

        rows, cols = linear_sum_assignment(-scores)
        for r, c in zip(rows, cols):
            pairing[keys[r]] = preds[c]
    per = {}
    for g, p in pairing.items():
        if p is None:
            per[g] = 0.0 if np.any(gt[g]) else 1.0
        else:
            per[g] = iou(pred[p], gt[g])
    return MaskIoUResult(float(np.mean(list(per.values()))), per, pairing, match)


# ---------------------------------------------------------------------------------------------
# PSNR family
# ---------------------------------------------------------------------------------------------
_SQUARES = np.arange(256, dtype=np.int64) ** 2


def _mse(a: np.ndarray, b: np.ndarray) -> float:
    if a.dtype == np.uint8 and b.dtype == np.uint8:
        # 8-bit images: the histogram of |a − b| gives the exact sum of squares (the float64 mean
        # of the squared differences is that same integer over the count), in a third of the time
        d = cv2.absdiff(np.ascontiguousarray(a), np.ascontiguousarray(b))
        return float(int(np.bincount(d.ravel(), minlength=256) @ _SQUARES) / d.size)
    d = a.astype(np.float64) - b.astype(np.float64)
    return float(np.mean(d * d))


def psnr(pred, gt, max_value: float = 255.0) -> float:
    """PSNR in dB, capped at 40 dB (identical images give exactly 40)."""
    pred, gt = np.asarray(pred), np.asarray(gt)
    if pred.shape != gt.shape:
        raise ValueError(f"image shapes differ: {pred.shape} vs {gt.shape}")
    if pred.size == 0:
        raise ValueError("empty images")
    mse = _mse(pred, gt)
    if mse <= 0.0:
        return PSNR_CAP_DB
    return float(min(10.0 * math.log10(max_value * max_value / mse), PSNR_CAP_DB))


def psnr_score(db: float | None) -> float | None:
    """min(PSNR/40, 1), clipped below at 0."""
    if db is None:
        return None
    return float(min(max(db / PSNR_CAP_DB, 0.0), 1.0))


def masked_psnr(pred, gt, region, max_value: float = 255.0) -> float | None:
    """PSNR (capped at 40 dB) over the pixels of `region` (the union of GT object masks), all channels.
    None when the region is empty."""
    pred, gt, region = np.asarray(pred), np.asarray(gt), _b(region)
    if pred.shape != gt.shape or pred.shape[:2] != region.shape:
        raise ValueError(f"shapes differ: {pred.shape}, {gt.shape}, mask {region.shape}")
    if not region.any():
        return None
    mse = _mse(pred[region], gt[region])
    if mse <= 0.0:
        return PSNR_CAP_DB
    return float(min(10.0 * math.log10(max_value * max_value / mse), PSNR_CAP_DB))


def mean_defined(values: Sequence[float | None]) -> float | None:
    """Mean of the values that are not None; None when none is defined."""
    vals = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    return float(np.mean(vals)) if vals else None


# ---------------------------------------------------------------------------------------------
# Velocity (E.2): centroid tracks back-projected onto each object's GT motion plane
# ---------------------------------------------------------------------------------------------
def camera_center(extrinsic) -> np.ndarray:
    E = np.asarray(extrinsic, dtype=np.float64)
    return -E[:, :3].T @ E[:, 3]


def optical_axis(extrinsic) -> np.ndarray:
    E = np.asarray(extrinsic, dtype=np.float64)
    return E[:, :3].T @ np.array([0.0, 0.0, 1.0])


def motion_plane(positions, extrinsic, tol: float = 1e-4, rel: float = 1e-3) -> tuple[np.ndarray, np.ndarray]:
    """(point, unit normal) of the plane an object's GT centre moves in. Planar motion: the best-fit
    plane. Straight-line motion: the plane through the line that faces the camera most directly. No
    motion: the plane through the point perpendicular to the optical axis.

    A simulator leaves a straight fall a few hundredths of a millimetre off its line; the best-fit
    plane of that jitter has an arbitrary orientation (nearly edge-on to the camera, say), which makes
    back-projection onto it ill-conditioned. So motion counts as spread along a direction only when its
    RMS spread there exceeds `tol` metres and `rel` times the spread along the main direction."""
    P = np.asarray(positions, dtype=np.float64).reshape(-1, 3)
    P = P[np.all(np.isfinite(P), axis=1)]
    axis = optical_axis(extrinsic)
    if P.shape[0] == 0:
        raise ValueError("no finite GT position")
    c = P.mean(axis=0)
    if P.shape[0] >= 2:
        _, s, vt = np.linalg.svd(P - c, full_matrices=False)
        s = s / np.sqrt(P.shape[0])      # RMS spread along each principal direction
    else:
        s, vt = np.zeros(1), np.eye(3)[:1]
    if s.size >= 2 and s[1] > max(tol, rel * s[0]):
        # planar (or 3-D scatter): the best-fit plane
        n = vt[2] if vt.shape[0] > 2 else np.cross(vt[0], vt[1])
    elif s.size >= 1 and s[0] > tol:
        d = vt[0]
        n = axis - np.dot(axis, d) * d
        if np.linalg.norm(n) < 1e-9:  # moving along the line of sight: any plane through it
            n = np.cross(d, np.array([1.0, 0.0, 0.0]) if abs(d[0]) < 0.9 else np.array([0.0, 1.0, 0.0]))
    else:
        n = axis
    n = n / np.linalg.norm(n)
    return c, n


def project_points(X, intrinsic, extrinsic) -> np.ndarray:
    """Pixel coordinates (N, 2) of world points X (N, 3) under the pinhole camera (OpenCV axes)."""
    X = np.asarray(X, dtype=np.float64).reshape(-1, 3)
    E = np.asarray(extrinsic, dtype=np.float64)
    pc = X @ E[:, :3].T + E[:, 3]
    uv = pc[:, :2] / pc[:, 2:3]
    K = np.asarray(intrinsic, dtype=np.float64)
    return uv @ K[:2, :2].T + K[:2, 2]


def backproject_to_plane(uv, intrinsic, extrinsic, point, normal) -> np.ndarray:
    """World points where the camera rays through pixel coordinates `uv` (N, 2) meet the plane; rows
    are NaN where a ray is parallel to the plane or meets it behind the camera."""
    uv = np.asarray(uv, dtype=np.float64).reshape(-1, 2)
    K = np.asarray(intrinsic, dtype=np.float64)
    E = np.asarray(extrinsic, dtype=np.float64)
    R = E[:, :3]
    C = camera_center(E)
    hom = np.concatenate([uv, np.ones((uv.shape[0], 1))], axis=1)
    d_cam = np.linalg.solve(K, hom.T).T
    d_world = d_cam @ R            # R^T d for each row
    n = np.asarray(normal, dtype=np.float64)
    denom = d_world @ n
    s = np.full(uv.shape[0], np.nan)
    ok = np.abs(denom) > 1e-12
    s[ok] = ((np.asarray(point, dtype=np.float64) - C) @ n) / denom[ok]
    s[~(s > 0)] = np.nan
    return C + s[:, None] * d_world


def velocity_error(pred_uv: Mapping[Hashable, np.ndarray], times, intrinsic, extrinsic,
                   planes: Mapping[Hashable, tuple[np.ndarray, np.ndarray]],
                   gt_velocity: Mapping[Hashable, np.ndarray] | None = None,
                   gt_positions: Mapping[Hashable, np.ndarray] | None = None,
                   lost_error: float = LOST_OBJECT_ERROR) -> float | None:
    """Mean Euclidean 3-D velocity error e_v (m/s).

    `pred_uv[obj]` holds the predicted centroid (u, v) of each object at each of `times` (NaN rows:
    not found). Each centroid is back-projected onto the object's GT motion plane; the velocity over
    each consecutive pair of times is the displacement over the time step, compared with the GT
    average velocity over the same pair (displacement of `gt_positions`, or else the mean of the
    endpoint `gt_velocity`). A pair where the object cannot be located costs `lost_error`. Per-object
    errors are averaged over pairs, then over the GT objects. None when fewer than two times or no
    object with a plane."""
    t = np.asarray(times, dtype=np.float64)
    if t.size < 2 or not planes:
        return None
    if gt_positions is None and gt_velocity is None:
        raise ValueError("need GT positions or GT velocities")
    errs = []
    for obj, (pt, nrm) in planes.items():
        if gt_positions is not None and obj in gt_positions:
            gp = np.asarray(gt_positions[obj], dtype=np.float64).reshape(-1, 3)
            gt_pair = (gp[1:] - gp[:-1]) / np.diff(t)[:, None]
        elif gt_velocity is not None and obj in gt_velocity:
            gv = np.asarray(gt_velocity[obj], dtype=np.float64).reshape(-1, 3)
            gt_pair = 0.5 * (gv[1:] + gv[:-1])
        else:
            continue
        uv = np.asarray(pred_uv.get(obj, np.full((t.size, 2), np.nan)), dtype=np.float64).reshape(-1, 2)
        if uv.shape[0] != t.size:
            raise ValueError(f"object {obj!r}: {uv.shape[0]} centroids for {t.size} times")
        X = backproject_to_plane(np.nan_to_num(uv, nan=-1e9), intrinsic, extrinsic, pt, nrm)
        X[~np.all(np.isfinite(uv), axis=1)] = np.nan
        v = (X[1:] - X[:-1]) / np.diff(t)[:, None]
        e = np.linalg.norm(v - gt_pair, axis=1)
        bad = ~np.isfinite(e) | ~np.all(np.isfinite(gt_pair), axis=1)
        # a pair whose GT is undefined does not count; a pair whose prediction is missing costs lost_error
        gt_ok = np.all(np.isfinite(gt_pair), axis=1)
        e = np.where(bad & gt_ok, lost_error, e)
        if not gt_ok.any():
            continue
        errs.append(float(np.mean(e[gt_ok])))
    if not errs:
        return None
    return float(np.mean(errs))


def velocity_score(e_v: float | None) -> float | None:
    """1 / (1 + e_v); None stays None; a non-finite error scores 0."""
    if e_v is None:
        return None
    if not math.isfinite(e_v):
        return 0.0
    return float(1.0 / (1.0 + max(e_v, 0.0)))
