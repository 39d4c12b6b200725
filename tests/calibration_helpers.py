"""Shared by the calibration tests that score built cases (test_eval_oracle_calibration.py,
test_eval_run_real.py and the single shipped-case tests): building one case with its oracle answers,
reading results back."""
import json
from pathlib import Path

import pytest

from orchard_eval.cli import main
from orchard_eval.records import read_records
from orchard_eval.run import Scorer, build_scorer

REPO = Path(__file__).resolve().parents[1]


def oracle_scorer(tmp_path: Path, config: str) -> tuple[Path, Scorer]:
    """Build one shipped case (`config` relative to the repository, e.g. scenes/free_fall/000001.yaml)
    with `orchard-build`, write the oracle baseline for it, and return the dataset and an
    objective-only scorer of that baseline (skipped without MuJoCo)."""
    pytest.importorskip("mujoco")
    from orchard_build.cli import main as build

    ds, pred = tmp_path / "orchard", tmp_path / "pred"
    assert build(["--config", str(REPO / config), "--out", str(ds), "--no-progress"]) == 0
    assert main(["baseline", "--kind", "oracle", "--cases", str(ds), "--out", str(pred)]) == 0
    return ds, build_scorer(str(ds), str(pred), "none", None, "paper", "classical")


def rollout0_metrics(results: Path, subtrack: str) -> dict:
    """case id → objective metrics of rollout 0 of one subtrack in a results directory."""
    return {r["case_id"]: r["metrics"] for r in read_records(results)
            if r["subtrack"] == subtrack and r["rollout"] == 0}


def at_rest(dataset: Path, cid: str) -> bool:
    """True when no object of the case moves (a still picture is then the right answer)."""
    v = json.loads((dataset / "cases" / cid / "velocity.json").read_text())
    return not any(o["moving"] for o in v["objects"])


def shipped_oracle_metrics(tmp_path: Path, config: str, case_id: str, *subtracks: str) -> dict[str, dict]:
    """`oracle_scorer` for one shipped case, then rollout 0 of each subtrack scored: subtrack → its
    objective metrics (each response must be valid)."""
    _, scorer = oracle_scorer(tmp_path, config)
    out = {}
    for st in subtracks:
        rec = scorer.score(case_id, st, 0)
        assert rec["valid"], (st, rec["error"])
        out[st] = rec["metrics"]
    return out


def deduction_ious(metrics: dict) -> float:
    """The smallest of the three Deduction IoUs (spatial, spatiotemporal, weighted spatial)."""
    return min(metrics["spatial_iou"], metrics["spatiotemporal_iou"], metrics["weighted_spatial_iou"])
