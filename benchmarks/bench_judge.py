"""Calibration and discrimination of the programmatic judge (prints tables; asserts nothing).

    python benchmarks/bench_judge.py --cases orchard [--calibrate-per-task N] [--baselines-per-task M]
                                     [--per-task 2] [--jobs 2]

Calibration: the oracle, blank and static baselines (image protocol) on every case (or N per task),
all five subtracks; targets: the oracle ≥ 0.98 on ≥ 99 % of cases per subtrack and never below 0.9,
blank and static ≤ 0.15 on P-T, F-T, F-G and Deduction. Discrimination, on `--per-task` cases per
task: the reference with one thing wrong (a changed digit, another option letter, changed substituted
values, a distractor formula, a changed speed, reversed arrows, arrows beside their objects, a label
left on a P-G answer, an extra object): the criterion that should catch it drops by ≥ 0.5 and every
unrelated criterion stays within 0.05; JPEG q75, a 4:3 answer and a 0.8 px blur cost ≤ 0.03.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from orchard_eval.judge_fidelity.bench import run, sample  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", required=True)
    ap.add_argument("--calibrate-per-task", type=int, default=None, help="default: every case")
    ap.add_argument("--per-task", type=int, default=2, help="cases per task for discrimination")
    ap.add_argument("--baselines-per-task", type=int, default=None,
                    help="cases per task for the blank and static baselines (default: as calibrated)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--work", help="answer folder (default: a temporary one)")
    ap.add_argument("--json", help="write the per-answer rows here")
    args = ap.parse_args()
    cal = sample(args.cases, args.calibrate_per_task)
    dis = sample(args.cases, args.per_task)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        base = None if args.baselines_per_task is None else sample(args.cases, args.baselines_per_task)
        rep = run(args.cases, args.work or tmp, cal, dis, jobs=args.jobs, progress=True, baselines=base)
    print(f"{len(cal)} cases calibrated, {len(dis)} discriminated, {len(rep.rows)} answers judged in "
          f"{time.perf_counter() - t0:.0f} s on {args.jobs} processes\n")
    print("\n".join(rep.lines))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rep.rows, "meta": rep.meta, "met": rep.met}, default=str))


if __name__ == "__main__":
    main()
