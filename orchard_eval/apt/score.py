"""`orchard-eval apt score`: a model's replies against the GT chains.

Replies: a JSON Lines file, one `{"case_id": …, "reply": …}` per case, where `reply` is the model's raw
text (parsed with `parse.parse_chain`) or an already-parsed list of records. A case without a reply
counts as an empty chain (every GT transition missed) and is reported as missing.

Numbers (micro-averaged over all cases, one-to-one matching by type within ±200 ms,
`matching.match_chains`): precision, recall and F1 overall, per type and per mechanism domain; the
mean number of predictions and of GT transitions per clip; type accuracy on the pairs matched by
time alone; the median timing error of the matched pairs; and the frame-grid ceiling, the best a
model could score if every time it gave was one of the frame times it was shown.
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..cases import EvalCase, load_dataset, schema_errors
from .matching import TOLERANCE_S, Counts, frame_grid_ceiling, match_chains, pooled
from .parse import ParsedChain, parse_chain, parse_record
from .prompt import DEFAULT_FRAMES, PROMPT_VERSION, sample_frames


class ReplyFileError(ValueError):
    """A replies file that cannot be read (bad JSON line, missing case_id)."""


def read_replies(path: str | Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ReplyFileError(f"{p}: {exc.strerror or exc}") from exc
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
        except ValueError as exc:
            raise ReplyFileError(f"{p}:{n}: not a JSON line ({exc.msg})") from exc
        if not isinstance(doc, dict) or not isinstance(doc.get("case_id"), str) or "reply" not in doc:
            raise ReplyFileError(f'{p}:{n}: expected {{"case_id": "...", "reply": ...}}')
        out[doc["case_id"]] = doc["reply"]
    return out


def parse_any(reply: Any) -> ParsedChain:
    if isinstance(reply, str):
        return parse_chain(reply)
    records = reply if isinstance(reply, list) else [reply]
    chain = [r for r in map(parse_record, records) if r is not None]
    return ParsedChain(chain, n_records=len(records), n_dropped=len(records) - len(chain))


def _counts(c: Counts) -> dict[str, Any]:
    return {"tp": c.tp, "n_pred": c.n_pred, "n_gt": c.n_gt, "precision": c.precision, "recall": c.recall, "f1": c.f1}


def score_replies(cases: Iterable[EvalCase], replies: Mapping[str, Any], n_frames: int = DEFAULT_FRAMES,
                  tolerance: float = TOLERANCE_S, model: str | None = None) -> dict[str, Any]:
    results, rows, ceilings = [], [], Counts()
    unknown: Counter = Counter()
    dts, typed = [], []
    n_pred = n_gt = n_missing = 0
    chosen = [c for c in cases if c.events is not None]
    for case in chosen:
        gt = list(case.events or ())
        missing = case.case_id not in replies
        parsed = ParsedChain([]) if missing else parse_any(replies[case.case_id])
        r = match_chains(parsed.transitions, gt, tolerance)
        results.append(r)
        ceilings.add(frame_grid_ceiling(gt, [s.t for s in sample_frames(case, n_frames)], tolerance))
        unknown.update(p.type for p in parsed.transitions if p.type in r.unknown_types)
        dts += r.timing_errors
        if r.type_accuracy is not None:
            typed.append(r.type_accuracy)
        n_pred += r.overall.n_pred
        n_gt += r.overall.n_gt
        n_missing += missing
        rows.append({"case_id": case.case_id, "missing": missing, "f1": r.overall.f1, "precision": r.overall.precision,
                     "recall": r.overall.recall, "n_pred": r.overall.n_pred, "n_gt": r.overall.n_gt,
                     "n_dropped": parsed.n_dropped, "repaired": parsed.repaired, "unknown_types": r.unknown_types})
    pool = pooled(results)
    report = {
        "benchmark": "orchard-apt", "model": model, "prompt_version": PROMPT_VERSION,
        "tolerance_ms": tolerance * 1000.0, "n_frames": n_frames, "n_cases": len(chosen), "n_missing": n_missing,
        "overall": _counts(pool["overall"]),
        "mean_predictions_per_clip": n_pred / len(chosen) if chosen else 0.0,
        "mean_gt_per_clip": n_gt / len(chosen) if chosen else 0.0,
        "type_accuracy": _type_accuracy(results),
        "median_dt_ms": float(np.median(dts)) * 1000.0 if dts else None,
        "unknown_types": dict(sorted(unknown.items())),
        "per_type": {k: _counts(v) for k, v in sorted(pool.items()) if k != "overall" and not k.startswith("domain:")},
        "per_domain": {k[7:]: _counts(v) for k, v in sorted(pool.items()) if k.startswith("domain:")},
        "ceiling": _counts(ceilings),
        "cases": rows,
    }
    errs = schema_errors(report, "apt_report.schema.json")
    if errs:  # pragma: no cover - our own document
        raise AssertionError("; ".join(errs[:3]))
    return report


def _type_accuracy(results) -> float | None:
    """Over all pairs matched by time alone, pooled across clips."""
    num = den = 0.0
    for r in results:
        if r.type_accuracy is not None and r.n_loose:
            num += r.type_accuracy * r.n_loose
            den += r.n_loose
    return num / den if den else None


def _f(v: float | None) -> str:
    return "–" if v is None else f"{100.0 * v:.1f}"


def markdown(report: Mapping[str, Any]) -> str:
    o, c = report["overall"], report["ceiling"]
    dt = "–" if report["median_dt_ms"] is None else f"{report['median_dt_ms']:.0f}"
    lines = [f"# APT chain benchmark: {report.get('model') or 'replies'}", "",
             f"{report['n_cases']} clips ({report['n_missing']} without a reply), {report['n_frames']} frames each, "
             f"one-to-one matching by type within ±{report['tolerance_ms']:.0f} ms. Percentages.", "",
             "| | precision | recall | F1 | pred./clip | GT/clip | type acc. | median ΔT (ms) |",
             "|---|---|---|---|---|---|---|---|",
             f"| model | {_f(o['precision'])} | {_f(o['recall'])} | {_f(o['f1'])} | "
             f"{report['mean_predictions_per_clip']:.1f} | {report['mean_gt_per_clip']:.1f} | "
             f"{_f(report['type_accuracy'])} | {dt} |",
             f"| frame-grid ceiling | {_f(c['precision'])} | {_f(c['recall'])} | {_f(c['f1'])} | | | | |", "",
             "| type / domain | GT | pred. | hits | precision | recall | F1 |", "|---|---|---|---|---|---|---|"]
    for table in (report["per_domain"], report["per_type"]):
        for k, v in table.items():
            lines.append(f"| {k} | {v['n_gt']} | {v['n_pred']} | {v['tp']} | {_f(v['precision'])} | {_f(v['recall'])} | "
                         f"{_f(v['f1'])} |")
    if report["unknown_types"]:
        lines += ["", "Unknown types in the replies: " + ", ".join(f"{k} ×{n}" for k, n in report["unknown_types"].items())]
    return "\n".join(lines) + "\n"


def write_report(report: Mapping[str, Any], out: str | Path) -> tuple[Path, Path]:
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = (out / "apt_report.json", out / "apt_report.md")
    for p, text in zip(paths, (json.dumps(report, indent=2, ensure_ascii=False) + "\n", markdown(report))):
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(p)
    return paths


def score_files(cases: str | Path, replies: str | Path, out: str | Path, n_frames: int = DEFAULT_FRAMES,
                model: str | None = None) -> dict[str, Any]:
    ds = load_dataset(cases)
    report = score_replies([c for _, c in sorted(ds.cases.items())], read_replies(replies), n_frames, model=model)
    write_report(report, out)
    return report
