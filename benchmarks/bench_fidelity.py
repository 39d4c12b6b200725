"""Fidelity of the objective metrics on answers with known truth (prints the table; asserts nothing).

    python benchmarks/bench_fidelity.py --cases orchard [--per-task 2] [--seed 0] [--jobs 2]
        [--work fidelity-work] [--families 'ded/*'] [--json out.json]

For `--per-task` built cases of every task (drawn with `--seed`) it makes every answer family of
`orchard_eval.fidelity.families.catalogue()` — re-timed GT, counterfactual re-renders built with
`orchard-build`, codecs, photometry, overlays, camera changes and combinations — scores them with the
code path of `orchard-eval run` (objective-only, classical segmenter) and prints, per family and metric,
mean and p90 of |reported − ideal|, Spearman of reported vs ideal and ordering accuracy, the totals
per metric, and which of the targets are met. Answers and counterfactual builds are kept in `--work`
and reused; the scores are recomputed every run.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

from orchard_eval.cases import load_dataset
from orchard_eval.fidelity import bench, catalogue


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", required=True, help="a built dataset (orchard-build output)")
    p.add_argument("--per-task", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--case", action="append", default=None, help="case id (repeatable; instead of --per-task)")
    p.add_argument("--families", default="*", help="glob over family names, comma-separated")
    p.add_argument("--work", type=Path, default=Path("fidelity-work"))
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--json", type=Path, default=None, help="also write rows and summary here")
    a = p.parse_args(argv)
    pats = [s.strip() for s in a.families.split(",")]
    fams = [f for f in catalogue() if any(fnmatch.fnmatch(f.name, pat) for pat in pats)]
    ds = load_dataset(a.cases)
    ids = a.case or bench.select_cases(ds, a.per_task, a.seed)
    t0 = time.perf_counter()
    rows, skipped = bench.run(a.cases, ids, a.work, fams, jobs=a.jobs, log=lambda s: print(s, file=sys.stderr))
    summary = bench.summarise(rows)
    print(f"{len(ids)} cases, {len(fams)} families, {len(rows)} values, {time.perf_counter() - t0:.0f} s")
    print("cases:", ", ".join(ids))
    print(bench.table(summary, rows))
    missing = {cid: s for cid, s in skipped.items() if s}
    if missing:
        print("\nno answer (family does not apply):", "; ".join(f"{c}: {', '.join(sorted(s))}"
                                                                for c, s in sorted(missing.items())))
    if a.json:
        a.json.write_text(json.dumps({"cases": ids, "rows": [asdict(r) for r in rows], "summary": summary},
                                     indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
