"""Reading an answer frame as a render of ours (segment/conditioning.py and its parts): camera
registration, the tone curve, the input's annotation layer left on, the F-G strokes after a codec.
Synthetic scenes with a known answer; the fidelity benchmark (test_eval_fidelity.py) checks the
whole on built cases."""
import io

import cv2
import numpy as np
import pytest
from PIL import Image, ImageDraw

from orchard_eval.fidelity import transforms as X
from orchard_eval.segment.overlay import ANSWER_ORANGE, InputLayer, answer_overlay_mask
from orchard_eval.segment.photometry import apply_inverse, fit_tone_curve
from orchard_eval.segment.registration import aspect_start, exposure, grey, landmarks, register, \
    resize_anisotropy

W, H = 640, 360


def textured_plate(seed: int = 0) -> np.ndarray:
    """A floor of random grey tiles under a light sky: edges everywhere, like a checker."""
    rng = np.random.default_rng(seed)
    tiles = rng.integers(90, 200, size=(H // 24 + 1, W // 24 + 1, 1)).astype(np.uint8)
    img = np.repeat(np.repeat(tiles, 24, axis=0), 24, axis=1)[:H, :W]
    img = np.repeat(img, 3, axis=2)
    img[:70] = (185, 195, 210)
    return cv2.GaussianBlur(img, (0, 0), 0.7)


def corner_error(A: np.ndarray, B: np.ndarray) -> float:
    corners = np.array([[0, 0, 1], [W, 0, 1], [0, H, 1], [W, H, 1]], float)
    return float(np.max(np.abs(corners @ (np.asarray(A) - np.asarray(B)).T)))


@pytest.mark.parametrize("affine", [
    X.crop_affine(((W - W / 1.06) / 2, (H - H / 1.06) / 2, W / 1.06, H / 1.06), (W, H)),    # zoom 6 %
    X.shake_affine(1.3, -0.9, 0.25, (W, H)),                                                  # shake
    X.crop_affine((0.2 * 0.08 * W, 0.8 * 0.08 * H, 0.92 * W, 0.92 * H), (W, H)),            # crop off-centre
])
def test_registration_recovers_the_camera(affine):
    plate = textured_plate()
    frame = X.warp(plate, affine, (W, H))
    cv2.circle(frame, (300, 200), 30, (200, 40, 40), -1)          # a moving object is an outlier
    reg = register(frame, landmarks(plate))
    assert reg is not None and not reg.aligned
    assert corner_error(reg.affine, affine) < 0.3


def test_registration_of_another_aspect_ratio_starts_from_a_centre_crop():
    plate = textured_plate(1)
    A = X.crop_affine((80, 0, 480, 360), (W, H))           # a 4:3 answer showing the scene's centre
    frame = X.warp(plate, A, (W, H))
    reg = register(frame, landmarks(plate), [None, aspect_start((480, 360), (W, H))],
                   resize_anisotropy((480, 360), (W, H)))
    assert reg is not None and corner_error(reg.affine, A) < 0.5


def test_a_warp_that_stretches_one_axis_is_no_camera_change():
    # a zoom scales both axes alike; 10 % narrower and 4 % taller is not a camera an answer at the
    # case's aspect could have, so the registration must not explain the frame with it
    plate = textured_plate(3)
    c = np.array([W / 2, H / 2])
    M = np.diag([0.9, 1.04])
    A = np.hstack([M, (c - M @ c)[:, None]])
    frame = X.warp(plate, A, (W, H))
    reg = register(frame, landmarks(plate))
    assert reg is None or corner_error(reg.affine, A) > 5
    sized = resize_anisotropy((480, 360), (W, H))           # the same stretch from a 4:3 answer resized
    assert sized == pytest.approx((W / H) / (480 / 360)) and resize_anisotropy(None, (W, H)) == 1.0


def test_an_aligned_frame_and_a_bare_plate_are_left_alone():
    plate = textured_plate(2)
    frame = plate.copy()
    cv2.rectangle(frame, (100, 150), (160, 210), (30, 30, 200), -1)
    reg = register(frame, landmarks(plate))
    assert reg is not None and reg.aligned
    bare = np.full((H, W, 3), 200, np.uint8)
    assert landmarks(bare) is None                          # nothing to register against
    bare[:60] = 150                                         # one horizon: it tells the vertical only
    frame = bare.copy()
    cv2.circle(frame, (320, 200), 25, (40, 40, 200), -1)
    reg = register(frame, landmarks(bare))
    assert reg is None or reg.aligned


def test_a_zoom_onto_a_bright_region_is_registered_at_the_plates_exposure():
    # framed tighter, the frame shows more of a bright block than the plate (11 % of it against
    # 9 %): its level distribution reads as a gain of 1.6 where the camera's is unchanged
    plate = textured_plate(4)
    cv2.rectangle(plate, (235, 155), (405, 275), (250, 248, 240), -1)
    A = X.crop_affine(((W - W / 1.12) / 2, (H - H / 1.12) / 2, W / 1.12, H / 1.12), (W, H))
    frame = X.warp(plate, A, (W, H))
    marks = landmarks(plate)
    assert exposure(grey(frame), marks)[0] > 1.4                      # the misleading estimate
    reg = register(frame, marks)
    assert reg is not None and corner_error(reg.affine, A) < 0.3 and abs(reg.gain - 1.0) < 0.05


@pytest.mark.parametrize("change", [dict(gain=(1.25, 1.25, 1.25)), dict(gain=(1.15, 1.0, 0.85)),
                                    dict(offset=20.0), dict(gamma=0.7)])
def test_tone_curve_is_fitted_and_inverted(change):
    rng = np.random.default_rng(3)
    plate = textured_plate(3)
    plate[200:260, 100:200] = (30, 60, 120)                 # dark, saturated parts widen the range
    plate[260:300, 400:500] = (220, 120, 40)
    answer = X.photometric(plate, **change)
    answer = np.clip(answer.astype(int) + rng.integers(-2, 3, answer.shape), 0, 255).astype(np.uint8)
    curve = fit_tone_curve(answer, plate)
    assert curve is not None and not curve.identity
    back = apply_inverse(answer, curve, plate)
    unclipped = (answer < 250).all(axis=2)
    assert np.median(np.abs(back.astype(int) - plate)[unclipped]) <= 3


def test_tone_curve_leaves_a_render_of_ours_alone():
    plate = textured_plate(4)
    noisy = np.clip(plate.astype(int) + np.random.default_rng(4).integers(-2, 3, plate.shape), 0, 255).astype(np.uint8)
    curve = fit_tone_curve(noisy, plate)
    assert curve is not None and curve.identity
    # another background is no tone curve
    other = np.full_like(plate, 120)
    other[::24] = 250
    assert fit_tone_curve(other, plate) is None


def _annotated(clean: np.ndarray) -> np.ndarray:
    img = Image.fromarray(clean.copy())
    d = ImageDraw.Draw(img)
    d.rounded_rectangle([20, 20, 180, 60], radius=4, fill=(255, 255, 255), outline=(90, 90, 90))
    d.text((30, 28), "g = 9.81 m/s2", fill=(20, 20, 20))
    d.line([(400, 250), (400, 150)], fill=(25, 90, 215), width=4)
    return np.asarray(img)


def test_input_layer_left_on_is_found_and_only_then():
    clean = textured_plate(5)
    annotated = _annotated(clean)
    layer = InputLayer(annotated, clean)
    assert layer.visible(annotated, clean).sum() > 0.9 * layer.drawn.sum()
    # a frame without the labels, brighter than the plate: the white box must not seem present
    brighter = X.photometric(clean, gain=(1.3, 1.3, 1.3))
    assert not layer.visible(brighter, clean).any()
    # fading out: a third of the labels still shows, found by the faint test
    faded = X.composite(clean, annotated, (layer.drawn * 0.3).astype(np.float32))
    assert layer.faint(faded, clean).any()
    assert not layer.faint(clean, clean).any()


def test_answer_strokes_survive_jpeg_but_an_orange_body_is_not_a_stroke():
    plate = textured_plate(6)
    rgb, alpha = X.answer_overlay((W, H), [((300, 200), (370, 200))], [((380, 190), "v = 1.49")])
    frame = X.composite(plate, rgb, alpha)
    # an orange ball, shaded as a render shades one (elastic polymer is this orange)
    yy, xx = np.mgrid[0:H, 0:W]
    r = np.hypot(xx - 150, yy - 250)
    shade = np.clip(1.0 - 0.55 * np.hypot(xx - 140, yy - 240) / 25.0, 0.35, 1.0)[..., None]
    frame = np.where((r <= 25)[..., None], (np.array([242, 153, 25]) * shade).astype(np.uint8), frame)
    jpeg = X.image_codec(frame, "jpeg", 75)
    found = answer_overlay_mask(jpeg, (ANSWER_ORANGE,), background=plate)
    drawn = alpha > 0.5
    assert (found & drawn).sum() > 0.9 * drawn.sum()
    ball = np.zeros((H, W), bool)
    cv2.circle(ball.view(np.uint8), (150, 250), 20, 1, -1)
    assert (found & ball).sum() < 0.05 * ball.sum()


def test_an_arrow_from_an_orange_balls_centre_leaves_the_balls_shading_observable():
    # the F-G arrow starts at the object's centre. A pale orange ball on a cream plate, shaded
    # darker to its rim as a render shades it (colours read off a suite answer): a band of its
    # shading reads as orange blended with the plate, thin like a text stroke. The ball beside that
    # band explains it as well as it explains itself: it is no stroke
    plate = np.empty((H, W, 3), np.uint8)
    plate[:] = (255, 249, 229)
    yy, xx = np.mgrid[0:H, 0:W]
    r = np.hypot(xx - 200.5, yy - 180.5)
    prof_r = np.array([0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22.0])
    prof = np.array([[255, 243, 162], [255, 243, 162], [255, 235, 155], [255, 227, 146], [252, 219, 142],
                     [248, 211, 138], [237, 203, 133], [224, 191, 125], [205, 176, 115], [174, 152, 103],
                     [131, 117, 88], [131, 117, 88]], float)
    ball = np.stack([np.interp(r, prof_r, prof[:, c]) for c in range(3)], axis=2)
    cover = np.clip(21.5 - r, 0, 1)[..., None]
    frame = np.round(cover * ball + (1 - cover) * plate).astype(np.uint8)
    rgb, alpha = X.answer_overlay((W, H), [((200.5, 180.5), (280, 180.5))], [((290, 170), "v = 0.82")])
    frame = X.composite(frame, rgb, alpha)
    drawn = alpha > 0.5
    away = (r <= 20) & ~(cv2.dilate(drawn.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0)
    for im in (frame, X.image_codec(frame, "jpeg", 90), X.image_codec(frame, "jpeg", 75)):
        found = answer_overlay_mask(im, (ANSWER_ORANGE,), background=plate)
        assert (found & drawn).sum() > 0.99 * drawn.sum()
        assert (found & away).sum() < 0.15 * away.sum()     # 42 % before what lies beside was read


def _scene_with_bodies(seed: int = 3):
    from types import SimpleNamespace

    cond = textured_plate(seed)
    masks = {}
    for oid, (x, y, r, col) in {"a": (220, 200, 26, (200, 40, 40)), "b": (420, 230, 32, (40, 160, 60))}.items():
        m = np.zeros((H, W), np.uint8)
        cv2.circle(m, (x, y), r, 1, -1)
        cond[m > 0] = col
        masks[oid] = m > 0
    return cond, SimpleNamespace(reference_image=cond, reference_masks=masks, cache={})


@pytest.mark.parametrize("sigma", [1.0, 1.5])
def test_rim_softness_measures_how_far_an_answer_smears_its_objects(sigma):
    from orchard_eval.segment.conditioning import rim_softness

    cond, ctx = _scene_with_bodies()
    soft = cv2.GaussianBlur(cond, (0, 0), sigma)
    assert abs(rim_softness(soft, ctx, None) - sigma) <= 0.5
    # a frame 0 as sharp as the condition frame (codec noise aside) is not soft
    noisy = np.clip(cond + np.random.default_rng(0).normal(0, 2, cond.shape), 0, 255).astype(np.uint8)
    assert rim_softness(noisy, ctx, None) == 0.0



def _ramp_scene(floor):
    """A teal 'ramp' polygon over `floor` (an RGB triple or an image) under a light sky."""
    img = np.empty((H, W, 3), np.uint8)
    img[:] = floor if not isinstance(floor, np.ndarray) else floor
    img[:70] = (185, 195, 210)
    cv2.fillPoly(img, [np.array([[150, 300], [150, 80], [460, 290]], np.int32)], (110, 190, 180))
    return img


def test_ground_from_plate_fills_a_hole_with_the_answers_materials_along_the_plates_edges():
    from types import SimpleNamespace

    from orchard_eval.segment.conditioning import ground_from_plate

    plate = _ramp_scene(textured_plate(1))           # the case: a tiled floor
    answer = _ramp_scene((235, 225, 205))              # the answer: the same scene on a cream floor
    hole = np.zeros((H, W), bool)
    cv2.circle(hole.view(np.uint8), (300, 190), 40, 1, -1)     # across the ramp's sloping rim
    ctx = SimpleNamespace(background=plate, cache={})
    filled = ground_from_plate(answer, ctx, hole)
    err = np.abs(filled.astype(int) - answer.astype(int)).max(axis=2)[hole]
    assert np.mean(err <= 12) >= 0.95
    assert (filled[~hole] == answer[~hole]).all()
    # inpainting from around alone smears the rim: the plate's structure is what makes the fill right
    smeared = cv2.inpaint(np.where(hole[..., None], 0, answer).astype(np.uint8), hole.astype(np.uint8), 5,
                          cv2.INPAINT_TELEA)
    assert np.mean(np.abs(smeared.astype(int) - answer.astype(int)).max(axis=2)[hole] <= 12) < 0.9


def test_the_ground_behind_a_body_is_what_it_uncovers_not_a_body_that_arrives_later():
    from types import SimpleNamespace

    from orchard_eval.segment.conditioning import _behind_input_objects

    plate = textured_plate(2)                          # the case's floor; the answer's is plain cream
    ground = np.full((H, W, 3), (235, 225, 205), np.uint8)
    ground[:70] = (185, 195, 210)
    a = np.zeros((H, W), np.uint8)
    cv2.circle(a, (300, 200), 25, 1, -1)

    def frame(at_a: bool, b_x: int | None):
        f = ground.copy()
        if at_a:
            f[a > 0] = (120, 200, 210)
        if b_x is not None:
            cv2.circle(f, (b_x, 200), 25, (60, 170, 190), -1)
        return f

    frame0 = frame(True, None)
    # A leaves at once; B reaches A's place in the third frame and rests there to the end
    later = [frame(False, None), frame(False, 250), frame(False, 300), frame(False, 300), frame(False, 300),
             frame(False, 300)]
    cond = plate.copy()                                # the case's condition frame: A on the case's floor
    cond[a > 0] = (120, 200, 210)
    ctx = SimpleNamespace(background=plate, reference_image=cond, reference_masks={"a": a > 0}, cache={},
                          answer_cache={}, answer_frames=later, input_layer=None)
    bg = _behind_input_objects(ctx, None, None, frame0, None)
    err = np.abs(bg.astype(int) - ground.astype(int)).max(axis=2)
    assert np.mean(err[a > 0] <= 12) >= 0.98
    far = ~(cv2.dilate(a, np.ones((15, 15), np.uint8)) > 0)
    assert (bg[far] == ground[far]).all()
    # a median over the frames takes B, which rests there longest, for the ground
    med = np.median(np.stack([frame0] + later), axis=0)
    assert np.mean(np.abs(med - ground).max(axis=2)[a > 0] <= 12) < 0.5


def test_a_body_resting_through_most_of_an_answer_is_no_part_of_its_background():
    from types import SimpleNamespace

    from orchard_eval.segment.conditioning import _seen_later, t0_region

    plate = textured_plate(3)                          # the case's floor; the answer's is plain cream
    ground = np.full((H, W, 3), (235, 225, 205), np.uint8)
    ground[:70] = (185, 195, 210)
    start, rest = np.zeros((H, W), np.uint8), np.zeros((H, W), np.uint8)
    cv2.circle(start, (200, 150), 25, 1, -1)           # where the condition frame shows the body
    cv2.circle(rest, (420, 260), 25, 1, -1)            # where it lands and rests

    def frame(y: int | None):
        f = ground.copy()
        if y is not None:
            cv2.circle(f, (420, y), 25, (150, 70, 50), -1)
        return f

    # a reversed answer: the body rests where it landed through its first frames, then rises
    frame0 = frame(260)
    later = [frame(260), frame(260), frame(260), frame(180), frame(120), frame(None)]
    cond = plate.copy()
    cond[start > 0] = (150, 70, 50)
    ctx = SimpleNamespace(background=plate, reference_image=cond, reference_masks={"a": start > 0}, cache={},
                          answer_cache={}, answer_frames=later, input_layer=None)
    bg = _seen_later(ctx, None, None, t0_region(ctx), frame0)
    err = np.abs(bg.astype(int) - ground.astype(int)).max(axis=2)
    assert np.mean(err[rest > 0] <= 12) >= 0.98
    assert np.mean(err <= 12) >= 0.99
    # the median over the frames takes the body, which rests there longest, for the ground
    med = np.median(np.stack([frame0] + later), axis=0)
    assert np.mean(np.abs(med - ground).max(axis=2)[rest > 0] <= 12) < 0.5


def test_an_answer_of_noise_moves_everywhere_and_still_has_a_background():
    from types import SimpleNamespace

    from orchard_eval.segment.conditioning import _seen_later, ground_from_plate, t0_region

    # every frame noise: the frames disagree on every pixel, and no ground is left outside the hole
    # to fill it from (the window it read grew past any size OpenCV takes)
    plate = textured_plate(4)
    rng = np.random.default_rng(5)
    frames = [rng.integers(0, 256, (H, W, 3), dtype=np.uint8) for _ in range(6)]
    cond = plate.copy()
    start = np.zeros((H, W), bool)
    start[140:180, 280:320] = True
    ctx = SimpleNamespace(background=plate, reference_image=cond, reference_masks={"a": start}, cache={},
                          answer_cache={}, answer_frames=frames[1:], input_layer=None)
    assert (ground_from_plate(frames[0], ctx, np.ones((H, W), bool)) == frames[0]).all()
    bg = _seen_later(ctx, None, None, t0_region(ctx), frames[0])
    assert bg.shape == frames[0].shape and bg.dtype == np.uint8


def test_block_coded_images_are_told_from_renders():
    from orchard_eval.segment.overlay import blockiness

    # a scene with no edge on the 8-pixel grid: smooth texture, a body at an odd place
    rng = np.random.default_rng(4)
    img = cv2.GaussianBlur(rng.integers(0, 255, (H, W, 3)).astype(np.float32), (0, 0), 5)
    img = np.clip((img - img.mean()) * 6 + 150, 0, 255).astype(np.uint8)
    cv2.circle(img, (301, 203), 41, (200, 60, 40), -1, lineType=cv2.LINE_AA)
    buf = cv2.imencode(".jpg", img[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 40])[1]
    jpeg = cv2.imdecode(buf, cv2.IMREAD_COLOR)[..., ::-1]
    assert blockiness(img) < 1.2
    assert blockiness(jpeg) > 1.5
