"""How large an answer draws each body (segment/body_size.py), read on a video's frame 0 from the
body's look on the condition frame. Drawn scenes with known sizes; the fidelity benchmark
(`ded/cf_size`, `ded/cf_shrink`, `fg/cf_size`, `fg/cf_shrink`) checks it on built cases."""
from types import SimpleNamespace

import cv2
import numpy as np
import pytest

from orchard_eval.segment.appearance import Looks, make_sprite
from orchard_eval.segment.body_size import frame0_scales as _frame0_scales
from orchard_eval.segment.conditioning import objects_in_place, rim_softness
from orchard_eval.segment.matting import weighted_ycc
from orchard_eval.segment.shape_prior import FIT_CHROMA_WEIGHT

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


def _coverage(x: int, y: int, r: int, shape) -> np.ndarray:
    """A disc's share of each pixel, drawn as `_discs` draws it."""
    big = np.zeros((4 * shape[0], 4 * shape[1]), np.float32)
    cv2.circle(big, (4 * x + 2, 4 * y + 2), 4 * r, 1.0, -1)
    return cv2.resize(big, (shape[1], shape[0]), interpolation=cv2.INTER_AREA)


def _video_context(plate: np.ndarray) -> SimpleNamespace:
    """What the size read needs of a case: the condition frame, its masks and each body's look
    there (a sprite from the condition frame, as `classical.body_looks` builds them from GT frames)."""
    cond = _discs(plate)
    masks, covers = {}, {}
    for oid, (x, y, r, _) in BODIES.items():
        covers[oid] = _coverage(x, y, r, plate.shape[:2])
        masks[oid] = covers[oid] >= 0.5
    ycc, plate_ycc = weighted_ycc(cond, FIT_CHROMA_WEIGHT), weighted_ycc(plate, FIT_CHROMA_WEIGHT)
    track = {oid: np.array([[x + 0.5, y + 0.5]]) for oid, (x, y, _, _) in BODIES.items()}
    looks = Looks(track, 1.0, lambda i: {oid: make_sprite(ycc, plate_ycc, covers[oid], tuple(track[oid][0]), 1.0)
                                         for oid in BODIES})
    return SimpleNamespace(reference_image=cond, reference_masks=masks, background=plate, cache={},
                           scene_depth=None, bodies=None, expected_at=None, camera=None, looks=looks)


def frame0_scales(frame0, background, ctx, hidden):
    """The sizes read on `frame0`, for the bodies it shows where the condition frame does, at the
    rim softness it shows (as `conditioning.answer_reference` reads them)."""
    return _frame0_scales(frame0, background, ctx, hidden, objects_in_place(frame0, ctx, hidden)[0],
                          rim_softness(frame0, ctx, hidden))


@pytest.mark.parametrize("k", [1.1, 1.2, 0.9, 0.85])
def test_frame0_reads_a_body_drawn_larger_or_smaller_through_blur_noise_and_its_anchor(k):
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
    # the case's own sizes, sharp, blurred or noisy: nothing is drawn at another size
    cond = ctx.reference_image
    for frame in (cond, cv2.GaussianBlur(cond, (0, 0), 2.0),
                  np.clip(cond + rng.normal(0, 6, cond.shape), 0, 255).astype(np.uint8)):
        assert frame0_scales(frame, plate, ctx, None) == {}
    # a frame 0 that shows a body elsewhere says nothing of its size
    moved = plate.copy()
    cv2.circle(moved, (300, 120), 30, BODIES["a"][3], -1)
    cv2.circle(moved, (420, 230), 32, BODIES["b"][3], -1)
    assert "a" not in frame0_scales(moved, plate, ctx, None)


def _striped(plate: np.ndarray, k: float) -> np.ndarray:
    """Body "a" drawn with vertical stripes (8 px at the case's size), `k` times as large about its
    centre, texture included; drawn at 4× and reduced."""
    x, y, r, _ = BODIES["a"]
    big = cv2.resize(plate, None, fx=4, fy=4, interpolation=cv2.INTER_NEAREST)
    ys, xs = np.mgrid[0:big.shape[0], 0:big.shape[1]]
    dx, dy = (xs - 4 * x - 2) / (4 * k), (ys - 4 * y - 2) / (4 * k)
    inside = dx * dx + dy * dy <= r * r
    light = (np.floor(dx / 8.0).astype(int) % 2) == 0
    big[inside & light], big[inside & ~light] = (230, 120, 60), (120, 40, 20)
    return cv2.resize(big, (plate.shape[1], plate.shape[0]), interpolation=cv2.INTER_AREA)


def test_a_textured_body_drawn_larger_is_still_in_place():
    # drawn 1.1 × about its centre, a striped body's interior no longer matches the condition
    # frame's pixel for pixel (its stripes spread outward); it does once the condition frame is
    # scaled alike, so frame 0 still shows it in place and its size is read. The same body drawn
    # elsewhere matches at no scale
    plate = _tiles(2)
    cond = _striped(plate, 1.0)
    x, y, r, _ = BODIES["a"]
    ctx = SimpleNamespace(reference_image=cond, reference_masks={"a": _coverage(x, y, r, plate.shape[:2]) >= 0.5},
                          cache={})
    assert objects_in_place(cond, ctx, None)[0] == {"a"}
    grown = _striped(plate, 1.1)
    interior = cv2.erode(ctx.reference_masks["a"].astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    assert np.mean(np.abs(grown.astype(int) - cond.astype(int)).max(axis=2)[interior] <= 24) < 0.9
    assert objects_in_place(grown, ctx, None)[0] == {"a"}
    elsewhere = np.roll(grown, 3 * r, axis=1)
    assert objects_in_place(elsewhere, ctx, None)[0] == set()


def test_a_look_drawn_larger_close_to_the_camera_is_a_body_grown_by_less():
    # a cube half a metre across, 1.2 m before this camera, seen face on: grown 10 % about its
    # centre, its near face comes 2.5 cm nearer, and its silhouette grows by more than 10 %. The
    # model's scale is read back from the silhouette's size; far away the two agree
    from orchard_eval.segment import shape_prior as SP
    from orchard_eval.segment.body_size import model_scale

    K = np.array([[300.0, 0.0, 160.0], [0.0, 300.0, 120.0], [0.0, 0.0, 1.0]])
    cam = SP.Camera(K, np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, 0.5], [0.0, 1.0, 0.0, 0.0]]))
    cube = SP.BodyPrior("box", "cube", {"edge": 0.5}, np.zeros(3), np.array([0.0, 1.0, 0.0]))

    def drawn(centre, k):
        area = [cv2.contourArea(cam.silhouette(b, centre, np.eye(3)).astype(np.float32)) for b in (cube, cube.scaled(k))]
        return float(np.sqrt(area[1] / area[0]))

    near, far = np.array([0.0, 1.2, 0.5]), np.array([0.0, 30.0, 0.5])
    assert drawn(near, 1.1) > 1.12
    assert model_scale(cam, cube, near, np.eye(3), drawn(near, 1.1)) == pytest.approx(1.1, abs=1e-3)
    assert model_scale(cam, cube, far, np.eye(3), drawn(far, 1.1)) == pytest.approx(1.1, abs=1e-3)
    assert abs(drawn(far, 1.1) - 1.1) < 0.002
