"""The pieces of the programmatic judge that read an F-G answer's drawn layer: arrows that two bodies
moving together share, the outline test across shadows, the object match that ignores the answer's
own arrow, and the label re-read from a crop; plus the P-T page precondition."""
from __future__ import annotations

import numpy as np
import pytest

from orchard_eval.judging import programmatic as P
from orchard_eval.judging.measure import to_lab

ORANGE = tuple(int(v) for v in P.ORANGE)


def _arrow(img, a, b, colour=ORANGE, width=5):
    import cv2

    cv2.arrowedLine(img, a, b, colour, width, line_type=cv2.LINE_AA, tipLength=0.3)
    return img


def test_touching_arrows_are_the_overlapping_pairs_only():
    arrows = [{"start": (100, 100), "end": (160, 90), "width": 5},
              {"start": (104, 97), "end": (164, 87), "width": 5},     # 3-4 px beside the first
              {"start": (100, 200), "end": (160, 220), "width": 5},   # far away
              None]
    assert P._touching_arrows(arrows, (300, 300)) == [(0, 1)]


def test_orange_along_measures_the_share_of_the_path_on_the_mask():
    m = np.zeros((50, 100), bool)
    m[20:23, 10:60] = True
    assert P._orange_along(m, np.array([10.5, 21.5]), np.array([59.5, 21.5])) == 1.0
    half = P._orange_along(m, np.array([10.5, 21.5]), np.array([109.0, 21.5]))
    assert 0.4 < half < 0.6


@pytest.mark.parametrize("outlined", [False, True])
def test_an_arrow_across_a_shadow_is_not_outlined_an_outlined_one_is(outlined):
    img = np.full((120, 200, 3), 200, np.uint8)
    img[40:80, 60:140] = 110           # a shadow the arrow crosses
    if outlined:
        _arrow(img, (20, 60), (180, 60), (20, 20, 20), 9)
    _arrow(img, (20, 60), (180, 60))
    lab = to_lab(img)
    shape = np.linalg.norm(lab - to_lab(P.ORANGE[None, None, :])[0, 0], axis=2) < 30
    share = P.outline_share(lab[..., 0], shape, ~shape)
    assert (share > 0.7) if outlined else (share < 0.25), share


def test_partial_sqdiff_equals_the_brute_force_over_the_seen_pixels():
    rng = np.random.default_rng(0)
    win = rng.uniform(-100, 100, (30, 40, 3)).astype(np.float32)
    tpl = rng.uniform(-100, 100, (8, 10, 3)).astype(np.float32)
    tm = (rng.uniform(size=(8, 10)) > 0.3).astype(np.float32)
    seen = (rng.uniform(size=(30, 40)) > 0.2).astype(np.float32)
    got = P._partial_sqdiff(win, tpl, tm, seen)
    for y, x in [(0, 0), (5, 7), (22, 30), (11, 19)]:
        w = tm * seen[y:y + 8, x:x + 10]
        want = float((w[..., None] * (win[y:y + 8, x:x + 10] - tpl) ** 2).sum() / max(w.sum(), 1.0))
        if w.sum() < max(10.0, 0.2 * tm.sum()):
            assert got[y, x] == np.inf
        else:
            assert got[y, x] == pytest.approx(want, rel=1e-3, abs=1.0)


def test_an_arrow_drawn_across_the_object_does_not_move_its_match():
    rng = np.random.default_rng(1)
    scene = rng.integers(90, 160, (160, 240, 3)).astype(np.uint8)
    ref = scene.copy()
    ref[60:100, 90:130] = (40, 120, 200)                    # the object, textured
    ref[60:100:4, 90:130] = (30, 90, 160)
    mask = np.zeros(ref.shape[:2], bool)
    mask[60:100, 90:130] = True
    ans = ref.copy()
    _arrow(ans, (110, 98), (110, 40), width=7)               # the answer's arrow points the other way
    orange = np.linalg.norm(to_lab(ans) - to_lab(P.ORANGE[None, None, :])[0, 0], axis=2) < 30
    seen = ~P.ME.dilate(orange, 2)
    (dx, dy), de = P.locate_object(ans, ref, mask, 30, seen=seen)
    assert (dx, dy) == (0, 0) and de < 1.0


def _label_image(text_colour, ground):
    from PIL import Image, ImageDraw, ImageFont

    from orchard_build.overlay import FONT_DIR

    im = Image.new("RGB", (320, 120), ground)
    d = ImageDraw.Draw(im)
    f = ImageFont.truetype(str(FONT_DIR / "DejaVuSans-Bold.ttf"), 20)
    d.text((150, 50), "v = 0.74", fill=text_colour, font=f)
    box = d.textbbox((150, 50), "v = 0.74", font=f)
    d.polygon([(60, 110), (120, 20), (150, 110)], fill=(240, 200, 120))   # a yellow cone beside it
    return np.asarray(im), box


def test_speed_labels_on_a_pale_ground_are_read_at_their_place():
    pytest.importorskip("rapidocr")
    img, box = _label_image(ORANGE, (236, 228, 212))
    readings = P.read_speed_labels(img, 1, places=[box])
    values = [m.group(1) for b in readings for piece in P._split_labels(b) if (m := P.SPEED_LABEL.match(piece.text))]
    assert values == ["0.74"], [b.text for b in readings]


def test_colour_within_the_coding_tolerance_is_the_same_colour():
    a = np.array([60.0, 40.0, 70.0])
    assert P.ME.colour_score(a, a + np.array([2.0, -2.0, 2.0])) == 1.0
    assert P.ME.colour_score(a, a + np.array([20.0, 0.0, 0.0])) == pytest.approx(0.5)
    assert P.ME.colour_score(a, None) == 0.0


def test_the_isolated_layer_is_read_around_its_ink_in_its_own_coordinates():
    """`_read_layer` reads only the box around the layer's ink: the label it finds lies where reading
    the whole layer finds it, and a blank layer reads nothing (no detection is run)."""
    pytest.importorskip("rapidocr")
    from PIL import Image, ImageDraw, ImageFont

    from orchard_build.overlay import FONT_DIR
    from orchard_eval.judging import ocr as OCR

    im = Image.new("RGB", (640, 360), (255, 255, 255))
    d = ImageDraw.Draw(im)
    d.text((400, 250), "v = 1.25", fill=(0, 0, 0), font=ImageFont.truetype(str(FONT_DIR / "DejaVuSans-Bold.ttf"), 18))
    iso = np.asarray(im)
    crop = P._read_layer(iso, 2.0)
    whole = OCR.lines(OCR.read_text(iso, scale=2.0), gap=1.5)
    assert [b.text for b in crop] == [b.text for b in whole] and P.SPEED_LABEL.match(crop[0].text)
    assert np.allclose(crop[0].box, whole[0].box, atol=2.0)
    assert 395 <= crop[0].box[0] <= 405 and 245 <= crop[0].box[1] <= 262
    assert P._read_layer(np.full((360, 640, 3), 255, np.uint8), 2.0) == []
