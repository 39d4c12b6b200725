"""Transition score calibration: detected vs GT event chains on a strided subset of a dataset.

    PYTHONPATH=$PWD python3 benchmarks/bench_transitions.py DATASET [--pred PRED_DIR] [--step N] [--offset K]

Without --pred the detector runs on each case's GT analytic tracks (the detector's own ceiling);
with --pred it runs on `answer_tracks` of each case's deduction rollout_01.mp4 (the oracle when PRED_DIR
holds the GT videos). Prints per-case F1, seconds per case, and the mean F1 and the share ≥ 0.95.
Objects are compared on body ids only (fixtures are not tracked; see orchard_eval.apt.detect).
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from orchard_eval.apt.detect import bodies_only, detect_transitions
from orchard_eval.apt.matching import match_chains
from orchard_eval.cases import load_dataset


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("dataset")
    ap.add_argument("--pred")
    ap.add_argument("--step", type=int, default=10)
    ap.add_argument("--offset", type=int, default=0)
    a = ap.parse_args()
    cases = sorted(load_dataset(a.dataset), key=lambda c: c.case_id)[a.offset::a.step]
    f1s = []
    for c in cases:
        if c.events is None:
            continue
        t0 = time.perf_counter()
        if a.pred:
            from orchard_eval.run import decode_deduction
            from orchard_eval.tracks import answer_tracks

            _, dense = decode_deduction(c, Path(a.pred) / "cases" / c.case_id / "deduction" / "rollout_01.mp4")
            tracks = answer_tracks(c, dense) if dense is not None else None
        else:
            tracks = c.object_tracks()
        if tracks is None:
            print(f"{c.case_id}: no tracks")
            continue
        ids = [o.id for o in c.objects]
        r = match_chains(bodies_only(detect_transitions(c, tracks), ids), bodies_only(c.events, ids),
                         match_objects=True)
        f1s.append(r.overall.f1)
        print(f"{c.case_id}: F1 {r.overall.f1:.3f}  {time.perf_counter() - t0:.1f} s", flush=True)
    if f1s:
        print(f"{len(f1s)} cases: mean F1 {np.mean(f1s):.3f}, ≥ 0.95 on {sum(f >= 0.95 for f in f1s)}")


if __name__ == "__main__":
    main()
