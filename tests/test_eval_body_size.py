"""How large an answer draws each body (segment/body_size.py), read on a video's frame 0 against the
condition frame. Drawn scenes with known sizes; the fidelity benchmark (`ded/cf_size`) checks it on
built cases."""
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from orchard_eval.segment.body_size import frame0_scales as _frame0_scales
from orchard_eval.segment.conditioning import objects_in_place

BODIES = {"a": (220, 200, 26, (200, 40, 40)), "b": (420, 230, 32, (40, 160, 60))}   # x, y, radius (px), colour


def _tiles(seed: int, h: int = 360, w: int = 640) -> np.ndarray:
    """A floor of random grey tiles: a textured background."""
    rng = np.random.default_rng(seed)
    tiles = rng.integers(90, 200, size=(h // 24 + 1, w // 24 + 1, 1)).astype(np.uint8)
    img = np.repeat(np.repeat(np.repeat(tiles, 24, axis=0), 24, axis=1)[:h, :w], 3, axis=2)
    return cv2.GaussianBlur(img, (0, 0), 0.7)


def _discs(plate: np.ndarray, scale: dict[str, float] | None = None, resting: bool = False) -> np.ndarray:
    """The bodies drawn on `plate`, each radius × `scale`, about its centre or (`resting`) about its
    lowest point, as a larger body on a floor grows; drawn at 4× and reduced (anti-aliased rims)."""
    big = cv2.resize(plate, None, fx=4, fy=4, interpolation=cv2.INTER_NEAREST)
    for oid, (x, y, r, col) in BODIES.items():
        k = (scale or {}).get(oid, 1.0)
        cy = y - (k - 1.0) * r if resting else y
        cv2.circle(big, (4 * x + 2, int(round(4 * cy + 2))), int(round(4 * r * k)), col, -1)
    return cv2.resize(big, (plate.shape[1], plate.shape[0]), interpolation=cv2.INTER_AREA)


def _video_context(plate: np.ndarray) -> SimpleNamespace:
    masks = {}
    for oid, (x, y, r, _) in BODIES.items():
        m = np.zeros(plate.shape[:2], np.uint8)
        cv2.circle(m, (x, y), r, 1, -1)
        masks[oid] = m > 0
    return SimpleNamespace(reference_image=_discs(plate), reference_masks=masks, background=plate, cache={},
                           scene_depth=None, bodies=None, expected_at=None, camera=None)


def frame0_scales(frame0, background, ctx, hidden):
    """The sizes read on `frame0`, for the bodies it shows where the condition frame does."""
    return _frame0_scales(frame0, background, ctx, hidden, objects_in_place(frame0, ctx, hidden)[0])


@pytest.mark.parametrize("k", [1.1, 1.2])
def test_frame0_reads_a_body_drawn_larger_through_blur_noise_and_its_anchor(k):
    plate = _tiles(2)
    ctx = _video_context(plate)
    grown = _discs(plate, {"a": k})
    scales = frame0_scales(grown, plate, ctx, None)
    assert abs(scales["a"] - k) <= 0.02 and "b" not in scales
    assert abs(frame0_scales(_discs(plate, {"a": k}, resting=True), plate, ctx, None)["a"] - k) <= 0.02
    rng = np.random.default_rng(1)
    for frame in (cv2.GaussianBlur(grown, (0, 0), 1.5),
                  np.clip(grown + rng.normal(0, 6, grown.shape), 0, 255).astype(np.uint8)):
        assert abs(frame0_scales(frame, plate, ctx, None).get("a", 1.0) - k) <= 0.03
    # the case's own sizes, sharp, blurred or noisy: nothing is drawn larger
    cond = ctx.reference_image
    for frame in (cond, cv2.GaussianBlur(cond, (0, 0), 2.0),
                  np.clip(cond + rng.normal(0, 6, cond.shape), 0, 255).astype(np.uint8)):
        assert frame0_scales(frame, plate, ctx, None) == {}
    # a frame 0 that shows a body elsewhere says nothing of its size
    moved = plate.copy()
    cv2.circle(moved, (300, 120), 30, BODIES["a"][3], -1)
    cv2.circle(moved, (420, 230), 32, BODIES["b"][3], -1)
    assert "a" not in frame0_scales(moved, plate, ctx, None)
