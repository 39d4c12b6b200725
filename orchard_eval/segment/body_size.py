"""How large an answer draws each body, against the case's rigid model.

The shape prior fits a body's silhouette at the case's size; an answer that draws the body larger
or smaller (another size in its physics, a model that does not keep proportions) then loses the
ring of pixels between the two outlines and places the centre of the smaller outline. A video's frame 0 shows the
input scene, so each body is where the condition frame shows it: `frame0_scales` reads its size
there from its look (`appearance.place_and_size`: the body as GT frame 0 shows it, scaled and moved
to where it explains frame 0 best, over frame 0's own background). A factor of SCALE_DETECTED or
more, or 1 / SCALE_DETECTED or less, scales the body's rigid model for the whole answer
(`scaled_bodies`), by the factor that draws its silhouette that much larger or smaller (`model_scale`: a look's size is an image's, a model's is the
body's, and perspective tells them apart for a body close to the camera). A single image (an F-G
answer) has no frame 0: the shape prior reads the size from the same look on the image itself.
"""
from __future__ import annotations

import cv2
import numpy as np

from . import appearance
from .matting import FIT_CHROMA_WEIGHT, weighted_ycc

SCALE_DETECTED = 1.04        # a body drawn this much larger (linear) than the case's, or as much smaller, is drawn so
OTHERS_PX = 2                # another object's pixels, grown this far, say nothing of this one
MODEL_SCALE_STEPS = 4        # fixed-point steps from a drawn size to the model's


def scaled_bodies(bodies: dict, scales: dict[str, float], camera=None, where: dict | None = None) -> dict:
    """The rigid models with each body in `scales` drawn that many times as large as the case draws
    it where `where` (image positions) puts it (`model_scale`; with no camera or position, the
    factor scales the model as it is)."""
    out = {}
    for oid, b in bodies.items():
        if oid not in scales:
            out[oid] = b
            continue
        placed = None if camera is None or (where or {}).get(oid) is None else camera.place(b, where[oid], 0.0)
        out[oid] = b.scaled(scales[oid] if placed is None else model_scale(camera, b, *placed, scales[oid]))
    return out


def model_scale(camera, body, centre: np.ndarray, attitude: np.ndarray, drawn: float) -> float:
    """The linear factor of the body's rigid model whose silhouette at (centre, attitude) is `drawn`
    times as large (square root of its area) as the model's own: a body close to the camera that
    grows brings its near side nearer, which the perspective enlarges more than the body grew, so a
    look drawn 13 % larger can be a body 10 % larger. Fixed-point steps (the silhouette grows about
    as the body does)."""
    def size(f: float) -> float | None:
        poly = camera.silhouette(body.scaled(f), centre, attitude)
        return None if poly is None else float(np.sqrt(max(cv2.contourArea(poly.astype(np.float32)), 0.0)))

    base = size(1.0)
    if base is None or base <= 0.0 or drawn == 1.0:
        return drawn
    f = drawn
    for _ in range(MODEL_SCALE_STEPS):
        now = size(f)
        if now is None or now <= 0.0:
            return drawn
        f *= drawn * base / now
    return f


def frame0_scales(frame0: np.ndarray, background: np.ndarray, ctx, hidden: np.ndarray | None,
                  ids: set[str], softness: float = 0.0) -> dict[str, float]:
    """Per body of `ids` (those the answer's frame 0 shows where the condition frame does,
    `conditioning.objects_in_place`) that frame 0 (in the case's camera and photometry, `background`
    its own background, `softness` its rims' blur) draws larger or smaller than the case does, the
    linear factor."""
    looks = getattr(ctx, "looks", None)
    masks = {k: m for k, m in (ctx.reference_masks or {}).items() if m is not None and m.shape == frame0.shape[:2]}
    if looks is None or not ids:
        return {}
    image, plate = weighted_ycc(frame0, FIT_CHROMA_WEIGHT), weighted_ycc(background, FIT_CHROMA_WEIGHT)
    blocked = np.zeros(frame0.shape[:2], bool) if hidden is None else hidden.copy()
    out: dict[str, float] = {}
    for oid in sorted(ids):
        track = looks.track_uv.get(oid)
        if track is None or not len(track) or not np.all(np.isfinite(track[0])):
            continue
        start = (float(track[0][0]), float(track[0][1]))
        sprite = looks.near(oid, start, 0.0)
        if sprite is None:
            continue
        weight = np.ones(frame0.shape[:2], np.float32)
        weight[blocked | _others(masks, oid, frame0.shape[:2]) | _in_front(ctx, oid, frame0.shape[:2])] = 0.0
        p = appearance.place_and_size(sprite, image, plate, weight, start, 1.0, softness)
        if p is not None and (p.size >= SCALE_DETECTED or p.size <= 1.0 / SCALE_DETECTED):
            out[oid] = round(p.size, 3)
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


def _others(masks: dict[str, np.ndarray], oid: str, shape) -> np.ndarray:
    """The other bodies' pixels on the condition frame, grown by OTHERS_PX."""
    others = np.zeros(shape, np.uint8)
    for other, n in masks.items():
        if other != oid:
            others |= n.astype(np.uint8)
    k = 2 * OTHERS_PX + 1
    return cv2.dilate(others, np.ones((k, k), np.uint8)) > 0
