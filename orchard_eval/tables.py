"""Result tables in the column order of the paper's Table 2:

    Model | Avg. | P-T  P-G  F-T  F-G  Ded. | Grav.  Mom.  N1  Multi | Sim.  Real | Trans.

written as CSV (machine-readable, empty cell = no score) and Markdown (— = no score). Every cell comes
from a run's `summary.json` (`table_row`), i.e. from case-level means, never from other cells.
`orchard-eval table results/*` puts several runs side by side; judged and objective-only runs are
labelled in the Mode column and never merged. The Prompts column says which prompts each run's
predictions answered (`provenance.prompts`: source and prompt_version, e.g. `apple-pi 1.0` for the
paper's own prompts, `orchard orchard-prompts-v1` for ours); when the rows do not all share one, the
Markdown table says so under the rows (`mixed_prompts`), so runs prompted differently are never
compared silently.

"Trans." is not part of the paper's table: the Deduction transition F1 (`apt.answers.summarise`),
reported beside the score; it enters "Ded." only in runs made with `--fuse-transitions`. Summaries
written before it existed show it as no score.
"""
from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

COLUMNS = ("Avg.", "P-T", "P-G", "F-T", "F-G", "Ded.", "Grav.", "Mom.", "N1", "Multi", "Sim.", "Real", "Trans.")
GROUPS = (("", ("Avg.",)), ("Track-wise", ("P-T", "P-G", "F-T", "F-G", "Ded.")),
          ("Pillar-wise", ("Grav.", "Mom.", "N1", "Multi")), ("Source-wise", ("Sim.", "Real")),
          ("Beside the score", ("Trans.",)))


class TableError(ValueError):
    """A results directory without a usable summary.json."""


def load_summary(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    if p.is_dir():
        p = p / "summary.json"
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise TableError(f"{p}: no summary.json (run `orchard-eval run` first)") from exc
    except ValueError as exc:
        raise TableError(f"{p}: not JSON: {exc}") from exc
    if not isinstance(doc, dict) or "table_row" not in doc:
        raise TableError(f"{p}: not an orchard-eval summary (no table_row)")
    return doc


def prompts_label(summary: Mapping[str, Any]) -> str:
    """`<source> <prompt_version>` of a run's predictions ("unknown" for runs that did not record it)."""
    prov = summary.get("provenance") if isinstance(summary.get("provenance"), Mapping) else {}
    p = prov.get("prompts") if isinstance(prov.get("prompts"), Mapping) else {}
    source = str(p.get("source") or "unknown")
    version = p.get("prompt_version")
    return source if source == "unknown" or version in (None, "") else f"{source} {version}"


def rows(summaries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for s in summaries:
        r = {"Model": str(s.get("model", "?")), "Mode": str(s.get("mode", "?")),
             "Protocol": str(s.get("protocol", "?")), "Prompts": prompts_label(s)}
        r.update({c: s["table_row"].get(c) for c in COLUMNS})
        out.append(r)
    return out


def mixed_prompts(summaries: Iterable[Mapping[str, Any]]) -> list[str]:
    """The distinct prompt labels of the rows when there is more than one (else [])."""
    labels = sorted({prompts_label(s) for s in summaries})
    return labels if len(labels) > 1 else []


def _fmt(v: Any, digits: int) -> str:
    return "—" if v is None else f"{float(v):.{digits}f}"


def to_csv(summaries: Sequence[Mapping[str, Any]], digits: int = 4) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["Model", "Mode", "Protocol", "Prompts", *COLUMNS])
    for r in rows(summaries):
        w.writerow([r["Model"], r["Mode"], r["Protocol"], r["Prompts"],
                    *["" if r[c] is None else f"{float(r[c]):.{digits}f}" for c in COLUMNS]])
    return buf.getvalue()


def to_markdown(summaries: Sequence[Mapping[str, Any]], digits: int = 3) -> str:
    head = ["Model", "Mode", "Prompts", *COLUMNS]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 3 + ["---:"] * len(COLUMNS)) + "|"]
    for r in rows(summaries):
        cells = [r["Model"].replace("|", "\\|"), r["Mode"], r["Prompts"].replace("|", "\\|")]
        lines.append("| " + " | ".join([*cells, *[_fmt(r[c], digits) for c in COLUMNS]]) + " |")
    notes = []
    mixed = mixed_prompts(summaries)
    if mixed:
        notes.append("**Rows answered different prompts** (" + "; ".join(mixed) + "): compare only rows with the "
                     "same Prompts value; scores made under other prompts than the paper's (apple-pi 1.0) do not "
                     "sit next to its Table 2.")
    if any(r["Mode"] == "objective-only" for r in rows(summaries)):
        notes.append("objective-only rows: no judge; P-T and F-T have no objective metric (—), the other "
                     "cells use the objective metrics alone and are not comparable with judged rows.")
    groups = "Groups: " + "; ".join(f"{g}: {', '.join(cs)}" for g, cs in GROUPS if g)
    return "\n".join(lines) + "\n\n" + groups + "\n" + "".join(f"\n{n}\n" for n in notes)


def write_tables(summaries: Sequence[Mapping[str, Any]], stem: str | Path) -> tuple[Path, Path]:
    """Write `<stem>.csv` and `<stem>.md`; returns their paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    c, m = stem.with_suffix(".csv"), stem.with_suffix(".md")
    c.write_text(to_csv(summaries), encoding="utf-8")
    m.write_text(to_markdown(summaries), encoding="utf-8")
    return c, m
