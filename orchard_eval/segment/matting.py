"""Small pieces shared by the matting steps of the segmenters: the colour space they compare in and
the nearest interior pixel of a mask (whose colour stands for the object's at a rim)."""
from __future__ import annotations

import cv2
import numpy as np

FIT_CHROMA_WEIGHT = 0.5  # chroma against luma where a body's colour is compared (4:2:0 video: half-resolution chroma)


def weighted_ycc(rgb: np.ndarray, chroma_weight: float) -> np.ndarray:
    """RGB (..., 3) → float32 (Y, w·Cb, w·Cr): BT.601 luma at full weight and the colour differences
    weighted by `chroma_weight` (H.264 4:2:0 video carries chroma at half resolution, so at an edge
    only luma is sharp)."""
    f = np.asarray(rgb).astype(np.float32)
    y = f @ np.array([0.299, 0.587, 0.114], np.float32)
    cb = (f[..., 2] - y) * (0.564 * chroma_weight)
    cr = (f[..., 0] - y) * (0.713 * chroma_weight)
    return np.stack([y, cb, cr], axis=-1)


def nearest_inside(mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For every pixel, the (row, column) of the nearest pixel of `mask` (which must not be empty)."""
    inner = mask.astype(bool)
    _, lab = cv2.distanceTransformWithLabels((~inner).astype(np.uint8), cv2.DIST_L2, 5,
                                             labelType=cv2.DIST_LABEL_PIXEL)
    iy, ix = np.nonzero(inner)
    # labels number the mask's pixels (the zeros of the transform's input) in row-major scan order
    order = np.zeros(lab.max() + 1, np.int64)
    order[lab[iy, ix]] = np.arange(iy.size)
    near = order[lab]
    return iy[near], ix[near]
