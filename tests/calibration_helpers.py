"""Shared by the calibration tests that score built cases (test_eval_oracle_calibration.py,
test_eval_run_real.py): reading their results back."""
import json
from pathlib import Path

from orchard_eval.records import read_records


def rollout0_metrics(results: Path, subtrack: str) -> dict:
    """case id → objective metrics of rollout 0 of one subtrack in a results directory."""
    return {r["case_id"]: r["metrics"] for r in read_records(results)
            if r["subtrack"] == subtrack and r["rollout"] == 0}


def at_rest(dataset: Path, cid: str) -> bool:
    """True when no object of the case moves (a still picture is then the right answer)."""
    v = json.loads((dataset / "cases" / cid / "velocity.json").read_text())
    return not any(o["moving"] for o in v["objects"])
