"""Oracle calibration on GENERATED cases (the shipped suite's sampler and materials), built once per
session with `orchard-build generate` + `orchard-build --config`: the oracle (the case's own reference
artifacts and GT video) through `orchard-eval run --judge none`, and the static / blank baselines.

The target is oracle ≥ 0.98 on every objective metric of every case; these generated cases reach it
(last measured: P-G ≥ 0.996, F-G ≥ 0.984, Deduction IoUs ≥ 0.991, velocity ≥ 0.992). On the 400
shipped cases the weight-free segmenter reaches it on 397 (see docs/evaluation.md, "Calibration"):
a contact band under a resting base, low contrast and a rail in contact still bias the silhouette fit
by a few tenths of a pixel on three of them. The floors guard the margins of the shipped suite's misses.
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from calibration_helpers import at_rest, rollout0_metrics

from orchard_eval.cli import main

REPO = Path(__file__).resolve().parents[1]
# tasks with a plain floor, a support and two objects; each case builds in ≈ 5–10 s
TASKS = ("free_fall", "uniform_linear_motion", "perfectly_elastic_collision", "projectile_motion")
COUNT, SEED = 2, 3
IOUS = ("spatial_iou", "spatiotemporal_iou", "weighted_spatial_iou")
# floors every case must keep even where a change costs it the 0.98 target (its message then names
# each metric; the shipped suite's worst values: F-G 0.980, Deduction IoUs 0.968, velocity 0.977)
FLOORS = {"perception_graphic": {"mask_iou": 0.98},
          "formulation_graphic": {"mask_iou": 0.97},
          "deduction": {"psnr": 0.98, "masked_psnr": 0.98, "spatial_iou": 0.97, "spatiotemporal_iou": 0.97,
                        "weighted_spatial_iou": 0.97, "velocity": 0.95}}


def _cli(module: str) -> list[str]:
    exe = shutil.which(module.replace("_", "-").replace(".cli", ""))
    return [exe] if exe else [sys.executable, "-c", f"import sys; from {module} import main; sys.exit(main())"]


@pytest.fixture(scope="session")
def generated(tmp_path_factory):
    pytest.importorskip("mujoco")
    root = tmp_path_factory.mktemp("oracle_cal")
    scenes, ds = root / "scenes", root / "orchard"
    env = dict(os.environ, ORCHARD_NO_PROGRESS="1")
    build = _cli("orchard_build.cli")
    for t in TASKS:
        subprocess.run(build + ["generate", "--task", t, "--count", str(COUNT), "--seed", str(SEED),
                                "--out", str(scenes / t)], env=env, cwd=REPO, check=True, capture_output=True)
    configs = sorted(str(c) for c in scenes.glob("*/*.yaml"))
    proc = subprocess.run(build + ["--config", *configs, "--out", str(ds), "--jobs", "2", "--no-progress"],
                          env=env, cwd=REPO, capture_output=True, text=True, timeout=600)
    if not (ds / "dataset.json").is_file() or not json.loads((ds / "dataset.json").read_text())["cases"]:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        pytest.fail(f"orchard-build rendered no case: {tail[0][:300]}")
    out = {}
    for kind in ("oracle", "static", "blank"):
        pred = root / f"pred_{kind}"
        assert main(["baseline", "--kind", kind, "--cases", str(ds), "--out", str(pred)]) == 0
        res = root / "results" / kind
        assert main(["run", "--judge", "none", "--cases", str(ds), "--predictions", str(pred), "--out", str(res),
                     "--jobs", "2", "--no-progress"]) == 0
        out[kind] = res
    return ds, out


def test_oracle_floors(generated):
    _, res = generated
    table = {}
    for st, floors in FLOORS.items():
        got = rollout0_metrics(res["oracle"], st)
        assert got, st
        for cid, m in got.items():
            table.setdefault(cid, {}).update({f"{st[:3]}.{k}": v for k, v in m.items()})
            for k, lo in floors.items():
                assert m.get(k) is None or m[k] >= lo, (cid, st, k, m[k])
    print("\noracle per case:", json.dumps(table, indent=1))


def test_oracle_reaches_098_on_every_objective_metric(generated):
    _, res = generated
    low = []
    for st in FLOORS:
        for cid, m in rollout0_metrics(res["oracle"], st).items():
            low += [(cid, st, k, round(v, 3)) for k, v in m.items() if v is not None and v < 0.98]
    assert not low, low


def test_static_and_blank_score_low_on_deduction_physics(generated):
    ds, res = generated
    ora = rollout0_metrics(res["oracle"], "deduction")
    for kind in ("static", "blank"):
        for cid, m in rollout0_metrics(res[kind], "deduction").items():
            if at_rest(ds, cid):
                continue
            # the time-collapsed spatial IoU of a blank answer can pick up a little of a slow object's
            # path (measured ≤ 0.17); per-frame overlap stays low, but a static answer keeps the body that
            # is at rest until it is struck (measured ≤ 0.11 on a head-on collision)
            assert m["spatial_iou"] <= 0.25 and max(m[k] for k in IOUS[1:]) <= 0.2, (kind, cid, m)
            assert max(m[k] for k in IOUS) < 0.5 * min(ora[cid][k] for k in IOUS), (kind, cid, m)
            assert m["psnr"] < 0.7 and m["masked_psnr"] < 0.5, (kind, cid, m)
            if m["velocity"] is not None:
                assert m["velocity"] < ora[cid]["velocity"], (kind, cid, m)
