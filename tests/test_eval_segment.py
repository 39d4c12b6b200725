"""Weight-free segmentation of generated frames (objects on white; in-scene against the clean plate)."""
import cv2
import numpy as np
import pytest

from orchard_eval import synthetic as syn
from orchard_eval.cases import load_dataset
from orchard_eval.media import read_video_frames, write_video
from orchard_eval.metrics import object_mask_iou
from orchard_eval.segment import (ClassicalSegmenter, SegmentContext, Segmentation, Segmenter, context_for_case,
                                  get_segmenter, register_segmenter)


def gt_masks(scene, inst):
    return {d.id: inst == d.instance_id for d in scene.discs}


@pytest.fixture(scope="module")
def scene():
    return syn.Scene(width=192, height=128)


@pytest.fixture(scope="module")
def scene_ctx(scene):
    ref, inst = scene.render(0.0)
    return SegmentContext([d.id for d in scene.discs], ref, gt_masks(scene, inst), background=scene.plate())


def degrade(scene, img, inst, t, tmp_path):
    """+5 % brightness, a cast shadow next to the ball, blur, noise and an H.264 round trip."""
    img = img.astype(float)
    u, v = scene.project(scene.discs[0].motion(t))
    yy, xx = np.mgrid[0:scene.height, 0:scene.width]
    shadow = (((xx - u - 6) ** 2 / 150 + (yy - v - 12) ** 2 / 20) <= 1) & (inst == 0)
    img[shadow] *= 0.6
    img = np.clip(img * 1.05 + np.random.default_rng(1).normal(0, 2, img.shape), 0, 255).astype(np.uint8)
    img = cv2.GaussianBlur(img, (3, 3), 0.8)
    p = tmp_path / f"f{t}.mp4"
    write_video(p, [img], crf=23)
    return read_video_frames(p)[0][0], shadow


def test_protocol_and_registry():
    seg = get_segmenter("classical")
    assert isinstance(seg, Segmenter) and seg.name == "classical"

    class Fake:
        name = "fake"

        def segment(self, image, context):
            z = np.zeros(image.shape[:2], bool)
            return Segmentation({i: z for i in context.object_ids}, z)

    register_segmenter("fake", Fake)
    assert isinstance(get_segmenter("fake"), Segmenter)
    with pytest.raises(KeyError):
        get_segmenter("sam-not-installed")


def test_clean_frames_are_exact(scene, scene_ctx):
    seg = ClassicalSegmenter()
    for t in (0.0, 0.25, 0.5):
        img, inst = scene.render(t)
        out = seg.segment(img, scene_ctx)
        assert object_mask_iou(out.masks, gt_masks(scene, inst)).value > 0.98
        assert not out.low_confidence


@pytest.mark.parametrize("t", [0.1, 0.3, 0.5])
def test_degraded_frames_with_shadow(scene, scene_ctx, tmp_path, t):
    img, inst = scene.render(t)
    bad, shadow = degrade(scene, img, inst, t, tmp_path)
    out = ClassicalSegmenter().segment(bad, scene_ctx)
    r = object_mask_iou(out.masks, gt_masks(scene, inst))
    assert min(r.per_object.values()) > 0.8, r.per_object
    assert (out.union() & shadow).sum() < 0.1 * shadow.sum()  # the shadow is not an object


def test_objects_on_white(scene):
    white, inst = scene.white(0.0)
    ctx = SegmentContext([d.id for d in scene.discs], white, gt_masks(scene, inst), background=None)
    shifted, inst2 = scene.white(0.1)
    out = ClassicalSegmenter().segment(shifted, ctx)
    assert object_mask_iou(out.masks, gt_masks(scene, inst2)).value > 0.95
    blank = ClassicalSegmenter().segment(np.full_like(white, 255), ctx)
    assert not blank.union().any() and "no object found" in blank.notes


def _lit_on_white(scene, white, masks):
    """`white` with each disc shaded as a lit ball is: 1.25 × its colour at its upper left down to
    0.45 × at its lower right (a spread of colours, as a rendered body shows)."""
    yy, xx = np.mgrid[0:scene.height, 0:scene.width] + 0.5
    img = white.astype(float)
    for m in masks.values():
        cy, cx, r = yy[m].mean(), xx[m].mean(), np.sqrt(m.sum() / np.pi)
        shade = np.clip(0.85 - 0.4 * ((xx - cx) + (yy - cy)) / (1.414 * r), 0.45, 1.25)
        img[m] *= shade[m][:, None]
    return np.clip(img, 0, 255).astype(np.uint8)


def test_objects_drawn_in_permuted_colours_are_told_apart_by_position():
    # a P-G answer that draws both bodies where they are, its colour channels permuted (R, G, B →
    # B, R, G): the first body's new colours fall within the second's colour model, the second's
    # within no one's. Colour alone gives the second body the first one's place and leaves the
    # second one's piece to no one; a body found on less than half of it next to a piece of a
    # body's size that no one took says colour cannot tell them apart, and position does
    p, v = syn.uniform(-0.8, 0.6, 0.0)
    q, w = syn.uniform(0.7, 1.2, 0.0)
    sc = syn.Scene(width=192, height=128, discs=[syn.Disc("a", 1, (164, 142, 93), 0.3, p, v),
                                                  syn.Disc("b", 2, (121, 173, 167), 0.3, q, w)])
    white, inst = sc.white(0.0)
    gt = gt_masks(sc, inst)
    lit = _lit_on_white(sc, white, gt)
    ctx = SegmentContext(["a", "b"], lit, gt, background=None)
    assert object_mask_iou(ClassicalSegmenter().segment(lit, ctx).masks, gt, match="identity").value > 0.95
    out = ClassicalSegmenter().segment(lit[..., [2, 0, 1]], ctx)
    assert any("told apart by position" in n for n in out.notes)
    assert object_mask_iou(out.masks, gt, match="identity").value > 0.95


def test_a_floor_patch_in_no_objects_colour_leaves_colour_to_tell_touching_objects_apart():
    # two touching discs in their own colours and, away from them, a compact patch of the floor
    # the size of a disc brightened into no object's colour (a frame's flicker or a codec leaves
    # such pieces): it is no object drawn in another colour, since every object shows in its own
    # colours, so colour still tells the discs apart; told apart by position instead, the touching
    # discs form one piece and one of them would take the patch
    p, v = syn.uniform(-0.32, 0.8, 0.0)
    q, w = syn.uniform(0.32, 0.8, 0.0)
    sc = syn.Scene(width=192, height=128, background="flat",
                   discs=[syn.Disc("a", 1, (220, 40, 40), 0.32, p, v), syn.Disc("b", 2, (40, 170, 60), 0.32, q, w)])
    ref, inst = sc.render(0.0)
    gt = gt_masks(sc, inst)
    ctx = SegmentContext(["a", "b"], ref, gt, background=sc.plate())
    frame = ref.copy()
    side = int(round(np.sqrt(gt["a"].sum())))
    patch = (slice(100, 100 + side // 2), slice(12, 12 + 2 * side))
    frame[patch] = np.clip(frame[patch].astype(int) + np.array([10, 40, 90]), 0, 255).astype(np.uint8)
    out = ClassicalSegmenter().segment(frame, ctx)
    assert not any("told apart by position" in n for n in out.notes), out.notes
    assert object_mask_iou(out.masks, gt, match="identity").value > 0.95
    assert not out.masks["a"][patch].any() and not out.masks["b"][patch].any()


def _twin_discs(left_z: float, right_z: float, speed: float) -> syn.Scene:
    """Two discs of one colour moving towards each other from x = ∓1 m at heights left_z, right_z."""
    p, v = syn.uniform(-1.0, left_z, speed)
    q, w = syn.uniform(1.0, right_z, -speed)
    return syn.Scene(width=192, height=128, discs=[syn.Disc("left", 1, (30, 160, 40), 0.3, p, v),
                                                    syn.Disc("right", 2, (30, 160, 40), 0.3, q, w)])


def test_lookalike_objects_are_told_apart_by_position():
    sc = _twin_discs(0.6, 0.6, 1.0)
    ref, inst = sc.render(0.0)
    ctx = SegmentContext(["left", "right"], ref, gt_masks(sc, inst), background=sc.plate())
    img, inst2 = sc.render(0.3)
    out = ClassicalSegmenter().segment(img, ctx)
    assert object_mask_iou(out.masks, gt_masks(sc, inst2), match="identity").value > 0.95
    # touching blobs are split in two
    img3, inst3 = sc.render(0.85)
    out3 = ClassicalSegmenter().segment(img3, ctx)
    assert all(m.any() for m in out3.masks.values())


def test_lookalike_objects_take_the_expected_identity():
    # two look-alike discs cross; the previous positions (here: the reference's) would swap their
    # labels, the GT centres expected at the frame's time do not
    sc = _twin_discs(0.6, 1.5, 2.0)
    ref, inst = sc.render(0.0)
    img, inst1 = sc.render(1.0)
    ctx = SegmentContext(["left", "right"], ref, gt_masks(sc, inst), background=sc.plate(), time=1.0)
    by_priors = ClassicalSegmenter().segment(img, ctx)
    assert object_mask_iou(by_priors.masks, gt_masks(sc, inst1), match="identity").value < 0.1
    ctx.expected_at = lambda t: {d.id: tuple(sc.project(d.motion(t))) for d in sc.discs}
    out = ClassicalSegmenter().segment(img, ctx)
    assert out.alike == [["left", "right"]]
    assert object_mask_iou(out.masks, gt_masks(sc, inst1), match="identity").value > 0.95


def test_a_piece_is_split_only_for_objects_expected_in_view():
    from orchard_eval.segment.classical import _assign_by_position

    yy, xx = np.mgrid[:60, :120]
    small = (xx - 40) ** 2 + (yy - 30) ** 2 <= 8 ** 2
    big = (xx - 58) ** 2 + (yy - 30) ** 2 <= 12 ** 2       # touching: one piece
    both = small | big
    seen = _assign_by_position(both, ["a", "b"], {"a": np.array([40.0, 30.0]), "b": np.array([58.0, 30.0])}, 12)
    assert seen["a"].any() and seen["b"].any() and not (seen["a"] & seen["b"]).any()
    # "b" expected out of view: the one body seen is not cut in two for it
    alone = _assign_by_position(big, ["a", "b"], {"a": np.array([56.0, 30.0]), "b": np.array([150.0, 30.0])}, 12)
    assert (alone["a"] == big).all() and not alone["b"].any()
    # "b" expected in view but elsewhere: a piece no larger than one body is one body
    far = {"a": np.array([56.0, 30.0]), "b": np.array([100.0, 30.0])}
    assert not _assign_by_position(big, ["a", "b"], far, 12, split_px=1.25 * big.sum())["b"].any()
    assert _assign_by_position(both, ["a", "b"], far, 12, split_px=1.25 * big.sum())["b"].any()


def test_a_speck_is_no_object_where_every_object_in_view_has_a_sizeable_piece():
    """Two look-alike bodies seen whole, one of them expected (the answer shows another time) nearer
    a speck a codec left beside a label than any body: each object takes one of the bodies, the
    speck none; with one body seen, the speck may be the other (one mostly hidden)."""
    from orchard_eval.segment.classical import _assign_by_position

    yy, xx = np.mgrid[:80, :200]
    left = (xx - 40) ** 2 + (yy - 45) ** 2 <= 12 ** 2
    right = (xx - 90) ** 2 + (yy - 35) ** 2 <= 11 ** 2
    speck = (np.abs(xx - 130) <= 1) & (np.abs(yy - 40) <= 1)
    label = (xx >= 132) & (xx < 170) & (yy >= 30) & (yy < 50)      # unobservable: the speck touches it
    expected = {"a": np.array([100.0, 40.0]), "b": np.array([125.0, 30.0])}
    reach = {"a": 11.0, "b": 11.0}
    got = _assign_by_position(left | right | speck, ["a", "b"], expected, 12, protect=label, reach=reach)
    assert sorted(int(m.sum()) for m in got.values()) == sorted([int(left.sum()), int(right.sum())])
    assert not any((m & speck).any() for m in got.values())
    one = _assign_by_position(right | speck, ["a", "b"], expected, 12, protect=label, reach=reach,
                              split_px=1.25 * right.sum())
    assert (one["a"] == right).all() and (one["b"] == speck).all()


def test_a_left_over_piece_joins_an_object_only_within_its_reach():
    from orchard_eval.segment.classical import _assign_by_position

    yy, xx = np.mgrid[:80, :200]
    a = (xx - 30) ** 2 + (yy - 40) ** 2 <= 10 ** 2
    b = (xx - 70) ** 2 + (yy - 40) ** 2 <= 10 ** 2
    beside = (xx >= 82) & (xx < 86) & (yy >= 34) & (yy < 46)       # a piece of b cut off by a rail
    smear = (xx >= 150) & (xx < 170) & (yy >= 30) & (yy < 35)      # a codec's smear along a third body
    priors = {"a": np.array([30.0, 40.0]), "b": np.array([70.0, 40.0])}
    out = _assign_by_position(a | b | beside | smear, ["a", "b"], priors, 12, reach={"a": 10.0, "b": 10.0})
    assert out["b"][beside].all() and not out["b"][smear].any() and not out["a"][smear].any()
    # without reaches every left-over piece joins the nearest object, as before
    assert _assign_by_position(a | b | smear, ["a", "b"], priors, 12)["b"][smear].all()


def test_an_object_drawn_twice_is_the_copy_nearest_its_expected_place():
    from orchard_eval.segment.classical import _components, _one_body

    yy, xx = np.mgrid[:80, :200]
    here = (xx - 40) ** 2 + (yy - 40) ** 2 <= 10 ** 2
    copy = (xx - 150) ** 2 + (yy - 40) ** 2 <= 11 ** 2            # a little larger
    comps = _components(here | copy, 12)
    assert (_one_body(comps, 10.0, here.shape, np.array([42.0, 40.0])) == here).all()
    assert (_one_body(comps, 10.0, here.shape) == copy).all()      # no expectation: the largest


def test_a_piece_unlike_the_object_is_no_copy_of_it_however_near_its_expected_place():
    # a drawn label's remnant (JPEG leaves one of the answer arrow's colour) as large as half the
    # body, nearer the body's expected place: a copy would look like the object, this one does not
    from orchard_eval.segment.classical import LIKENESS_NATS, _components, _one_body

    yy, xx = np.mgrid[:80, :200]
    body = (xx - 150) ** 2 + (yy - 40) ** 2 <= 11 ** 2
    remnant = (xx - 40) ** 2 + (yy - 40) ** 2 <= 9 ** 2
    comps = _components(body | remnant, 12)
    prior = np.array([42.0, 40.0])
    likeness = lambda piece: -2.0 if (piece & body).any() else -2.0 - 2 * LIKENESS_NATS
    assert (_one_body(comps, 10.0, body.shape, prior, likeness) == body).all()
    assert (_one_body(comps, 10.0, body.shape, prior) == remnant).all()        # position alone
    # copies alike within the margin: position decides, as for an object drawn twice
    alike = lambda piece: -2.0 if (piece & body).any() else -2.0 - 0.5 * LIKENESS_NATS
    assert (_one_body(comps, 10.0, body.shape, prior, alike) == remnant).all()



def test_a_larger_piece_unlike_the_object_is_not_the_object():
    # a reframed answer that shows floor where the plate shows sky: a strip three times the body's
    # size, far less like the object than the body itself, is not it, largest piece though it is
    from orchard_eval.segment.classical import LIKENESS_NATS, _components, _one_body

    yy, xx = np.mgrid[:120, :200]
    body = (xx - 100) ** 2 + (yy - 90) ** 2 <= 12 ** 2
    strip = yy < 8
    comps = _components(body | strip, 12)
    likeness = lambda piece: -2.7 if (piece & body).any() else -2.7 - 2 * LIKENESS_NATS
    assert (_one_body(comps, 10.0, body.shape, np.array([100.0, 60.0]), likeness) == body).all()
    assert (_one_body(comps, 10.0, body.shape, np.array([100.0, 60.0])) == strip).all()   # size alone

@pytest.mark.parametrize("t", [1.56, 1.565])
def test_a_body_leaving_the_frame_is_found_on_its_last_sliver(t):
    # 42 and 23 px of the disc remain inside a 640×360 frame: below the frame's smallest blob (46 px),
    # but the frame's edge hides the rest, as an overlay would, so the sliver is the body
    p, v = syn.uniform(0.0, 0.6, 2.0)
    sc = syn.Scene(width=640, height=360, duration=2.0, discs=[syn.Disc("red", 1, (200, 40, 40), 0.15, p, v)])
    ref, inst0 = sc.render(0.0)
    img, inst = sc.render(t)
    assert 10 < (inst == 1).sum() < 46
    ctx = SegmentContext(["red"], ref, {"red": inst0 == 1}, background=sc.plate())
    out = ClassicalSegmenter().segment(img, ctx)
    found, true = out.masks["red"], inst == 1
    assert (found & true).sum() / (found | true).sum() > 0.75
    # a blob as small away from the edge is still noise
    yy, xx = np.mgrid[:360, :640]
    from orchard_eval.segment.classical import _components
    speck = (np.abs(xx - 300) <= 2) & (np.abs(yy - 100) <= 2)
    edge = (xx >= 635) & (np.abs(yy - 100) <= 2)
    assert [c.sum() for c in _components(speck | edge, 46)] == [edge.sum()]


def test_low_contrast_objects_are_flagged():
    p, v = syn.uniform(0.0, 0.6, 0.0)
    sc = syn.Scene(width=128, height=96, background="flat",
                   discs=[syn.Disc("grey", 1, (156, 156, 152), 0.4, p, v)])
    ref, inst = sc.render(0.0)
    ctx = SegmentContext(["grey"], ref, gt_masks(sc, inst), background=sc.plate())
    out = ClassicalSegmenter().segment(ref, ctx)
    assert out.low_confidence and out.confidence["grey"] < 0.5


def test_context_for_case(tmp_path):
    sc = syn.Scene()
    cid = "UniversalGravitation/FreeFall/000000"
    syn.write_orchard_case(tmp_path, sc, cid)
    case = load_dataset(tmp_path).cases[cid]
    pg = context_for_case(case, "perception_graphic")
    assert pg.on_white and set(pg.reference_masks) == {"ball", "cube"}
    fg = context_for_case(case, "formulation_graphic")
    assert not fg.on_white and fg.background.shape == (64, 96, 3)
    ans = case.image("formulation_graphic")
    out = ClassicalSegmenter().segment(ans, fg)
    ref = case.reference_object_masks("formulation_graphic")
    assert object_mask_iou(out.masks, ref).value > 0.8


def test_answer_arrows_and_labels_are_not_objects(tmp_path):
    sc = syn.Scene(width=192, height=128)
    cid = "UniversalGravitation/FreeFall/000000"
    syn.write_orchard_case(tmp_path, sc, cid)
    case = load_dataset(tmp_path).cases[cid]
    ctx = context_for_case(case, "formulation_graphic")
    ans = case.image("formulation_graphic").copy()
    ref = case.reference_object_masks("formulation_graphic")
    ys, xs = np.nonzero(ref["cube"])
    cx, cy = int(xs.mean()), int(ys.mean())
    cv2.arrowedLine(ans, (cx, cy), (cx + 40, cy - 30), (255, 140, 0), 2, tipLength=0.3)  # arrow from the centre
    cv2.putText(ans, "v = 1.60", (cx + 10, cy - 36), cv2.FONT_HERSHEY_SIMPLEX, 0.35, (255, 140, 0), 1)
    out = ClassicalSegmenter().segment(ans, ctx)
    r = object_mask_iou(out.masks, ref)
    assert r.per_object["cube"] > 0.75 and r.per_object["ball"] > 0.9, r.per_object
