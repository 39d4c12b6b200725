"""Prediction layout validation and canonicalisation / time alignment (App. D)."""
import json
import shutil

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from PIL import Image

from orchard_eval import synthetic as syn
from orchard_eval.canonical import (canonical_answer, canonical_deduction, dense_times, gt_deduction, gt_index,
                                    physical_index, published_index)
from orchard_eval.cases import SUBTRACKS, load_dataset
from orchard_eval.media import MAX_SIDE, MediaError, probe_image, read_image, resize_mask, resize_rgb
from orchard_eval.predictions import (keyframe_name, parse_keyframe_name, rollout_path,
                                      load_submission, validate_predictions)

CID = "UniversalGravitation/FreeFall/000000"


@pytest.fixture(scope="module")
def scene():
    return syn.Scene()


@pytest.fixture(scope="module")
def dataset(tmp_path_factory, scene):
    root = tmp_path_factory.mktemp("gt")
    syn.write_orchard_case(root, scene, CID)
    syn.write_index(root, [CID], "orchard")
    return load_dataset(root, strict=True)


def _video_submission(root, scene, case):
    syn.write_submission(root, "video")
    sub = load_submission(root)
    start = case.image("annotated_first_frame")
    for st_ in SUBTRACKS:
        for r in range(3):
            p = rollout_path(sub, CID, st_, r)
            if st_ == "deduction":
                syn.deduction_video(p, scene, n_physics=2 * 12, size=(128, 80))
            else:
                ref = {"perception_text": "perception_text", "perception_graphic": "perception_graphic",
                       "formulation_text": "formulation_text", "formulation_graphic": "formulation_graphic"}[st_]
                syn.answer_video(p, case.image(ref), start, n=4)
    return sub


@pytest.fixture(scope="module")
def video_preds(tmp_path_factory, scene, dataset):
    root = tmp_path_factory.mktemp("pred_video")
    _video_submission(root, scene, dataset.cases[CID])
    return root


def test_complete_video_submission_validates(dataset, video_preds):
    rep = validate_predictions(dataset, video_preds)
    assert rep.ok, [str(i) for i in rep.issues]
    assert rep.expected == rep.usable == 15


def test_broken_files_are_reported_never_raised(dataset, video_preds, tmp_path):
    root = tmp_path / "p"
    shutil.copytree(video_preds, root)
    d = root / "cases" / CID
    (d / "perception_text" / "rollout_00.mp4").unlink()                              # missing
    (d / "perception_text" / "rollout_01.mp4").write_bytes(b"")                      # zero bytes
    (d / "perception_graphic" / "rollout_00.mp4").write_bytes(b"\x00\x00\x00\x18ftypisom" + b"\x00" * 64)  # garbage
    full = (d / "deduction" / "rollout_00.mp4").read_bytes()
    (d / "deduction" / "rollout_01.mp4").write_bytes(full[: len(full) * 2 // 3])     # truncated
    Image.new("RGB", (8, 8), "white").save(d / "formulation_text" / "rollout_02.mp4", format="PNG")  # mislabelled
    from orchard_eval.media import write_video

    write_video(d / "deduction" / "rollout_02.mp4", [np.zeros((64, 96, 3), np.uint8)])  # condition frame only
    (root / "cases" / "MultiLaw" / "Composition" / "000123" / "deduction").mkdir(parents=True)  # unknown case
    rep = validate_predictions(dataset, root)
    kinds = {(i.subtrack, i.rollout, i.kind) for i in rep.issues}
    assert ("perception_text", 0, "missing") in kinds
    assert ("perception_text", 1, "empty") in kinds
    assert ("perception_graphic", 0, "undecodable") in kinds
    assert ("formulation_text", 2, "mislabelled") in kinds
    assert ("deduction", 2, "no_frames") in kinds
    assert any(i.kind == "unknown_case" and i.case_id == "MultiLaw/Composition/000123" for i in rep.issues)
    trunc = [i for i in rep.issues if i.subtrack == "deduction" and i.rollout == 1]
    assert trunc and all(i.kind in ("truncated", "undecodable", "no_frames") for i in trunc)
    assert not rep.ok and rep.usable < rep.expected
    json.dumps(rep.to_dict())


def test_submission_missing_or_invalid(dataset, tmp_path):
    rep = validate_predictions(dataset, tmp_path)
    assert not rep.ok and rep.issues[0].kind == "submission"
    (tmp_path / "submission.json").write_text(json.dumps({"model": "m", "protocol": "audio", "num_rollouts": 3}))
    assert validate_predictions(dataset, tmp_path).issues[0].kind == "submission"


def test_oversized_png_refused_from_header(tmp_path):
    # a PNG header claiming 9000 × 10 px: refused before any pixel is decoded
    p = tmp_path / "big.png"
    Image.new("L", (MAX_SIDE + 1, 2)).save(p)
    with pytest.raises(MediaError) as e:
        probe_image(p)
    assert e.value.kind == "oversized"
    p2 = tmp_path / "mp.png"
    Image.new("1", (8000, 7000)).save(p2)  # 56 MP, within 8192 a side
    with pytest.raises(MediaError) as e:
        read_image(p2)
    assert e.value.kind == "oversized"


def test_image_protocol_keyframes(dataset, scene, tmp_path):
    case = dataset.cases[CID]
    syn.write_submission(tmp_path, "image")
    sub = load_submission(tmp_path)
    for st_ in SUBTRACKS[:4]:
        for r in range(3):
            p = rollout_path(sub, CID, st_, r)
            p.parent.mkdir(parents=True, exist_ok=True)
            Image.fromarray(case.image("perception_graphic")).save(p)
    for r in range(3):
        d = rollout_path(sub, CID, "deduction", r)
        d.mkdir(parents=True)
        for i, t in enumerate(case.timestamps):
            Image.fromarray(scene.render(t)[0]).save(d / keyframe_name(i, t))
    assert validate_predictions(dataset, tmp_path).ok
    d0 = rollout_path(sub, CID, "deduction", 0)
    (d0 / keyframe_name(1, 0.25)).rename(d0 / keyframe_name(7, 0.25))         # right time, wrong index
    (d0 / keyframe_name(2, 0.5)).unlink()                                       # missing
    Image.new("RGB", (4, 4)).save(d0 / keyframe_name(3, 0.4))                   # not a timestamp of the case
    rep = validate_predictions(dataset, tmp_path)
    kinds = {i.kind for i in rep.issues if i.rollout == 0}
    assert {"mislabelled", "missing_keyframe", "unexpected_keyframe"} <= kinds
    pkt = canonical_deduction(case, d0, "image")
    assert pkt.ok and pkt.missing == [2]
    assert np.array_equal(pkt.frames[1], scene.render(0.25)[0])


def test_keyframe_names():
    assert keyframe_name(0, 0.5) == "frame_000_t0.500s.png"
    assert parse_keyframe_name("frame_012_t1.250s.png") == (12, 1.25)
    assert parse_keyframe_name("frame_1_t1s.jpg") is None


# ------------------------------------------------------------------------------------------------
# Alignment rules
# ------------------------------------------------------------------------------------------------
def test_paper_example_d2():
    # 192 generated frames read as a 4 s trajectory: frame 96 at t = 2 s; GT at 30 fps: frame 60
    assert physical_index(2.0, 192, 4.0) == 96
    assert gt_index(2.0, 30, 121) == 60


@settings(max_examples=200, deadline=None)
@given(fps=st.sampled_from([24, 30, 25, 12]), T=st.sampled_from([0.5, 1.0, 2.0, 3.5, 5.0]))
def test_physical_and_published_forms_agree_on_the_grid(fps, T):
    n = int(round(T * fps))  # a prediction at the GT's own rate
    for j in range(1, n + 1):
        assert physical_index(j / fps, n, T) == published_index(j - 1, fps, n, T) == j


@settings(max_examples=200, deadline=None)
@given(fps=st.sampled_from([24, 30]), T=st.sampled_from([1.0, 2.0, 5.0]), n=st.integers(2, 400))
def test_forms_differ_at_most_by_the_published_shift(fps, T, n):
    r = n / (T * fps)  # prediction frames per GT frame
    for j in range(1, int(round(T * fps)) + 1):
        a = physical_index(j / fps, n, T)
        b = published_index(j - 1, fps, n, T)
        assert 1 <= b <= n and 0 <= a <= n
        assert abs(a - b) <= int(np.ceil(r)) + 1


def test_python_rounding_is_used():
    # 2.5 rounds to 2 (half to even) in both forms
    assert physical_index(0.25, 10, 1.0) == 2
    assert published_index(5, 20, 10, 1.0) == 1 + 2


def test_video_deduction_alignment_ignores_container_fps(dataset, scene, tmp_path):
    case = dataset.cases[CID]
    p = tmp_path / "d.mp4"
    syn.deduction_video(p, scene, n_physics=36, size=(128, 80), fps=7)  # 3× the GT rate, odd fps, other size
    pkt = canonical_deduction(case, p, "video")
    assert pkt.ok and pkt.n_video_frames == 37
    assert pkt.pred_indices == [9, 18, 36]  # t·N/T for t in (0.125, 0.25, 0.5)
    gt = gt_deduction(case)
    assert gt.indices == [3, 6, 12]
    for f, g in zip(pkt.frames, gt.frames):
        assert f.shape == g.shape == (64, 96, 3)
        assert np.abs(f.astype(int) - g.astype(int)).mean() < 12
    pub = canonical_deduction(case, p, "video", rule="published")
    assert pub.pred_indices == [1 + round(2 / 24 * 72), 1 + round(5 / 24 * 72), 1 + min(round(11 / 24 * 72), 35)]
    assert len(dense_times(case)) == 12


def test_deduction_degenerate_videos(dataset, scene, tmp_path):
    case = dataset.cases[CID]
    one = tmp_path / "one.mp4"
    from orchard_eval.media import write_video

    write_video(one, [scene.render(0)[0]])
    pkt = canonical_deduction(case, one, "video")
    assert not pkt.ok and pkt.error_kind == "no_frames"
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video")
    pkt = canonical_deduction(case, bad, "video")
    assert not pkt.ok and pkt.error_kind == "undecodable"
    assert not canonical_deduction(case, tmp_path / "nope", "image").ok


def test_answer_is_last_decodable_frame_resized(dataset, tmp_path):
    case = dataset.cases[CID]
    p = tmp_path / "a.mp4"
    final = np.zeros((80, 128, 3), np.uint8)
    final[:, :64] = 255
    syn.answer_video(p, final, np.full_like(final, 90), n=5)
    ans = canonical_answer(p, "video", case.frame_size)
    assert ans.ok and ans.image.shape == (64, 96, 3) and ans.source_size == (128, 80) and ans.n_frames == 5
    assert ans.image[:, :40].mean() > 240 and ans.image[:, 56:].mean() < 15
    bad = canonical_answer(tmp_path / "missing.png", "image", case.frame_size)
    assert not bad.ok and bad.error_kind == "missing"


def test_resize_rules():
    m = np.array([[0, 1], [2, 3]], np.int32)
    r = resize_mask(m, (4, 4))
    assert r.dtype == np.int32 and set(np.unique(r)) == {0, 1, 2, 3} and (r[:2, :2] == 0).all()
    assert resize_mask(resize_mask(m, (6, 6)), (2, 2)).tolist() == m.tolist()
    img = np.zeros((10, 20, 3), np.uint8)
    assert resize_rgb(img, (7, 5)).shape == (5, 7, 3)
