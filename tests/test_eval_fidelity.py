"""The fidelity benchmark, small: two shipped cases built with `orchard-build`, answers of a dozen
families written as real files (MP4 / PNG) with their truth, scored through `orchard-eval run`'s
code path, reported against ideal values. The targets are those of `benchmarks/bench_fidelity.py`
(docs/evaluation.md, "Fidelity"); the full table holds them on 20 shipped cases."""
import json
from pathlib import Path

import numpy as np
import pytest

from orchard_eval.fidelity import bench
from orchard_eval.fidelity.families import catalogue, frame_plan
from orchard_eval.fidelity.truth import FrameTruth, Truth, load_truth, save_truth, warp_instances

REPO = Path(__file__).resolve().parents[1]
CONFIGS = ("scenes/free_fall/000001.yaml", "scenes/perfectly_elastic_collision/000001.yaml")
FAMILIES = ("ded/retime_0.7x", "ded/reversed", "ded/cf_gravity", "ded/h264_crf28", "ded/gain", "ded/overlay",
            "ded/shake", "ded/zoom", "ded/h264_crf34", "ded/retime_0.7x+crf34", "pg/shift_large", "pg/jpeg75", "pg/recolour",
            "pg/blur",
            "fg/time_early", "fg/jpeg75", "fg/labels_on", "fg/zoom", "ded/cf_background", "fg/cf_background")


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    pytest.importorskip("mujoco")
    from orchard_build.cli import main as build

    root = tmp_path_factory.mktemp("fidelity")
    ds = root / "orchard"
    assert build(["--config", *(str(REPO / c) for c in CONFIGS), "--out", str(ds), "--no-progress"]) == 0
    ids = sorted(e["case_id"] for e in json.loads((ds / "dataset.json").read_text())["cases"])
    fams = [f for f in catalogue() if f.name in FAMILIES]
    rows, skipped = bench.run(ds, ids, root / "work", fams, jobs=1, progress=False, log=lambda s: None)
    return rows, skipped, bench.summarise(rows), root


@pytest.mark.slow
def test_every_family_answers_every_case(measured):
    rows, skipped, _, root = measured
    assert not any(skipped.values()), skipped
    assert {r.family for r in rows} == set(FAMILIES)
    assert all(r.reported is not None and r.ideal is not None for r in rows), \
        [(r.family, r.case_id, r.metric) for r in rows if r.reported is None or r.ideal is None]
    # the answers are real files in the submission layout, with their truth beside them
    assert list((root / "work" / "answers" / "ded__h264_crf28").rglob("rollout_00.mp4"))
    assert list((root / "work" / "answers" / "pg__jpeg75").rglob("rollout_00.png"))


# Misses measured on these two cases, with the bound they must stay under. The F-G answer at
# t* − 0.25 T fits FreeFall/000001's falling cone 1 px off its GT pose (IoU 0.91 against its own GT
# frame; 0.97 when segmented as of the time it really shows), so the F-G physics mean is 0.0058
# here, 0.002 over the 20 cases of bench_fidelity.py. Remove an entry once it meets the target.
KNOWN_MISSES = {"formulation_graphic/physics/mask_iou": 0.008}


@pytest.mark.slow
def test_the_targets_hold(measured):
    """The benchmark's targets, pooled per subtrack and kind (two cases per family are too few for a
    per-family p90): appearance mean |err| ≤ 0.03 and p90 ≤ 0.06, physics mean ≤ 0.005, a
    registered camera change never more than 0.05 below the image-space ideal; ordering ≥ 0.95.
    A known miss (KNOWN_MISSES) must stay within its bound instead."""
    rows, _, summary, _ = measured
    missed = []
    for key, s in summary["kinds"].items():
        sub, kind, metric = key.split("/")
        if kind == "appearance" and (s["mean"] > bench.TARGET_APPEARANCE_MEAN or s["p90"] > bench.TARGET_APPEARANCE_P90):
            missed.append((key, s["mean"], s["p90"]))
        if kind == "physics" and s["mean"] > KNOWN_MISSES.get(key, bench.TARGET_PHYSICS_MEAN):
            missed.append((key, s["mean"]))
        if kind == "camera" and s["below_image"] is not None and s["below_image"] > bench.TARGET_CAMERA_BELOW:
            missed.append((key, s["below_image"]))
    for key, s in summary["metrics"].items():
        if s["ordering"] is not None and s["ordering"] < bench.TARGET_ORDERING:
            missed.append((key, "ordering", s["ordering"]))
    assert not missed, missed


@pytest.mark.slow
def test_physics_errors_are_measured_and_appearance_is_not_charged(measured):
    rows, _, _, _ = measured
    by = {(r.family, r.case_id, r.metric): r for r in rows}
    for (fam, cid, metric), r in by.items():
        if fam in ("ded/retime_0.7x", "ded/reversed") and metric == "spatiotemporal_iou":
            assert r.ideal < 0.9                      # a physics error the truth sees...
            assert abs(r.reported - r.ideal) < 0.02   # ...and the evaluator measures
        if fam in ("ded/h264_crf28", "ded/overlay", "pg/jpeg75", "fg/labels_on"):
            assert abs(r.reported - r.ideal) < 0.07, (fam, cid, metric, r.reported, r.ideal)


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["empty", "noise", "white"])
def test_bad_answers_get_defined_values_and_a_reason(measured, kind):
    from orchard_eval.baselines import encode_video
    from orchard_eval.judges import get_judge
    from orchard_eval.predictions import load_submission
    from orchard_eval.run import Scorer
    from orchard_eval.cases import load_dataset

    _, _, _, root = measured
    ds = load_dataset(root / "orchard")
    cid = sorted(ds.cases)[0]
    case = ds.cases[cid]
    sub = root / f"bad_{kind}"
    path = sub / "cases" / cid / "deduction" / "rollout_00.mp4"
    path.parent.mkdir(parents=True, exist_ok=True)
    (sub / "submission.json").write_text(json.dumps({"model": kind, "protocol": "video", "num_rollouts": 1}))
    w, h = case.frame_size
    n = case.n_gt_frames()
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "noise":
        rng = np.random.default_rng(0)
        encode_video(path, (rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for _ in range(n)))
    else:
        encode_video(path, [np.full((h, w, 3), 255, np.uint8)] * n)
    rec = Scorer(ds, load_submission(sub), get_judge("none")).score(cid, "deduction", 0)
    if kind == "empty":
        assert not rec["valid"] and rec["score"] == 0.0 and rec["error"]["kind"]
    else:
        assert rec["valid"], rec["error"]
        vals = [rec["metrics"][m] for m in ("spatial_iou", "spatiotemporal_iou", "weighted_spatial_iou")]
        assert all(v is not None and 0.0 <= v <= 0.2 for v in vals), vals
        assert rec["notes"]                           # what the segmenter made of it is logged


@pytest.mark.slow
def test_the_exact_look_reader_finds_a_body_where_the_frame_draws_it(measured):
    # a codec family's answer read by a reader that knows each body's exact pixels: on light H.264
    # its masks are the truth's; on a frame that draws the first body 3 px right and 2 px up it finds the
    # body there, to a quarter pixel
    from orchard_eval.canonical import canonical_deduction
    from orchard_eval.cases import load_dataset
    from orchard_eval.fidelity import exact_look
    from orchard_eval.fidelity.bench import answers_dir, truth_path
    from orchard_eval.fidelity.truth import deduction_ideal

    _, _, _, root = measured
    ds = load_dataset(root / "orchard")
    fam = next(f for f in catalogue() if f.name == "ded/h264_crf28")
    assert exact_look.applies(fam)
    assert not exact_look.applies(next(f for f in catalogue() if f.name == "ded/gain"))
    for cid, case in ds.cases.items():
        truth, _ = load_truth(truth_path(root / "work", fam.name, cid))
        pk = canonical_deduction(case, answers_dir(root / "work", fam.name) / "cases" / cid / "deduction"
                                 / "rollout_00.mp4", "video")
        got = exact_look.metrics(case, pk.frames, truth.frames, pk.pred_indices)
        ideal = deduction_ideal(case, truth.frames, pk.pred_indices, pk.n_video_frames)
        assert all(abs(got[m] - ideal[m]) < 0.02 for m in exact_look.METRICS), (cid, got, ideal)
    case = ds.cases[sorted(ds.cases)[0]]
    j = case.n_gt_frames() // 2
    gt, inst, plate = case.gt_frame(j), case.gt_instances(j), case.image("clean_plate")
    first = case.objects[0]
    body = inst == first.instance_id
    drawn = plate.copy()
    drawn[~body] = gt[~body]
    ys, xs = np.nonzero(body)
    drawn[ys - 2, xs + 3] = gt[ys, xs]
    read = exact_look.read_frame(drawn, gt, inst, plate, {first.id: first.instance_id})
    assert np.allclose(read.offsets[first.id], (3.0, -2.0), atol=0.25), read.offsets
    assert np.array_equal(read.masks[first.id][ys - 2, xs + 3], np.ones(len(ys), bool))


def test_frame_plans():
    assert frame_plan(5, 24, None) == [0, 1, 2, 3, 4]
    assert frame_plan(5, 24, ("reverse",)) == [4, 3, 2, 1, 0]
    assert frame_plan(5, 24, ("freeze", 0.5)) == [0, 1, 2, 2, 2]
    assert frame_plan(7, 24, ("drop", 3)) == [0, 1, 2, 4, 5]
    assert frame_plan(5, 24, ("hold", 2)) == [0, 0, 2, 2, 4]


def test_truth_warps_outlines_by_sub_pixel_shifts_and_round_trips(tmp_path):
    inst = np.zeros((40, 60), np.uint8)
    inst[10:20, 10:30] = 3
    shifted = warp_instances(inst, np.array([[1.0, 0, 0.6], [0, 1.0, 0]]), (60, 40))
    assert shifted[15, 10] == 0 and shifted[15, 11] == 3 and shifted[15, 30] == 3 and shifted[15, 31] == 0
    truth = Truth([FrameTruth(inst, inst > 0, {"a": (20.0, 15.0)}), FrameTruth(shifted, None, {"a": None})])
    save_truth(tmp_path / "t.npz", truth, ["a"])
    back, idx = load_truth(tmp_path / "t.npz")
    assert idx == [0, 1] and (back.frames[1].instances == shifted).all()
    assert back.frames[0].centres == {"a": (20.0, 15.0)} and back.frames[1].centres == {"a": None}
    assert back.frames[0].unobservable.sum() == 200 and not back.frames[1].unobservable.any()


def test_statistics():
    rows = [bench.Row("f", "physics", "deduction", "c", "t", "m", rep, ide, ide)
            for rep, ide in ((0.9, 0.9), (0.5, 0.52), (0.1, 0.12), (1.0, 1.0), (0.99, 1.0), (0.98, 1.0))]
    acc, n = bench.ordering_accuracy(rows)
    assert n > 0 and acc == 1.0
    # the three answers tied at 1.0 count once: their order among themselves is noise, not ranking
    assert bench.spearman([r.reported for r in rows], [r.ideal for r in rows]) == pytest.approx(1.0)
    assert bench.spearman([r.reported for r in rows], [r.ideal for r in rows], tie=None) < 1.0


def test_a_half_vanished_answer_shows_the_plate_where_its_truth_has_no_body(tmp_path):
    from orchard_eval import synthetic as syn
    from orchard_eval.cases import load_dataset
    from orchard_eval.fidelity.families import Source, make_answer

    sc = syn.Scene(width=160, height=96, duration=1.0)
    cid = "UniversalGravitation/FreeFall/000000"
    syn.write_orchard_case(tmp_path, sc, cid)
    case = load_dataset(tmp_path).cases[cid]
    fam = next(f for f in catalogue() if f.name == "ded/half_vanished")
    ans = make_answer(fam, case, {"gt": Source(case, case)})
    first = case.objects[0].instance_id
    plate = case.clean_plate()
    n = len(ans.frames)
    late = [k for k in range(n // 2 + 1, n) if (case.gt_instances(k) == first).sum() > 50]
    assert late
    for k in (0, late[0]):
        gt = case.gt_instances(k) == first
        now = ans.truth.frames[k].instances == first
        if k == 0:          # before T/2 the body is whole
            assert (now == gt).all()
            continue
        rows = np.nonzero(gt)[0]
        assert now.sum() < 0.6 * gt.sum() and not now[: int(rows.mean()) - 1].any()
        gone = gt & ~now
        assert (ans.frames[k][gone] == plate[gone]).all()
        # what is left is no whole body: its true centre is the centroid of the part left
        from orchard_eval.metrics import mask_centroid
        assert ans.truth.frames[k].centres[case.objects[0].id] == pytest.approx(mask_centroid(now))


def test_the_size_counterfactuals_keep_the_scene_a_track_rolls_on():
    """The build grows a track's rails with the bodies on it by default; a larger body must not
    bring taller rails (they would hide more of it than the case's scene does), so the edit pins the
    rails at the height the original bodies gave them, as the build computes it (a smaller body
    likewise keeps them)."""
    import copy

    import yaml

    from orchard_build.config import load_materials, resolve_config
    from orchard_build.engines.mujoco_scene import _track_rails
    from orchard_eval.fidelity.counterfactual import edit_shrink, edit_size

    scenes = Path(__file__).resolve().parents[1] / "scenes"
    path = scenes / "circular_motion" / "000008.yaml"
    lib = load_materials(scenes / "materials.yaml")
    original = yaml.safe_load(path.read_text())
    edited = copy.deepcopy(original)
    assert edit_size(edited, {})
    r0 = original["objects"][0]["size"]["radius"]
    assert edited["objects"][0]["size"]["radius"] == pytest.approx(1.1 * r0, abs=1e-4)
    shrunk = copy.deepcopy(original)
    assert edit_shrink(shrunk, {})
    assert shrunk["objects"][0]["size"]["radius"] == pytest.approx(0.9 * r0, abs=1e-4)

    def rails(cfg):
        c = resolve_config(cfg, path, lib)
        return _track_rails(c, c.tracks[0])[1]

    assert rails(edited) == pytest.approx(rails(original), abs=1e-6)
    assert rails(shrunk) == pytest.approx(rails(original), abs=1e-6)
    # without the pin the larger body would have raised them
    unpinned = copy.deepcopy(edited)
    del unpinned["supports"]["tracks"][0]["rail_height"]
    assert rails(unpinned) > rails(original) * 1.05


# Answers measured far from their ideal before the registration searched for the camera globally,
# fell back to the plate's exposure and judged a warp only where it disagrees with the known camera
# (second and third draws of bench_fidelity.py): a zoom onto a bright ramp (InclinedPlane/000004),
# a 92 % window that loses the only horizon of a bare floor (FreeFall/000049), a body filling the
# middle of a checkered floor (AtRest/000018); and an aligned answer whose gain clips the floor
# white, which a warp of a few pixels seemed to explain better than none (ProjectileMotion/000072).
REFRAMED = ("scenes/inclined_plane/000004.yaml", "scenes/free_fall/000049.yaml", "scenes/at_rest/000018.yaml",
            "scenes/projectile_motion/000072.yaml")
REFRAMINGS = ("ded/zoom", "ded/crop_shift", "fg/zoom", "fg/crop_shift", "ded/gain")


@pytest.mark.slow
def test_reframed_and_clipped_answers_score_as_registered(tmp_path):
    pytest.importorskip("mujoco")
    from orchard_build.cli import main as build

    ds = tmp_path / "orchard"
    assert build(["--config", *(str(REPO / c) for c in REFRAMED), "--out", str(ds), "--no-progress"]) == 0
    ids = sorted(e["case_id"] for e in json.loads((ds / "dataset.json").read_text())["cases"])
    fams = [f for f in catalogue() if f.name in REFRAMINGS]
    rows, skipped = bench.run(ds, ids, tmp_path / "work", fams, jobs=1, progress=False, log=lambda s: None)
    assert not any(skipped.values()) and len(rows) == len(ids) * (3 * 4 + 2 * 1)
    below = [(r.family, r.case_id, r.metric, round(r.ideal_image - r.reported, 3)) for r in rows
             if r.family != "ded/gain" and r.ideal_image - r.reported > bench.TARGET_CAMERA_BELOW]
    assert not below, below
    off = [(r.case_id, r.metric, round(r.reported - r.ideal, 3)) for r in rows
           if r.family == "ded/gain" and abs(r.reported - r.ideal) > bench.TARGET_APPEARANCE_MEAN]
    assert not off, off


def test_the_ideal_cannot_place_a_body_a_label_hides_all_but_a_sliver_of():
    from types import SimpleNamespace

    from orchard_eval.fidelity.truth import _hidden_objects

    inst = np.zeros((60, 80), np.int32)
    inst[10:30, 10:30] = 1                              # body a: 400 px
    inst[10:30, 50:70] = 2                              # body b: 400 px
    label = np.zeros((60, 80), bool)
    label[5:35, 5:34] = True                            # over all of a
    label[5:35, 45:68] = True                           # over b but a 2-px strip (40 px)
    case = SimpleNamespace(objects=[SimpleNamespace(id="a", instance_id=1), SimpleNamespace(id="b", instance_id=2)])
    assert _hidden_objects(case, FrameTruth(inst, label)) == {"a"}
    assert _hidden_objects(case, FrameTruth(inst, None)) == set()
