"""Classical (weight-free) segmentation of generated frames.

Foreground:
* objects on white (P-G answers): colour distance to white in CIE Lab above a noise-adaptive
  threshold;
* in-scene frames (F-G answers, Deduction frames): Lab difference to the case's clean plate after
  removing the median global offset (a uniform brightness or tint change of the whole frame), a
  noise-adaptive threshold (median + 5 robust sigmas, floored), and shadow suppression: a cast shadow
  is the plate times one attenuation k in every channel, k measured on the reference (condition)
  frame (`learn_shadow_gain`, `shadow_mask`). Edges by matting against the plate (darkened where the
  shadow lies). Strokes of the F-G answer overlay (`overlay.answer_overlay_mask`) are unobservable and
  never foreground. Each object's mask is completed to its convex hull where the hull's pixels are
  changed, shadow-like, overlay or of the object's colour (every suite shape has a convex silhouette).
Both are cleaned by opening, closing, hole filling and removal of specks.

Rigid shape prior (in-scene frames, where the case declares each object's primitive, size and
camera; `shape_prior.py`): each object's position is fitted to the frame on its GT motion plane
and its exact silhouette decides the pixels colour leaves open — rims blended by anti-aliasing and
H.264, an unlit side with the colour of the support in shadow — never a pixel that shows the plate.
Per case, from the condition frame: the scene's depth (supports that hide a body), each body's rim
shading (`shape_prior.LimbModel`) and the light that casts the objects' shadows (`shadows.py`).

Assignment to objects: colour models (joint L·a*·b* histograms, coarse in L, smoothed) are built from
a reference image with per-object masks (the case's condition frame or reference answer). Objects
whose colour models are distinguishable are separated pixel by pixel; objects that look alike
are told apart by position (Hungarian matching of connected components to expected centroids; merged
blobs are split by 2-means on pixel coordinates). An object whose colour is close to its background
(ΔE below `LOW_CONTRAST_DE`) is reported as low confidence, as is a frame where most pixels changed.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import cv2
import numpy as np
from scipy import ndimage
from scipy.optimize import linear_sum_assignment

from ..media import MediaError
from ..metrics import mask_centroid
from .appearance import Looks, make_sprite
from .base import SegmentContext, Segmentation
from .body_size import scaled_bodies
from .conditioning import rim_softness, scene_view, white_view
from .matting import FIT_CHROMA_WEIGHT, nearest_inside, weighted_ycc
from .overlay import ANSWER_ORANGE, InputLayer
from .photometry import channel_difference
from .shadows import CastShadows, cast_shadows
from .shape_prior import (MIN_FIT_IOU_WHITE, BodyPrior, Camera, LimbModel, apply_shape_prior,
                          EDGE_SHIFT_MAX, hidden_pixels, silhouette_coverage, learn_limb_model, quat_to_matrix)

L_BINS, AB_BINS = 4, 16
N_BINS = L_BINS * AB_BINS * AB_BINS
SIMILAR_BC = 0.55          # Bhattacharyya coefficient above which two objects count as alike in colour
LOW_CONTRAST_DE = 14.0     # ΔE between an object and its background below which results are unreliable
WHITE_FLOOR_DE = 8.0
WHITE_CLEAN_DE = 0.25      # threshold on a noise-free white background (clean renders): any non-white pixel
PLATE_FLOOR_DE = 7.0
PROTECTED_MIN_PX = 6        # a component next to unobservable pixels is kept from this size
MOVED_PX = 1.0             # a body whose centre moved farther (pixels) is elsewhere in the scene
FAINT_FRACTION = 0.5        # a difference from the plate above this share of the change threshold is faint
PLATE_CHROMA_WEIGHT = 1.0   # chroma weight in in-scene matting (measured: full weight is best even on 4:2:0 video)
SHADOW_SPREAD = 0.05       # relative spread of the per-channel ratio frame/plate in learned shadow pixels
SHADOW_ABS_TOL = 6.0       # RGB levels: a shadow pixel is k · plate within this plus SHADOW_REL_TOL · |k · plate|
SHADOW_REL_TOL = 0.05
SHADOW_K_TOL = 0.07        # tolerance on the learned shadow attenuation
ANSWER_ANNOTATION_RGB = (ANSWER_ORANGE,)   # F-G answers draw velocity arrows and labels in orange
SIZEABLE = 0.2             # a piece this share of the largest one's size may be an object of its own
COMPARABLE = 0.5           # ... and one this share of it may be the object itself, drawn twice
LIKENESS_NATS = 1.5        # ... if its colours are at most this much less likely (mean log-likelihood)
LIKENESS_SIZED = 0.1       # pieces of this share of the largest's size or more are compared by their likeness
SPLIT_SHARE = 0.25         # a piece larger than the largest object by this share of the smallest holds two
DARK_RATIO, DARK_SPREAD = 0.85, 0.25   # a pixel below this share of the plate in every channel, alike within this, is shadow-like
MIN_COLOURED = 0.3         # object-coloured changed pixels, as a share of the objects' area, below which colour is not used
EVERY_COLOURED = 0.5       # ... and the share of each object's area in its own colours that shows it drawn in them
RECOLOURED_BC = 0.3        # an answer's object whose colours overlap the case's less than this is recoloured
LIKELY_RATIO = 4.0         # an object's colour model over the frame's histogram that marks a likely object pixel
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
    if not low.size:
        return floor
    centre = np.median(low)
    sigma = 1.4826 * float(np.median(np.abs(low - centre)))
    return max(floor, float(centre) + 5.0 * sigma)


def labelled(mask: np.ndarray) -> tuple[int, np.ndarray, np.ndarray]:
    """`cv2.connectedComponentsWithStats` (8-connected) of a mask, worked out on its bounding box
    only: the same labels, the stats in frame coordinates (the background's row is not used). On a
    frame where the objects are small this is about 20× faster than labelling the whole frame."""
    m = mask.astype(np.uint8)
    labels = np.zeros(m.shape, np.int32)
    x, y, w, h = cv2.boundingRect(m)
    if w == 0 or h == 0:
        return 1, labels, np.array([[0, 0, m.shape[1], m.shape[0], m.size]], np.int32)
    n, sub, stats, _ = cv2.connectedComponentsWithStats(m[y:y + h, x:x + w], connectivity=8)
    labels[y:y + h, x:x + w] = sub
    stats[1:, cv2.CC_STAT_LEFT] += x
    stats[1:, cv2.CC_STAT_TOP] += y
    return n, labels, stats


def _kernel(shape: tuple[int, int]) -> int:
    k = max(3, int(round(min(shape) / 120)))
    return k + 1 - k % 2


def clean_mask(fg: np.ndarray, min_area: int | None = None, protect: np.ndarray | None = None,
               open_edges: bool = True) -> np.ndarray:
    """Opening, closing, hole filling, and components of at least `min_area` pixels; a component
    next to `protect` (unobservable pixels: the visible part of a body a drawn layer hides) needs
    only PROTECTED_MIN_PX, and with `open_edges` one at the frame's edge too (what is beyond it is
    not observed either: a body leaving the view). Counting marks rather than segmenting bodies,
    pass `open_edges=False`: a speck at the edge is no mark."""
    k = _kernel(fg.shape)
    m = fg.astype(np.uint8)
    m = cv2.morphologyEx(m, cv2.MORPH_OPEN, np.ones((3, 3), np.uint8))
    m = cv2.morphologyEx(m, cv2.MORPH_CLOSE, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (k + 2, k + 2)))
    m = fill_holes(m)
    min_area = min_area if min_area is not None else max(12, int(2e-4 * fg.size))
    n, labels, stats = labelled(m)
    return _big_enough(labels, stats, min_area, protect, open_edges)[labels]


def _big_enough(labels: np.ndarray, stats: np.ndarray, min_area: int, protect: np.ndarray | None,
                open_edges: bool = True) -> np.ndarray:
    """Per component label: kept (the background label 0 never). A component that touches
    unobservable pixels (`protect`) or, with `open_edges`, the frame's edge is kept from
    PROTECTED_MIN_PX: the rest of it may lie where nothing is observed."""
    area = stats[:, cv2.CC_STAT_AREA]
    keep = area >= min_area
    if open_edges:
        h, w = labels.shape
        x, y = stats[:, cv2.CC_STAT_LEFT], stats[:, cv2.CC_STAT_TOP]
        at_edge = (x == 0) | (y == 0) | (x + stats[:, cv2.CC_STAT_WIDTH] == w) | (y + stats[:, cv2.CC_STAT_HEIGHT] == h)
        keep |= at_edge & (area >= PROTECTED_MIN_PX)
    if protect is not None and protect.any():
        near = cv2.dilate(protect.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
        touching = np.zeros(len(area), bool)
        touching[np.unique(labels[near])] = True
        keep |= touching & (area >= PROTECTED_MIN_PX)
    keep[0] = False
    return keep


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
                 level: float = 0.5, chroma_weight: float = 1.0, min_contrast: float = 20.0) -> np.ndarray:
    """Sub-pixel edge placement by matting: along the mask's boundary (a band of `band` px on each side)
    each pixel's colour c is read as a blend α·o + (1 − α)·b of the object colour o (the colour of the
    nearest pixel well inside the mask) and the background b (the plate pixel — already darkened where
    the object's shadow lies —, or white), and the pixel belongs to the object when α ≥ `level`. A
    rendered silhouette with anti-aliasing then keeps exactly the pixels that are at least half
    covered, which is what a renderer's instance mask holds. Colours are compared in luma/chroma with
    chroma weighted by `chroma_weight` (< 1 for chroma-subsampled video). Pixels whose object and
    background colours are too close to tell apart (weighted distance < `min_contrast`) keep their
    coarse label."""
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
    c = rgb[y0:y1, x0:x1].astype(np.float32)
    ry, rx = np.nonzero(ring)
    ny, nx = nearest_inside(inner)
    o = weighted_ycc(c[ny[ry, rx], nx[ry, rx]], chroma_weight)
    b = (np.full((ry.size, 3), 255.0, np.float32) if background is None
         else background[y0:y1, x0:x1].astype(np.float32)[ry, rx])
    b = weighted_ycc(b, chroma_weight)
    px = weighted_ycc(c[ry, rx], chroma_weight)
    ob = o - b
    den = np.sum(ob * ob, axis=1)
    ok = den > min_contrast ** 2
    alpha = np.where(ok, np.sum((px - b) * ob, axis=1) / np.maximum(den, 1e-6), 0.0)
    out = sub.astype(bool).copy()
    out[ry[ok], rx[ok]] = alpha[ok] >= level
    full = mask.copy()
    full[y0:y1, x0:x1] = out
    return full


def white_foreground(rgb: np.ndarray) -> tuple[np.ndarray, float]:
    """Pixels that are not (near) white. Returns (mask, threshold in ΔE). The threshold adapts to the
    noise of the white background; on a noise-free white (a clean render) it drops to
    `WHITE_CLEAN_DE`, so that near-white object parts (a lit off-white ceramic face) stay objects.
    Noise-free is judged next to the objects, where a codec puts its noise (JPEG keeps a flat white
    exact and rings around every edge)."""
    lab = to_lab(rgb)
    d = np.sqrt((100.0 - lab[..., 0]) ** 2 + lab[..., 1] ** 2 + lab[..., 2] ** 2)
    ref = np.percentile(d, 40.0)
    low = d[d <= ref]
    clean_white = low.size > 0 and float(np.percentile(low, 99)) < 0.2
    if clean_white:
        rough = (d > WHITE_FLOOR_DE).astype(np.uint8)
        near = (cv2.dilate(rough, np.ones((9, 9), np.uint8)) > 0) & ~(cv2.dilate(rough, np.ones((3, 3), np.uint8)) > 0)
        clean_white = not near.any() or float(np.percentile(d[near], 90)) < 0.5
    thr = _robust_threshold(d, WHITE_CLEAN_DE if clean_white else WHITE_FLOOR_DE, background_quantile=40.0)
    coarse = clean_mask(d > thr)
    if not clean_white:
        coarse = clean_mask(half_contrast(coarse, d))
    return clean_mask(alpha_refine(coarse, rgb, None)), thr


def learn_shadow_gain(reference: np.ndarray | None, plate: np.ndarray, masks: dict[str, np.ndarray]
                      ) -> float | None:
    """The attenuation k of the objects' cast shadows (frame ≈ k · plate, the same k in every channel),
    measured on the reference frame: its pixels that differ from the plate away from every object are
    the objects' shadows. None when the reference shows no shadow."""
    if reference is None or reference.shape != plate.shape or not masks:
        return None
    obj = np.zeros(plate.shape[:2], bool)
    for m in masks.values():
        if m is not None and m.shape == obj.shape:
            obj |= m.astype(bool)
    near = cv2.dilate(obj.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0
    f, p = reference.astype(np.float32), plate.astype(np.float32)
    k, spread = _ratio(f, p)
    cand = (np.abs(f - p).sum(axis=2) > 24) & ~near & (spread < SHADOW_SPREAD) & (k > 0.1) & (k < 0.9)
    if cand.sum() < 12:
        return None
    return float(np.median(k[cand]))


def _ratio(f: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel mean ratio frame/plate over the channels and its relative spread."""
    r = (f + 1.0) / (p + 1.0)
    k = r.mean(axis=2)
    spread = r.std(axis=2) / np.maximum(k, 1e-3)
    return k, spread


def shadow_mask(rgb: np.ndarray, plate: np.ndarray, shadow_gain: float | None,
                broad: bool = False, where: np.ndarray | None = None) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Pixels that look like the plate darkened uniformly in every channel (a cast shadow): the colour
    is k · plate within a tolerance of a few levels plus `SHADOW_REL_TOL` of its brightness (absolute
    residuals, so that the dark channels of a saturated floor do not make ratios noisy). With a known
    attenuation k (`learn_shadow_gain`) the umbra is k ± `SHADOW_K_TOL`, and the penumbra the pixels
    between k and the plate next to it; without one, any uniform darkening to 25–90 %.

    `broad=True` also returns the pixels that fit *some* uniform darkening (k in 0.2–0.95): a shadow
    on a surface turned another way than the one the gain was learned on (a curved track, a ramp)
    has another k. Returns (learned-gain shadow, broad shadow) then. `where`: the only pixels the
    caller asks about (results elsewhere are False)."""
    h, w = rgb.shape[:2]
    # a global exposure/tint change, from every 4th pixel in each direction
    gain = np.median((rgb[::4, ::4].astype(np.float32) + 1.0) / (plate[::4, ::4].astype(np.float32) + 1.0),
                     axis=(0, 1))
    if where is None:
        sel = np.ones(h * w, bool)
    else:
        # only pixels that can matter (the caller's candidates and a penumbra's reach around them)
        sel = (cv2.dilate(where.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0).ravel()
    idx = np.flatnonzero(sel)
    f = rgb.reshape(-1, 3)[idx].astype(np.float32) / gain
    p = plate.reshape(-1, 3)[idx].astype(np.float32)
    pp = np.sum(p * p, axis=1)
    k = np.sum(f * p, axis=1) / np.maximum(pp, 1.0)            # best uniform attenuation
    res = np.linalg.norm(f - k[:, None] * p, axis=1)
    tol = SHADOW_ABS_TOL + SHADOW_REL_TOL * k * np.sqrt(pp)
    flat = res <= tol

    def full(v: np.ndarray) -> np.ndarray:
        out = np.zeros(h * w, bool)
        out[idx] = v
        return out.reshape(h, w)

    if shadow_gain is None:
        umbra = flat & (k > 0.25) & (k < 0.9)
        lo = 0.25
    else:
        umbra = flat & (np.abs(k - shadow_gain) <= SHADOW_K_TOL)
        lo = shadow_gain - SHADOW_K_TOL
    out = full(umbra)
    if umbra.any():
        near = (cv2.dilate(out.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0).ravel()[idx]
        pen = near & (res <= 1.5 * tol) & (k > lo) & (k < 0.97)
        out = full(umbra | pen)
    if not broad:
        return out
    wide = full(flat & (k > 0.2) & (k < 0.95))
    return out, out | wide


@dataclass
class PlateDifference:
    """How a frame differs from the clean plate (`plate_foreground`)."""
    foreground: np.ndarray     # changed pixels, cast shadows suppressed, cleaned and matted
    threshold: float           # ΔE above which a pixel counts as changed
    changed_fraction: float    # share of the frame changed, before cleaning
    changed: np.ndarray        # pixels above the threshold
    shadow: np.ndarray         # changed pixels taken for cast shadow
    shadow_like: np.ndarray    # any uniform darkening of the plate, object-coloured or not
    faint: np.ndarray          # changes above FAINT_FRACTION of the threshold


EDGE_BINS = (0.0, 2.0, 4.0, 8.0, 16.0, 32.0)   # plate lightness gradient (L per pixel) bin edges
EDGE_BIN_MIN_PX = 100     # of the quarter sampled


def edge_bands(plate_l: np.ndarray) -> np.ndarray:
    """Per pixel, its band of plate lightness gradient (EDGE_BINS), for `edge_thresholds`."""
    gx = cv2.Sobel(plate_l, cv2.CV_32F, 1, 0, ksize=3) / 8.0
    gy = cv2.Sobel(plate_l, cv2.CV_32F, 0, 1, ksize=3) / 8.0
    return np.digitize(np.sqrt(gx * gx + gy * gy), EDGE_BINS[1:]).astype(np.uint8)


def edge_thresholds(d: np.ndarray, band: np.ndarray, floor: float) -> np.ndarray:
    """Per pixel, the change threshold of its kind of plate pixel: a codec (or a resampling) errs
    most where the plate has edges — blocks and ringing along a checker's lines, a horizon, a
    table's outline — so the noise is measured per band of plate gradient (median + 5 robust sigmas
    of the lower half of the differences there, as `_robust_threshold` does over the frame) and a
    pixel is changed when it exceeds its band's level (`band`: `edge_bands` of the plate). A band
    with few pixels takes the flatter band's level. On a render of ours every band sits at the
    floor."""
    levels = np.full(len(EDGE_BINS), floor, np.float32)
    last = floor
    sub = (slice(None, None, 2), slice(None, None, 2))     # the statistics of a quarter of the pixels
    ds, bs = d[sub], band[sub]
    for b in range(len(EDGE_BINS)):
        sel = ds[bs == b]
        if sel.size >= EDGE_BIN_MIN_PX:
            last = max(last, _robust_threshold(sel, floor))   # never below a flatter band's
        levels[b] = last
    return levels[band]


def plate_foreground(rgb: np.ndarray, plate: np.ndarray, object_models: list[ColourModel] | None = None,
                     shadow_gain: float | None = None, ignore: np.ndarray | None = None,
                     plate_lab: np.ndarray | None = None, lab: np.ndarray | None = None,
                     edge_band: np.ndarray | None = None, bins: np.ndarray | None = None) -> PlateDifference:
    """Pixels that differ from the clean plate, cast shadows suppressed (`PlateDifference`). `ignore`:
    pixels that are unobservable (answer overlay) and never foreground; `plate_lab`, `lab`: the plate
    and the frame in Lab, `bins` the frame's `bin_index`, when the caller has them already."""
    lab = to_lab(rgb) if lab is None else lab
    lab_p = to_lab(plate) if plate_lab is None else plate_lab
    diff = lab - lab_p
    # per channel on a contiguous copy: the same medians, a third faster than along a strided axis
    offset = np.median(np.ascontiguousarray(diff.reshape(-1, 3).T), axis=1)
    diff = diff - offset
    # the same sums as np.linalg.norm(diff, axis=2), written out: five times faster on a frame
    d = np.sqrt(diff[..., 0] * diff[..., 0] + diff[..., 1] * diff[..., 1] + diff[..., 2] * diff[..., 2])
    thr = _robust_threshold(d, PLATE_FLOOR_DE)
    thr_map = edge_thresholds(d, edge_bands(lab_p[..., 0]) if edge_band is None else edge_band, PLATE_FLOOR_DE)
    changed_px = d > thr_map
    learned, wide = shadow_mask(rgb, plate, shadow_gain, broad=True, where=changed_px)
    shadow_like = changed_px & wide
    # the learned attenuation is trusted; any other uniform darkening (no shadow in the reference,
    # or a surface lit at another angle) is a shadow only where its colour is not typical of an object
    shadow = changed_px & (learned if shadow_gain is not None else np.zeros_like(learned))
    loose = shadow_like & ~shadow
    if loose.any():
        if object_models:
            idx = (bin_index(lab) if bins is None else bins)[loose]
            best = np.max(np.stack([m.prob[idx] for m in object_models]), axis=0)
            sh = np.zeros_like(loose)
            sh[loose] = best <= 20.0 / N_BINS
            shadow = shadow | sh
        elif shadow_gain is None:
            shadow = shadow | (changed_px & learned)
    changed = float(changed_px.mean())
    fg = changed_px & ~shadow
    if ignore is not None:
        fg &= ~ignore
    coarse = clean_mask(fg, protect=ignore)
    # matting against the local background: the plate, darkened where the object's shadow lies
    bg = plate
    if shadow.any():
        near = cv2.dilate(shadow.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
        if shadow_gain is not None and near.any():
            bg = plate.astype(np.float32)
            bg[near] *= shadow_gain
    refined = alpha_refine(coarse, rgb, bg, chroma_weight=PLATE_CHROMA_WEIGHT)
    if ignore is not None:
        refined &= ~ignore
    return PlateDifference(clean_mask(refined, protect=ignore), thr, changed, changed_px, shadow,
                           shadow_like, d > FAINT_FRACTION * thr_map)


def convex_completion(mask: np.ndarray, eligible: np.ndarray, min_area: int = 20) -> np.ndarray:
    """Fill the pixels of a silhouette's convex hull that are `eligible` (changed, shadow-like,
    unobservable, or of the object's colour). Every object of the suite (sphere, box, cylinder, cone)
    has a convex silhouette; parts of it that happen to look like the plate or like a shadow of the
    plate (a red ball's dark side over a red ramp) are recovered. The hull is taken after an opening so
    that a thin stray protrusion does not inflate it."""
    if mask.sum() < min_area:
        return mask
    n, labels, stats = labelled(mask)
    if n > 2:   # one hull per sizeable piece: pieces apart (an arrow across the object) stay apart
        out = mask.copy()
        for i in range(1, n):
            if stats[i, cv2.CC_STAT_AREA] >= min_area:
                out |= convex_completion(labels == i, eligible, min_area)
        return out
    ys, xs = np.nonzero(mask)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    sub = mask[y0:y1, x0:x1].astype(np.uint8)
    core = cv2.morphologyEx(sub, cv2.MORPH_OPEN, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (5, 5)))
    if core.sum() < 0.8 * sub.sum():
        core = sub
    pts = cv2.findNonZero(core)
    if pts is None:
        return mask
    hull = np.zeros_like(sub)
    cv2.fillConvexPoly(hull, cv2.convexHull(pts), 1)
    out = mask.copy()
    out[y0:y1, x0:x1] |= (hull > 0) & eligible[y0:y1, x0:x1]
    return out


# ---------------------------------------------------------------------------------------------
# Assignment
# ---------------------------------------------------------------------------------------------
def _components(mask: np.ndarray, min_area: int, protect: np.ndarray | None = None) -> list[np.ndarray]:
    n, labels, stats = labelled(mask)
    keep = _big_enough(labels, stats, min_area, protect)
    return [labels == i for i in range(1, n) if keep[i]]


def _centroid(mask: np.ndarray) -> np.ndarray:
    c = mask_centroid(mask)
    return np.array([math.nan, math.nan] if c is None else c)


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


def _assign_by_position(mask: np.ndarray, ids: list[str], priors: dict[str, np.ndarray], min_area: int,
                        protect: np.ndarray | None = None, split_px=None,
                        reach: dict[str, float] | None = None) -> dict[str, np.ndarray]:
    """Pieces of the foreground to objects by position (Hungarian on distance to `priors`). Fewer
    sizeable pieces than objects expected in view (`priors` inside the image): the largest holds
    several (touching look-alikes) and is split if it may hold two (`_holds_two`; one body is not
    cut in two for another one that left the view). A speck (codec noise) does not count
    as one of the objects: where there is a sizeable piece for every object in view only those
    are matched; where there is not, a smaller piece may be an object seen small (far off, or
    mostly hidden). A piece left over joins the nearest object only within that object's
    `reach` (pixels, as `_one_body`): a smear a codec left along another body's edge is no part
    of a look-alike across the scene."""
    comps = _components(mask, min_area, protect)
    out = {i: np.zeros_like(mask) for i in ids}
    if not comps:
        return out
    comps.sort(key=lambda m: -int(m.sum()))
    h, w = mask.shape
    in_view = sum(p is None or (0 <= p[0] < w and 0 <= p[1] < h) for p in (priors.get(i) for i in ids))

    def sizeable() -> list[int]:   # the pieces (largest first) that may each be an object of its own
        top = int(comps[0].sum())
        return [c for c, comp in enumerate(comps) if int(comp.sum()) >= SIZEABLE * top]
    while comps and len(sizeable()) < in_view and _holds_two(comps[0], priors, split_px):
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
    # with a sizeable piece for every object in view, a smaller one is no object of its own
    cand = sizeable()
    if len(cand) < in_view:
        cand = list(range(len(comps)))
    rows, cols = linear_sum_assignment(cost[:, cand])
    assigned = {ids[r]: cand[c] for r, c in zip(rows, cols)}
    for i, c in assigned.items():
        out[i] |= comps[c]
    # left-over components (an object seen in pieces): join the nearest object by centroid
    largest = int(comps[0].sum())      # the pieces are sorted largest first
    for c, comp in enumerate(comps):
        if c in assigned.values() or comp.sum() < 0.1 * largest:
            continue
        best = min(assigned, key=lambda i: np.linalg.norm(cents[c] - cents[assigned[i]]))
        if reach is not None and best in reach:
            dist = cv2.distanceTransform((~out[best]).astype(np.uint8), cv2.DIST_L2, 3)
            if float(dist[comp].min()) > reach[best]:
                continue
        out[best] |= comp
    return out


def _holds_two(piece: np.ndarray, priors: dict, split_px) -> bool:
    """Whether one piece may hold two objects: it covers where two are expected, or it is larger
    than `split_px` (a number, or a function of the piece's centroid; None: always)."""
    if split_px is None or _covers(piece, priors.values()) >= 2:
        return True
    limit = split_px(_centroid(piece)) if callable(split_px) else split_px
    return limit is None or int(piece.sum()) > limit


def _covers(piece: np.ndarray, points) -> int:
    """How many of `points` (x, y) lie inside `piece`'s convex hull (a drawn arrow or a rail may
    cut through a body; its hull still covers the centre)."""
    hull = cv2.convexHull(cv2.findNonZero(piece.astype(np.uint8)))
    return sum(p is not None and cv2.pointPolygonTest(hull, (float(p[0]) - 0.5, float(p[1]) - 0.5), False) >= 0
               for p in points)


def _darkened(image: np.ndarray, plate: np.ndarray, where: np.ndarray) -> np.ndarray:
    """Pixels of `where` that are the plate made darker by one factor in every channel (within
    DARK_SPREAD of each other): a shadow, whether or not the shadow model placed it there."""
    out = np.zeros(where.shape, bool)
    ratio = (image[where].astype(np.float32) + 1.0) / (plate[where].astype(np.float32) + 1.0)
    hi, lo = ratio.max(axis=1), ratio.min(axis=1)
    out[where] = (hi < DARK_RATIO) & (hi - lo <= DARK_SPREAD * hi)
    return out


def _every_object_coloured(densities: dict[str, np.ndarray], ids, ctx: SegmentContext) -> bool:
    """Whether the changed pixels show every object of `ids` in its own colours: at least
    EVERY_COLOURED of its area at t = 0 in colours its model holds (`densities`: each object's
    colour-model density at each changed pixel; an object without a model shows in none). Then a
    piece in other colours is no object the answer drew in another colour (a frame's flicker or a
    codec leaves such pieces in a floor), and colour still tells the objects apart. Objects alike in
    colour each count the other's pixels too: they are told apart by position anyway."""
    sizes = _reference_sizes(ctx)
    for i in ids:
        density, size = densities.get(i), sizes.get(i)
        if density is None or not size:
            return False
        if np.count_nonzero(density >= GATE_DENSITY / N_BINS) < EVERY_COLOURED * size:
            return False
    return True


def _reference_sizes(ctx: SegmentContext) -> dict[str, int]:
    """Each object's area on the reference at t = 0 (the objects it shows), once per context."""
    if "reference_sizes" not in ctx.cache:
        ctx.cache["reference_sizes"] = {i: int(np.count_nonzero(m)) for i, m in ctx.reference_masks.items()
                                        if m is not None and m.any()}
    return ctx.cache["reference_sizes"]


def _off_colour_body(fg: np.ndarray, keep: np.ndarray, ctx: SegmentContext, image: np.ndarray | None = None,
                     plate: np.ndarray | None = None) -> bool:
    """Whether a piece of the foreground is an object drawn in another colour: the size of an object
    (on white: at least 0.3 of the smallest; in a scene also at most 3 times the largest, no longer
    than twice the objects' extent, and compact — solidity ≥ 0.85 — where a texture the plate does
    not explain, or a horizon the camera moved, leaves strips and specks) with fewer than half of
    its pixels in an object's colours and, given the frame and its `plate`, fewer than half the
    plate made darker (`_darkened`: a shadow the shadow model did not place). An object's own
    pixels on our render match its model far more often than that."""
    sizes = list(_reference_sizes(ctx).values())
    if not sizes:
        return False
    if "reference_extent" not in ctx.cache:     # the largest extent of an object on the reference, once
        ctx.cache["reference_extent"] = max(max(np.ptp(np.nonzero(m)[0]), np.ptp(np.nonzero(m)[1])) + 1
                                            for m in ctx.reference_masks.values() if m is not None and m.any())
    extent = ctx.cache["reference_extent"]
    n, labels, stats = labelled(fg)
    coloured = np.zeros(fg.shape, bool)
    coloured[fg] = keep
    hits = np.bincount(labels[coloured], minlength=n)
    for i in range(1, n):
        area = stats[i, cv2.CC_STAT_AREA]
        if area < 0.3 * min(sizes) or hits[i] >= 0.5 * area:
            continue
        if ctx.on_white:
            return True
        x, y, bw, bh = stats[i, :4]
        if area > 3 * max(sizes) or max(bw, bh) > 2 * extent:
            continue
        piece = labels[y:y + bh, x:x + bw] == i
        if plate is not None and _darkened(image[y:y + bh, x:x + bw], plate[y:y + bh, x:x + bw], piece).sum() >= 0.5 * area:
            continue
        hull = cv2.convexHull(cv2.findNonZero(piece.astype(np.uint8)))
        if area >= 0.85 * cv2.contourArea(hull):
            return True
    return False


def _colour_left_one_out(masks: dict[str, np.ndarray], foreground: np.ndarray, ctx: SegmentContext,
                         image: np.ndarray, plate: np.ndarray | None) -> bool:
    """Whether colour found an object that the reference shows on less than half its area there
    while a piece of the `foreground` that no object took is the size of an object
    (`_off_colour_body`'s test, every pixel counted as off-colour)."""
    if not any(m is not None and int(masks.get(i, np.zeros(1, bool)).sum()) < 0.5 * int(m.sum())
               for i, m in ctx.reference_masks.items()):
        return False
    taken = np.zeros(foreground.shape, bool)
    for m in masks.values():
        taken |= m
    left = foreground & ~taken
    return bool(left.any()) and _off_colour_body(left, np.zeros(int(left.sum()), bool), ctx, image, plate)


def _one_body(comps: list[np.ndarray], reach: float, shape: tuple[int, int],
              prior: np.ndarray | None = None, likeness=None) -> np.ndarray:
    """One object's pieces: its largest component and the others of at least a tenth of its size
    that lie within `reach` pixels of what is taken (a body seen in pieces, a rail across it); a
    piece farther away is something else (a faint label, clutter). Where another piece is nearly as
    large (COMPARABLE: a copy of the object drawn twice), the one nearest the object's expected
    place `prior` (x, y) is the object. `likeness(piece)`: the mean log-likelihood of its colours
    under the object's colour model; the object looks like itself, so a piece whose colours are far
    less likely (LIKENESS_NATS) than the likeliest piece's (of a tenth of the largest's size or more)
    is not the object, however large or near the expected place (a drawn label's remnant in a like
    colour, a strip of floor where an answer framed differently shows no sky)."""
    out = np.zeros(shape, bool)
    if not comps:
        return out
    comps = sorted(comps, key=lambda c: -int(c.sum()))
    like = comps
    if likeness is not None:
        sized = [c for c in comps if c.sum() >= LIKENESS_SIZED * comps[0].sum()]
        if len(sized) > 1:
            score = [likeness(c) for c in sized]
            like = [c for c, v in zip(sized, score) if v >= max(score) - LIKENESS_NATS]
    largest = int(like[0].sum())
    rivals = [c for c in like if c.sum() >= COMPARABLE * largest]
    seed = rivals[0]
    if prior is not None and len(rivals) > 1:
        seed = min(rivals, key=lambda c: float(np.linalg.norm(_centroid(c) - prior)))
    comps = [seed] + [c for c in comps if c is not seed]
    out |= comps[0]
    rest = [c for c in comps[1:] if c.sum() >= 0.1 * largest]
    while rest:
        dist = cv2.distanceTransform((~out).astype(np.uint8), cv2.DIST_L2, 3)
        near = [c for c in rest if float(dist[c].min()) <= reach]
        if not near:
            break
        for c in near:
            out |= c
        rest = [c for c in rest if not any(c is n for n in near)]
    return out


def _likeness(model: "ColourModel | None", bins: np.ndarray):
    """`_one_body`'s likeness of a piece (mean log-likelihood of its colours under `model`); None
    without a model."""
    if model is None:
        return None
    return lambda piece: float(model.logp[bins[piece]].mean())


class ClassicalSegmenter:
    """Weight-free segmenter (see the module docstring)."""

    name = "classical"

    def _models(self, ctx: SegmentContext, view=None) -> dict[str, ColourModel | None]:
        """Colour models of the objects, learned on the case's reference image and masks — or, for
        an answer whose own frame 0 shows the objects in other colours (`View.reference`), on that
        frame (the model recoloured them; their places at t = 0 are the case's)."""
        if "models" not in ctx.cache:
            ctx.cache["models"] = self._learn(ctx.reference_image, ctx)
        models = ctx.cache["models"]
        ref = None if view is None else view.reference
        if ref is None:
            return models
        if "models" not in ctx.answer_cache:
            own = self._learn(ref.image, ctx)
            # an object the answer shows where the case puts it at t = 0 (frame 0 differs from the
            # plate there), in colours unlike the case's (not an object the answer started elsewhere)
            there = channel_difference(ref.image, ctx.background) > 24
            differ = any(models.get(i) is not None and own.get(i) is not None
                         and there[ctx.reference_masks[i]].mean() >= 0.7
                         and bhattacharyya(models[i], own[i]) < RECOLOURED_BC for i in ctx.object_ids)
            ctx.answer_cache["models"] = own if differ else models
        return ctx.answer_cache["models"]

    @staticmethod
    def _learn(image: np.ndarray | None, ctx: SegmentContext) -> dict[str, ColourModel | None]:
        models: dict[str, ColourModel | None] = {i: None for i in ctx.object_ids}
        if image is not None:
            lab = to_lab(image)
            for i in ctx.object_ids:
                m = ctx.reference_masks.get(i)
                if m is not None and m.shape == lab.shape[:2]:
                    models[i] = colour_model(lab, m)
        return models

    def _likely_object(self, ctx: SegmentContext):
        """image → pixels whose colour is far more typical of one of the case's objects than of the
        image as a whole (LIKELY_RATIO: a colour model against the image's own histogram)."""
        known = [m for m in self._models(ctx).values() if m is not None]

        def likely(image: np.ndarray) -> np.ndarray:
            if not known:
                return np.zeros(image.shape[:2], bool)
            bins = bin_index(to_lab(image))
            frame = np.bincount(bins.ravel(), minlength=N_BINS) / bins.size
            best = np.max(np.stack([m.prob for m in known]), axis=0)
            return ((best >= LIKELY_RATIO * frame) & (best >= GATE_DENSITY / N_BINS))[bins]
        return likely

    @staticmethod
    def _split_px(ctx: SegmentContext, ids: list[str]):
        """piece centroid (x, y) -> the area (pixels) above which a piece there holds two of these
        objects: the largest one's and SPLIT_SHARE of the smallest one's, as large as each would look
        there (on its motion plane; its area on the reference scaled by the inverse square of
        depth). None where the case has no rigid models."""
        cam, bodies = ctx.camera, ctx.bodies
        ref = {}
        for i in ids:
            m, b = ctx.reference_masks.get(i), bodies.get(i) if bodies else None
            if cam is None or b is None or m is None or not m.any():
                return None
            placed = cam.place(b, _centroid(m), 0.0)
            if placed is None or cam.depth(placed[0]) <= 0:
                return None
            ref[i] = (float(m.sum()), cam.depth(placed[0]), b)

        def at(c: np.ndarray) -> float | None:
            now = []
            for area, z0, b in ref.values():
                placed = cam.place(b, c, ctx.time)
                if placed is None or cam.depth(placed[0]) <= 0:
                    return None
                now.append(area * (z0 / cam.depth(placed[0])) ** 2)
            return max(now) + SPLIT_SHARE * min(now)
        return at

    @staticmethod
    def _reach(ctx: SegmentContext, oid: str) -> float:
        """How far (pixels) a piece of object `oid` may lie from its other pieces: its radius on the
        reference image (area-equivalent disc), at least 8 px."""
        m = ctx.reference_masks.get(oid)
        area = float(m.sum()) if m is not None else 0.0
        return max(8.0, math.sqrt(area / math.pi))

    def _edge_band(self, ctx: SegmentContext, view) -> np.ndarray:
        """`edge_bands` of the background a frame is compared with, once per background."""
        store = (view.reference.__dict__ if view.reference is not None else
                 {} if view.own_background else ctx.cache)
        key = f"edge_band_{view.blur:g}"
        if key not in store:
            store[key] = edge_bands(self._plate_lab(ctx, view)[..., 0])
        return store[key]

    def _plate_lab(self, ctx: SegmentContext, view=None) -> np.ndarray:
        """The background a frame is compared with, in Lab: the clean plate (blurred as the answer
        is, `View.blur`), or the answer's own background (`View.reference`), each computed once."""
        if view is not None and view.reference is not None:
            if view.reference.plate_lab is None:
                view.reference.plate_lab = to_lab(view.reference.plate)
            return view.reference.plate_lab
        if view is not None and view.own_background:
            return to_lab(view.plate)
        blur = 0.0 if view is None else view.blur
        key = f"plate_lab_{blur:g}"
        if key not in ctx.cache:
            from .conditioning import blurred_plate

            ctx.cache[key] = to_lab(ctx.background if not blur else blurred_plate(ctx, blur))
        return ctx.cache[key]

    def _shadow_gain(self, ctx: SegmentContext) -> float | None:
        if "shadow_gain" not in ctx.cache:
            ctx.cache["shadow_gain"] = (None if ctx.background is None else
                                        learn_shadow_gain(ctx.reference_image, ctx.background, ctx.reference_masks))
        return ctx.cache["shadow_gain"]

    def _contrast(self, ctx: SegmentContext, models: dict[str, ColourModel | None]) -> dict[str, float]:
        """ΔE between each object's mean colour and its background (white, or the plate under and
        around the object's reference mask)."""
        if "contrast" in ctx.cache:
            return ctx.cache["contrast"]
        out = {}
        plate_lab = None if ctx.background is None else self._plate_lab(ctx)
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

    def _assign(self, ctx: SegmentContext, fg: np.ndarray, models, bins: np.ndarray, min_area: int,
                ignore: np.ndarray | None, colourless: bool) -> tuple[dict[str, np.ndarray], list[list[str]]]:
        """The foreground's pixels to objects: by colour where the objects' colour models differ (and
        `colourless` is not set), by position within a group that looks alike; and those groups."""
        ids = list(ctx.object_ids)
        masks = {i: np.zeros(fg.shape, bool) for i in ids}
        priors = {}
        for i in ids:
            if ctx.priors and ctx.priors.get(i) is not None:
                priors[i] = np.asarray(ctx.priors[i], float)
            elif ctx.reference_masks.get(i) is not None and ctx.reference_masks[i].any():
                priors[i] = _centroid(ctx.reference_masks[i])
        alike: list[list[str]] = []
        if len(ids) == 1:
            masks[ids[0]] = _one_body(_components(fg, min_area, ignore), self._reach(ctx, ids[0]), fg.shape,
                                      priors.get(ids[0]), _likeness(models.get(ids[0]), bins))
        elif ids:
            groups = [list(ids)] if colourless else _groups(ids, models)
            alike = [g for g in groups if len(g) > 1]
            if alike and ctx.expected_at is not None and ctx.time is not None:
                # which of two look-alike objects a blob is cannot be read from its colour; the
                # previous frame's labels swap when they meet. Each takes the GT object expected
                # nearest, the pairing the metrics use, so it is fitted on that object's motion plane
                expected = ctx.expected_at(ctx.time)
                for g in alike:
                    for i in g:
                        if expected.get(i) is not None:
                            priors[i] = np.asarray(expected[i], float)
            if len(groups) == 1:
                masks.update(_assign_by_position(fg, ids, priors, min_area, ignore, self._split_px(ctx, ids),
                                                 {i: self._reach(ctx, i) for i in ids}))
            else:
                idx = bins[fg]
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
                        masks[g[0]] = _one_body(_components(gmask, min_area, ignore), self._reach(ctx, g[0]),
                                                fg.shape, priors.get(g[0]), _likeness(models.get(g[0]), bins))
                    else:
                        masks.update(_assign_by_position(gmask, g, priors, min_area, ignore, self._split_px(ctx, g),
                                                         {i: self._reach(ctx, i) for i in g}))
        return masks, alike

    def segment(self, image: np.ndarray, context: SegmentContext) -> Segmentation:
        ctx = context
        image = np.asarray(image, dtype=np.uint8)
        notes: list[str] = []
        if not ctx.on_white and ctx.background.shape != image.shape:
            raise ValueError(f"clean plate {ctx.background.shape} and frame {image.shape} differ in size")
        # read the frame as a render of ours: the case's camera, the plate's photometry, drawn layers
        # unobservable (segment/conditioning.py)
        view = white_view(image, ctx) if ctx.on_white else scene_view(image, ctx, self._likely_object(ctx))
        image, ignore, plate = view.image, view.unobservable, view.plate
        notes.extend(view.notes)
        models = self._models(ctx, view)
        eligible = None
        lab = to_lab(image)
        bins = bin_index(lab)
        if ctx.on_white:
            fg, _ = white_foreground(image)
            changed = float(fg.mean())
        else:
            diff = plate_foreground(image, plate, [m for m in models.values() if m is not None],
                                    shadow_gain=self._shadow_gain(ctx), ignore=ignore,
                                    plate_lab=self._plate_lab(ctx, view), lab=lab,
                                    edge_band=self._edge_band(ctx, view), bins=bins)
            fg, changed, shadow_like, faint = diff.foreground, diff.changed_fraction, diff.shadow_like, diff.faint
            eligible = diff.changed | diff.shadow
            if ignore is not None:
                eligible |= ignore
        min_area = max(12, int(2e-4 * fg.size))
        known = {i: m for i, m in models.items() if m is not None}
        colourless = False
        ungated = fg
        if known and fg.any():
            # colour gate: drop changed pixels whose colour none of the objects shows (leftover
            # annotations, other clutter), then clean up again
            densities = {i: m.prob[bins[fg]] for i, m in known.items()}
            best = np.max(np.stack(list(densities.values())), axis=0)
            keep = best >= GATE_DENSITY / N_BINS
            expected = sum(int(m.sum()) for m in ctx.reference_masks.values() if m is not None)
            if keep.sum() < MIN_COLOURED * expected or (
                    _off_colour_body(fg, keep, ctx, image, plate) and not _every_object_coloured(densities, list(models), ctx)):
                # the answer drew the objects in other colours: the changed pixels in an object's
                # colour cannot make up the objects (a fraction of their size at t = 0), or a
                # compact piece the size of an object is in none of their colours while some object
                # does not show in its own; colour can then neither gate nor tell them apart,
                # position does
                colourless = True
                notes.append("changed pixels unlike every object's colour: objects told apart by position")
            else:
                gated = np.zeros_like(fg)
                gated[fg] = keep
                if gated.sum() < fg.sum():
                    notes.append(f"{int(fg.sum() - gated.sum())} changed pixels match no object colour (ignored)")
                fg = clean_mask(gated, protect=ignore)
        ids = list(ctx.object_ids)
        masks, alike = self._assign(ctx, fg, models, bins, min_area, ignore, colourless)
        if known and not colourless and len(ids) > 1 and _colour_left_one_out(masks, ungated, ctx, image, plate):
            # colour found an object on less than half of it while a piece of the foreground the
            # size of an object is no one's: the answer drew the objects in other colours, one nearer
            # another's model (colours permuted); colour cannot tell them apart, position does
            notes.append("colour found an object on less than half of it and an object-sized piece is no one's: "
                         "objects told apart by position")
            colourless, fg = True, ungated
            masks, alike = self._assign(ctx, fg, models, bins, min_area, ignore, True)
        if eligible is not None:
            # convex silhouettes: recover hull pixels that look like the plate or its shadow
            taken = np.zeros(fg.shape, bool)
            for m in masks.values():
                taken |= m
            for i in ids:
                if not masks[i].any():
                    continue
                el = eligible & ~(taken & ~masks[i])
                if models.get(i) is not None:
                    el |= (models[i].prob[bins] >= GATE_DENSITY / N_BINS) & ~taken
                masks[i] = convex_completion(masks[i], el)
                taken |= masks[i]
        centres: dict[str, tuple[float, float]] = {}
        if ctx.bodies and ctx.camera is not None:
            # rigid silhouettes decide the pixels colour leaves open (segment/shape_prior.py); on
            # white nothing occludes, so the silhouette (under a stricter fit) claims all its pixels
            # (H.264 turns the lit face of an off-white body pure white), the colour blob keeps its
            # pixels within one pixel of the outline that are more body than white (a limb shaded
            # unlike the interior biases the fit there) and loses those farther out (ringing around
            # a dark body); a soft answer is fitted with its own blur's edge
            if eligible is not None:
                limbs = ctx.limbs if ctx.limbs_at is None or ctx.time is None else ctx.limbs_at(ctx.time, ctx.gt_frame)
                masks, centres, prior_notes = apply_shape_prior(
                    masks, _drawn_bodies(ctx, view.scales), ctx.camera, image, plate, allowed=eligible,
                    ambiguous=shadow_like, unobservable=ignore, time=ctx.time, alike=alike,
                    scene_depth=ctx.scene_depth if ctx.scene_depth is not None
                    and ctx.scene_depth.shape == image.shape[:2] else None, limbs=limbs,
                    shadows=ctx.shadows if ctx.shadows is not None
                    and ctx.shadows.shape == image.shape[:2] else None, faint=faint, softness=view.softness,
                    looks=ctx.looks, size_scales=view.scales)
            else:
                everything = np.ones(image.shape[:2], bool)
                masks, centres, prior_notes = apply_shape_prior(
                    masks, ctx.bodies, ctx.camera, image, np.full_like(image, 255), allowed=everything,
                    ambiguous=~everything, unobservable=ignore, time=ctx.time, alike=alike,
                    min_iou=MIN_FIT_IOU_WHITE, keep_rims=True, limbs=ctx.limbs,
                    edge_blur=_white_blur(image, ctx, ignore))
            notes.extend(prior_notes)
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
        return Segmentation(masks=masks, foreground=fg, low_confidence=low, confidence=confidence, notes=notes,
                            centres=centres, alike=alike, unobservable=ignore)


def _drawn_bodies(ctx: SegmentContext, scales: dict[str, float]) -> dict[str, BodyPrior]:
    """The rigid models at the size the answer's frame 0 draws them (`body_size.frame0_scales`), once per answer."""
    if not scales:
        return ctx.bodies
    if "drawn_bodies" not in ctx.answer_cache:
        where = ctx.expected_at(0.0) if ctx.expected_at is not None else None
        ctx.answer_cache["drawn_bodies"] = scaled_bodies(ctx.bodies, scales, ctx.camera, where)
    return ctx.answer_cache["drawn_bodies"]


def alike_groups(case) -> list[list[str]]:
    """The groups of the case's objects that look alike (one colour model for all, as the
    segmenter tells them on the condition frame): identity within a group is unknown in an answer,
    so metrics match its members by the best assignment."""
    def make():
        frame, masks = case.image("condition_frame"), case.reference_object_masks("condition_frame")
        if frame is None or not masks:
            return []
        lab = to_lab(frame)
        models = {i: colour_model(lab, m) for i, m in masks.items() if m.shape == lab.shape[:2]}
        ids = [o.id for o in case.objects]
        return [g for g in _groups(ids, models) if len(g) > 1]
    return case.memo("alike_groups", make)


def _white_blur(image: np.ndarray, ctx, hidden: np.ndarray | None) -> float:
    """How much softer than a sharp render an answer on white draws its objects, for the shape
    prior's edge model: the blur matched at the rims of the objects it shows where the objects-only
    reference has them (`conditioning.rim_softness`; 0 where none is). Scenes keep the one-pixel
    ramp: there the blur estimates (a video's rim softness, an image's blur matched on the plate)
    also read a codec's smear and a resampling, not a Gaussian blur."""
    ref = ctx.reference_image
    return rim_softness(image, ctx, hidden) if ref is not None and ref.shape == image.shape else 0.0


def context_for_case(case, subtrack: str, priors: dict[str, tuple[float, float]] | None = None) -> SegmentContext:
    """The segmentation context of a subtrack: P-G answers are objects on white (colour models from the
    objects-only reference); F-G and Deduction frames are scenes (colour models from the condition
    frame and its instance map, background from the clean plate, else the clean condition frame is
    not usable as a plate and the white model is refused). What a context is built from is read and
    derived once per case (`scene_models`); each call returns a fresh context (its time and priors
    change while a response is segmented)."""
    ids = [o.id for o in case.objects]
    scene = case.memo("scene_models", lambda: scene_models(case))
    layer = case.memo("input_layer", lambda: _input_layer(case))
    if subtrack == "perception_graphic":
        ref, masks, cache = case.memo("white_inputs", lambda: _white_inputs(case))
        limbs = case.memo("white_limbs", lambda: _white_limbs(case, scene, ref, masks))
        return SegmentContext(ids, ref, masks, background=None, priors=priors, bodies=scene.bodies,
                              camera=scene.camera, time=0.0, limbs=limbs, cache=cache,
                              expected_at=case.image_centres, input_layer=layer)
    if scene.plate is None:
        raise ValueError(f"{case.case_id}: no clean plate; in-scene segmentation needs one "
                         "(or a learned segmenter)")
    exclude = ANSWER_ANNOTATION_RGB if subtrack == "formulation_graphic" else ()
    shadows = _memo_shadows(case, scene.camera, scene.bodies, scene.frame0, scene.masks0, scene.plate, scene.depth)
    return SegmentContext(ids, scene.frame0, scene.masks0, background=scene.plate, priors=priors,
                          exclude_rgb=exclude, bodies=scene.bodies, camera=scene.camera,
                          scene_depth=scene.depth, limbs=scene.limbs, shadows=shadows, cache=scene.cache,
                          limbs_at=lambda t, frame: limbs_at(case, t, frame),
                          looks=case.memo("body_looks", lambda: body_looks(case)),
                          expected_at=case.image_centres, input_layer=layer,
                          time=case.target_time if subtrack == "formulation_graphic" else None)


def _input_layer(case) -> InputLayer | None:
    """The case's input annotation layer: the annotated first frame against the clean one."""
    annotated = case.image("annotated_first_frame") if case.has("annotated_first_frame") else None
    clean = case.image("condition_frame")
    if annotated is None or clean is None or annotated.shape != clean.shape:
        return None
    objects = np.zeros(clean.shape[:2], bool)
    for m in case.reference_object_masks("condition_frame").values():
        if m.shape == objects.shape:
            objects |= m
    layer = InputLayer(annotated, clean, objects)
    return layer if layer.elements else None


@dataclass
class SceneModels:
    """Everything in-scene segmentation derives from a case once: the condition frame and its masks,
    the clean plate at frame size, the rigid models, the scene's depth, rim shading, and the
    segmenter's own per-case cache (colour models, plate Lab, shadow gain)."""
    frame0: np.ndarray | None
    masks0: dict[str, np.ndarray]
    plate: np.ndarray | None
    camera: Camera | None
    bodies: dict[str, BodyPrior]
    depth: np.ndarray | None
    limbs: dict[str, LimbModel]
    cache: dict


def _memo_shadows(case, camera, bodies, frame0, masks0, plate, depth) -> CastShadows | None:
    """The case's cast shadows (`case_shadows`), fitted once per case, where the case has what the
    light fit needs (rigid bodies, the scene's depth, a condition frame the size of the plate)."""
    if not bodies or depth is None or frame0 is None or plate is None or frame0.shape != plate.shape:
        return None
    return case.memo("cast_shadows", lambda: case_shadows(case, camera, bodies, frame0, masks0, plate, depth))


def scene_models(case) -> SceneModels:
    frame0 = case.image("condition_frame")
    masks0 = case.reference_object_masks("condition_frame")
    plate = case.clean_plate()
    if plate is not None and plate.shape[:2] != (case.frame_size[1], case.frame_size[0]):
        from ..media import resize_rgb

        plate = resize_rgb(plate, case.frame_size)
    camera, bodies = rigid_models(case)
    depth = case.scene_depth() if bodies else None
    if depth is not None and depth.shape != (case.frame_size[1], case.frame_size[0]):
        depth = None     # a depth map at another resolution than the frames cannot be trusted per pixel
    usable = bool(bodies) and frame0 is not None and plate is not None and frame0.shape == plate.shape
    limbs = limb_models(case, camera, bodies, frame0, masks0, plate, depth) if usable else {}
    return SceneModels(frame0, masks0, plate, camera, bodies, depth, limbs, {})


def _white_inputs(case) -> tuple[np.ndarray | None, dict[str, np.ndarray], dict]:
    """The P-G colour reference (the objects-only answer, else the condition frame), its masks and the
    segmenter's per-case cache for objects on white."""
    ref = case.image("perception_graphic") if case.has("perception_graphic") else None
    masks = case.reference_object_masks("perception_graphic") if ref is not None else {}
    if ref is None or not any(m.any() for m in masks.values()):
        ref, masks = case.image("condition_frame"), case.reference_object_masks("condition_frame")
    return ref, masks, {}


def _white_limbs(case, scene: SceneModels, ref: np.ndarray | None, masks: dict[str, np.ndarray]
                 ) -> dict[str, LimbModel]:
    """How the bodies' rims look on white (P-G answers show the objects at their t = 0 poses): the rim
    colour learned on the condition frame (same poses, same light), and the rim offsets learned on the
    objects-only reference — already the colour reference of P-G segmentation — since the offsets
    measured against the scene's background do not hold against white (there a rim lies inside the
    outline, white bleeding over it). Without that reference, no offsets."""
    colours = {k: replace(m, edge_shift=None) for k, m in scene.limbs.items()}
    if (ref is None or not case.has("perception_graphic") or scene.camera is None or not colours
            or ref.shape[:2] != (case.frame_size[1], case.frame_size[0])):
        return colours
    white = np.full_like(ref, 255)
    learned = limb_models(case, scene.camera, {k: b for k, b in scene.bodies.items() if k in colours}, ref, masks,
                          white, None, colours)
    return {k: learned.get(k, m) for k, m in colours.items()}


def case_shadows(case, camera, bodies, frame0, masks0, plate, scene_depth) -> CastShadows | None:
    """Where the case's cast shadows fall (`segment.shadows`): the light fitted on the condition frame."""
    tracks = case.object_tracks()
    if camera is None or tracks is None:
        return None
    pos, _ = tracks.at(0.0)
    return cast_shadows(camera, bodies, pos, frame0, masks0, plate, scene_depth)


def limb_models(case, camera, bodies: dict[str, BodyPrior], frame0: np.ndarray, masks0: dict[str, np.ndarray],
                plate: np.ndarray, scene_depth: np.ndarray | None,
                colours: dict[str, LimbModel] | None = None, time: float = 0.0,
                offsets: bool = True) -> dict[str, LimbModel]:
    """Each body's rim shading (`shape_prior.LimbModel`), learned on a GT frame where its pose (GT
    track at `time`, the condition frame by default) and mask are known; rim pixels next to another
    object, a changed background pixel (a cast shadow) or a hiding support are not used. `colours`:
    rim colours already known per object (only the rim offsets are learned on this frame then);
    `offsets` False: rim colours only."""
    tracks = case.object_tracks()
    if camera is None or tracks is None:
        return {}
    pos, _ = tracks.at(time)
    grow = np.ones((5, 5), np.uint8)
    objects = np.zeros(plate.shape[:2], bool)
    for m in masks0.values():
        objects |= m
    changed = channel_difference(frame0, plate) > 12
    # changed pixels beyond an object's blended rim are a cast shadow (or another change): rim
    # pixels next to one blend with it, not with the plate
    near_objects = cv2.dilate(objects.astype(np.uint8), grow) > 0
    shadowed = cv2.dilate((changed & ~near_objects).astype(np.uint8), grow, iterations=2) > 0
    out: dict[str, LimbModel] = {}
    for oid, body in bodies.items():
        m = masks0.get(oid)
        if m is None or not m.any() or oid not in pos:
            continue
        R = body.candidate_attitudes(time)[0]
        others = cv2.dilate((objects & ~m).astype(np.uint8), grow) > 0
        usable = ~others & ~shadowed
        if scene_depth is not None:
            usable &= ~(cv2.dilate(hidden_pixels(camera, body, pos[oid], R, scene_depth).astype(np.uint8), grow) > 0)
        model = learn_limb_model(camera, body, pos[oid], R, frame0, plate, usable,
                                 None if colours is None else colours.get(oid), offsets=offsets)
        if model is not None:
            out[oid] = model
    return out


def limbs_at(case, t: float | None, frame: np.ndarray | None = None) -> dict[str, LimbModel]:
    """The bodies' rim models for a frame answering physical time `t`: rim colours learned on the GT
    frame nearest to t (`frame` when the caller has decoded it) with that frame's masks and poses,
    since a rim's shading changes with where the body is (the light meets it at another angle); the
    rim offsets stay those of the condition frame (measured on the shipped suite: offsets learned at
    t as well lost more cases than they won), less those that belong to the place a moved body left
    (`_rim_colours_from`). Directions that frame cannot show (another object, a shadow, a support
    next to the rim) and bodies it cannot show at all keep the condition frame's rim colours; every
    body keeps the condition frame's model where t is None or 0, or the case has no GT frames."""
    scene = case.memo("scene_models", lambda: scene_models(case))
    if t is None or not scene.limbs or scene.plate is None:
        return scene.limbs
    try:
        index = case.gt_index(t)
    except (ValueError, MediaError):      # no GT frames
        return scene.limbs
    if index == 0:
        return scene.limbs

    def learn() -> dict[str, LimbModel]:
        learned: dict[str, LimbModel] = {}
        try:
            image = case.gt_frame(index) if frame is None else frame
            masks = case.gt_object_masks(index)
        except (ValueError, MediaError):  # unreadable frame or masks: the condition frame's colours
            image, masks = None, {}
        if image is not None and image.shape == scene.plate.shape and masks:
            learned = limb_models(case, scene.camera, {k: b for k, b in scene.bodies.items() if k in scene.limbs},
                                  image, masks, scene.plate, scene.depth, time=index / case.gt_fps, offsets=False)
        moved = _moved_bodies(case, index / case.gt_fps)
        return {k: _rim_colours_from(learned.get(k), m, k in moved) for k, m in scene.limbs.items()}

    return case.memo(f"limbs@{index}", learn)


def body_looks(case) -> Looks | None:
    """How the case's GT frames show each body (`appearance.Looks`), for reading where an answer
    shows it; None where the case lacks what that needs (rigid models, tracks, the plate)."""
    scene = case.memo("scene_models", lambda: scene_models(case))
    tracks = case.object_tracks()
    if scene.camera is None or not scene.bodies or scene.plate is None or tracks is None:
        return None
    try:
        n = case.n_gt_frames()
    except (ValueError, MediaError):
        return None
    fps = float(case.gt_fps)
    centres = [case.image_centres(i / fps) for i in range(n)]
    track_uv = {oid: np.array([c.get(oid, (np.nan, np.nan)) for c in centres], float) for oid in scene.bodies}
    plate_ycc = weighted_ycc(scene.plate, FIT_CHROMA_WEIGHT)
    ids = {o.id: o.instance_id for o in case.objects}

    def build(i: int) -> dict:
        try:
            frame, inst = case.gt_frame(i), case.gt_instances(i)
        except (ValueError, MediaError):
            return {}
        if frame is None or inst is None or frame.shape != scene.plate.shape:
            return {}
        ycc = weighted_ycc(frame, FIT_CHROMA_WEIGHT)
        pos, _ = tracks.at(i / fps)
        out = {}
        for oid, b in scene.bodies.items():
            if oid not in pos or oid not in ids or not np.all(np.isfinite(track_uv[oid][i])):
                continue
            X, R = np.asarray(pos[oid], float), b.attitude_at(i / fps)
            cover = silhouette_coverage(scene.camera, b, X, R, inst.shape)
            if cover is None:
                continue
            cover[(inst != ids[oid]) & (inst != 0)] = 0.0
            if scene.depth is not None:
                cover[hidden_pixels(scene.camera, b, X, R, scene.depth)] = 0.0
            sp = make_sprite(ycc, plate_ycc, cover, tuple(track_uv[oid][i]), scene.camera.depth(X), free=inst == 0)
            if sp is not None:
                out[oid] = sp
        return out

    return Looks(track_uv, fps, build)


def _moved_bodies(case, t: float) -> set[str]:
    """Objects whose GT centre projects more than MOVED_PX from where it was on the condition frame."""
    now, then = case.image_centres(t), case.image_centres(0.0)
    return {k for k, uv in now.items() if k in then and math.dist(uv, then[k]) > MOVED_PX}


def _rim_colours_from(model: LimbModel | None, fallback: LimbModel, moved: bool = False) -> LimbModel:
    """`fallback` (the condition frame's model) with the rim colours `model` knows: its outline
    directions that `model` does not know and its rim offsets are kept — except, for a body that has
    `moved`, offsets at the learning bound (EDGE_SHIFT_MAX): a rim that far from its outline is not
    the body's shading but what touched it there (a ramp's contact edge), and stays behind."""
    shift = fallback.edge_shift
    if moved and shift is not None:
        shift = np.where(np.abs(shift) >= EDGE_SHIFT_MAX - 1e-9, 0.0, shift)
    if model is None:
        return replace(fallback, edge_shift=shift)
    known = np.isfinite(model.delta).all(axis=1)
    return LimbModel(np.where(known[:, None], model.delta, fallback.delta), shift)


def rigid_models(case) -> tuple[Camera | None, dict[str, BodyPrior]]:
    """The case's camera and, per object whose primitive and size the case declares, its rigid model
    (motion plane from the GT track, recorded attitudes). Empty where the layout does not say."""
    from ..metrics import motion_plane

    tracks = case.object_tracks()
    if case.intrinsic is None or case.extrinsic is None or tracks is None:
        return None, {}
    bodies: dict[str, BodyPrior] = {}
    for o in case.objects:
        if not o.shape or not o.size or o.id not in tracks.positions:
            continue
        try:
            point, normal = motion_plane(tracks.positions[o.id], case.extrinsic)
            # the plane through the track, which holds the body centre at every time
            seqs = [quat_to_matrix(seq) for seq in tracks.attitudes.get(o.id, ())
                    if len(seq) == len(tracks.times)]
            bodies[o.id] = BodyPrior(o.id, o.shape, dict(o.size), point, normal,
                                     attitude_times=np.asarray(tracks.times, float) if seqs else None,
                                     attitudes=seqs)
        except (ValueError, KeyError, np.linalg.LinAlgError):
            continue
    return (Camera(case.intrinsic, case.extrinsic) if bodies else None), bodies
