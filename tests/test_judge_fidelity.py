"""The judge benchmark (orchard_eval.judge_fidelity) on REAL built cases: the shipped suite's first config
of every task (scenes/<task>/000000.yaml, built as tests/test_judge_programmatic.py builds), every
answer written in the submission layout and scored through `orchard_eval.run.Scorer`.

Asserted: the oracle ≥ 0.98 on every subtrack, the blank baseline ≤ 0.15 where the issue asks it,
every known-wrong answer the cases carry drops its catching criterion by ≥ 0.5, and the appearance
changes (JPEG q75, a 4:3 answer resized back, a slight blur) cost ≤ 0.03 on every image subtrack. What the benchmark still misses
is listed in KNOWN_MISSES with the reason and documented in docs/judges.md."""
from __future__ import annotations

import pytest

pytest.importorskip("rapidocr")

from orchard_eval.judge_fidelity.bench import run  # noqa: E402

from pathlib import Path  # noqa: E402

from test_judge_programmatic import build_cases  # noqa: E402

TASKS = tuple(sorted(p.name for p in (Path(__file__).resolve().parent.parent / "scenes").iterdir() if p.is_dir()))

# target name → why it is not met yet (docs/judges.md, "Limits")
KNOWN_MISSES = {
    "static formulation_graphic mean ≤ 0.15": "the input shows the objects, partly in place",
    "static deduction mean ≤ 0.15": "an object at rest, or nearly, is where the input shows it",
}


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    ds, by_task = build_cases(tmp_path_factory, TASKS, "judge_bench_cases", configs="scenes")
    assert set(by_task) == set(TASKS), sorted(set(TASKS) - set(by_task))
    ids = [c.case_id for c in by_task.values()]
    return run(str(ds.root), tmp_path_factory.mktemp("judge_bench"), ids, ids, jobs=2)


def test_oracle_full_marks(report):
    oracle = [r for r in report.rows if r["variant"] == "oracle"]
    assert oracle and all(r["error"] is None for r in oracle)
    low = [(r["case"], r["subtrack"], r["judge"]) for r in oracle if r["judge"] is None or r["judge"] < 0.98]
    assert not low, low


def test_blank_scores_low(report):
    for st in ("formulation_text", "formulation_graphic", "deduction"):
        vals = [r["judge"] for r in report.rows if r["variant"] == "blank" and r["subtrack"] == st]
        assert vals and max(vals) <= 0.15, (st, vals)


def test_the_input_handed_back_scores_low_on_perception_text(report):
    # every label is there and in place, but the scene was not removed: the task was not done
    vals = [r["judge"] for r in report.rows if r["variant"] == "static" and r["subtrack"] == "perception_text"]
    assert vals and max(vals) <= 0.15, vals


@pytest.mark.parametrize("kind", ["pt_changed_digit", "ft_other_letter", "ft_changed_values", "fg_reversed_arrow",
                                  "fg_arrow_off_object", "fg_outlined_arrow", "pg_extra_object"])
def test_wrong_answer_is_caught(report, kind):
    keys = [k for k in report.met if k.startswith(f"{kind}: catching")]
    assert keys, f"no case carried {kind}"
    assert all(report.met[k] for k in keys), [l for l in report.lines if l.startswith(f"| {kind} ")]


@pytest.mark.parametrize("kind", ["fg_reversed_arrow", "fg_outlined_arrow", "pg_extra_object"])
def test_a_wrong_answer_moves_nothing_else(report, kind):
    # reversed arrows meeting head to head between two bodies are still one arrow each; an outline
    # drawn round the arrow itself; a copy of the only object leaves the object where it was
    keys = [k for k in report.met if k.startswith(f"{kind}: unrelated")]
    assert keys, f"no case carried {kind}"
    assert all(report.met[k] for k in keys), [l for l in report.lines if l.startswith(f"| {kind} ")]


def test_appearance_costs_little(report):
    keys = [k for k in report.met if "mean cost" in k]
    assert keys
    assert all(report.met[k] for k in keys), [k for k in keys if not report.met[k]]


def test_report_lists_every_target(report):
    text = "\n".join(report.lines)
    assert "## Calibration" in text and "## Discrimination" in text and "## Appearance" in text
    assert f"Targets met: {sum(report.met.values())} / {len(report.met)}" in text
    for k in KNOWN_MISSES:
        assert k in report.met or not any(k.split(" ")[0] in m for m in report.met)
