"""Detection of the answer overlay the Formulation-Graphic prompt requires: an orange velocity arrow
from each moving object's centre and a bold orange `v = X.XX` label (colour `ANSWER_ORANGE`).

Pixels under that overlay are unobservable: the prompt asks for the arrow to start at the object's
centre, so it necessarily hides part of the object. `answer_overlay_mask` finds them in an answer
image, the same way for every model:

* seeds: pixels within `SEED_TOLERANCE` (RGB distance) of the answer colour; drawn annotations are
  flat colour, shaded objects (even orange ones) rarely hit it that closely;
* strokes only: a connected group of seeds counts when it is shaped like an arrow or text, i.e. its
  largest inscribed disc has a radius of at most `max(4, MAX_STROKE_RADIUS · height)` pixels (arrow
  heads included); a large filled orange area is not an annotation;
* the anti-aliased fringe: the accepted strokes are grown by `FRINGE_PX` pixels;
* a cap: when the accepted overlay covers more than `MAX_FRACTION` of the image, nothing is treated
  as overlay (an answer cannot hide its objects by painting over them).
"""
from __future__ import annotations

import cv2
import numpy as np

ANSWER_ORANGE = (255, 140, 0)
SEED_TOLERANCE = 28.0
MAX_STROKE_RADIUS = 0.03
FRINGE_PX = 1
MAX_FRACTION = 0.04
MIN_SEED_AREA = 3


def answer_overlay_mask(rgb: np.ndarray, colours: tuple[tuple[int, int, int], ...] = (ANSWER_ORANGE,),
                        tolerance: float = SEED_TOLERANCE) -> np.ndarray:
    """Boolean (H, W) mask of the answer's drawn arrows and labels (see the module docstring)."""
    rgb = np.asarray(rgb)
    h, w = rgb.shape[:2]
    out = np.zeros((h, w), bool)
    if not colours:
        return out
    img = rgb[..., :3].astype(np.int32)
    seeds = np.zeros((h, w), bool)
    for c in colours:
        d2 = np.sum((img - np.asarray(c, np.int32)) ** 2, axis=2)
        seeds |= d2 <= tolerance * tolerance
    if not seeds.any():
        return out
    n, labels, stats, _ = cv2.connectedComponentsWithStats(seeds.astype(np.uint8), connectivity=8)
    dist = cv2.distanceTransform(np.pad(seeds, 1).astype(np.uint8), cv2.DIST_L2, 5)[1:-1, 1:-1]
    rmax = max(4.0, MAX_STROKE_RADIUS * h)
    # largest inscribed radius per component
    inscribed = np.zeros(n, np.float32)
    np.maximum.at(inscribed, labels.ravel(), dist.ravel())
    keep = (inscribed <= rmax) & (stats[:, cv2.CC_STAT_AREA] >= MIN_SEED_AREA)
    keep[0] = False
    strokes = keep[labels]
    if not strokes.any():
        return out
    k = 2 * FRINGE_PX + 1
    out = cv2.dilate(strokes.astype(np.uint8), np.ones((k, k), np.uint8)) > 0
    if out.mean() > MAX_FRACTION:
        return np.zeros((h, w), bool)
    return out
