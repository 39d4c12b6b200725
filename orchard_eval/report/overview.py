"""The overview page: Table 2 row(s), the stage funnel, pillar/source/task breakdowns, metric and
criterion distributions, judged-vs-objective scatter, rollout spread, zero scores by reason."""
from __future__ import annotations

from collections import defaultdict
from statistics import mean, pstdev

from .. import tables
from . import svg
from .html import esc, fmt, num, page, table, warnings
from .load import Results

MAX_MISSING_ROWS = 500  # a 400-case run that lost everything still gives a page that opens quickly
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
    zero_log_only: dict[str, list[str]] = defaultdict(list)
    have = set()
    for rec in r.records:
        have.add((rec["case_id"], rec["subtrack"], int(rec.get("rollout") or 0)))
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
    for key, (kind, _detail) in r.log_zero.items():
        if key not in have:  # logged, but its record was lost (torn write) or never written
            zero_log_only[kind].append(key[0])
    if zero or zero_log_only:
        rows = []
        for kind in sorted(set(zero) | set(zero_log_only)):
            cids = zero.get(kind, []) + zero_log_only.get(kind, [])
            links = " ".join(f'<a href="{case_href(c)}">{esc(c)}</a>' for c in sorted(set(cids))[:50])
            rows.append([esc(kind), str(len(cids)), str(len(zero_log_only.get(kind, []))), links])
        out.append("<h3>Zero-scored responses by reason</h3><p>from the records (the error of an invalid "
                   "response) and from eval.log (the run logs every zero score; a response whose record "
                   "was lost counts under “only in eval.log”)</p>"
                   + table(["Reason", "Responses", "Only in eval.log", "Cases"], rows, cls="zero", tid=f"zero-{k_id(r)}"))
    if r.missing:
        by_case: dict[str, list[str]] = defaultdict(list)
        for cid, st, ro in r.missing:
            by_case[cid].append(f"{st} rollout {ro}")
        rows = [[f'<a href="{case_href(c)}">{esc(c)}</a>', esc(", ".join(v))] for c, v in sorted(by_case.items())]
        shown = rows[:MAX_MISSING_ROWS]
        more = f"<p>… and {len(rows) - len(shown)} more cases</p>" if len(rows) > len(shown) else ""
        out.append(f"<h3>Missing responses ({len(r.missing)})</h3><p>expected but without a record (the run "
                   "was interrupted, or its records were cut); resuming the run scores them</p>"
                   + table(["Case", "Responses without a record"], shown, cls="missing", tid=f"missing-{k_id(r)}")
                   + more)
    if r.log_warnings:
        items = "".join(f"<li>{esc(w)}</li>" for w in r.log_warnings[:MAX_MISSING_ROWS])
        out.append(f"<details><summary>eval.log warnings ({len(r.log_warnings)})</summary><ul>{items}</ul></details>")
    return "".join(out)


def k_id(r: Results) -> str:
    """An HTML id fragment for a run (its directory name, letters and digits only)."""
    return "".join(ch if ch.isalnum() else "-" for ch in r.path.name)
