"""Export to the published Apple-PI-GT layout: schema-valid, accepted by the published tools (their
manifest values and the rules of their `validate-gt`, checked here independently of the exporter's own
check), read back by the evaluator with the same values as the Orchard layout, and baseline
predictions for it in the layout their `validate-predictions` expects."""
import json
import shutil
import zipfile

import cv2
import numpy as np
import pytest

from orchard_build.build import build
from orchard_build.cli import main as cli
from orchard_build.export_apple_pi import case_problems, manifest_problems
from orchard_build.schemas import iter_errors
from orchard_eval.cases import load_dataset
from orchard_eval.cli import main as eval_cli
from tests.conftest import FIXTURES, SCENES

pytestmark = pytest.mark.slow
PICKS = ["perfectly_elastic_collision/000000.yaml", "inclined_plane/000001.yaml", "composition/000000.yaml"]


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    src = tmp_path_factory.mktemp("orchard")
    report = build([FIXTURES / p for p in PICKS], SCENES / "materials.yaml", src, progress=False)
    assert not report.failed, report.failed
    out = tmp_path_factory.mktemp("apple_pi")
    assert cli(["export", str(src), "--out", str(out), "--no-progress"]) == 0
    return src, out


def test_export_validates(both):
    _, out = both
    index = json.loads((out / "dataset.json").read_text())
    assert list(iter_errors(index, "dataset.schema.json")) == [] and len(index["cases"]) == len(PICKS)
    for entry in index["cases"]:
        meta = json.loads((out / entry["path"] / "metadata.json").read_text())
        assert list(iter_errors(meta, "eval_apple_pi_metadata.schema.json")) == []
        for sub in ("initial_state", "instantaneous_velocity", "rgb", "instance_segmentation", "mask", "depth",
                    "velocity", "camera_parameters"):
            assert (out / entry["path"] / sub).is_dir(), sub
        assert meta["gt_video"] is None and meta["gt_total_frames"] == len(list((out / entry["path"] / "rgb").glob("*.png")))


def test_reader_round_trip(both):
    src, out = both
    ours = load_dataset(src, strict=True)
    theirs = load_dataset(out, strict=True)
    assert sorted(c.case_id for c in ours) == sorted(c.case_id for c in theirs)
    by_id = {c.case_id: c for c in theirs}
    for a in ours:
        b = by_id[a.case_id]
        assert (a.task, a.pillar, a.source) == (b.task, b.pillar, b.source)
        assert a.gt_fps == b.gt_fps and a.physics_duration == b.physics_duration and a.target_time == b.target_time
        assert a.timestamps == b.timestamps and a.frame_size == b.frame_size
        assert [(o.id, o.instance_id) for o in a.objects] == [(o.id, o.instance_id) for o in b.objects]
        # the published metadata lists bare formulas (its prompt builder adds the letters)
        assert [c.split(". ", 1)[1] for c in a.formula.choices] == list(b.formula.choices)
        assert a.formula.correct_letter == b.formula.correct_letter
        assert not any(c[:3] in ("A. ", "B. ", "C. ", "D. ") for c in b.formula.choices)
        assert np.allclose(a.intrinsic, b.intrinsic) and np.allclose(a.extrinsic, b.extrinsic)
        n = a.n_gt_frames()
        assert b.n_gt_frames() == n
        fa, fb = a.gt_frames(range(1, n)), b.gt_frames(range(1, n))
        assert all(np.array_equal(fa[k], fb[k]) for k in range(1, n))
        for k in (0, n // 2, n - 1):
            assert np.array_equal(a.gt_instances(k), b.gt_instances(k))
        for role in ("perception_text", "perception_graphic", "formulation_graphic", "annotated_first_frame"):
            assert np.array_equal(a.image(role), b.image(role)), role


def test_pixel_velocities_of_a_rolling_ball(both):
    """Exported velocity maps: v + ω × (p − c); at the contact point a rolling ball is at rest."""
    src, out = both
    case = out / "cases" / "UniversalGravitation" / "InclinedPlane" / "000001"
    vel = np.load(case / "velocity" / "maps.npz")["maps"]
    inst = np.load(case / "instance_segmentation" / "maps.npz")["maps"]
    k = vel.shape[0] - 1
    v = vel[k][inst[k] == 1]
    assert v.shape[0] > 50
    speeds = np.linalg.norm(v, axis=1)
    states = np.load(src / "cases" / "UniversalGravitation" / "InclinedPlane" / "000001" / "gt" / "states.npz")
    centre_speed = np.linalg.norm(states["engine/ball/linear_velocity"][k])
    # the visible hemisphere moves between ~0 (near the contact) and ~2 v (top); the mean is near v
    assert 0.6 * centre_speed < speeds.mean() < 1.6 * centre_speed and speeds.max() > 1.3 * centre_speed


# -- what the published tools accept (docs/GT_FORMAT.md and apple_pi/data/{dataset,validation}.py of the
#    release, restated here as plain rules) ------------------------------------------------------------
def _maps_shape(path):
    with zipfile.ZipFile(path) as zf:
        assert "maps.npy" in zf.namelist(), path
        with zf.open("maps.npy") as fh:
            version = np.lib.format.read_magic(fh)
            shape, _, _ = (np.lib.format.read_array_header_1_0 if version[0] == 1
                           else np.lib.format.read_array_header_2_0)(fh)
    return shape


def test_manifest_is_the_published_one(both):
    src, out = both
    index = json.loads((out / "dataset.json").read_text())
    # the published loader refuses any other name or rollout count; version and prompt version of release 1.0
    assert (index["name"], index["version"], index["prompt_version"], index["num_rollouts"]) == ("Apple-PI", "1.0",
                                                                                                "1.0", 3)
    for entry in index["cases"]:
        assert entry["path"] == "cases/" + entry["case_id"] and entry["split"] == "test"
    # our provenance rides along in an extra key
    assert index["orchard"]["tool"] == "orchard-build" and index["orchard"]["source"]["name"] == json.loads(
        (src / "dataset.json").read_text())["name"]
    assert manifest_problems(index) == []


def test_layout_follows_the_published_validation_rules(both):
    _, out = both
    for entry in json.loads((out / "dataset.json").read_text())["cases"]:
        case = out / entry["path"]
        meta = json.loads((case / "metadata.json").read_text())
        assert meta["schema_version"] == "1.0" and meta["is_realworld"] is False
        for key in ("input_image", "clean_first_frame", "gt_frames_dir", "annotations_only_reference",
                    "objects_only_reference", "future_state_reference"):
            assert (case / meta[key]).exists(), key
        for rel in ("initial_state/rgb_0000.png", "initial_state/instance_segmentation_0000.npy",
                    "initial_state/mask_0000.npy", "initial_state/instance_segmentation_mapping_0000.json",
                    "instantaneous_velocity/mask.npy", "instantaneous_velocity/mapping.json"):
            assert (case / rel).is_file(), rel
        inst = _maps_shape(case / "instance_segmentation" / "maps.npz")
        assert len(inst) == 3 and _maps_shape(case / "mask" / "maps.npz") == inst
        assert _maps_shape(case / "depth" / "maps.npz") == inst
        assert _maps_shape(case / "velocity" / "maps.npz") == (*inst, 3)
        cams = sorted((case / "camera_parameters").glob("*.json"))
        assert len(cams) == inst[0] == meta["gt_total_frames"] == len(list((case / "rgb").glob("*.png")))
        cam = json.loads(cams[0].read_text())
        assert np.shape(cam["intrinsic"]) == (3, 3) and np.shape(cam["extrinsic"]) == (3, 4)
        assert len(meta["formula_info"]["choices"]) == 4 and meta["formula_info"]["correct_letter"] in "ABCD"
        assert meta["target_time"] >= 0
        assert all(0 < t <= meta["physics_duration"] for t in meta["deduction_timestamps"])
        assert case_problems(case) == []


def test_the_exporters_check_finds_what_the_published_tools_refuse(both, tmp_path):
    _, out = both
    good = next((out / "cases").glob("*/*/*"))
    assert case_problems(good) == []

    def broken(name, edit):
        d = tmp_path / name
        shutil.copytree(good, d)
        edit(d)
        return " ".join(case_problems(d))

    def meta_edit(**changes):
        def edit(d):
            meta = json.loads((d / "metadata.json").read_text())
            meta.update(changes)
            (d / "metadata.json").write_text(json.dumps(meta))
        return edit

    meta = json.loads((good / "metadata.json").read_text())
    T = meta["physics_duration"]
    assert "instantaneous_velocity/mask.npy" in broken("mask", lambda d: (d / "instantaneous_velocity" / "mask.npy").unlink())
    assert "mapping.json" in broken("mapping", lambda d: (d / "instantaneous_velocity" / "mapping.json").unlink())
    assert "objects-only reference" in broken("ref", lambda d: (d / meta["objects_only_reference"]).unlink())
    assert "deduction_timestamps" in broken("late", meta_edit(deduction_timestamps=[T / 2, T + 0.5]))
    assert "four formula choices" in broken("choices", meta_edit(formula_info=dict(meta["formula_info"],
                                                                                   choices=["a", "b", "c"])))
    assert "camera JSON" in broken("camera", lambda d: shutil.rmtree(d / "camera_parameters"))

    def rekey(d):
        np.savez(d / "mask" / "maps.npz", masks=np.zeros((2, 4, 4), np.uint8))
    assert "key 'maps'" in broken("key", rekey)

    def flat_velocity(d):
        np.savez(d / "velocity" / "maps.npz", maps=np.zeros((2, 4, 4), np.float32))
    assert "velocity/maps.npz" in broken("velocity", flat_velocity)

    index = json.loads((out / "dataset.json").read_text())
    assert any("name" in p for p in manifest_problems(dict(index, name="orchard")))
    assert any("num_rollouts" in p for p in manifest_problems(dict(index, num_rollouts=2)))


def test_reader_reads_both_manifest_names(both, tmp_path):
    """Our reader takes the published name and the one older exports wrote."""
    _, out = both
    old = tmp_path / "old_export"
    shutil.copytree(out, old)
    index = json.loads((old / "dataset.json").read_text())
    index.update(name="orchard", version="0.1.0", prompt_version="orchard-prompts-v1")
    index.pop("orchard")
    (old / "dataset.json").write_text(json.dumps(index))
    a, b = load_dataset(out, strict=True), load_dataset(old, strict=True)
    assert (a.name, a.layout, a.prompt_version) == ("Apple-PI", "apple-pi-gt", "1.0")
    assert (b.name, b.layout) == ("orchard", "apple-pi-gt")
    assert sorted(a.cases) == sorted(b.cases) and len(a.cases) == len(PICKS)


@pytest.mark.parametrize("protocol", ["video", "image"])
def test_baseline_predictions_follow_the_published_layout(both, tmp_path, protocol):
    """What the published validate-predictions checks: submission.json with num_rollouts 3, and per case ×
    subtrack × rollout a video with frames (video), a readable PNG, or a keyframe directory holding
    frame_III_tS.SSSs.png for every deduction timestamp of the metadata (image)."""
    _, out = both
    pred = tmp_path / protocol
    assert eval_cli(["baseline", "--kind", "static", "--cases", str(out), "--out", str(pred),
                     "--protocol", protocol]) == 0
    sub = json.loads((pred / "submission.json").read_text())
    assert sub["num_rollouts"] == 3 and sub["protocol"] == protocol and sub["model"]
    assert sub["prompt_version"] == "1.0"
    for entry in json.loads((out / "dataset.json").read_text())["cases"]:
        meta = json.loads((out / entry["path"] / "metadata.json").read_text())
        for st in ("perception_text", "perception_graphic", "formulation_text", "formulation_graphic", "deduction"):
            for r in range(3):
                base = pred / "cases" / entry["case_id"] / st
                if protocol == "video":
                    cap = cv2.VideoCapture(str(base / f"rollout_{r:02d}.mp4"))
                    assert cap.isOpened() and int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) > 0, (st, r)
                    cap.release()
                elif st != "deduction":
                    assert cv2.imread(str(base / f"rollout_{r:02d}.png"), cv2.IMREAD_COLOR) is not None, (st, r)
                else:
                    for i, t in enumerate(meta["deduction_timestamps"]):
                        assert (base / f"rollout_{r:02d}" / f"frame_{i:03d}_t{t:.3f}s.png").is_file(), (r, i, t)
