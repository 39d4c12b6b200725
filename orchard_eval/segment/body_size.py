"""How large an answer draws each body, against the case's rigid model.

The shape prior fits a body's silhouette at the case's size; an answer that draws the body larger
(another size in its physics, a model that does not keep proportions) then loses the ring of pixels
between the two outlines and places the centre of the smaller outline. A video's frame 0 shows the
input scene, so each body is where the condition frame shows it: `frame0_scales` compares its widths
there with the condition frame's. A width is the body's extent through its centre along one of
SCALE_DIRECTIONS directions, read where the pixels' share of the body's colour falls to one half (a
blur or a codec's smear leaves that place where it is); the median of the width ratios is blind to
where a grown body is anchored (a larger body on a floor grows upwards) and to a shadow or a
support on a few sides. A factor of SCALE_DETECTED–SCALE_MAX scales the body's rigid model for the
whole answer (`scaled_bodies`).

A single image (an F-G answer) has no frame 0. Measuring its fitted bodies against their own
silhouettes (edges along rays from the fitted centre, over the same ratio on the condition frame)
was tried on the fidelity benchmark and not kept: `fg/cf_size` did not improve (mean error 0.025 →
0.028) and JPEG answers drew false detections (`fg/jpeg75` p90 0.014 → 0.030).
"""
from __future__ import annotations

from dataclasses import replace

import cv2
import numpy as np

from .matting import nearest_inside

SCALE_DETECTED = 1.04        # a body drawn this much larger (linear) than the case's is drawn larger
SCALE_MAX = 1.5              # ... and one that seems larger than this is not the same body
SCALE_CONTRAST = 20          # RGB levels between a body's colour and the background below which a pixel says nothing of it
SCALE_SMOOTH_PX = 1.0        # Gaussian σ both frames are smoothed by first (noise; a half-coverage edge stays put)
SCALE_DIRECTIONS = 24        # widths per body
SCALE_RAY_STEP_PX = 0.25
SCALE_LIMB = 0.35            # off the blend line and away from the background by this × contrast: a shaded limb


def scaled_bodies(bodies: dict, scales: dict[str, float]) -> dict:
    """The rigid models with each body in `scales` that many times as large."""
    return {oid: b if oid not in scales else replace(b, size={k: scales[oid] * v for k, v in b.size.items()})
            for oid, b in bodies.items()}


def frame0_scales(frame0: np.ndarray, background: np.ndarray, ctx, hidden: np.ndarray | None,
                  ids: set[str]) -> dict[str, float]:
    """Per body of `ids` (those the answer's frame 0 shows where the condition frame does,
    `conditioning.objects_in_place`) that frame 0 (in the case's camera and photometry, `background`
    its own background) draws larger than the condition frame, the linear factor: the median ratio
    of its widths in the two frames."""
    cond, plate = ctx.reference_image, ctx.background
    shape = cond.shape[:2]
    masks = {k: m for k, m in ctx.reference_masks.items() if m is not None and m.shape == shape and m.sum() >= 20}
    blocked = np.zeros(shape, bool) if hidden is None else hidden
    out: dict[str, float] = {}
    for oid in sorted(ids & set(masks)):
        m = masks[oid]
        interior = cv2.erode(m.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
        ys, xs = np.nonzero(m)
        centre = (float(xs.mean()), float(ys.mean()))
        reach = _reach(m, centre)
        off = blocked | _others(masks, oid) | _in_front(ctx, oid, shape)
        w0 = _widths(cond, plate, cond, interior, centre, reach, off)
        w1 = _widths(frame0, background, cond, interior, centre, reach, off)
        k = _median_ratio(w1, w0)
        if k is not None and SCALE_DETECTED <= k <= SCALE_MAX:
            out[oid] = round(k, 3)
    return out


def _in_front(ctx, oid: str, shape) -> np.ndarray | bool:
    """Where the static scene lies nearer than body `oid`'s front at t = 0 (a support in front
    of it: what a larger body there would grow behind is not seen)."""
    depth, body = ctx.scene_depth, (ctx.bodies or {}).get(oid)
    where = ctx.expected_at(0.0) if ctx.expected_at is not None else {}
    if depth is None or depth.shape != shape or body is None or where.get(oid) is None:
        return False
    placed = ctx.camera.place(body, where[oid], 0.0)
    if placed is None:
        return False
    front = ctx.camera.depth(placed[0]) - float(np.linalg.norm(body._local, axis=1).max())
    return np.isfinite(depth) & (depth < front)


def _others(masks: dict[str, np.ndarray], oid: str) -> np.ndarray:
    """The other bodies' pixels grown by 2 px: a width that reaches them is not this body's."""
    shape = next(iter(masks.values())).shape
    others = np.zeros(shape, np.uint8)
    for other, n in masks.items():
        if other != oid:
            others |= n.astype(np.uint8)
    return cv2.dilate(others, np.ones((5, 5), np.uint8)) > 0


def _reach(mask: np.ndarray, centre) -> float:
    """How far from `centre` a ray looks for the body's edge: the mask's farthest pixel, grown as a
    body SCALE_MAX × as large anchored at its far side would reach."""
    ys, xs = np.nonzero(mask)
    r = float(np.sqrt(((ys - centre[1]) ** 2 + (xs - centre[0]) ** 2).max())) + 1.0
    return (1.0 + 2.0 * (SCALE_MAX - 1.0)) * r + 2.0


def _median_ratio(w: np.ndarray, ref: np.ndarray) -> float | None:
    """The median of w / ref where both are known, None unless half of the entries are."""
    ok = np.isfinite(w) & np.isfinite(ref) & (ref > 1.0)
    if ok.sum() < w.size // 2:
        return None
    return float(np.median(w[ok] / ref[ok]))


def _widths(image: np.ndarray, background: np.ndarray, colour_image: np.ndarray, interior: np.ndarray, centre,
            reach: float, blocked: np.ndarray) -> np.ndarray:
    """The body's width through `centre` (x, y) along each of SCALE_DIRECTIONS directions: the sum of
    the distances, on opposite rays, at which the pixels' share α of the body's colour first falls
    below one half (NaN where `blocked` pixels or the frame's edge hide where the body ends). The
    body's colour at a pixel is `colour_image`'s at the nearest pixel of `interior`."""
    h, w = interior.shape
    cx, cy = centre
    r = int(np.ceil(reach)) + 2
    y0, y1 = max(0, int(cy) - r), min(h, int(cy) + r + 1)
    x0, x1 = max(0, int(cx) - r), min(w, int(cx) + r + 1)
    box = (slice(y0, y1), slice(x0, x1))
    if not interior[box].any():
        return np.full(SCALE_DIRECTIONS, np.nan)
    ny, nx = nearest_inside(interior[box])
    colour = colour_image[box].astype(np.float32)[ny, nx]
    alpha = _body_share(image[box], background[box], colour)
    alpha[blocked[box]] = np.nan
    steps = np.arange(0.0, reach, SCALE_RAY_STEP_PX, dtype=np.float32)
    angles = np.arange(2 * SCALE_DIRECTIONS) * (np.pi / SCALE_DIRECTIONS)
    px = (cx - x0) + np.cos(angles)[:, None] * steps[None, :]
    py = (cy - y0) + np.sin(angles)[:, None] * steps[None, :]
    a = cv2.remap(alpha, px.astype(np.float32), py.astype(np.float32), cv2.INTER_LINEAR,
                  borderMode=cv2.BORDER_CONSTANT, borderValue=np.nan)
    a[(px < 0) | (px > x1 - x0 - 1) | (py < 0) | (py > y1 - y0 - 1)] = np.nan
    edge = np.full(len(angles), np.nan)
    for j in range(len(angles)):
        # the first pixel seen below one half, right after one seen above it (unseen pixels inside
        # the body are passed over; an edge they hide is no edge)
        low = np.nonzero(a[j] < 0.5)[0]
        if low.size == 0 or low[0] == 0 or not np.isfinite(a[j, low[0] - 1]):
            continue
        i = low[0]
        hi, lo = a[j, i - 1], a[j, i]
        edge[j] = steps[i - 1] + SCALE_RAY_STEP_PX * (hi - 0.5) / max(hi - lo, 1e-6)
    return edge[:SCALE_DIRECTIONS] + edge[SCALE_DIRECTIONS:]


def _body_share(image: np.ndarray, background: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Per pixel the share α of `colour` (per pixel) against `background` on the line between the
    two, both lightly smoothed (noise); a pixel far off that line and far from the background is a
    limb shaded unlike the colour it is read against (α 1); where the two colours are too alike to
    tell, NaN."""
    def smooth(x):
        return cv2.GaussianBlur(x.astype(np.float32), (0, 0), SCALE_SMOOTH_PX)
    b = smooth(background)
    ob = colour - b
    dc = smooth(image) - b
    den = np.sum(ob * ob, axis=-1)
    alpha = np.sum(dc * ob, axis=-1) / np.maximum(den, 1e-6)
    contrast = np.sqrt(den)
    change = np.sqrt(np.sum(dc * dc, axis=-1))
    off = np.sqrt(np.maximum(change ** 2 - alpha ** 2 * den, 0.0))
    alpha = np.where((off > SCALE_LIMB * contrast) & (change > SCALE_LIMB * contrast), 1.0, alpha)
    alpha[np.abs(ob).max(axis=-1) < SCALE_CONTRAST] = np.nan
    return alpha.astype(np.float32)
