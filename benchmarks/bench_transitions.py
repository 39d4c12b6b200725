"""Calibration of the Deduction transition score (docs/apt.md), measured and printed.

    PYTHONPATH=$PWD python3 benchmarks/bench_transitions.py DATASET [--per-task N] [--kinds oracle,static,blank]
        [--pred PRED_DIR] [--fidelity FW_WORK] [--gt-only]

Cases: every case of DATASET, or `--per-task N` per task (the fidelity benchmark's reproducible
draw, `fidelity.bench.select_cases`). Three measurements:

1. the detector's ceiling on each case's GT analytic tracks, sampled as the run samples an answer
   (the frames at T_c plus frame 0, at their own times) and at every GT frame;
2. baseline answers (`--kinds`, written for the chosen cases into a temporary directory, or
   `--pred` for an existing prediction directory) scored by the run's own code path
   (`run.Scorer`: the Deduction metrics, then the transition score from their segmentations),
   rollout 0: F1 per case, the mean over cases with events, the minimum, and the seconds per
   response; targets: oracle ≥ 0.95 on every case with events, static and blank ≤ 0.2 (mean);
3. with `--fidelity FW_WORK` (a `bench_fidelity.py` work directory: answers/, counterfactual/): the
   re-timed and counterfactual Deduction answers, reported F1 against the F1 of the events the
   answer truly shows (re-timed: the case's events at t / speed that fall inside the clip and, for a
   speed-up, which holds the GT's last frame from T / speed on, a sliding_arrest there of every body
   still moving at T other than in free flight; counterfactual: its own build's events.json; either
   split by `observable` at the case's frame rate and its shown events taken), both scored as the run
   scores (against the case's shown events, detections only an unsure one takes excused); target:
   mean |reported − true| ≤ 0.05.

"Cases with events" are cases with at least one shown event (`apt.answers.with_events`).
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from orchard_eval.apt.answers import with_events
from orchard_eval.apt.detect import A_MIN, H_RATIO, V_EPS, bodies_only, detect_transitions
from orchard_eval.apt.matching import match_chains, without_excused
from orchard_eval.apt.observable import case_observable, observable_events, track_heights
from orchard_eval.apt.taxonomy import Transition
from orchard_eval.cases import ObjectTracks, load_dataset

FIDELITY = {"ded/retime_0.7x": ("speed", 0.7), "ded/retime_1.4x": ("speed", 1.4), "ded/cf_gravity": "gravity",
            "ded/cf_velocity": "velocity", "ded/cf_restitution": "restitution", "ded/cf_friction": "friction",
            "ded/cf_mass": "mass", "ded/cf_start": "start"}


def _f1(case, chain) -> float:
    """F1 of `chain` as the run scores a detected chain: against the case's shown events, a detection
    that only an unsure one takes excused (`observable`)."""
    ids = [o.id for o in case.objects]
    ob = case_observable(case)
    shown, unsure = bodies_only(ob.shown, ids), bodies_only(ob.unsure, ids)
    pred = without_excused(bodies_only(chain, ids), shown, unsure, match_objects=True)
    return match_chains(pred, shown, match_objects=True).overall.f1


def _sampled(tr: ObjectTracks, ts: np.ndarray) -> ObjectTracks:
    P = {k: np.stack([np.interp(ts, tr.times, v[:, d]) for d in range(3)], 1) for k, v in tr.positions.items()}
    V = {k: np.stack([np.gradient(P[k][:, d], ts) for d in range(3)], 1) for k in P}
    return ObjectTracks(ts, P, V)


def ceiling(cases) -> None:
    """The detector on GT tracks, sampled as the run samples (frame times of T_c and 0) and dense."""
    rows = []
    for c in cases:
        tr = c.object_tracks()
        if not with_events(c) or tr is None:
            continue
        ts = np.unique(np.round(np.array([0.0] + [float(t) for t in c.timestamps]) * c.gt_fps)) / c.gt_fps
        rows.append((_f1(c, detect_transitions(c, _sampled(tr, ts))),
                     _f1(c, detect_transitions(c, _sampled(tr, tr.times)))))
    if rows:
        a = np.array(rows)
        print(f"GT tracks, {len(rows)} cases with events: sampled as the run samples: mean F1 {a[:, 0].mean():.3f}, "
              f"≥ 0.95 on {int((a[:, 0] >= 0.95).sum())}; every GT frame: mean F1 {a[:, 1].mean():.3f}, "
              f"≥ 0.95 on {int((a[:, 1] >= 0.95).sum())}", flush=True)


def score_dir(dataset: str, pred: str, ids: list[str], label: str, verbose: bool = True) -> dict[str, dict]:
    """Rollout 0 of every chosen case through the run's Scorer; case id -> its record."""
    from orchard_eval.run import build_scorer

    sc = build_scorer(dataset, pred, "none", None, "paper", "classical", case_ids=ids)
    out = {}
    for cid in ids:
        t0 = time.perf_counter()
        rec = sc.score(cid, "deduction", 0)
        rec["_s"] = time.perf_counter() - t0
        out[cid] = rec
        tr = rec.get("transitions")
        if verbose:
            f1 = "n/a" if tr is None else f"{tr['f1']:.3f} ({tr['tp']}/{tr['n_pred']} pred, {tr['n_gt']} GT)"
            print(f"  {label} {cid}: F1 {f1}  {rec['_s']:.1f} s", flush=True)
    return out


def baseline_report(kind: str, recs: dict[str, dict], cases: dict) -> bool:
    f1 = {cid: r["transitions"]["f1"] for cid, r in recs.items() if r.get("transitions") and with_events(cases[cid])}
    na = [cid for cid, r in recs.items() if with_events(cases[cid]) and not r.get("transitions")]
    secs = [r["_s"] for r in recs.values()]
    vals = np.array(list(f1.values()) + [0.0] * len(na))
    if not vals.size:
        print(f"{kind}: no case with events")
        return False
    ok = bool(vals.min() >= 0.95) if kind == "oracle" else bool(vals.mean() <= 0.2)
    target = "every case ≥ 0.95" if kind == "oracle" else "mean ≤ 0.2"
    print(f"{kind}: {vals.size} cases with events: mean F1 {vals.mean():.3f}, min {vals.min():.3f}, "
          f"≥ 0.95 on {int((vals >= 0.95).sum())}; not scored {len(na)}; {np.mean(secs):.2f} s per response "
          f"(metrics + transitions); target {target}: {'PASS' if ok else 'FAIL'}", flush=True)
    if kind == "oracle":
        for cid, v in sorted(f1.items()):
            if v < 0.95:
                tr = recs[cid]["transitions"]
                print(f"    {cid}: F1 {v:.3f}; detected {[(d['type'], d['t']) for d in tr['detected']]}; GT "
                      f"{[(e.type, round(e.t, 3)) for e in case_observable(cases[cid]).shown]}")
    return ok


def true_events(case, family: str, work: Path) -> list[Transition] | None:
    """The transitions the family's answer to `case` truly shows (`observable`: at the case's frame rate)."""
    spec = FIDELITY[family]
    ids = [o.id for o in case.objects]
    if isinstance(spec, tuple):
        s, T = spec[1], case.physics_duration
        h = track_heights(case.object_tracks(), case.intrinsic, case.extrinsic)
        retimed = None if h is None else (lambda b, t: h(b, t * s))
        return list(observable_events(_retimed_events(case, s, T), ids, case.gt_fps, T, retimed).shown)
    from orchard_eval.fidelity.counterfactual import load_variant_case

    v = load_variant_case(work / "counterfactual", spec, case)
    if v is None or v.events is None:
        return None
    return list(case_observable(v).shown)


def _retimed_events(case, s: float, T: float) -> list[Transition]:
    """The case's events in an answer played `s` times as fast (cut at T)."""
    out = [Transition(e.type, e.t / s, e.objects) for e in case.events if e.t / s <= T + 1e-9]
    tracks = case.object_tracks() if s > 1 else None
    if tracks is not None:
        # a speed-up runs out of GT at T / s and holds its last frame: a body still moving on its
        # support there stops dead, moving → stationary, and an answer that shows it truly shows an
        # arrest (one frozen in mid-flight shows no transition of the taxonomy)
        for o in case.objects:
            v = tracks.velocities.get(o.id)
            if v is not None and len(v) >= 3 and float(np.linalg.norm(v[-1])) > V_EPS \
                    and not _ballistic(tracks.times[-3:], v[-3:]):
                out.append(Transition("sliding_arrest", T / s, (o.id,)))
    return sorted(out, key=lambda e: e.t)


def _ballistic(t: np.ndarray, v: np.ndarray) -> bool:
    """Whether velocities `v` (N, 3) at times `t` show a free flight: a downward acceleration above the
    weakest gravity with hardly any horizontal one (the detector's test of a flight's parabola)."""
    a = (v[-1] - v[0]) / max(float(t[-1] - t[0]), 1e-9)
    return a[2] <= -A_MIN and float(np.hypot(a[0], a[1])) <= H_RATIO * abs(a[2])


def fidelity(dataset: str, work: Path, ids: list[str], cases: dict) -> None:
    from orchard_eval.fidelity.bench import answers_dir

    diffs = []
    for fam in FIDELITY:
        root = answers_dir(work, fam)
        if not root.is_dir():
            print(f"{fam}: no answers under {root}")
            continue
        have = [cid for cid in ids if with_events(cases[cid]) and (root / "cases" / cid / "deduction").is_dir()]
        recs = score_dir(dataset, str(root), have, fam, verbose=False)
        rows = []
        for cid in have:
            tr, te = recs[cid].get("transitions"), true_events(cases[cid], fam, work)
            if te is None:
                continue
            reported = 0.0 if tr is None else tr["f1"]
            rows.append((cid, reported, _f1(cases[cid], te)))
        d = [abs(a - b) for _, a, b in rows]
        diffs += d
        worst = max(rows, key=lambda r: abs(r[1] - r[2])) if rows else None
        print(f"{fam}: {len(rows)} answers: mean reported F1 {np.mean([r[1] for r in rows]):.3f}, true "
              f"{np.mean([r[2] for r in rows]):.3f}, mean |Δ| {np.mean(d):.3f}"
              + (f"; worst {worst[0]} {worst[1]:.2f} vs {worst[2]:.2f}" if worst else ""), flush=True)
    if diffs:
        ok = float(np.mean(diffs)) <= 0.05
        print(f"fidelity: {len(diffs)} answers, mean |reported − true| {np.mean(diffs):.3f}; target ≤ 0.05: "
              f"{'PASS' if ok else 'FAIL'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dataset")
    ap.add_argument("--per-task", type=int, default=None)
    ap.add_argument("--kinds", default="oracle,static,blank")
    ap.add_argument("--pred", help="score this prediction directory (as --kinds' single kind) instead of "
                                   "writing baselines")
    ap.add_argument("--fidelity", metavar="FW_WORK")
    ap.add_argument("--gt-only", action="store_true", help="only the detector's ceiling on GT tracks")
    a = ap.parse_args()
    ds = load_dataset(a.dataset)
    if a.per_task:
        from orchard_eval.fidelity.bench import select_cases

        ids = select_cases(ds, a.per_task)
    else:
        ids = sorted(ds.cases)
    cases = {cid: ds.cases[cid] for cid in ids}
    print(f"{len(ids)} cases ({'all' if not a.per_task else f'{a.per_task} per task'}), "
          f"{sum(1 for c in cases.values() if with_events(c))} with events a video shows", flush=True)
    ceiling(cases.values())
    if a.gt_only:
        return
    kinds = [k for k in a.kinds.split(",") if k]
    if a.pred:
        baseline_report(kinds[0], score_dir(a.dataset, a.pred, ids, kinds[0]), cases)
    else:
        from orchard_eval.baselines import write_baseline

        sub = load_dataset(a.dataset, case_ids=ids)
        with tempfile.TemporaryDirectory(prefix="bench_trans_") as tmp:
            for k in kinds:
                out = Path(tmp) / k
                write_baseline(k, sub, out, subtracks=("deduction",), num_rollouts=1)
                baseline_report(k, score_dir(a.dataset, str(out), ids, k), cases)
    if a.fidelity:
        fidelity(a.dataset, Path(a.fidelity), ids, cases)


if __name__ == "__main__":
    main()
