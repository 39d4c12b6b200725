"""Run the fidelity benchmark: make every family's answers for a set of built cases (with their
truth), score them with the code path of `orchard-eval run` (`run.Scorer`, objective-only), compute
the ideal values from the truth, and summarise reported against ideal.

Work directory layout (answers and counterfactual builds are reused by a rerun; scores are always
recomputed, since what is measured is the evaluator):

    <work>/counterfactual/<variant>/{scenes,materials.yaml,out}   edited configs and their builds
    <work>/answers/<family>/submission.json, cases/<case_id>/<subtrack>/rollout_00.{mp4,png}
    <work>/truth/<family>/<case_id>.npz
"""
from __future__ import annotations

import json
import math
from concurrent.futures import as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
from orchard_build.pool import process_pool

from ..baselines import encode_video
from ..cases import Dataset, EvalCase, load_dataset
from . import counterfactual as CF
from .families import DEDUCTION, KINDS, Answer, Family, Source, catalogue, make_answer
from .truth import DEDUCTION_METRICS, GRAPHIC_METRIC, graphic_ideal, deduction_ideal, load_truth, save_truth

TARGET_APPEARANCE_MEAN, TARGET_APPEARANCE_P90 = 0.03, 0.06
TARGET_CAMERA_BELOW = 0.05
TARGET_PHYSICS_MEAN = 0.005
TARGET_SPEARMAN, TARGET_ORDERING = 0.95, 0.95
ORDER_GAP = 0.1
TIE_WIDTH = 0.01


@dataclass
class Row:
    family: str
    kind: str
    subtrack: str
    case_id: str
    task: str
    metric: str
    reported: float | None
    ideal: float | None
    ideal_image: float | None       # image-space ideal (differs from `ideal` for camera changes)
    note: str = ""


def _slug(family: str) -> str:
    return family.replace("/", "__").replace("+", "_and_")


def answers_dir(work: Path, family: str) -> Path:
    """The submission directory (the `orchard-eval run` layout) of a family's answers under `work`."""
    return work / "answers" / _slug(family)


def truth_dir(work: Path, family: str) -> Path:
    """The directory of a family's truths under `work`: one NPZ per case, at the case id's path."""
    return work / "truth" / _slug(family)


def truth_path(work: Path, family: str, case_id: str) -> Path:
    """The NPZ of a family's truth for one case under `work` (`truth.load_truth`)."""
    return truth_dir(work, family) / f"{case_id}.npz"


def select_cases(ds: Dataset, per_task: int, seed: int = 0) -> list[str]:
    """`per_task` case ids per task, drawn reproducibly."""
    by_task: dict[str, list[str]] = {}
    for cid in sorted(ds.cases):
        by_task.setdefault(cid.split("/")[1], []).append(cid)
    rng = np.random.default_rng(seed)
    out = []
    for task in sorted(by_task):
        ids = by_task[task]
        pick = rng.choice(len(ids), size=min(per_task, len(ids)), replace=False)
        out.extend(ids[i] for i in sorted(pick))
    return out


# ---------------------------------------------------------------------------------------------
# Counterfactual builds
# ---------------------------------------------------------------------------------------------
def build_counterfactuals(ds: Dataset, case_ids: Sequence[str], variants: Iterable[str], work: Path,
                          library: Path, jobs: int = 1, log=print) -> None:
    root = work / "counterfactual"
    for v in sorted(set(variants)):
        configs = []
        for cid in case_ids:
            p = CF.write_variant(ds.cases[cid], v, root, library)
            if p is not None:
                configs.append(p)
        if configs:
            _, out = CF.build_variant(root, v, configs, jobs)
            log(f"counterfactual {v}: " + " | ".join(out.strip().splitlines()[:2]))


# ---------------------------------------------------------------------------------------------
# One case: make its answers, score them, compare
# ---------------------------------------------------------------------------------------------
def _write_answer(ans: Answer, fam: Family, root: Path, case_id: str) -> Path:
    d = root / "cases" / case_id / fam.subtrack
    d.mkdir(parents=True, exist_ok=True)
    if fam.protocol == "video":
        p = d / "rollout_00.mp4"
        crf = ans.codec[1] if ans.codec and ans.codec[0] == "h264" else 18
        encode_video(p, ans.frames, fps=ans.fps, crf=crf)
    else:
        from PIL import Image

        p = d / "rollout_00.png"
        Image.fromarray(ans.frames[0]).save(p)
    return p


def _submission(root: Path, fam: Family) -> None:
    p = root / "submission.json"
    if not p.is_file():
        root.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"model": f"fidelity:{fam.name}", "protocol": fam.protocol, "num_rollouts": 1,
                                 "prompt_version": "orchard-prompts-v1",
                                 "notes": f"fidelity benchmark family {fam.name}: {fam.about}"}), encoding="utf-8")


def _sampled(case: EvalCase, n_video_frames: int) -> set[int]:
    from ..run import _indices

    out = {0}
    for rule in ("paper", "published"):
        out |= set(_indices(case, case.timestamps, n_video_frames - 1, rule))
    return out


def _sources(case: EvalCase, work: Path, variants: Iterable[str]) -> dict[str, Source]:
    out = {"gt": Source(case, case)}
    for v in variants:
        c = CF.load_variant_case(work / "counterfactual", v, case)
        if c is not None:
            out[v] = Source(c, case)
    return out


def prepare_case(case: EvalCase, families: Sequence[Family], work: Path) -> dict[str, str]:
    """Write the answers (and truths) of `case` that do not exist yet. Returns family → why it has
    no answer for this case."""
    skipped: dict[str, str] = {}
    sources = None
    for fam in families:
        troot = truth_path(work, fam.name, case.case_id)
        aroot = answers_dir(work, fam.name)
        if troot.is_file():
            continue
        if sources is None:
            sources = _sources(case, work, sorted({v for f in families for v in f.spec.sources}))
        ans = make_answer(fam, case, sources)
        if ans is None:
            skipped[fam.name] = "does not apply to this case"
            continue
        _submission(aroot, fam)
        _write_answer(ans, fam, aroot, case.case_id)
        keep = _sampled(case, len(ans.frames)) if fam.subtrack == DEDUCTION else None
        save_truth(troot, ans.truth, [o.id for o in case.objects], keep)
    return skipped


def score_case(ds: Dataset, case_id: str, families: Sequence[Family], work: Path, segmenter: str = "classical",
               rule: str = "paper") -> list[Row]:
    from ..judges import get_judge
    from ..predictions import load_submission
    from ..run import Scorer

    case = ds.cases[case_id]
    judge = get_judge("none")
    rows: list[Row] = []
    for fam in families:
        tpath = truth_path(work, fam.name, case_id)
        if not tpath.is_file():
            continue
        sub = load_submission(answers_dir(work, fam.name))
        rec = Scorer(ds, sub, judge, rule, segmenter).score(case_id, fam.subtrack, 0)
        truth, _ = load_truth(tpath)
        rows.extend(_compare(case, fam, rec, truth, rule))
    return rows


def _compare(case: EvalCase, fam: Family, rec: dict, truth, rule: str) -> list[Row]:
    got = rec.get("metrics") or {}
    note = "" if rec.get("valid", True) else f"invalid: {(rec.get('error') or {}).get('kind')}"
    base = dict(family=fam.name, kind=fam.kind, subtrack=fam.subtrack, case_id=case.case_id, task=case.task)
    if fam.subtrack != DEDUCTION:
        ideal = graphic_ideal(case, fam.subtrack, truth.view(True)[0])
        img = graphic_ideal(case, fam.subtrack, truth.frames[0]) if truth.registered else ideal
        return [Row(**base, metric=GRAPHIC_METRIC, reported=_num(got.get(GRAPHIC_METRIC), rec), ideal=ideal,
                    ideal_image=img, note=note)]
    art = rec.get("artifact") or {}
    idx, n = art.get("pred_indices"), art.get("n_frames")
    if not idx or not n:
        return [Row(**base, metric=m, reported=_num(got.get(m), rec), ideal=None, ideal_image=None,
                    note=note or "no frame choice recorded") for m in DEDUCTION_METRICS]
    ideal = deduction_ideal(case, truth.view(True), idx, n, rule)
    img = deduction_ideal(case, truth.frames, idx, n, rule) if truth.registered else ideal
    return [Row(**base, metric=m, reported=_num(got.get(m), rec), ideal=ideal.get(m), ideal_image=img.get(m),
                note=note) for m in DEDUCTION_METRICS]


def _num(v, rec) -> float | None:
    if v is None and not rec.get("valid", True):
        return 0.0          # an invalid response scores 0 on every metric
    return None if v is None else float(v)


def _case_job(args) -> tuple[list[Row], dict[str, str]]:
    root, case_id, names, work, segmenter, rule = args
    fams = [f for f in catalogue() if f.name in names]
    ds = load_dataset(root, case_ids=[case_id])
    skipped = prepare_case(ds.cases[case_id], fams, Path(work))
    return score_case(ds, case_id, fams, Path(work), segmenter, rule), skipped


def run(cases_root: str | Path, case_ids: Sequence[str], work: str | Path, families: Sequence[Family] | None = None,
        jobs: int = 1, segmenter: str = "classical", rule: str = "paper", library: Path | None = None,
        progress: bool = True, log=print) -> tuple[list[Row], dict[str, dict[str, str]]]:
    """Everything above for `case_ids`; returns the rows and, per case, the families it has no
    answer for (and why)."""
    from tqdm import tqdm

    work = Path(work)
    fams = list(families or catalogue())
    ds = load_dataset(cases_root, case_ids=case_ids)
    variants = {v for f in fams for v in f.spec.sources}
    if variants:
        build_counterfactuals(ds, case_ids, variants, work, library or CF.default_library(), jobs, log)
    names = [f.name for f in fams]
    tasks = [(str(cases_root), cid, names, str(work), segmenter, rule) for cid in case_ids]
    rows: list[Row] = []
    skipped: dict[str, dict[str, str]] = {}
    bar = tqdm(total=len(tasks), unit="case", disable=not progress)
    done: dict[str, list[Row]] = {}
    if jobs <= 1:
        for t in tasks:
            done[t[1]], skipped[t[1]] = _case_job(t)
            bar.update(1)
    else:
        with process_pool(jobs) as pool:
            futures = {pool.submit(_case_job, t): t[1] for t in tasks}
            for fut in as_completed(futures):
                done[futures[fut]], skipped[futures[fut]] = fut.result()
                bar.update(1)
    bar.close()
    for cid in case_ids:          # rows in case order, whatever finished first
        rows.extend(done[cid])
    return rows, skipped


# ---------------------------------------------------------------------------------------------
# Statistics
# ---------------------------------------------------------------------------------------------
def spearman(reported: Sequence[float], ideal: Sequence[float], tie: float | None = TIE_WIDTH) -> float | None:
    """Spearman's ρ of reported against ideal values. With `tie`, answers whose ideals fall in the
    same bin of that width count as one, at their mean reported value: most appearance answers
    have an ideal of exactly 1.0, and the ranks of their reported values among themselves — noise,
    which the mean and p90 errors measure — would otherwise dominate ρ (with a perfect ordering
    between the tied groups and noise within them, ρ of this benchmark's mix stays near 0.7)."""
    from scipy.stats import spearmanr

    r, i = np.asarray(reported, float), np.asarray(ideal, float)
    if tie:
        keys = np.floor(i / tie)
        uniq = np.unique(keys)
        r = np.array([r[keys == k].mean() for k in uniq])
        i = np.array([i[keys == k].mean() for k in uniq])
    if r.size < 3 or np.ptp(r) < 1e-9 or np.ptp(i) < 1e-9:
        return None
    return float(spearmanr(r, i).statistic)


def ordering_accuracy(rows: Sequence[Row], among: Sequence[Row] | None = None, gap: float = ORDER_GAP
                      ) -> tuple[float | None, int]:
    """For pairs of answers to the same case whose ideals differ by ≥ `gap`: the share the reported
    values order the same way (a tie counts as wrong). `among`: only pairs with one member there."""
    by_case: dict[tuple[str, str], list[Row]] = {}
    for r in rows:
        by_case.setdefault((r.case_id, r.metric), []).append(r)
    mine = None if among is None else {id(r) for r in among}
    good = total = 0
    for group in by_case.values():
        for i in range(len(group)):
            for j in range(i + 1, len(group)):
                a, b = group[i], group[j]
                if mine is not None and id(a) not in mine and id(b) not in mine:
                    continue
                if abs(a.ideal - b.ideal) < gap:
                    continue
                total += 1
                good += (a.reported - b.reported) * (a.ideal - b.ideal) > 0
    return (good / total if total else None), total


def usable(rows: Iterable[Row]) -> list[Row]:
    return [r for r in rows if r.reported is not None and r.ideal is not None]


@dataclass
class Stat:
    n: int
    mean: float | None
    p90: float | None
    spearman: float | None          # ties of the ideal grouped (`spearman`)
    spearman_raw: float | None      # every answer on its own
    ordering: float | None
    below_image: float | None      # the largest amount the reported value lies below the image-space ideal


def stat(rows: Sequence[Row], all_rows: Sequence[Row] | None = None) -> Stat:
    rows = usable(rows)
    if not rows:
        return Stat(0, None, None, None, None, None, None)
    err = np.abs([r.reported - r.ideal for r in rows])
    below = [r.ideal_image - r.reported for r in rows if r.ideal_image is not None]
    order, _ = ordering_accuracy(usable(all_rows) if all_rows is not None else rows,
                                 rows if all_rows is not None else None)
    rep, ide = [r.reported for r in rows], [r.ideal for r in rows]
    return Stat(len(rows), float(err.mean()), float(np.percentile(err, 90)), spearman(rep, ide),
                spearman(rep, ide, tie=None), order, max(below) if below else None)


def summarise(rows: Sequence[Row]) -> dict:
    """Per family and metric, per kind and metric, and per metric over everything, with the
    targets checked."""
    rows = list(rows)
    metrics = sorted({r.metric for r in rows}, key=lambda m: (m != GRAPHIC_METRIC, m))
    out: dict = {"families": {}, "kinds": {}, "metrics": {}, "targets": []}
    for fam in sorted({r.family for r in rows}):
        out["families"][fam] = {m: asdict(stat([r for r in rows if r.family == fam and r.metric == m], rows))
                                for m in metrics if any(r.family == fam and r.metric == m for r in rows)}
    for kind in KINDS:
        for sub in sorted({r.subtrack for r in rows}):
            for m in metrics:
                sel = [r for r in rows if r.kind == kind and r.subtrack == sub and r.metric == m]
                if sel:
                    out["kinds"][f"{sub}/{kind}/{m}"] = asdict(stat(sel))
    for sub in sorted({r.subtrack for r in rows}):
        for m in metrics:
            sel = [r for r in rows if r.subtrack == sub and r.metric == m]
            if sel:
                out["metrics"][f"{sub}/{m}"] = asdict(stat(sel))
    out["targets"] = check_targets(rows, out)
    return out


def check_targets(rows: Sequence[Row], summary: dict) -> list[dict]:
    """The issue's targets, each with the measured figure and whether it is met."""
    res = []

    def add(what, value, ok):
        res.append({"target": what, "value": value, "ok": bool(ok)})

    fams = summary["families"]
    for fam, per in fams.items():
        kind = next(r.kind for r in rows if r.family == fam)
        for m, s in per.items():
            if s["n"] == 0:
                continue
            if kind == "appearance":
                add(f"{fam} {m}: mean |err| ≤ {TARGET_APPEARANCE_MEAN}", s["mean"], s["mean"] <= TARGET_APPEARANCE_MEAN)
                add(f"{fam} {m}: p90 |err| ≤ {TARGET_APPEARANCE_P90}", s["p90"], s["p90"] <= TARGET_APPEARANCE_P90)
            elif kind == "camera":
                add(f"{fam} {m}: never more than {TARGET_CAMERA_BELOW} below the image-space ideal",
                    s["below_image"], s["below_image"] is None or s["below_image"] <= TARGET_CAMERA_BELOW)
            elif kind == "physics":
                add(f"{fam} {m}: mean |err| ≤ {TARGET_PHYSICS_MEAN}", s["mean"], s["mean"] <= TARGET_PHYSICS_MEAN)
    for key, s in summary["metrics"].items():
        if s["spearman"] is not None:
            add(f"{key}: Spearman ≥ {TARGET_SPEARMAN}", s["spearman"], s["spearman"] >= TARGET_SPEARMAN)
        if s["ordering"] is not None:
            add(f"{key}: ordering accuracy ≥ {TARGET_ORDERING}", s["ordering"], s["ordering"] >= TARGET_ORDERING)
    return res


def _fmt(x: float | None, nd: int = 3) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def table(summary: dict, rows: Sequence[Row]) -> str:
    """Markdown: one row per family (mean / p90 of |reported − ideal| per metric, Spearman and ordering
    per family), the per-metric totals, and the targets."""
    about = {f.name: f.about for f in catalogue()}
    lines = []
    for sub, metrics in ((DEDUCTION, DEDUCTION_METRICS), ("perception_graphic", (GRAPHIC_METRIC,)),
                         ("formulation_graphic", (GRAPHIC_METRIC,))):
        fams = [f for f in summary["families"] if any(r.family == f and r.subtrack == sub for r in rows)]
        if not fams:
            continue
        head = " | ".join(f"{m} mean / p90 / ρ / ord" for m in metrics)
        lines += [f"\n### {sub}\n", f"| family | kind | what | n | {head} |",
                  "|---|---|---|---|" + "---|" * len(metrics)]
        for fam in fams:
            per = summary["families"][fam]
            kind = next(r.kind for r in rows if r.family == fam)
            n = max((per[m]["n"] for m in metrics if m in per), default=0)
            cells = []
            for m in metrics:
                s = per.get(m)
                if s is None:
                    cells.append("—")
                    continue
                extra = f" (below img {_fmt(s['below_image'])})" if kind == "camera" else ""
                cells.append(f"{_fmt(s['mean'])} / {_fmt(s['p90'])} / {_fmt(s['spearman'], 2)} / "
                             f"{_fmt(s['ordering'], 2)}{extra}")
            lines.append(f"| {fam} | {kind} | {about.get(fam, '')} | {n} | " + " | ".join(cells) + " |")
    lines += ["\n### per metric, all families\n",
              "| metric | n | mean | p90 | Spearman (ties grouped) | Spearman (raw) | ordering |",
              "|---|---|---|---|---|---|---|"]
    for key, s in summary["metrics"].items():
        lines.append(f"| {key} | {s['n']} | {_fmt(s['mean'])} | {_fmt(s['p90'])} | {_fmt(s['spearman'])} | "
                     f"{_fmt(s['spearman_raw'])} | {_fmt(s['ordering'])} |")
    failed = [t for t in summary["targets"] if not t["ok"]]
    lines += [f"\ntargets met: {len(summary['targets']) - len(failed)} / {len(summary['targets'])}"]
    lines += [f"- MISSED {t['target']}: {_fmt(t['value'])}" for t in failed]
    return "\n".join(lines)
