"""The judge benchmark: calibration of the programmatic judge on the baselines (oracle, blank, static)
and its discrimination of answers with exactly one thing wrong, plus appearance changes that must not
cost points. Every answer is written in the submission layout (image protocol) and scored with
`orchard_eval.run.Scorer`, the code path of `orchard-eval run --judge programmatic`.

Scores reported are the *judge* score of a response: its criteria fused with the rubric's group
weights and no objective metric (the fused run score with the metrics is listed next to it for the
oracle), so that the numbers say how good the judge is, not the segmenter.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np
from PIL import Image
from orchard_build.pool import process_pool

from ..baselines import write_baseline
from ..cases import SUBTRACKS, load_dataset
from ..fusion import fuse, keyframe_criteria
from ..rubrics import rubric_for
from .answers import APPEARANCE, wrong_answers

BASELINES = ("oracle", "blank", "static")
IMAGE_SUBTRACKS = SUBTRACKS[:4]
TARGETS = {"oracle_min_share": 0.99, "oracle_good": 0.98, "oracle_floor": 0.9, "baseline_max": 0.15,
           "catch_drop": 0.5, "unrelated": 0.05, "appearance": 0.03}
LOW_BASELINE_SUBTRACKS = ("perception_text", "formulation_text", "formulation_graphic", "deduction")
# subtracks whose answer is the scene at a later time: the input held still is the right answer there
# for a case where nothing moves, so the static baseline's target is taken over the cases that move
SCENE_SUBTRACKS = ("formulation_graphic", "deduction")
STILL_PX = 2.0   # largest image-plane move of every object's GT centre over the clip of a case that holds still


def _judge_view(rec: dict[str, Any]) -> tuple[dict[str, float] | None, float | None]:
    crit = rec.get("criteria")
    if not crit or not rec.get("valid", True):
        return None, (0.0 if not rec.get("valid", True) else None)
    if "per_timestamp" in crit:
        crit = keyframe_criteria(crit["per_timestamp"])
        return crit, fuse(rubric_for("deduction", "video"), crit, {}).score
    return crit, fuse(rubric_for(rec["subtrack"], "image"), crit, {}).score


# --- scoring in worker processes ---------------------------------------------------------------------
_SCORERS: dict[str, Any] = {}
_CASES: str = ""


def _init(cases: str) -> None:
    global _CASES
    _CASES = cases
    import logging

    logging.getLogger("orchard_eval").setLevel(logging.ERROR)


def _score(task: tuple[str, str, str, str]) -> dict[str, Any]:
    from ..run import build_scorer

    variant, pred, cid, st = task
    sc = _SCORERS.get(pred)
    if sc is None:
        ids = sorted({p.relative_to(Path(pred) / "cases").parent.as_posix()
                      for p in (Path(pred) / "cases").glob("*/*/*/*")})
        sc = _SCORERS[pred] = build_scorer(_CASES, pred, "programmatic", {}, "paper", "classical", case_ids=ids)
    rec = sc.score(cid, st, 0)
    crit, judge = _judge_view(rec)
    return {"variant": variant, "case": cid, "task": rec["task"], "subtrack": st, "criteria": crit,
            "judge": judge, "score": rec["score"], "error": rec["error"]}


# --- writing the answers -------------------------------------------------------------------------------
def _write_png(root: Path, cid: str, st: str, img: np.ndarray) -> None:
    d = root / "cases" / cid / st
    d.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.ascontiguousarray(img)).save(d / "rollout_00.png")


def _submission(root: Path, model: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "submission.json").write_text(json.dumps({"model": model, "protocol": "image", "num_rollouts": 1,
                                                       "prompt_version": "orchard-prompts-v1"}), encoding="utf-8")


def write_answers(cases: str, work: Path, calibrate: Sequence[str], discriminate: Sequence[str],
                  baselines: Sequence[str] | None = None) -> tuple[list[tuple[str, str, str, str]], dict[str, dict]]:
    """Writes every answer under `work`; returns the scoring tasks and, per wrong answer, what it
    should move ((variant, case) → {"catch": …, "also": …, "subtrack": …}). The oracle runs on
    `calibrate`, blank and static on `baselines` (default: the same cases)."""
    tasks: list[tuple[str, str, str, str]] = []
    for kind in BASELINES:
        ids = list(calibrate) if kind == "oracle" or baselines is None else list(baselines)
        root = work / kind
        if not (root / "submission.json").is_file():
            write_baseline(kind, load_dataset(cases, case_ids=list(ids)), root, protocol="image", num_rollouts=1)
        tasks += [(kind, str(root), cid, st) for cid in ids for st in SUBTRACKS]
    # the oracle of the discrimination sample is needed even where calibration left it out
    missing = [c for c in discriminate if c not in set(calibrate)]
    if missing:
        root = work / "oracle_extra"
        if not (root / "submission.json").is_file():
            write_baseline("oracle", load_dataset(cases, case_ids=missing), root, protocol="image", num_rollouts=1)
        tasks += [("oracle", str(root), cid, st) for cid in missing for st in IMAGE_SUBTRACKS]
    meta: dict[str, dict] = {}
    ds = load_dataset(cases, case_ids=list(discriminate))
    roots: dict[str, Path] = {}
    for cid in discriminate:
        case = ds.cases[cid]
        for w in wrong_answers(case):
            root = roots.setdefault(w.name, work / "wrong" / w.name)
            _write_png(root, cid, w.subtrack, w.image)
            meta[f"{w.name}|{cid}"] = {"catch": list(w.catch), "also": list(w.also), "subtrack": w.subtrack}
            tasks.append((w.name, str(root), cid, w.subtrack))
        for name, fn in APPEARANCE.items():
            root = roots.setdefault(name, work / "appearance" / name)
            for st in IMAGE_SUBTRACKS:
                if not case.has(st):
                    continue
                _write_png(root, cid, st, fn(case.image(st)))
                tasks.append((name, str(root), cid, st))
    for name, root in roots.items():
        _submission(root, name)
    return tasks, meta


# --- the tables ------------------------------------------------------------------------------------------
@dataclass
class Report:
    rows: list[dict[str, Any]]
    meta: dict[str, dict]
    lines: list[str] = field(default_factory=list)
    met: dict[str, bool] = field(default_factory=dict)


def holds_still(case) -> bool:
    """Whether no object of the case moves: every GT centre stays within STILL_PX of where it starts
    (image plane, over the GT track's times). False where the case has no tracks or camera."""
    tracks = case.object_tracks()
    if tracks is None or len(tracks.times) == 0:
        return False
    start = case.image_centres(float(tracks.times[0]))
    if not start:
        return False
    for t in tracks.times[1:]:
        for k, uv in case.image_centres(float(t)).items():
            if k in start and math.dist(uv, start[k]) > STILL_PX:
                return False
    return True


def _q(v: Sequence[float], q: float) -> float:
    return float(np.quantile(np.asarray(v, float), q)) if len(v) else math.nan


def summarise(rows: list[dict[str, Any]], meta: dict[str, dict], still: Iterable[str] = ()) -> Report:
    """The tables and targets; `still`: the cases where nothing moves (`holds_still`)."""
    still = set(still)
    R = Report(rows, meta)
    by = defaultdict(dict)
    for r in rows:
        by[r["variant"]][(r["case"], r["subtrack"])] = r
    L = R.lines
    T = TARGETS
    # 1. calibration
    L.append("## Calibration (judge score: criteria fused, no objective metric)")
    L.append("| subtrack | n | oracle mean | min | ≥ 0.98 | fused run score (oracle) | blank mean / max | static mean / max |")
    L.append("|---|---|---|---|---|---|---|---|")
    still_rows: list[str] = []
    for st in SUBTRACKS:
        o = [r["judge"] for (c, s), r in by["oracle"].items() if s == st and r["judge"] is not None]
        f = [r["score"] for (c, s), r in by["oracle"].items() if s == st and r["score"] is not None]
        b = [r["judge"] for (c, s), r in by["blank"].items() if s == st and r["judge"] is not None]
        z, z_still = [], []
        for (c, s), r in by["static"].items():
            if s == st and r["judge"] is not None:
                (z_still if st in SCENE_SUBTRACKS and c in still else z).append(r["judge"])
        if not o:
            continue
        share = float(np.mean([v >= T["oracle_good"] for v in o]))
        L.append(f"| {st} | {len(o)} | {np.mean(o):.3f} | {min(o):.3f} | {100 * share:.1f} % | "
                 f"{np.mean(f):.3f} | {np.mean(b):.3f} / {max(b):.3f} | {np.mean(z):.3f} / {max(z):.3f} |"
                 if b and z else f"| {st} | {len(o)} | {np.mean(o):.3f} | {min(o):.3f} | {100 * share:.1f} % | "
                 f"{np.mean(f):.3f} | – | – |")
        if z_still:
            still_rows.append(f"- {st}: static {np.mean(z_still):.3f} / {max(z_still):.3f} (mean / max) on the "
                              f"{len(z_still)} cases where nothing moves, left out of its static column")
        R.met[f"oracle {st} ≥ {T['oracle_good']} on ≥ {100 * T['oracle_min_share']:.0f} %"] = share >= T["oracle_min_share"]
        R.met[f"oracle {st} never below {T['oracle_floor']}"] = min(o) >= T["oracle_floor"]
        if st in LOW_BASELINE_SUBTRACKS:
            for kind, v in (("blank", b), ("static", z)):
                if v:
                    R.met[f"{kind} {st} mean ≤ {T['baseline_max']}"] = float(np.mean(v)) <= T["baseline_max"]
    if still_rows:
        L.append("")
        L.append("The input held still is the right answer where nothing moves (F-G, Deduction):")
        L.extend(still_rows)
    per_task = defaultdict(lambda: defaultdict(list))
    for (c, s), r in by["oracle"].items():
        if r["judge"] is not None:
            per_task[r["task"]][s].append(r["judge"])
    L.append("")
    L.append("| task (oracle mean / min) | " + " | ".join(SUBTRACKS) + " |")
    L.append("|---|" + "---|" * len(SUBTRACKS))
    for task in sorted(per_task):
        cells = [f"{np.mean(per_task[task][s]):.3f} / {min(per_task[task][s]):.3f}" if per_task[task][s] else "–"
                 for s in SUBTRACKS]
        L.append(f"| {task} | " + " | ".join(cells) + " |")
    low = defaultdict(list)
    for (c, s), r in by["oracle"].items():
        for k, v in (r["criteria"] or {}).items():
            if v is not None and v != -1 and v < 0.95:
                low[(s, k)].append((c, v))
    L.append("")
    L.append("Oracle criteria below 0.95: " + ("none" if not low else ""))
    for (s, k), items in sorted(low.items()):
        items.sort(key=lambda x: x[1])
        L.append(f"- {s} / {k}: {len(items)} cases, worst " + ", ".join(f"{c} {v:.2f}" for c, v in items[:4]))
    # 2. discrimination
    L.append("")
    L.append("## Discrimination (the reference with exactly one thing wrong)")
    L.append("| wrong answer | subtrack | n | catching drop mean / min | ≥ 0.5 | worst unrelated change | judge score oracle → wrong |")
    L.append("|---|---|---|---|---|---|---|")
    kinds = sorted({k.split("|")[0] for k in meta})
    for kind in kinds:
        drops, unrel, so, sw = [], [], [], []
        st = None
        for key, m in meta.items():
            name, cid = key.split("|", 1)
            if name != kind:
                continue
            st = m["subtrack"]
            o, w = by["oracle"].get((cid, st)), by[kind].get((cid, st))
            if not o or not w or o["criteria"] is None or w["criteria"] is None:
                continue
            oc, wc = o["criteria"], w["criteria"]

            def val(c, k):
                v = c.get(k)
                return None if v is None or v == -1 else float(v)

            d = [val(oc, k) - val(wc, k) for k in m["catch"] if val(oc, k) is not None and val(wc, k) is not None]
            drops.append(max(d) if d else math.nan)
            others = [abs(val(oc, k) - val(wc, k)) for k in oc if k not in m["catch"] and k not in m["also"]
                      and val(oc, k) is not None and val(wc, k) is not None]
            unrel.append(max(others) if others else 0.0)
            so.append(o["judge"]); sw.append(w["judge"])
        if not drops:
            continue
        ok = [x >= TARGETS["catch_drop"] - 1e-3 for x in drops]   # one of two objects' labels: a drop of 0.5
        L.append(f"| {kind} | {st} | {len(drops)} | {np.nanmean(drops):.2f} / {np.nanmin(drops):.2f} | "
                 f"{100 * np.mean(ok):.0f} % | {max(unrel):.3f} | {np.mean(so):.3f} → {np.mean(sw):.3f} |")
        R.met[f"{kind}: catching criterion drops ≥ {TARGETS['catch_drop']}"] = all(ok)
        R.met[f"{kind}: unrelated criteria within {TARGETS['unrelated']}"] = max(unrel) <= TARGETS["unrelated"]
    # 3. appearance
    L.append("")
    L.append("## Appearance changes that must not cost points (judge score, oracle − changed)")
    L.append("| change | subtrack | n | mean cost | max cost |")
    L.append("|---|---|---|---|---|")
    for name in APPEARANCE:
        for st in IMAGE_SUBTRACKS:
            cost = []
            for (cid, s), w in by[name].items():
                o = by["oracle"].get((cid, s))
                if s == st and o and o["judge"] is not None and w["judge"] is not None:
                    cost.append(o["judge"] - w["judge"])
            if not cost:
                continue
            L.append(f"| {name} | {st} | {len(cost)} | {np.mean(cost):.3f} | {max(cost):.3f} |")
            R.met[f"{name} {st}: mean cost ≤ {TARGETS['appearance']}"] = float(np.mean(cost)) <= TARGETS["appearance"]
    L.append("")
    n_met = sum(R.met.values())
    L.append(f"Targets met: {n_met} / {len(R.met)}")
    for k, v in R.met.items():
        if not v:
            L.append(f"- missed: {k}")
    return R


def sample(cases: str, per_task: int | None) -> list[str]:
    ds = load_dataset(cases)
    by_task: dict[str, list[str]] = defaultdict(list)
    for cid in sorted(ds.cases):
        by_task[ds.cases[cid].task].append(cid)
    if per_task is None:
        return sorted(ds.cases)
    return [c for t in sorted(by_task) for c in by_task[t][:per_task]]


def run(cases: str, work: str | Path, calibrate: Iterable[str], discriminate: Iterable[str], jobs: int = 1,
        progress: bool = False, baselines: Iterable[str] | None = None) -> Report:
    work = Path(work)
    work.mkdir(parents=True, exist_ok=True)
    tasks, meta = write_answers(cases, work, list(calibrate), list(discriminate),
                                None if baselines is None else list(baselines))
    rows: list[dict[str, Any]] = []
    if jobs <= 1:
        _init(cases)
        for i, t in enumerate(tasks):
            rows.append(_score(t))
            if progress and i % 50 == 0:
                print(f"  {i}/{len(tasks)}", flush=True)
    else:
        # Deduction first: the slowest answers should not form the tail
        tasks.sort(key=lambda t: (t[3] != "deduction", t[2]))
        with process_pool(jobs, _init, (cases,)) as pool:
            for i, r in enumerate(pool.map(_score, tasks, chunksize=4)):
                rows.append(r)
                if progress and i % 100 == 0:
                    print(f"  {i}/{len(tasks)}", flush=True)
    scored = sorted({r["case"] for r in rows if r["variant"] == "static"})
    ds = load_dataset(cases, case_ids=scored) if scored else None
    return summarise(rows, meta, [c for c in scored if holds_still(ds.cases[c])] if ds else ())
