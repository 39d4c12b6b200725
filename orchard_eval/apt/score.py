"""`orchard-eval apt score`: a prediction file against the GT chains of a dataset (docs/apt.md).

Predictions are JSON Lines, one object per case: `{"case_id": ..., "reply": "<the model's raw text>"}`
(read with `parse.parse_chain`) or `{"case_id": ..., "transitions": [{"type", "t_ms"}, ...]}`. A case
without a prediction scores as an empty chain (all of its transitions missed) and is listed.

Every number comes from `matching.match_chains` (one-to-one, same type, ±200 ms, greedy by
confidence or by the order given) pooled over clips (micro average): precision, recall and F1
overall, per type and per mechanism domain; the mean number of predictions per clip; type accuracy
on the pairs matched by time alone; the median timing error of the matched pairs; and the frame-grid
ceiling at each frame budget (the best a chain could score if its times had to be sampled-frame times).
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Iterable, Mapping

import numpy as np

from ..cases import Dataset, EvalCase, load_dataset, schema_errors
from .matching import TOLERANCE_S, Counts, frame_grid_ceiling, match_chains, pooled, without_excused
from .observable import case_observable
from .parse import ParsedChain, parse_chain
from .prompt import DEFAULT_FRAMES, PROMPT_VERSION, frame_plan
from .taxonomy import APT_TYPES, DOMAINS

REPORT_VERSION = 1
REPORT_SCHEMA = "eval_apt_report.schema.json"


class PredictionFileError(ValueError):
    """A prediction file that cannot be read at all (a bad line is skipped and reported instead)."""


def read_predictions(path: str | Path) -> tuple[dict[str, dict], list[str]]:
    """case id -> record; later lines for the same case replace earlier ones. A directory means
    DIR/predictions.jsonl. Lines that are not JSON objects with a string case_id are skipped (noted)."""
    p = Path(path)
    if p.is_dir():
        p = p / "predictions.jsonl"
    if not p.is_file():
        raise PredictionFileError(f"{p}: no prediction file")
    out: dict[str, dict] = {}
    notes: list[str] = []
    for n, line in enumerate(p.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            notes.append(f"{p.name}:{n}: not JSON (skipped)")
            continue
        if not isinstance(rec, dict) or not isinstance(rec.get("case_id"), str):
            notes.append(f"{p.name}:{n}: no case_id (skipped)")
            continue
        out[rec["case_id"]] = rec
    return out, notes


def chain_of(rec: Mapping | None, duration_s: float | None) -> ParsedChain:
    if rec is None:
        return ParsedChain(transitions=[], notes=["no prediction"])
    if isinstance(rec.get("transitions"), list):
        return parse_chain(json.dumps(rec["transitions"]), duration_s)
    return parse_chain(rec.get("reply") if isinstance(rec.get("reply"), str) else None, duration_s)


def ceiling(cases: Iterable[EvalCase], n_frames: int, tolerance: float = TOLERANCE_S) -> Counts:
    """The frame-grid ceiling over the cases' shown events (`observable`)."""
    total = Counts()
    for case in cases:
        ob = case_observable(case)
        if ob is None:
            continue
        plan = frame_plan(case.n_frames_declared, case.gt_fps, n_frames)
        total.add(frame_grid_ceiling(ob.shown, [f.index / case.gt_fps for f in plan], tolerance))
    return total


def _pct(x: float | None) -> float | None:
    return None if x is None else float(x)


def score(cases: str | Path | Dataset, predictions: Mapping[str, Mapping] | str | Path,
          n_frames: int = DEFAULT_FRAMES, tolerance: float = TOLERANCE_S,
          ceiling_frames: Iterable[int] = (8, 16)) -> dict:
    """The report (eval_apt_report.schema.json)."""
    ds = cases if isinstance(cases, Dataset) else load_dataset(cases)
    notes: list[str] = [f"dataset problem (case skipped): {p}" for p in ds.problems]
    if not isinstance(predictions, Mapping):
        predictions, more = read_predictions(predictions)
        notes += more
    results, per_case = [], []
    dts: list[float] = []
    loose = correct = 0
    n_pred_total = 0
    missing, no_gt, parse_issues = [], [], 0
    for cid in sorted(ds.cases):
        case = ds.cases[cid]
        if case.events is None:
            no_gt.append(cid)
            continue
        rec = predictions.get(cid)
        if rec is None:
            missing.append(cid)
        chain = chain_of(rec, case.physics_duration)
        ob = case_observable(case)
        gt = list(ob.shown)
        # a reported transition that only an unsure one (real, but one the video may not show) takes
        # is excused: neither a hit nor a false alarm
        preds = without_excused(chain.transitions, gt, ob.unsure, tolerance)
        r = match_chains(preds, gt, tolerance)
        results.append(r)
        n_pred_total += len(preds)
        dts += r.timing_errors
        loose += r.n_loose   # pairs matched by time alone: the denominator of type accuracy
        correct += int(round((r.type_accuracy or 0.0) * r.n_loose))
        if rec is not None and (chain.truncated or chain.dropped or not chain.found):
            parse_issues += 1
        per_case.append({"case_id": cid, "n_gt": len(gt), "n_pred": len(preds), "tp": r.overall.tp,
                         "n_unsure": len(ob.unsure), "n_excused": len(chain.transitions) - len(preds),
                         "f1": r.overall.f1, "median_dt_ms": None if r.median_timing_error is None
                         else 1000 * r.median_timing_error, "parse": chain.as_dict()})
    pool = pooled(results)
    overall = pool["overall"]
    n_clips = len(results)
    budgets = sorted({int(n_frames), *(int(k) for k in ceiling_frames)})
    scored = [ds.cases[c["case_id"]] for c in per_case]
    ceilings = {}
    for k in budgets:
        c = ceiling(scored, k, tolerance)
        ceilings[str(k)] = {"recall": c.recall, "f1": c.f1, "reachable": c.tp, "n_gt": c.n_gt}
    unknown = sorted({t for c in per_case for t in c["parse"]["unknown_types"]})
    report = {
        "report_version": REPORT_VERSION, "prompt_version": PROMPT_VERSION, "n_frames": int(n_frames),
        "tolerance_ms": 1000 * tolerance, "dataset": {"name": ds.name, "version": ds.version},
        "n_clips": n_clips, "n_gt": overall.n_gt, "n_pred": overall.n_pred,
        "overall": {"tp": overall.tp, "precision": overall.precision, "recall": overall.recall, "f1": overall.f1},
        "mean_pred_per_clip": n_pred_total / n_clips if n_clips else None,
        "mean_gt_per_clip": overall.n_gt / n_clips if n_clips else None,
        "type_accuracy": correct / loose if loose else None, "time_matched_pairs": loose,
        "median_dt_ms": float(np.median(dts)) * 1000 if dts else None,
        "frame_grid_ceiling": ceilings,
        "per_type": {t: pool[t].as_dict() for t in APT_TYPES if t in pool},
        "per_domain": {d: pool[f"domain:{d}"].as_dict() for d in (*DOMAINS, "unknown") if f"domain:{d}" in pool},
        "unknown_types": unknown, "replies_with_parse_issues": parse_issues,
        "missing_predictions": missing, "cases_without_gt": no_gt,
        "unknown_cases": sorted(set(predictions) - set(ds.cases)), "notes": notes, "cases": per_case,
    }
    errs = schema_errors(report, REPORT_SCHEMA)
    if errs:  # a bug here, not bad input: refuse to write a report that breaks its own contract
        raise AssertionError(f"APT report breaks {REPORT_SCHEMA}: " + "; ".join(errs[:5]))
    return report


def _f(x: float | None, pct: bool = True) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{100 * x:.1f}" if pct else f"{x:.0f}"


def to_markdown(rep: Mapping) -> str:
    o = rep["overall"]
    lines = [f"APT chains: {rep['n_clips']} clips, {rep['n_gt']} GT transitions, {rep['n_pred']} predicted "
             f"({rep['n_frames']} frames, ±{rep['tolerance_ms']:.0f} ms).", "",
             "| Precision | Recall | F1 | Pred/clip | GT/clip | Type acc. | Median ΔT (ms) | "
             + " | ".join(f"Ceiling F1 @{k}" for k in rep["frame_grid_ceiling"]) + " |",
             "|" + "---|" * (7 + len(rep["frame_grid_ceiling"])),
             f"| {_f(o['precision'])} | {_f(o['recall'])} | {_f(o['f1'])} | "
             f"{'–' if rep['mean_pred_per_clip'] is None else format(rep['mean_pred_per_clip'], '.2f')} | "
             f"{'–' if rep['mean_gt_per_clip'] is None else format(rep['mean_gt_per_clip'], '.2f')} | "
             f"{_f(rep['type_accuracy'])} | {_f(rep['median_dt_ms'], pct=False)} | "
             + " | ".join(_f(c["f1"]) for c in rep["frame_grid_ceiling"].values()) + " |", "",
             "| Slice | GT | Pred | TP | Precision | Recall | F1 |", "|---|---|---|---|---|---|---|"]
    for title, table in (("domain", rep["per_domain"]), ("type", rep["per_type"])):
        for k, c in table.items():
            lines.append(f"| {title}: {k} | {c['n_gt']} | {c['n_pred']} | {c['tp']} | {_f(c['precision'])} | "
                         f"{_f(c['recall'])} | {_f(c['f1'])} |")
    if rep["unknown_types"]:
        lines += ["", "Unknown types in the replies: " + ", ".join(rep["unknown_types"])]
    return "\n".join(lines) + "\n"


def write_report(rep: Mapping, out: str | Path) -> tuple[Path, Path]:
    from ..atomic import write_json_atomic

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "report.json", rep)
    md = out / "report.md"
    tmp = md.with_name(".report.md.tmp")
    tmp.write_text(to_markdown(rep), encoding="utf-8")
    tmp.replace(md)
    return out / "report.json", md
