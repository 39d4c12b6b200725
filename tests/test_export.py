"""Export to the published Apple-PI-GT layout: schema-valid, and read back by the evaluator with the
same values as the Orchard layout."""
import json

import numpy as np
import pytest

from orchard_build.build import build
from orchard_build.cli import main as cli
from orchard_build.schemas import iter_errors
from orchard_eval.cases import load_dataset
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
        assert a.formula.choices == b.formula.choices and a.formula.correct_letter == b.formula.correct_letter
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
