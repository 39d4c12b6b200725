"""Time `orchard-eval report` on an existing results directory (e.g. a 400 × 5 × 3 run) and print
wall time, pages written and report size.

    python3 benchmarks/bench_report.py RESULTS_DIR [RESULTS_DIR …] [--jobs 2] [--predictions PRED_DIR …]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from orchard_eval.report import write_report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--predictions", action="append", default=[], help="prediction dir per RESULTS_DIR (answer visuals)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_report_") as tmp:
        out = Path(tmp) / "report"
        t0 = time.perf_counter()
        problems = write_report(a.results, out, jobs=a.jobs, progress=False, predictions=a.predictions)
        wall = time.perf_counter() - t0
        files = [p for p in out.rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        pages = len(list((out / "cases").glob("*.html")))
        print(f"runs {len(a.results)}  case pages {pages}  files {len(files)}  size {size / 1e6:.1f} MB  "
              f"jobs {a.jobs}  wall {wall:.1f} s  problems {len(problems)}")


if __name__ == "__main__":
    main()
