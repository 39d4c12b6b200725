"""The overview page: Table 2 row(s), the stage funnel, pillar/source/task breakdowns, metric and
criterion distributions, judged-vs-objective scatter, rollout spread, zero scores by reason."""
from __future__ import annotations

from collections import defaultdict
from statistics import mean, pstdev

from .. import tables
from . import svg
from .html import esc, fmt, num, page, table, warnings
from .load import Results

STAGES = (("Perception", ("P-T", "P-G")), ("Formulation", ("F-T", "F-G")), ("Deduction", ("Ded.",)))


def case_href(cid: str) -> str:
    return "cases/" + cid.replace("/", "__") + ".html"


def _stage(row: dict, cols) -> float | None:
    vals = [row.get(c) for c in cols if row.get(c) is not None]
    return mean(vals) if vals else None


def render(results: list[Results], problems: list[str]) -> str:
    parts = [warnings(problems)]
    with_summary = [r for r in results if r.summary]
    if with_summary:
        parts.append("<h2>Table 2</h2>" + table(
            ["Model", "Mode", "Prompts", *tables.COLUMNS],
            [[esc(x["Model"]), esc(x["Mode"]), esc(x["Prompts"]), *[num(x[c]) for c in tables.COLUMNS]]
             for x in tables.rows([r.summary for r in with_summary])], tid="table2"))
        names = [r.name for r in with_summary]
        rows = [r.summary["table_row"] for r in with_summary]
        parts.append('<h2>Breakdowns</h2><div class="plots">'
                     + svg.bars([s for s, _ in STAGES], [[_stage(x, c) for _, c in STAGES] for x in rows], names,
                                "Stage funnel: Perception → Formulation → Deduction")
                     + svg.bars(["Grav.", "Mom.", "N1", "Multi"], [[x.get(c) for c in ("Grav.", "Mom.", "N1", "Multi")]
                                                                  for x in rows], names, "Pillars")
                     + svg.bars(["Sim.", "Real"], [[x.get("Sim."), x.get("Real")] for x in rows], names, "Sources", w=240)
                     + "</div>")
    for r in results:
        parts.append(f"<h2>{esc(r.name)} <small>({esc(r.path)})</small></h2>" + _per_run(r))
    return page("Orchard evaluation report", "".join(parts))


def _per_run(r: Results) -> str:
    out = []
    by_task: dict[str, list[float]] = defaultdict(list)
    metrics: dict[str, list[float]] = defaultdict(list)
    criteria: dict[str, list[float]] = defaultdict(list)
    pairs: list[tuple[float, float]] = []
    rollouts: dict[tuple[str, str], list[float]] = defaultdict(list)
    zero: dict[str, list[str]] = defaultdict(list)
    for rec in r.records:
        s = rec.get("score")
        if s is not None:
            by_task[rec.get("task", "?")].append(float(s))
            rollouts[(rec["case_id"], rec["subtrack"])].append(float(s))
        for k, v in (rec.get("metrics") or {}).items():
            if isinstance(v, (int, float)):
                metrics[f"{rec['subtrack']}:{k}"].append(float(v))
        for k, v in (rec.get("criteria") or {}).items():
            if isinstance(v, (int, float)):
                criteria[f"{rec['subtrack']}:{k}"].append(float(v))
        m = [v for v in (rec.get("metrics") or {}).values() if isinstance(v, (int, float))]
        c = [v for v in (rec.get("criteria") or {}).values() if isinstance(v, (int, float))]
        if m and c:
            pairs.append((mean(c), mean(m)))
        if rec.get("error") or s == 0:  # None = no score for this mode (objective-only P-T/F-T), not a zero
            err = rec.get("error") or {}
            zero[str(err.get("kind") or "scored 0")].append(rec["case_id"])
    if by_task:
        out.append("<h3>Per task</h3>" + table(["Task", "Responses", "Mean score"],
                                               [[esc(t), str(len(v)), num(mean(v))] for t, v in sorted(by_task.items())]))
    if metrics or criteria:
        out.append('<h3>Distributions</h3><div class="plots">'
                   + "".join(svg.histogram(v, k) for k, v in sorted(metrics.items()))
                   + "".join(svg.histogram(v, k) for k, v in sorted(criteria.items())) + "</div>")
    if pairs:
        out.append('<h3>Judged vs objective</h3><div class="plots">'
                   + svg.scatter(pairs, "mean criterion vs mean metric per response", "judged", "objective") + "</div>")
    if rollouts:
        spreads = [pstdev(v) for v in rollouts.values() if len(v) > 1]
        out.append(f"<h3>Rollout spread</h3><p>standard deviation of a case × subtrack's rollout scores: "
                   f"mean {fmt(mean(spreads) if spreads else None)}, max {fmt(max(spreads) if spreads else None)} "
                   f"over {len(spreads)} pairs</p>")
    if zero:
        rows = []
        for kind, cids in sorted(zero.items()):
            links = " ".join(f'<a href="{case_href(c)}">{esc(c)}</a>' for c in sorted(set(cids))[:50])
            rows.append([esc(kind), str(len(cids)), links])
        out.append("<h3>Zero-scored responses by reason</h3>" + table(["Reason", "Responses", "Cases"], rows, cls="zero"))
    return "".join(out)
