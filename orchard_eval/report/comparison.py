"""Comparison of runs on one dataset: per-case mean-score deltas and the cases they disagree on most."""
from __future__ import annotations

from statistics import mean

from .html import esc, num, page, table, warnings
from .load import Results
from .overview import case_href


def case_means(r: Results) -> dict[str, float]:
    acc: dict[str, list[float]] = {}
    for rec in r.records:
        if rec.get("score") is not None:
            acc.setdefault(rec["case_id"], []).append(float(rec["score"]))
    return {c: mean(v) for c, v in acc.items()}


def render(results: list[Results], problems: list[str], top: int = 20) -> str:
    if len(results) < 2:
        return page("Comparison", warnings(problems) + "<p>One run only: nothing to compare.</p>")
    means = [case_means(r) for r in results]
    common = sorted(set.intersection(*[set(m) for m in means]))
    rows, spread = [], []
    for cid in common:
        vals = [m[cid] for m in means]
        spread.append((max(vals) - min(vals), cid))
        rows.append([f'<a href="{case_href(cid)}">{esc(cid)}</a>', *[num(v) for v in vals],
                     *[num(v - vals[0]) for v in vals[1:]]])
    head = ["Case", *[r.name for r in results], *[f"Δ {r.name} − {results[0].name}" for r in results[1:]]]
    worst = sorted(spread, reverse=True)[:top]
    dis = table(["Case", "max − min"], [[f'<a href="{case_href(c)}">{esc(c)}</a>', num(d)] for d, c in worst])
    return page("Comparison", warnings(problems) + f"<h2>Most disagreement (top {len(worst)})</h2>" + dis
                + f"<h2>Per-case deltas ({len(common)} cases in every run)</h2>" + table(head, rows, tid="deltas"))
