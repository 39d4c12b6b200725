"""Evaluator readers: both layouts into one EvalCase, autodetection, hostile manifests."""
import json
import shutil

import numpy as np
import pytest

from orchard_eval import synthetic as syn
from orchard_eval.cases import CaseFormatError, load_case, load_dataset
from orchard_eval.paths import UnsafePathError, check_relpath, safe_join

ORCH_ID = "UniversalGravitation/FreeFall/000000"
APPLE_ID = "UniversalGravitation/FreeFall/000001"


@pytest.fixture(scope="module")
def scene():
    return syn.Scene()


@pytest.fixture(scope="module")
def orchard_root(tmp_path_factory, scene):
    root = tmp_path_factory.mktemp("orchard")
    syn.write_orchard_case(root, scene, ORCH_ID)
    syn.write_index(root, [ORCH_ID], "orchard")
    return root


@pytest.fixture(scope="module")
def apple_root(tmp_path_factory, scene):
    root = tmp_path_factory.mktemp("apple")
    syn.write_apple_case(root, scene, APPLE_ID)
    syn.write_index(root, [APPLE_ID], "apple-pi-gt")
    return root


def test_orchard_layout_reads_every_field(orchard_root, scene):
    ds = load_dataset(orchard_root, strict=True)
    assert ds.layout == "orchard" and len(ds) == 1 and not ds.problems
    c = ds.cases[ORCH_ID]
    assert (c.task, c.pillar, c.source) == ("free_fall", "UniversalGravitation", "sim")
    assert c.timestamps == (0.125, 0.25, 0.5) and c.target_time == 0.25 and c.physics_duration == 0.5
    assert c.frame_size == (96, 64) and c.gt_fps == 24.0
    assert [o.id for o in c.objects] == ["ball", "cube"] and c.instance_ids == {"ball": 1, "cube": 2}
    assert np.allclose(c.intrinsic, scene.K) and np.allclose(c.extrinsic, scene.E)
    centres = c.image_centres(5 / 24)
    assert set(centres) == {"ball", "cube"}
    for d in scene.discs:
        assert np.allclose(centres[d.id], scene.project(d.motion(5 / 24)), atol=1e-3)
    assert c.formula.correct_letter == "B" and c.formula.substituted.startswith("y(t) = 1.8")
    assert "g = 9.81" in c.annotation_text
    assert {s.id for s in c.target_state} == {"ball", "cube"}
    assert c.n_gt_frames() == scene.n_frames == 13
    # GT frame k equals the rendered frame (H.264 near-lossless)
    rgb, inst = scene.render(5 / 24)
    assert np.abs(c.gt_frame(5).astype(int) - rgb).mean() < 3
    assert np.array_equal(c.gt_instances(5), inst)
    assert c.gt_object_masks(5)["ball"].sum() == (inst == 1).sum()
    for role in ("perception_text", "perception_graphic", "formulation_text", "formulation_graphic",
                 "condition_frame", "annotated_first_frame", "clean_plate"):
        assert c.image(role).shape == (64, 96, 3), role
    assert c.label_map("formulation_graphic").max() == 2
    tr = c.object_tracks()
    assert tr.source == "analytic" and np.allclose(tr.positions["ball"][0], [-0.5, 0, 1.8])
    assert c.gt_index(0.25) == 6 and c.gt_index(99) == 12


def test_apple_layout_reads_the_same_case(apple_root, scene):
    ds = load_dataset(apple_root, strict=True)
    assert ds.layout == "apple-pi-gt"
    c = ds.cases[APPLE_ID]
    assert (c.task, c.source, c.layout) == ("free_fall", "sim", "apple-pi-gt")
    assert [o.id for o in c.objects] == ["ball", "cube"]  # INVALID and Ground are not objects
    assert c.timestamps == (0.125, 0.25, 0.5) and c.frame_size == (96, 64)
    assert c.n_gt_frames() == 13 and c.formula.correct_formula.startswith("y(t)")
    rgb, inst = scene.render(5 / 24)
    assert np.array_equal(c.gt_frame(5), rgb)
    assert np.array_equal(c.gt_instances(5), inst)
    assert c.image("perception_graphic").shape == (64, 96, 3)
    assert c.image("formulation_text") is None and not c.has("clean_plate")
    assert c.label_map("formulation_graphic").max() == 2
    tr = c.object_tracks()
    # visible-surface centroid of a disc at depth 5 m is its centre (up to pixelisation)
    assert np.allclose(tr.positions["ball"][6], scene.discs[0].motion(6 / 24), atol=0.05)
    assert np.allclose(tr.velocities["cube"][3], [1.6, 0, 0])


def test_apple_real_case_with_gt_video(tmp_path, scene):
    syn.write_apple_case(tmp_path, scene, "NewtonsFirstLaw/AtRest/000002", is_real=True, gt_as_video=True)
    c = load_dataset(tmp_path, strict=True).cases["NewtonsFirstLaw/AtRest/000002"]
    assert c.source == "real" and c.task == "at_rest" and c.pillar == "NewtonsFirstLaw"
    assert [o.id for o in c.objects] == ["object_1", "object_2"]
    # the GT video already holds frame 0: 13 frames, not 14
    assert c.n_gt_frames() == 13
    assert c.object_tracks() is None


def test_autodetect_without_index_and_single_case(orchard_root, apple_root, tmp_path):
    both = tmp_path / "mixed"
    shutil.copytree(orchard_root / "cases", both / "cases")
    ds = load_dataset(both)
    assert list(ds.cases) == [ORCH_ID] and ds.layout == "orchard"
    one = load_dataset(apple_root / "cases" / APPLE_ID)
    assert list(one.cases) == [APPLE_ID]
    assert load_case(orchard_root / "cases" / ORCH_ID).layout == "orchard"


@pytest.mark.parametrize("bad", ["../outside.png", "/etc/passwd", "a/../../b", "C:/x", "a\\b", "", "./.", 3])
def test_hostile_paths_are_refused(bad):
    with pytest.raises(UnsafePathError):
        check_relpath(bad)


def test_symlink_escape_is_refused(tmp_path):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "link").symlink_to(tmp_path)
    with pytest.raises(UnsafePathError):
        safe_join(tmp_path / "base", "link/secret")


def test_hostile_manifests(orchard_root, apple_root, tmp_path):
    # case.json artifact escaping the case directory
    root = tmp_path / "o"
    shutil.copytree(orchard_root, root)
    cj = root / "cases" / ORCH_ID / "case.json"
    doc = json.loads(cj.read_text())
    doc["artifacts"]["video"] = "../../../../../../etc/passwd"
    cj.write_text(json.dumps(doc))
    with pytest.raises(CaseFormatError):
        load_dataset(root, strict=True)
    ds = load_dataset(root)
    assert not ds.cases and len(ds.problems) == 1
    # dataset.json with an absolute case path
    idx = json.loads((orchard_root / "dataset.json").read_text())
    idx["cases"][0]["path"] = "/tmp"
    (root / "dataset.json").write_text(json.dumps(idx))
    with pytest.raises(CaseFormatError):
        load_dataset(root)
    # metadata.json with '..'
    root2 = tmp_path / "a"
    shutil.copytree(apple_root, root2)
    mj = root2 / "cases" / APPLE_ID / "metadata.json"
    meta = json.loads(mj.read_text())
    meta["gt_frames_dir"] = "../../x"
    mj.write_text(json.dumps(meta))
    with pytest.raises(CaseFormatError):
        load_dataset(root2, strict=True)


def test_case_id_mismatch_and_broken_json(orchard_root, tmp_path):
    root = tmp_path / "o"
    shutil.copytree(orchard_root, root)
    idx = json.loads((root / "dataset.json").read_text())
    idx["cases"][0]["case_id"] = "UniversalGravitation/FreeFall/000099"
    (root / "dataset.json").write_text(json.dumps(idx))
    ds = load_dataset(root)
    assert not ds.cases and "index says" in ds.problems[0]
    (root / "cases" / ORCH_ID / "case.json").write_text("{not json")
    with pytest.raises(CaseFormatError):
        load_case(root / "cases" / ORCH_ID)


def test_first_map_reads_frame_zero_of_a_stack_without_the_rest(tmp_path):
    from orchard_eval.cases import CaseFormatError
    from orchard_eval.readers._common import first_map

    stack = np.random.default_rng(1).random((5, 7, 9)).astype(np.float32)
    np.savez_compressed(tmp_path / "depth.npz", maps=stack)
    assert np.array_equal(first_map(tmp_path / "depth.npz"), stack[0])
    assert first_map(tmp_path / "absent.npz") is None
    np.savez_compressed(tmp_path / "flat.npz", maps=stack[0])
    (tmp_path / "broken.npz").write_bytes((tmp_path / "depth.npz").read_bytes()[:100])
    for bad in ("flat.npz", "broken.npz"):
        with pytest.raises(CaseFormatError):
            first_map(tmp_path / bad)
    with pytest.raises(CaseFormatError):
        first_map(tmp_path / "depth.npz", key="other")
