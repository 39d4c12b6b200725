"""What the frames of the fidelity benchmark's codec answers still show (prints figures; asserts nothing).

    python benchmarks/bench_codec_limit.py --cases DATASET --work FIDELITY_WORK [--families 'ded/h264_*']
                                           [--fidelity-json RUN.json]

Reads the answers and truth `bench_fidelity.py` wrote under `--work` and scores each codec family's
answers (a Deduction answer that is the GT video through a codec and nothing else) with the
exact-look reader (`orchard_eval/fidelity/exact_look.py`): every object's own GT pixels placed where
they explain the decoded frame best. Per family and mask metric it prints the reader's mean and p90 of
|value − ideal| and, given `--fidelity-json` (the `--json` of a `bench_fidelity.py` run on the same
work directory), the evaluator's beside it. Where the reader misses a target the frames no longer
show the bodies where they are, and the evaluator cannot meet it either.
"""
from __future__ import annotations

import argparse
import fnmatch
import json
import time
from pathlib import Path

import numpy as np

from orchard_eval.canonical import canonical_deduction
from orchard_eval.cases import load_dataset
from orchard_eval.fidelity import exact_look
from orchard_eval.fidelity.bench import answers_dir, truth_dir, truth_path
from orchard_eval.fidelity.families import catalogue
from orchard_eval.fidelity.truth import deduction_ideal, load_truth


def _stat(errs: list[float]) -> str:
    return "—" if not errs else f"{np.mean(errs):.3f} / {np.percentile(errs, 90):.3f}"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", required=True, help="the built dataset the fidelity run used")
    p.add_argument("--work", type=Path, required=True, help="the fidelity run's --work directory")
    p.add_argument("--families", default="ded/h264_*", help="glob over family names, comma-separated")
    p.add_argument("--fidelity-json", type=Path, default=None, help="that run's --json, for the evaluator's figures")
    a = p.parse_args(argv)
    pats = [s.strip() for s in a.families.split(",")]
    fams = [f for f in catalogue() if any(fnmatch.fnmatch(f.name, pat) for pat in pats)]
    skipped = [f.name for f in fams if not exact_look.applies(f)]
    fams = [f for f in fams if exact_look.applies(f)]
    if skipped:
        print("not codec-only (the reader does not apply):", ", ".join(skipped))
    ours: dict[tuple[str, str], list[float]] = {}
    if a.fidelity_json:
        for r in json.loads(a.fidelity_json.read_text())["rows"]:
            if r["reported"] is not None and r["ideal"] is not None:
                ours.setdefault((r["family"], r["metric"]), []).append(abs(r["reported"] - r["ideal"]))
    t0 = time.perf_counter()
    print("| family | metric | n | exact-look reader mean / p90 | evaluator mean / p90 |")
    print("|---|---|---|---|---|")
    for fam in fams:
        troot = truth_dir(a.work, fam.name)
        cids = sorted(str(q.relative_to(troot).with_suffix("")) for q in troot.rglob("*.npz"))
        ds = load_dataset(a.cases, case_ids=cids)
        errs: dict[str, list[float]] = {m: [] for m in exact_look.METRICS}
        for cid in cids:
            case = ds.cases[cid]
            truth, _ = load_truth(truth_path(a.work, fam.name, cid))
            path = answers_dir(a.work, fam.name) / "cases" / cid / "deduction" / "rollout_00.mp4"
            pk = canonical_deduction(case, path, "video")
            if not pk.ok:
                continue
            frames = truth.view(False)
            got = exact_look.metrics(case, pk.frames, frames, pk.pred_indices)
            ideal = deduction_ideal(case, frames, pk.pred_indices, pk.n_video_frames)
            for m in exact_look.METRICS:
                if got.get(m) is not None and ideal.get(m) is not None:
                    errs[m].append(abs(got[m] - ideal[m]))
        for m in exact_look.METRICS:
            print(f"| {fam.name} | {m} | {len(errs[m])} | {_stat(errs[m])} | {_stat(ours.get((fam.name, m), []))} |")
    print(f"\n{time.perf_counter() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
