"""A body's place read from its look (`segment.appearance.place`): a shaded ball rendered at a known
sub-pixel place is found there from a start three pixels off, through a codec-like smear on one side,
a recolouring, a softer answer and a drawn layer over part of it, and a small recoloured ball from
four pixels off (its colour mapping fitted again where each search ends); a search cannot leave its
window.
Its size read with its place (`place_and_size`): a ball drawn larger or smaller is found at its size,
a larger one also from a start farther off than one search window reaches, one drawn at the case's
size is not taken for another, and a bar in front of it is no evidence either way."""
import cv2
import numpy as np
import pytest

from orchard_eval.segment.appearance import SEARCH_PX, make_sprite, place, place_and_size
from orchard_eval.segment.matting import weighted_ycc

H, W, R = 120, 160, 14.0


def _background() -> np.ndarray:
    y, x = np.mgrid[0:H, 0:W]
    checker = ((x // 20 + y // 20) % 2).astype(np.float32)
    bg = np.stack([150 + 30 * checker, 140 + 30 * checker, 120 + 25 * checker], axis=-1)
    return bg.astype(np.float32)


def _ball(centre, colour=(200, 40, 40), ss: int = 8, radius: float = R) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A lit ball at `centre` over the background, anti-aliased by supersampling; its mask (pixel
    centres inside) and its coverage (each pixel's share)."""
    R = radius
    bg = _background()
    ys, xs = np.mgrid[0:H * ss, 0:W * ss]
    u, v = (xs + 0.5) / ss, (ys + 0.5) / ss
    d2 = ((u - centre[0]) ** 2 + (v - centre[1]) ** 2) / (R * R)
    inside = d2 <= 1.0
    shade = np.clip(1.0 - 0.45 * ((u - centre[0]) / R + (v - centre[1]) / R), 0.4, 1.3)
    big = cv2.resize(bg, (W * ss, H * ss), interpolation=cv2.INTER_NEAREST)
    col = np.asarray(colour, np.float32)[None, None, :] * shade[..., None]
    big = np.where(inside[..., None], col, big)
    img = cv2.resize(big, (W, H), interpolation=cv2.INTER_AREA)
    yy, xx = np.mgrid[0:H, 0:W]
    mask = (xx + 0.5 - centre[0]) ** 2 + (yy + 0.5 - centre[1]) ** 2 <= R * R
    cover = cv2.resize(inside.astype(np.float32), (W, H), interpolation=cv2.INTER_AREA)
    return np.clip(img, 0, 255).astype(np.uint8), mask, cover


SPRITE_AT = (70.0, 60.0)


@pytest.fixture(scope="module")
def sprite():
    frame, _, cover = _ball(SPRITE_AT)
    plate = weighted_ycc(_background().astype(np.uint8), 0.5)
    return make_sprite(weighted_ycc(frame, 0.5), plate, cover, SPRITE_AT, depth=2.0)


def _place(sprite, answer, start, weight=None, softness=0.0, background=None):
    bg = weighted_ycc((_background() if background is None else background).astype(np.uint8), 0.5)
    wt = np.ones((H, W), np.float32) if weight is None else weight
    return place(sprite, weighted_ycc(answer, 0.5), bg, wt, start, 1.0, softness)


def test_found_from_three_pixels_off(sprite):
    truth = (83.3, 52.6)
    answer, _, _ = _ball(truth)
    p = _place(sprite, answer, (truth[0] + 2.6, truth[1] - 2.4))
    assert p is not None and np.hypot(p.uv[0] - truth[0], p.uv[1] - truth[1]) < 0.2, p
    assert p.cost < p.cost_at_start


def test_smear_on_one_side_does_not_drag_it(sprite):
    truth = (60.4, 64.8)
    answer, mask, _ = _ball(truth)
    # the body's colour bled 3 px into the background on its left, at half strength (a codec's trail)
    ring = (cv2.dilate(mask.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0) & ~mask
    left = ring & (np.mgrid[0:H, 0:W][1] < truth[0])
    smeared = answer.astype(np.float32)
    smeared[left] = 0.5 * smeared[left] + 0.5 * np.array([200, 40, 40], np.float32)
    p = _place(sprite, smeared.astype(np.uint8), (truth[0] - 1.5, truth[1]))
    assert np.hypot(p.uv[0] - truth[0], p.uv[1] - truth[1]) < 0.35, p


def test_recoloured_and_softer(sprite):
    truth = (75.7, 57.2)
    answer, _, _ = _ball(truth, colour=(60, 90, 210))
    soft = cv2.GaussianBlur(answer, (0, 0), 1.0)
    p = _place(sprite, soft, (truth[0] + 2.0, truth[1] + 1.0), softness=1.0)
    assert np.hypot(p.uv[0] - truth[0], p.uv[1] - truth[1]) < 0.35, p


@pytest.mark.parametrize("radius,truth", [(9.0, (80.3, 58.6)), (6.0, (64.2, 55.7))])
def test_a_recoloured_body_is_found_from_a_start_four_pixels_off(radius, truth):
    # the colour mapping fitted where the search starts, four pixels off a small recoloured ball,
    # takes in the checker's colours and holds the search 1.5-2.5 px short of the ball; fitted again
    # where each search ends, it finds the ball
    frame, _, cover = _ball(SPRITE_AT, radius=radius)
    bg = weighted_ycc(_background().astype(np.uint8), 0.5)
    small = make_sprite(weighted_ycc(frame, 0.5), bg, cover, SPRITE_AT, depth=2.0)
    answer = weighted_ycc(_ball(truth, colour=(60, 90, 210), radius=radius)[0], 0.5)
    start, wt = (truth[0] - 4.0, truth[1] - 4.0), np.ones((H, W), np.float32)
    held = place(small, answer, bg, wt, start, refits=0)
    found = place(small, answer, bg, wt, start)
    assert np.hypot(held.uv[0] - truth[0], held.uv[1] - truth[1]) > 1.0, held
    assert np.hypot(found.uv[0] - truth[0], found.uv[1] - truth[1]) < 0.2, found


def test_pixels_without_weight_say_nothing(sprite):
    truth = (72.2, 61.1)
    answer, _, _ = _ball(truth)
    # an orange label drawn over the ball's right half, marked unobservable
    answer[40:80, 74:100] = (255, 140, 0)
    weight = np.ones((H, W), np.float32)
    weight[40:80, 74:100] = 0.0
    p = _place(sprite, answer, (truth[0] - 2.0, truth[1] + 1.5), weight)
    assert np.hypot(p.uv[0] - truth[0], p.uv[1] - truth[1]) < 0.35, p


def test_search_stays_in_its_window(sprite):
    truth = (100.0, 60.0)
    answer, _, _ = _ball(truth)
    start = (80.0, 60.0)
    p = _place(sprite, answer, start)
    assert p is None or abs(p.uv[0] - start[0]) <= SEARCH_PX + 0.5


def test_a_search_ending_on_its_edge_starts_again_from_there(sprite):
    truth = (79.2, 63.7)
    answer, _, _ = _ball(truth)
    start = (truth[0] - 8.0, truth[1] + 2.0)
    bg = weighted_ycc(_background().astype(np.uint8), 0.5)
    wt = np.ones((H, W), np.float32)
    once = place(sprite, weighted_ycc(answer, 0.5), bg, wt, start)
    again = place(sprite, weighted_ycc(answer, 0.5), bg, wt, start, recentre=1)
    assert once is None or abs(once.uv[0] - start[0]) >= SEARCH_PX, once     # held at its edge
    assert again is not None and np.hypot(again.uv[0] - truth[0], again.uv[1] - truth[1]) < 0.3, again


def test_explained_share_tells_a_body_from_a_ghost_and_from_nothing(sprite):
    truth = (66.0, 58.0)
    answer, mask, _ = _ball(truth)
    p = _place(sprite, answer, truth)
    assert p.explained > 0.95, p
    # a codec's ghost: the body at half strength where it was 9 px earlier, beside it
    ghost, gmask, _ = _ball((truth[0] - 9.0, truth[1]))
    trail = gmask & ~mask
    ghosted = answer.astype(np.float32)
    ghosted[trail] = 0.5 * ghosted[trail] + 0.5 * ghost[trail]
    g = _place(sprite, ghosted.astype(np.uint8), (truth[0] - 2.0, truth[1]))
    assert np.hypot(g.uv[0] - truth[0], g.uv[1] - truth[1]) < 0.5, g
    assert 0.4 < g.explained < p.explained, g
    # no body at all: a sprite laid anywhere only adds difference
    empty = _background().astype(np.uint8)
    n = _place(sprite, empty, truth)
    assert n is None or n.explained < 0.1, n


def test_another_background_under_the_rim(sprite):
    """The sprite's rim is taken off the GT background: laid over another one it blends with that."""
    truth = (66.3, 58.9)
    frame, _, cover = _ball(truth)
    other = np.full((H, W, 3), (40, 120, 60), np.float32)
    answer = (cover[..., None] * frame.astype(np.float32) + (1 - cover[..., None]) * other)
    # the ball's own pixels as rendered over the checker: where fully covered they are the ball's
    answer = np.where(cover[..., None] >= 1.0, frame.astype(np.float32), answer)
    p = _place(sprite, answer.astype(np.uint8), (truth[0] + 2.0, truth[1] - 2.0), background=other)
    assert np.hypot(p.uv[0] - truth[0], p.uv[1] - truth[1]) < 0.25, p


BAR = (slice(0, H), slice(62, 68))      # a vertical bar in front of the ball, in the GT frame and the answer


def _with_bar(image: np.ndarray) -> np.ndarray:
    out = image.copy()
    out[BAR] = (60, 60, 200)
    return out


@pytest.mark.parametrize("size", [1.0, 1.12, 1.3, 0.88])
def test_size_read_with_the_place(sprite, size):
    truth = (80.4, 57.3)
    answer, _, _ = _ball(truth, radius=R * size)
    bg = weighted_ycc(_background().astype(np.uint8), 0.5)
    p = place_and_size(sprite, weighted_ycc(answer, 0.5), bg, np.ones((H, W), np.float32),
                       (truth[0] - 2.2, truth[1] + 1.7))
    assert p is not None and abs(p.size - size) <= 0.01 and np.hypot(p.uv[0] - truth[0], p.uv[1] - truth[1]) < 0.3, p


def test_a_larger_body_beyond_one_window_is_found_at_its_size(sprite):
    # the silhouette fit at the case's size starts the search farther from a body drawn larger than
    # one search window reaches: a grid size's search that ends on its window's edge goes on from there
    truth = (80.4, 52.3)
    answer, _, _ = _ball(truth, radius=R * 1.12)
    bg = weighted_ycc(_background().astype(np.uint8), 0.5)
    p = place_and_size(sprite, weighted_ycc(answer, 0.5), bg, np.ones((H, W), np.float32),
                       (truth[0] + 0.6, truth[1] + SEARCH_PX + 1.2))
    assert p is not None and abs(p.size - 1.12) <= 0.01 and np.hypot(p.uv[0] - truth[0], p.uv[1] - truth[1]) < 0.3, p


def test_a_support_in_front_is_no_evidence_of_size():
    frame, _, cover = _ball(SPRITE_AT)
    hidden = np.zeros((H, W), bool)
    hidden[BAR] = True
    seen = np.where(hidden, 0.0, cover).astype(np.float32)
    plate = weighted_ycc(_with_bar(_background().astype(np.uint8)), 0.5)
    sp = make_sprite(weighted_ycc(_with_bar(frame), 0.5), plate, seen, SPRITE_AT, depth=2.0)
    answer, _, _ = _ball((73.0, 61.0), radius=R * 1.2)
    weight = np.where(hidden, 0.0, 1.0).astype(np.float32)
    p = place_and_size(sp, weighted_ycc(_with_bar(answer), 0.5), plate, weight, (72.0, 60.0))
    assert p is not None and abs(p.size - 1.2) <= 0.01, p
