"""Time `orchard-eval report` on an existing results directory (e.g. a 400 × 5 × 3 run, see
benchmarks/report_fixture.py) and print wall time, pages written, report size and the visual
cache's hits and misses, and the CPU seconds spent (this process and its workers). `--passes 2` builds the report a second time into the same folder, which
reads the visual data cached by the first build (`out/cache/`), as a rebuild after a resumed run does.

    python3 benchmarks/bench_report.py RESULTS_DIR [RESULTS_DIR …] [--jobs 2] [--predictions PRED_DIR …]
        [--passes 2] [--no-cache]
"""
from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from orchard_eval.report import write_report


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("results", nargs="+")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--predictions", action="append", default=[], help="prediction dir per RESULTS_DIR (answer visuals)")
    ap.add_argument("--passes", type=int, default=1, help="builds into the same folder (the later ones hit the cache)")
    ap.add_argument("--no-cache", action="store_true", help="cache in a fresh empty dir per pass (cold every time)")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_report_") as tmp:
        out = Path(tmp) / "report"
        for k in range(a.passes):
            cache = Path(tmp) / f"cold{k}" if a.no_cache else None
            stats: dict = {}
            t0, c0 = time.perf_counter(), _cpu()
            problems = write_report(a.results, out, jobs=a.jobs, progress=False, predictions=a.predictions,
                                    cache_dir=cache, stats=stats)
            wall, cpu = time.perf_counter() - t0, _cpu() - c0
            files = [p for p in out.rglob("*") if p.is_file() and "cache" not in p.relative_to(out).parts]
            size = sum(p.stat().st_size for p in files)
            csize = sum(p.stat().st_size for p in (cache or out / "cache").rglob("*") if p.is_file())
            pages = len(list((out / "cases").glob("*.html")))
            print(f"pass {k + 1}  runs {len(a.results)}  case pages {pages}  files {len(files)}  size {size / 1e6:.1f} MB  "
                  f"cache {csize / 1e6:.1f} MB, {stats.get('cache_hits', 0)} hits / {stats.get('cache_misses', 0)} "
                  f"misses  jobs {a.jobs}  wall {wall:.1f} s  cpu {cpu:.1f} s  problems {len(problems)}", flush=True)


def _cpu() -> float:
    """User + system CPU seconds of this process and its finished workers: on a shared machine the
    wall time depends on the others' load, the CPU time much less (cpu / jobs ≈ wall on idle cores)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


if __name__ == "__main__":
    main()
