"""Semi-automatic object masks of real-world clips (App. B.3): seed, propagate, flag drift, re-seed.

* Seeds: instance-id maps (H×W uint8, 0 = background) on some frames — frame 0 from an annotation, or
  from an initialiser: a colour key per object (`seed_from_colors`) or the difference to a background
  estimate (`seed_from_background`, the per-pixel temporal median of the clip).
* Propagation (`propagate`): from each seed frame forward until the next seed frame. Step k−1 → k:
  dense backward optical flow (Farnebäck) warps the previous map onto frame k; each object's warped
  mask, unioned with its constant-velocity prediction, is dilated into a search region in which the
  pixels matching the object's colour model (Lab mean/covariance from its seed) form the new mask
  (largest component overlapping the prediction). Seed frames are kept verbatim, so corrected frames
  re-seed the propagation.
* Drift detection (`detect_drift`): per object and frame, area jumps, centroid jumps against the
  constant-velocity prediction, shape jumps (IoU after aligning centroids), lost masks, and near
  contacts: colour identity is checked there and a better-matching swapped assignment is reported as
  an identity swap. Flagged frames are what a human corrects before the next propagation.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import cv2
import numpy as np

AREA_JUMP = 0.30          # relative area change between consecutive frames
CENTROID_JUMP = 0.35      # × equivalent diameter, against the constant-velocity prediction …
CENTROID_FLOOR_PX = 4.0   # … but never below this
SHAPE_IOU = 0.60          # IoU of consecutive masks after aligning their centroids
CONTACT_PX = 3            # masks closer than this are in contact
SWAP_MARGIN = 1.5         # swapped colour assignment must be this much better (Mahalanobis sum ratio)
COLOR_GATE = 3.5          # Mahalanobis distance accepted as the object's colour


@dataclass
class DriftFlag:
    frame: int
    object_id: str
    kind: str   # area_jump | centroid_jump | shape_jump | lost | identity_swap | contact
    value: float
    threshold: float

    def to_dict(self) -> dict[str, Any]:
        return {"frame": self.frame, "object": self.object_id, "kind": self.kind, "value": float(self.value),
                "threshold": float(self.threshold)}


@dataclass
class ColorModel:
    mean: np.ndarray
    inv_cov: np.ndarray

    @classmethod
    def fit(cls, lab_pixels: np.ndarray) -> "ColorModel":
        px = lab_pixels.reshape(-1, 3).astype(np.float64)
        mean = px.mean(axis=0)
        cov = np.cov(px.T) if len(px) > 3 else np.eye(3)
        cov = cov + np.eye(3) * 4.0  # floor: sensor noise, compression
        return cls(mean, np.linalg.inv(cov))

    def distance(self, lab: np.ndarray) -> np.ndarray:
        d = lab.reshape(-1, 3).astype(np.float64) - self.mean
        return np.sqrt(np.einsum("ij,jk,ik->i", d, self.inv_cov, d)).reshape(lab.shape[:-1])


def to_lab(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(np.ascontiguousarray(rgb[..., :3]).astype(np.uint8), cv2.COLOR_RGB2LAB).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Initialisers
# ---------------------------------------------------------------------------------------------
def seed_from_colors(frame: np.ndarray, colors: Mapping[int, tuple[Sequence[int], float]]) -> np.ndarray:
    """Instance map from colour keys: {instance_id: ((r, g, b), tolerance in Lab ΔE)}; the largest
    connected component per object is kept."""
    lab = to_lab(frame)
    out = np.zeros(frame.shape[:2], np.uint8)
    for iid, (rgb, tol) in colors.items():
        ref = to_lab(np.array([[rgb]], np.uint8))[0, 0]
        close = np.linalg.norm(lab - ref, axis=-1) <= float(tol)
        comp = _largest_component(close)
        out[comp & (out == 0)] = iid
    return out


def background_median(frames: Sequence[np.ndarray] | np.ndarray, max_frames: int = 60) -> np.ndarray:
    frames = np.asarray(frames)
    step = max(1, len(frames) // max_frames)
    return np.median(frames[::step], axis=0).astype(np.uint8)


def seed_from_background(frame: np.ndarray, background: np.ndarray, instance_ids: Sequence[int],
                         threshold: float = 25.0, min_area: int = 20) -> np.ndarray:
    """Instance map from the difference to a background: the largest foreground components, one per
    object, assigned left to right in the order of `instance_ids`."""
    diff = np.linalg.norm(to_lab(frame) - to_lab(background), axis=-1) > threshold
    diff = cv2.morphologyEx(diff.astype(np.uint8), cv2.MORPH_OPEN, np.ones((3, 3), np.uint8)) > 0
    n, labels, stats, cents = cv2.connectedComponentsWithStats(diff.astype(np.uint8), connectivity=8)
    comps = [(stats[i, cv2.CC_STAT_AREA], cents[i][0], i) for i in range(1, n) if stats[i, cv2.CC_STAT_AREA] >= min_area]
    comps = sorted(comps, reverse=True)[:len(instance_ids)]
    comps.sort(key=lambda c: c[1])
    out = np.zeros(frame.shape[:2], np.uint8)
    for iid, (_, _, i) in zip(instance_ids, comps):
        out[labels == i] = iid
    return out


# ---------------------------------------------------------------------------------------------
# Propagation
# ---------------------------------------------------------------------------------------------
def _largest_component(mask: np.ndarray, overlap: np.ndarray | None = None) -> np.ndarray:
    if not mask.any():
        return mask
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 2:
        return labels == 1
    best, best_score = 1, -1.0
    for i in range(1, n):
        comp = labels == i
        score = float(stats[i, cv2.CC_STAT_AREA])
        if overlap is not None:
            score += 1e6 * float(np.count_nonzero(comp & overlap))
        if score > best_score:
            best, best_score = i, score
    return labels == best


def centroid(mask: np.ndarray) -> np.ndarray | None:
    ys, xs = np.nonzero(mask)
    if len(xs) == 0:
        return None
    return np.array([xs.mean() + 0.5, ys.mean() + 0.5])  # pixel centres: (0,0) is the top-left corner


def _shift(mask: np.ndarray, d: np.ndarray) -> np.ndarray:
    m = np.float32([[1, 0, d[0]], [0, 1, d[1]]])
    return cv2.warpAffine(mask.astype(np.uint8), m, (mask.shape[1], mask.shape[0]), flags=cv2.INTER_NEAREST) > 0


@dataclass
class PropagationResult:
    masks: list[np.ndarray]
    seed_frames: list[int]
    flags: list[DriftFlag] = field(default_factory=list)

    def frames_to_correct(self) -> list[int]:
        return sorted({f.frame for f in self.flags if f.kind != "contact"})


def propagate(frames: Sequence[np.ndarray] | np.ndarray, seeds: Mapping[int, np.ndarray],
              instance_ids: Sequence[int]) -> list[np.ndarray]:
    """Instance maps for every frame: seeds verbatim, the frames in between propagated forward."""
    n = len(frames)
    if 0 not in seeds:
        raise ValueError("propagation needs a seed on frame 0")
    grays = [cv2.cvtColor(np.ascontiguousarray(f[..., :3]).astype(np.uint8), cv2.COLOR_RGB2GRAY) for f in frames]
    labs: dict[int, np.ndarray] = {}
    out: list[np.ndarray] = [None] * n  # type: ignore[list-item]
    models: dict[int, ColorModel] = {}
    velocity: dict[int, np.ndarray] = {}
    h, w = grays[0].shape
    gx, gy = np.meshgrid(np.arange(w, dtype=np.float32), np.arange(h, dtype=np.float32))
    for k in range(n):
        if k in seeds:
            seed = np.asarray(seeds[k]).astype(np.uint8)
            if seed.shape != (h, w):
                raise ValueError(f"seed of frame {k} is {seed.shape[::-1]}, the frames are {w}×{h}")
            out[k] = seed.copy()
            lab = labs.setdefault(k, to_lab(frames[k]))
            for iid in instance_ids:
                m = seed == iid
                if m.any():
                    models[iid] = ColorModel.fit(lab[m])
                    if k > 0 and out[k - 1] is not None:
                        c0, c1 = centroid(out[k - 1] == iid), centroid(m)
                        if c0 is not None and c1 is not None:
                            velocity[iid] = c1 - c0
            continue
        prev = out[k - 1]
        flow = cv2.calcOpticalFlowFarneback(grays[k], grays[k - 1], None, 0.5, 4, 21, 5, 7, 1.5, 0)
        warped = cv2.remap(prev, gx + flow[..., 0], gy + flow[..., 1], cv2.INTER_NEAREST,
                           borderMode=cv2.BORDER_CONSTANT, borderValue=0)
        lab = to_lab(frames[k])
        cur = np.zeros((h, w), np.uint8)
        for iid in instance_ids:
            pm = prev == iid
            if not pm.any():
                continue
            v = velocity.get(iid, np.zeros(2))
            predicted = (warped == iid) | _shift(pm, v)
            radius = int(min(max(5.0, 0.5 * float(np.linalg.norm(v)) + 3.0), 60.0))
            region = cv2.dilate(predicted.astype(np.uint8), cv2.getStructuringElement(
                cv2.MORPH_ELLIPSE, (2 * radius + 1, 2 * radius + 1))) > 0
            model = models.get(iid)
            if model is not None:
                ys, xs = np.nonzero(region)
                dist = model.distance(lab[ys, xs][None])[0]
                colour = np.zeros((h, w), bool)
                colour[ys[dist <= COLOR_GATE], xs[dist <= COLOR_GATE]] = True
                colour = cv2.morphologyEx(colour.astype(np.uint8), cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8)) > 0
                m = _largest_component(colour, overlap=predicted)
                if np.count_nonzero(m) < 0.3 * np.count_nonzero(pm):
                    m = warped == iid
            else:
                m = warped == iid
            cur[m & (cur == 0)] = iid
            c0, c1 = centroid(pm), centroid(m)
            if c0 is not None and c1 is not None:
                velocity[iid] = c1 - c0
        out[k] = cur
    return out


# ---------------------------------------------------------------------------------------------
# Drift detection
# ---------------------------------------------------------------------------------------------
def _iou(a: np.ndarray, b: np.ndarray) -> float:
    union = np.count_nonzero(a | b)
    return 1.0 if union == 0 else np.count_nonzero(a & b) / union


def detect_drift(masks: Sequence[np.ndarray], frames: Sequence[np.ndarray] | np.ndarray,
                 objects: Mapping[int, str], seeds: Iterable[int] = (0,)) -> list[DriftFlag]:
    """Frames whose masks look wrong. `objects`: instance id → object id. Seed frames are trusted."""
    seeds = set(seeds)
    flags: list[DriftFlag] = []
    hist: dict[int, list[np.ndarray | None]] = {iid: [] for iid in objects}
    models: dict[int, ColorModel] = {}
    lab0 = to_lab(frames[0])
    for iid in objects:
        m0 = masks[0] == iid
        if m0.any():
            models[iid] = ColorModel.fit(lab0[m0])
    for k, mk in enumerate(masks):
        for iid, oid in objects.items():
            m = mk == iid
            c = centroid(m)
            hist[iid].append(c)
            if k == 0 or k in seeds:
                continue
            prev = masks[k - 1] == iid
            a0, a1 = np.count_nonzero(prev), np.count_nonzero(m)
            if a0 and not a1:
                flags.append(DriftFlag(k, oid, "lost", 0.0, 1.0))
                continue
            if not a0 or not a1:
                continue
            rel = abs(a1 / a0 - 1.0)
            if rel > AREA_JUMP:
                flags.append(DriftFlag(k, oid, "area_jump", rel, AREA_JUMP))
            cs = hist[iid]
            if k >= 2 and cs[k - 2] is not None and cs[k - 1] is not None:
                pred = 2 * cs[k - 1] - cs[k - 2]
                diam = 2.0 * np.sqrt(a1 / np.pi)
                thr = max(CENTROID_JUMP * diam, CENTROID_FLOOR_PX)
                jump = float(np.linalg.norm(c - pred))
                if jump > thr:
                    flags.append(DriftFlag(k, oid, "centroid_jump", jump, thr))
            c0 = centroid(prev)
            iou = _iou(_shift(prev, c - c0), m)
            if iou < SHAPE_IOU:
                flags.append(DriftFlag(k, oid, "shape_jump", iou, SHAPE_IOU))
        # contacts and identity
        ids = [i for i in objects if np.any(mk == i)]
        if len(ids) < 2 or not models:
            continue
        lab = None
        kernel = np.ones((2 * CONTACT_PX + 1, 2 * CONTACT_PX + 1), np.uint8)
        for ai, a in enumerate(ids):
            grown = cv2.dilate((mk == a).astype(np.uint8), kernel) > 0
            for b in ids[ai + 1:]:
                if not np.any(grown & (mk == b)):
                    continue
                flags.append(DriftFlag(k, objects[a], "contact", 1.0, CONTACT_PX))
                if a not in models or b not in models:
                    continue
                lab = to_lab(frames[k]) if lab is None else lab
                ca, cb = lab[mk == a].mean(axis=0)[None, None], lab[mk == b].mean(axis=0)[None, None]
                keep = float(models[a].distance(ca)[0, 0] + models[b].distance(cb)[0, 0])
                swap = float(models[a].distance(cb)[0, 0] + models[b].distance(ca)[0, 0])
                if swap * SWAP_MARGIN < keep:
                    for i in (a, b):
                        flags.append(DriftFlag(k, objects[i], "identity_swap", keep / max(swap, 1e-9), SWAP_MARGIN))
    return flags


def run_pipeline(frames: Sequence[np.ndarray] | np.ndarray, seeds: Mapping[int, np.ndarray],
                 objects: Mapping[int, str]) -> PropagationResult:
    masks = propagate(frames, seeds, list(objects))
    flags = detect_drift(masks, frames, objects, seeds=seeds.keys())
    return PropagationResult(masks=masks, seed_frames=sorted(seeds), flags=flags)


def review_document(result: PropagationResult, method: str) -> dict[str, Any]:
    """gt/mask_review.json: how the masks were made and which frames a human should correct."""
    return {"method": method, "seed_frames": result.seed_frames,
            "frames_to_correct": result.frames_to_correct(),
            "flags": [f.to_dict() for f in result.flags],
            "thresholds": {"area_jump": AREA_JUMP, "centroid_jump_diameters": CENTROID_JUMP,
                           "centroid_floor_px": CENTROID_FLOOR_PX, "shape_iou": SHAPE_IOU,
                           "contact_px": CONTACT_PX, "swap_margin": SWAP_MARGIN}}
