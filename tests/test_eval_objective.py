"""End to end on a synthetic case: canonical packets → segmentation → objective metrics → fusion."""
import pytest

from orchard_eval import synthetic as syn
from orchard_eval.canonical import canonical_answer, canonical_deduction, dense_times
from orchard_eval.cases import load_dataset
from orchard_eval.fusion import OBJECTIVE_ONLY, fuse
from orchard_eval.objective import deduction_metrics, graphic_iou

CID = "UniversalGravitation/FreeFall/000000"


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("e2e")
    sc = syn.Scene(width=192, height=128)
    syn.write_orchard_case(root, sc, CID)
    return root, sc, load_dataset(root, strict=True).cases[CID]


def _score(case, path, protocol="video"):
    pk = canonical_deduction(case, path, protocol)
    dn = canonical_deduction(case, path, protocol, times=dense_times(case)) if protocol == "video" else None
    r = deduction_metrics(case, pk, dense=dn)
    return r, fuse("deduction", None, r.values)


def test_deduction_objective_ranks_physics(setup):
    root, sc, case = setup
    good, fast, frozen = root / "good.mp4", root / "fast.mp4", root / "frozen.mp4"
    syn.deduction_video(good, sc, n_physics=36, size=(256, 160))
    syn.deduction_video(fast, sc, n_physics=36, size=(256, 160), time_scale=1.5)
    syn.deduction_video(frozen, sc, n_physics=36, size=(256, 160), time_scale=1e-4)
    rg, fg_ = _score(case, good)
    rf, ff = _score(case, fast)
    rz, fz = _score(case, frozen)
    assert rg.values["spatiotemporal_iou"] > 0.9 and rg.values["velocity"] > 0.8 and rg.values["psnr"] > 0.9
    for key in ("spatial_iou", "spatiotemporal_iou", "weighted_spatial_iou", "velocity", "psnr", "masked_psnr"):
        assert rg.values[key] > rf.values[key] and rg.values[key] > rz.values[key], key
    assert fg_.mode == OBJECTIVE_ONLY and fg_.score > 0.85 > 0.5 > ff.score > 0


def test_keyframes_missing_timestamp_scores_zero_there(setup, tmp_path):
    root, sc, case = setup
    from PIL import Image

    from orchard_eval.predictions import keyframe_name

    d = tmp_path / "rollout_00"
    d.mkdir()
    for i, t in enumerate(case.timestamps[:-1]):
        Image.fromarray(sc.render(t)[0]).save(d / keyframe_name(i, t))
    r, f = _score(case, d, "image")
    assert r.values["velocity"] is None and r.details["psnr_db"][-1] == 0.0
    assert r.details["psnr_db"][0] > 35  # the GT went through H.264
    assert 0.5 < r.values["spatiotemporal_iou"] < 0.8  # 2 of 3 timestamps right
    assert f.score is not None


def test_graphic_iou(setup, tmp_path):
    root, sc, case = setup
    ans = canonical_answer(root / "cases" / CID / "references" / "formulation_graphic.png", "image", case.frame_size)
    assert graphic_iou(case, "formulation_graphic", ans.image).values["mask_iou"] > 0.95
    wrong = case.image("condition_frame")  # the objects still at their t = 0 places
    assert graphic_iou(case, "formulation_graphic", wrong).values["mask_iou"] < 0.5
    pg = graphic_iou(case, "perception_graphic", case.image("perception_graphic"))
    assert pg.values["mask_iou"] > 0.95 and fuse("perception_graphic", None, pg.values).score > 0.95


def test_apple_case_without_plate_marks_masks_not_applicable(tmp_path):
    sc = syn.Scene()
    cid = "UniversalGravitation/FreeFall/000001"
    syn.write_apple_case(tmp_path, sc, cid)
    case = load_dataset(tmp_path).cases[cid]
    p = tmp_path / "v.mp4"
    syn.deduction_video(p, sc, n_physics=12)
    r, f = _score(case, p)
    assert r.values["psnr"] > 0.8 and r.values["spatial_iou"] is None
    assert any("clean plate" in n for n in r.notes) and f.score is not None
