"""Classical (weight-free) segmentation of generated frames.

Foreground:
* objects on white (P-G answers): colour distance to white in CIE Lab above a noise-adaptive
  threshold;
* in-scene frames (F-G answers, Deduction frames): Lab difference to the case's clean plate after
  removing the median global offset (a uniform brightness or tint change of the whole frame), a
  noise-adaptive threshold (median + 5 robust sigmas, floored), and shadow suppression: pixels that
  are darker than the plate with almost unchanged chroma are taken for shadows unless their colour
  is typical of one of the objects.
Both are cleaned by opening, closing, hole filling and removal of specks.

Assignment to objects: colour models (joint L·a*·b* histograms, coarse in L, smoothed) are built from
a reference image with per-object masks (the case's condition frame or reference answer). Objects
whose colour models are distinguishable are separated pixel by pixel; objects that look alike
are told apart by position (Hungarian matching of connected components to expected centroids; merged
blobs are split by 2-means on pixel coordinates). An object whose colour is close to its background
(ΔE below `LOW_CONTRAST_DE`) is reported as low confidence, as is a frame where most pixels changed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
from scipy import ndimage
from scipy.optimize import linear_sum_assignment

from .base import SegmentContext, Segmentation

L_BINS, AB_BINS = 4, 16
N_BINS = L_BINS * AB_BINS * AB_BINS
SIMILAR_BC = 0.55          # Bhattacharyya coefficient above which two objects count as alike in colour
LOW_CONTRAST_DE = 14.0     # ΔE between an object and its background below which results are unreliable
WHITE_FLOOR_DE = 8.0
PLATE_FLOOR_DE = 7.0
ANSWER_ANNOTATION_RGB = ((255, 140, 0),)   # F-G answers draw velocity arrows and labels in orange
GATE_DENSITY = 0.3         # a colour bin counts as an object colour above this multiple of the uniform density


def to_lab(rgb: np.ndarray) -> np.ndarray:
    """RGB uint8 → float32 Lab (L in [0, 100], a and b roughly in [−128, 127])."""
    return cv2.cvtColor(np.ascontiguousarray(rgb, dtype=np.uint8).astype(np.float32) / 255.0, cv2.COLOR_RGB2Lab)


def bin_index(lab: np.ndarray) -> np.ndarray:
    li = np.clip((lab[..., 0] * (L_BINS / 100.0)).astype(np.int32), 0, L_BINS - 1)
    ai = np.clip(((lab[..., 1] + 128.0) * (AB_BINS / 256.0)).astype(np.int32), 0, AB_BINS - 1)
    bi = np.clip(((lab[..., 2] + 128.0) * (AB_BINS / 256.0)).astype(np.int32), 0, AB_BINS - 1)
    return (li * AB_BINS + ai) * AB_BINS + bi


@dataclass
class ColourModel:
    prob: np.ndarray       # (N_BINS,), sums to 1
    logp: np.ndarray
    mean_lab: np.ndarray   # (3,)
    n: int


def colour_model(lab: np.ndarray, mask: np.ndarray) -> ColourModel | None:
    mask = mask.astype(bool)
    if mask.sum() > 50:  # drop the blended rim when the mask is big enough
        inner = ndimage.binary_erosion(mask, iterations=1)
        if inner.sum() >= 20:
            mask = inner
    n = int(mask.sum())
    if n == 0:
        return None
    counts = np.bincount(bin_index(lab)[mask], minlength=N_BINS).astype(np.float64)
    h = ndimage.gaussian_filter(counts.reshape(L_BINS, AB_BINS, AB_BINS), sigma=(0.5, 0.8, 0.8), mode="constant")
    h = h.ravel() + 1e-3 * max(h.max(), 1e-9) / N_BINS
    p = h / h.sum()
    return ColourModel(p, np.log(p), lab[mask].mean(axis=0), n)


def bhattacharyya(a: ColourModel, b: ColourModel) -> float:
    return float(np.sum(np.sqrt(a.prob * b.prob)))


def delta_e(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(np.asarray(a, float) - np.asarray(b, float)))


# ---------------------------------------------------------------------------------------------
# Foreground
# ---------------------------------------------------------------------------------------------
def _robust_threshold(d: np.ndarray, floor: float, background_quantile: float = 50.0) -> float:
    ref = np.percentile(d, background_quantile)
    low = d[d <= ref]
    sigma = 1.4826 * float(np.median(np.abs(low - np.median(low)))) if low.size else 0.0
    return max(floor, float(np.median(low)) + 5.0 * sigma if low.size else floor)


def _kernel(shape: tuple[int, int]) -> int:
    k = max(3, int(round(min(shape) / 120)))
    return k + 1 - k % 2


def clean_mask(fg: np.ndarray, min_area: int | None = None) -> np.ndarray:
    k = _kernel(fg.shape)
    m = fg.astype(np.uint8)
    m = cv2.morphologyEx(m, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    m = cv2.morphologyEx(m, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k + 2, k + 2)))
    m = fill_holes(m)
    min_area = min_area if min_area is not None else max(12, int(2e-4 * fg.size))
    n, labels, stats, _ = cv2.connectedComponentsWithStats(m.astype(np.uint8), connectivity=8)
    keep = np.zeros(n, bool)
    keep[1:] = stats[1:, cv2.CC_STAT_AREA] >= min_area
    return keep[labels]


def half_contrast(mask: np.ndarray, d: np.ndarray, fraction: float = 0.5) -> np.ndarray:
    """Sharpen blurred or chroma-subsampled boundaries: inside each connected component keep the
    pixels whose difference reaches `fraction` of the component's typical (75th percentile) contrast,
    which puts the edge where a blend of object and background is half-way."""
    n, labels = cv2.connectedComponents(mask.astype(np.uint8), connectivity=8)
    if n <= 1:
        return mask
    out = np.zeros_like(mask, dtype=bool)
    for i in range(1, n):
        comp = labels == i
        level = float(np.percentile(d[comp], 75))
        # only the rim is trimmed: weakly contrasted pixels inside an object (shading) stay
        rim = comp & ~ndimage.binary_erosion(comp, iterations=2)
        out |= comp & ~(rim & (d < fraction * level))
    return fill_holes(out)


def fill_holes(mask: np.ndarray) -> np.ndarray:
    """Fill holes (background regions not connected to the image border); a cv2 flood fill, much faster
    than scipy's binary_fill_holes on full frames."""
    m = mask.astype(np.uint8)
    h, w = m.shape
    pad = np.zeros((h + 2, w + 2), np.uint8)
    pad[1:-1, 1:-1] = m
    ff = pad.copy()
    cv2.floodFill(ff, np.zeros((h + 4, w + 4), np.uint8), (0, 0), 1)
    return (pad[1:-1, 1:-1] > 0) | (ff[1:-1, 1:-1] == 0)


def alpha_refine(mask: np.ndarray, rgb: np.ndarray, background: np.ndarray | None, band: int = 2,
                 level: float = 0.5) -> np.ndarray:
    """Sub-pixel edge placement by matting: along the mask's boundary (a band of `band` px on each side)
    each pixel's colour c is read as a blend α·o + (1 − α)·b of the object colour o (the colour of the
    nearest pixel well inside the mask) and the background b (the plate pixel, or white), and the
    pixel belongs to the object when α ≥ `level`. A rendered silhouette with anti-aliasing then keeps
    exactly the pixels that are at least half covered, which is what a renderer's instance mask holds.
    Pixels whose object and background colours are too close to tell apart keep their coarse label."""
    if not mask.any():
        return mask
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    m = band + 3
    y0, y1 = max(int(ys.min()) - m, 0), min(int(ys.max()) + m + 1, h)
    x0, x1 = max(int(xs.min()) - m, 0), min(int(xs.max()) + m + 1, w)
    sub = mask[y0:y1, x0:x1].astype(np.uint8)
    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * band + 1, 2 * band + 1))
    inner = cv2.erode(sub, k)
    outer = cv2.dilate(sub, k)
    ring = (outer > 0) & (inner == 0)
    if not inner.any() or not ring.any():
        return mask
    # nearest interior pixel of every pixel: distance transform of the non-interior with labels
    _, lab = cv2.distanceTransformWithLabels((inner == 0).astype(np.uint8), cv2.DIST_L2, 5,
                                             labelType=cv2.DIST_LABEL_PIXEL)
    iy, ix = np.nonzero(inner)
    # labels number the zero pixels of the input (the interior) in row-major scan order
    order = np.zeros(lab.max() + 1, np.int64)
    zero_lab = lab[iy, ix]
    order[zero_lab] = np.arange(iy.size)
    c = rgb[y0:y1, x0:x1].astype(np.float32)
    ry, rx = np.nonzero(ring)
    nearest = order[lab[ry, rx]]
    o = c[iy[nearest], ix[nearest]]
    b = (np.full_like(o, 255.0) if background is None
         else background[y0:y1, x0:x1].astype(np.float32)[ry, rx])
    px = c[ry, rx]
    ob = o - b
    den = np.sum(ob * ob, axis=1)
    ok = den > 20.0 ** 2          # object and background distinguishable (ΔRGB > 20)
    alpha = np.where(ok, np.sum((px - b) * ob, axis=1) / np.maximum(den, 1e-6), 0.0)
    out = sub.astype(bool).copy()
    sel = ok
    out[ry[sel], rx[sel]] = alpha[sel] >= level
    full = mask.copy()
    full[y0:y1, x0:x1] = out
    return full


def white_foreground(rgb: np.ndarray) -> tuple[np.ndarray, float]:
    """Pixels that are not (near) white. Returns (mask, threshold in ΔE)."""
    lab = to_lab(rgb)
    d = np.sqrt((100.0 - lab[..., 0]) ** 2 + lab[..., 1] ** 2 + lab[..., 2] ** 2)
    thr = _robust_threshold(d, WHITE_FLOOR_DE, background_quantile=40.0)
    coarse = clean_mask(half_contrast(clean_mask(d > thr), d))
    return clean_mask(alpha_refine(coarse, rgb, None)), thr


def plate_foreground(rgb: np.ndarray, plate: np.ndarray, object_models: list[ColourModel] | None = None
                     ) -> tuple[np.ndarray, float, float]:
    """Pixels that differ from the clean plate (shadows suppressed). Returns (mask, threshold ΔE,
    fraction of changed pixels before cleaning)."""
    lab, lab_p = to_lab(rgb), to_lab(plate)
    diff = lab - lab_p
    offset = np.median(diff.reshape(-1, 3), axis=0)
    diff = diff - offset
    d = np.linalg.norm(diff, axis=2)
    thr = _robust_threshold(d, PLATE_FLOOR_DE)
    fg = d > thr
    # shadows: darker than the plate, chroma nearly unchanged, not too dark
    chroma = np.hypot(diff[..., 1], diff[..., 2])
    ratio = (lab[..., 0] - offset[0] + 1.0) / (lab_p[..., 0] + 1.0)
    shadow = fg & (diff[..., 0] < -thr * 0.5) & (chroma < np.maximum(4.0, 0.3 * np.abs(diff[..., 0]))) \
        & (ratio > 0.35) & (ratio < 0.92)
    if object_models and shadow.any():
        idx = bin_index(lab)[shadow]
        best = np.max(np.stack([m.prob[idx] for m in object_models]), axis=0)
        keep = best > 20.0 / N_BINS
        sh = np.zeros_like(shadow)
        sh[shadow] = ~keep
        shadow = sh
    changed = float(fg.mean())
    fg = clean_mask(fg & ~shadow)
    coarse = clean_mask(half_contrast(fg, np.where(shadow, 0.0, d)))
    return clean_mask(alpha_refine(coarse, rgb, plate)), thr, changed


# ---------------------------------------------------------------------------------------------
# Assignment
# ---------------------------------------------------------------------------------------------
def _components(mask: np.ndarray, min_area: int) -> list[np.ndarray]:
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    return [labels == i for i in range(1, n) if stats[i, cv2.CC_STAT_AREA] >= min_area]


def _centroid(mask: np.ndarray) -> np.ndarray:
    ys, xs = np.nonzero(mask)
    return np.array([xs.mean() + 0.5, ys.mean() + 0.5])


def _split2(mask: np.ndarray) -> list[np.ndarray]:
    ys, xs = np.nonzero(mask)
    if ys.size < 4:
        return [mask]
    pts = np.stack([xs, ys], axis=1).astype(np.float32)
    crit = (cv2.TERM_CRITERIA_EPS + cv2.TERM_CRITERIA_MAX_ITER, 30, 0.5)
    cv2.setRNGSeed(0)
    _, lab, _ = cv2.kmeans(pts, 2, None, crit, 3, cv2.KMEANS_PP_CENTERS)
    out = []
    for k in range(2):
        m = np.zeros_like(mask)
        sel = lab.ravel() == k
        m[ys[sel], xs[sel]] = True
        out.append(m)
    return out


def _groups(ids: list[str], models: dict[str, ColourModel | None]) -> list[list[str]]:
    if len(ids) <= 1 or any(models.get(i) is None for i in ids):
        return [list(ids)]
    parent = {i: i for i in ids}

    def find(x):
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a in range(len(ids)):
        for b in range(a + 1, len(ids)):
            if bhattacharyya(models[ids[a]], models[ids[b]]) > SIMILAR_BC:
                parent[find(ids[a])] = find(ids[b])
    out: dict[str, list[str]] = {}
    for i in ids:
        out.setdefault(find(i), []).append(i)
    return list(out.values())


def _assign_by_position(mask: np.ndarray, ids: list[str], priors: dict[str, np.ndarray], min_area: int
                        ) -> dict[str, np.ndarray]:
    comps = _components(mask, min_area)
    out = {i: np.zeros_like(mask) for i in ids}
    if not comps:
        return out
    comps.sort(key=lambda m: -int(m.sum()))
    while len(comps) < len(ids) and comps:
        parts = _split2(comps.pop(0))
        comps.extend(parts)
        comps.sort(key=lambda m: -int(m.sum()))
        if len(parts) < 2:
            break
    diag = math.hypot(*mask.shape)
    cents = [_centroid(c) for c in comps]
    cost = np.zeros((len(ids), len(comps)))
    for r, i in enumerate(ids):
        p = priors.get(i)
        for c, cc in enumerate(cents):
            cost[r, c] = 0.0 if p is None else float(np.linalg.norm(cc - p)) / diag
    rows, cols = linear_sum_assignment(cost)
    assigned = {ids[r]: cols_i for r, cols_i in zip(rows, cols)}
    for i, c in assigned.items():
        out[i] |= comps[c]
    # left-over components (an object seen in pieces): join the nearest object by centroid
    largest = max(int(c.sum()) for c in comps)
    for c, comp in enumerate(comps):
        if c in assigned.values() or comp.sum() < 0.1 * largest:
            continue
        best = min(assigned, key=lambda i: np.linalg.norm(cents[c] - cents[assigned[i]]))
        out[best] |= comp
    return out


class ClassicalSegmenter:
    """Weight-free segmenter (see the module docstring)."""

    name = "classical"

    def _models(self, ctx: SegmentContext) -> dict[str, ColourModel | None]:
        if "models" not in ctx.cache:
            models: dict[str, ColourModel | None] = {i: None for i in ctx.object_ids}
            if ctx.reference_image is not None:
                lab = to_lab(ctx.reference_image)
                for i in ctx.object_ids:
                    m = ctx.reference_masks.get(i)
                    if m is not None and m.shape == lab.shape[:2]:
                        models[i] = colour_model(lab, m)
            ctx.cache["models"] = models
        return ctx.cache["models"]

    def _exclusion_models(self, ctx: SegmentContext) -> list[ColourModel]:
        if "exclude" not in ctx.cache:
            out = []
            rng = np.random.default_rng(0)
            for rgb in ctx.exclude_rgb:
                # the colour with the spread of anti-aliasing and compression: blends toward grey/white
                base = np.array(rgb, float)[None, None, :]
                patch = base * rng.uniform(0.8, 1.05, (24, 24, 1)) + rng.normal(0, 6, (24, 24, 3))
                patch = np.clip(patch, 0, 255).astype(np.uint8)
                m = colour_model(to_lab(patch), np.ones(patch.shape[:2], bool))
                if m is not None:
                    out.append(m)
            ctx.cache["exclude"] = out
        return ctx.cache["exclude"]

    def _contrast(self, ctx: SegmentContext, models: dict[str, ColourModel | None]) -> dict[str, float]:
        """ΔE between each object's mean colour and its background (white, or the plate under and
        around the object's reference mask)."""
        if "contrast" in ctx.cache:
            return ctx.cache["contrast"]
        out = {}
        plate_lab = None if ctx.background is None else to_lab(ctx.background)
        for i, m in models.items():
            if m is None:
                continue
            if plate_lab is None:
                bg = np.array([100.0, 0.0, 0.0])
            else:
                ref = ctx.reference_masks.get(i)
                if ref is None or not ref.any() or ref.shape != plate_lab.shape[:2]:
                    continue
                ring = ndimage.binary_dilation(ref, iterations=3)
                bg = plate_lab[ring].mean(axis=0)
            out[i] = delta_e(m.mean_lab, bg)
        ctx.cache["contrast"] = out
        return out

    def segment(self, image: np.ndarray, context: SegmentContext) -> Segmentation:
        ctx = context
        image = np.asarray(image, dtype=np.uint8)
        models = self._models(ctx)
        notes: list[str] = []
        if ctx.on_white:
            fg, thr = white_foreground(image)
            changed = float(fg.mean())
        else:
            if ctx.background.shape != image.shape:
                raise ValueError(f"clean plate {ctx.background.shape} and frame {image.shape} differ in size")
            fg, thr, changed = plate_foreground(image, ctx.background, [m for m in models.values() if m is not None])
        min_area = max(12, int(2e-4 * fg.size))
        known = [m for m in models.values() if m is not None]
        if known and fg.any():
            # colour gate: drop changed pixels whose colour none of the objects shows (answer arrows,
            # labels, leftover annotations), then clean up again
            idx = bin_index(to_lab(image))[fg]
            best = np.max(np.stack([m.prob[idx] for m in known]), axis=0)
            keep = best >= GATE_DENSITY / N_BINS
            excl = self._exclusion_models(ctx)
            if excl:
                worst = np.max(np.stack([m.prob[idx] for m in excl]), axis=0)
                keep &= best >= worst
            gated = np.zeros_like(fg)
            gated[fg] = keep
            if gated.sum() < fg.sum():
                notes.append(f"{int(fg.sum() - gated.sum())} changed pixels match no object colour (ignored)")
            fg = clean_mask(gated)
        ids = list(ctx.object_ids)
        masks = {i: np.zeros(fg.shape, bool) for i in ids}
        priors = {}
        for i in ids:
            if ctx.priors and ctx.priors.get(i) is not None:
                priors[i] = np.asarray(ctx.priors[i], float)
            elif ctx.reference_masks.get(i) is not None and ctx.reference_masks[i].any():
                priors[i] = _centroid(ctx.reference_masks[i])
        if len(ids) == 1:
            comps = _components(fg, min_area)
            if comps:
                largest = max(int(c.sum()) for c in comps)
                for c in comps:
                    if c.sum() >= 0.1 * largest:
                        masks[ids[0]] |= c
        elif ids:
            groups = _groups(ids, models)
            if len(groups) == 1:
                masks.update(_assign_by_position(fg, ids, priors, min_area))
            else:
                lab = to_lab(image)
                idx = bin_index(lab)[fg]
                scores = np.stack([np.max(np.stack([models[i].logp[idx] for i in g]), axis=0) for g in groups])
                raw = np.full(fg.shape, 255, np.uint8)
                raw[fg] = np.argmax(scores, axis=0).astype(np.uint8)
                lbl = cv2.medianBlur(raw, 5)
                edge = fg & (lbl == 255)          # the median pulled boundary pixels to background
                lbl[edge] = raw[edge]
                lbl[~fg] = 255
                for gi, g in enumerate(groups):
                    gmask = fg & (lbl == gi)
                    if len(g) == 1:
                        comps = _components(gmask, min_area)
                        if comps:
                            largest = max(int(c.sum()) for c in comps)
                            for c in comps:
                                if c.sum() >= 0.1 * largest:
                                    masks[g[0]] |= c
                    else:
                        masks.update(_assign_by_position(gmask, g, priors, min_area))
        contrast = self._contrast(ctx, models)
        confidence = {i: float(min(1.0, contrast[i] / (2 * LOW_CONTRAST_DE))) if i in contrast else 0.5 for i in ids}
        low = any(contrast.get(i, LOW_CONTRAST_DE) < LOW_CONTRAST_DE for i in ids)
        if low:
            notes.append("an object's colour is close to its background: low confidence")
        if changed > 0.5:
            low = True
            notes.append(f"{changed:.0%} of the frame changed: background or camera differs from the plate")
        if ids and all(not m.any() for m in masks.values()):
            notes.append("no object found")
        return Segmentation(masks=masks, foreground=fg, low_confidence=low, confidence=confidence, notes=notes)


def context_for_case(case, subtrack: str, priors: dict[str, tuple[float, float]] | None = None) -> SegmentContext:
    """The segmentation context of a subtrack: P-G answers are objects on white (colour models from the
    objects-only reference); F-G and Deduction frames are scenes (colour models from the condition
    frame and its instance map, background from the clean plate, else the clean condition frame is
    not usable as a plate and the white model is refused)."""
    ids = [o.id for o in case.objects]
    if subtrack == "perception_graphic":
        ref = case.image("perception_graphic") if case.has("perception_graphic") else None
        masks = case.reference_object_masks("perception_graphic") if ref is not None else {}
        if ref is None or not any(m.any() for m in masks.values()):
            ref, masks = case.image("condition_frame"), case.reference_object_masks("condition_frame")
        return SegmentContext(ids, ref, masks, background=None, priors=priors)
    ref = case.image("condition_frame")
    masks = case.reference_object_masks("condition_frame")
    plate = case.clean_plate()
    if plate is None:
        raise ValueError(f"{case.case_id}: no clean plate; in-scene segmentation needs one "
                         "(or a learned segmenter)")
    if plate.shape[:2] != (case.frame_size[1], case.frame_size[0]):
        from ..media import resize_rgb

        plate = resize_rgb(plate, case.frame_size)
    exclude = ANSWER_ANNOTATION_RGB if subtrack == "formulation_graphic" else ()
    return SegmentContext(ids, ref, masks, background=plate, priors=priors, exclude_rgb=exclude)
