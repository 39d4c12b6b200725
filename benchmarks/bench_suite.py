"""Whole-suite build wall time (issue goal: ≤ 45 min on 2 cores).

    python benchmarks/bench_suite.py [--jobs 2] [--out DIR] [--tasks free_fall …]

Builds every shipped config of `scenes/` from scratch into a temporary (or given) directory and prints
the wall time per task and in total, with cases/s.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchard_build.build import build, find_configs  # noqa: E402
from orchard_build.resources import scenes_dir  # noqa: E402
from orchard_build.tasks import TASK_NAMES  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--tasks", nargs="*", default=list(TASK_NAMES))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = args.out or Path(tmp)
        total_t, total_n, failed = 0.0, 0, 0
        for task in args.tasks:
            paths = find_configs(scenes_dir(), [task])
            t0 = time.perf_counter()
            report = build(paths, scenes_dir() / "materials.yaml", out, jobs=args.jobs, progress=False, force=True)
            dt = time.perf_counter() - t0
            total_t, total_n, failed = total_t + dt, total_n + len(paths), failed + len(report.failed)
            print(f"{task:32s} {len(paths):4d} cases {dt:8.1f} s  ({len(paths) / dt:.2f} cases/s, "
                  f"{len(report.failed)} failed)", flush=True)
        print(f"{'whole suite':32s} {total_n:4d} cases {total_t:8.1f} s = {total_t / 60:.1f} min on {args.jobs} "
              f"job(s); {failed} failed")


if __name__ == "__main__":
    main()
