"""One page per case (answers and references per subtrack and rollout, scores per criterion and
group, judge feedback, metric values, Deduction per-timestamp details) and the case list."""
from __future__ import annotations

from pathlib import Path
from statistics import mean

from PIL import Image

from . import prompt_text, svg, visuals
from .cache import VisualCache
from .html import esc, fmt, num, page, table
from .load import Results
from .overview import case_href

THUMB = 320  # thumbnails, never full frames: a 400-case report stays small and fast


def thumbnail(src: Path, dst: Path) -> bool:
    """Write a PNG thumbnail of src (first frame of a video is not decoded here); False when absent."""
    if not src.is_file():
        return False
    with Image.open(src) as im:
        im = im.convert("RGB")
        im.thumbnail((THUMB, THUMB))
        dst.parent.mkdir(parents=True, exist_ok=True)
        im.save(dst, "PNG")
    return True


def render_case(job: tuple) -> tuple[str, str, tuple[int, int]]:
    """(file name, HTML, (cache hits, misses)) of one case; job = (case_id, [(run name, records,
    prediction dir or None, [(subtrack, rollout) without a record], {(subtrack, rollout): (kind,
    detail) logged in eval.log})], dataset root or None, out dir, (cache write dir or None, read dirs))."""
    cid, runs, dataset, out, (cache_dir, cache_read) = job
    cache = VisualCache(cache_dir, tuple(cache_read))
    case = visuals.load_case_once(dataset, cid)
    stem = cid.replace("/", "__")
    parts = []
    if dataset is not None:
        for name in ("annotated_first_frame.png", "first_frame.png"):
            if thumbnail(Path(dataset) / "cases" / cid / name, Path(out) / "thumbs" / f"{stem}.png"):
                parts.append(f'<h2>Input image</h2><img class="thumb" alt="input image of {esc(cid)}" '
                             f'src="../thumbs/{stem}.png">')
                break
        else:
            parts.append('<div class="warn">the input image is not on disk (dataset moved?)</div>')
    else:
        parts.append('<div class="warn">dataset not found on disk: no input image or references</div>')
    parts.append(_prompts(case, dataset, runs))
    for ri, (run_name, recs, pred, missing, logged) in enumerate(runs):
        parts.append(f"<h2>{esc(run_name)}</h2>")
        if not recs:
            parts.append('<div class="warn">no records for this case in this run (missing)</div>')
        if missing:
            parts.append('<div class="warn missing">responses without a record: '
                         + ", ".join(f"{esc(st)} rollout {ro}" for st, ro in missing) + "</div>")
            for st, ro in missing:
                if (st, ro) in logged:
                    kind, detail = logged[(st, ro)]
                    parts.append(f'<div class="warn">eval.log: {esc(st)} rollout {ro} scored 0: {esc(kind)}: '
                                 f"{esc(detail)}</div>")
        for rec in sorted(recs, key=lambda r: (r["subtrack"], r.get("rollout", 0))):
            parts.append(_record_block(rec, case.timestamps if case is not None else None))
            parts.append(_visual_block(case, rec, pred, Path(out), stem, ri, cache))
    return stem + ".html", page(f"Case {cid}", "".join(parts), depth=1), (cache.hits, cache.misses)


def _prompts(case, dataset: str | None, runs) -> str:
    """One Prompts section per distinct (template source, prompt version, protocol) of the runs."""
    seen: dict[tuple, list[str]] = {}
    for run_name, recs, *_ in runs:
        if recs:
            prov = recs[0].get("provenance") or {}
            pr = prov.get("prompts") or {}
            key = (pr.get("source"), pr.get("prompt_version"), recs[0].get("protocol") or prov.get("protocol"),
                   int(prov.get("num_rollouts") or 3))
            seen.setdefault(key, []).append(run_name)
    out = []
    for (source, version, protocol, n_roll), names in seen.items():
        head = "Prompts" + ("" if len(seen) == 1 else f" ({', '.join(names)})")
        out.append(f"<h2>{esc(head)}</h2>" + prompt_text.prompts_block(
            case, Path(dataset) if dataset else None, {"source": source, "prompt_version": version},
            str(protocol or "video"), n_roll))
    return "".join(out)


def _visual_block(case, rec: dict, pred: str | None, out: Path, stem: str, run_index: int,
                  cache: VisualCache) -> str:
    """Answer-vs-reference thumbnails (image subtracks) or Deduction outlines and trajectories (rollout 0)."""
    root = Path(pred) if pred else None
    tag = f"r{run_index}_{rec['subtrack']}_{rec.get('rollout', 0)}"
    if rec["subtrack"] in visuals.REFERENCE_ROLES:
        return visuals.reference_block(case, rec, root, out, stem, tag, cache)
    if rec["subtrack"] in ("deduction", "Ded.") and int(rec.get("rollout", 0) or 0) == 0:
        return visuals.deduction_block(case, rec, root, out, stem, tag, cache)
    return ""


def _detail_plots(det: dict, times) -> str:
    """A plot per per-timestamp metric detail (e.g. psnr_db) against t; a constant one (the oracle's
    40 dB everywhere) is said in words instead, as a flat line reads like a broken plot."""
    plots, flat = [], []
    for name, vals in sorted(det.items()):
        if not isinstance(vals, list) or not vals or not all(v is None or isinstance(v, (int, float)) for v in vals):
            continue
        ys = [None if v is None else float(v) for v in vals]
        defined = [v for v in ys if v is not None]
        unit = " dB" if name.endswith("_db") else ""
        if not defined:
            flat.append(f"{esc(name)}: undefined at every timestamp")
            continue
        if max(defined) - min(defined) < 1e-9:
            flat.append(f"{esc(name)} = {defined[0]:.4g}{unit} at every timestamp"
                        + (f" ({len(ys) - len(defined)} undefined)" if len(defined) < len(ys) else "")
                        + " (constant: not plotted)")
            continue
        xs, xl = (list(times), "t (s)") if times is not None and len(times) == len(ys) else (list(range(len(ys))), "timestamp #")
        # dB on an absolute scale from 0, so that a 0.1 dB wobble does not fill the plot
        plots.append(svg.lines([(name, xs, ys)], f"{name} per timestamp", xlabel=xl,
                               ylabel=f"{name[:-3]} (dB)" if unit else name,
                               ymin=0.0 if unit else None))
    out = ('<div class="plots">' + "".join(plots) + "</div>") if plots else ""
    if flat:
        out += '<p class="flat">' + "; ".join(flat) + "</p>"
    return out


def _record_block(rec: dict, times=None) -> str:
    head = f"<h3>{esc(rec['subtrack'])} · rollout {esc(rec.get('rollout'))} · score {fmt(rec.get('score'))}</h3>"
    rows = []
    for group, d in (("metric", rec.get("metrics")), ("criterion", rec.get("criteria")), ("group", rec.get("groups"))):
        for k, v in sorted((d or {}).items()):
            rows.append([esc(group), esc(k), num(v)])
    body = [table(["Kind", "Name", "Value"], rows, cls="scores")] if rows else []
    err = rec.get("error")
    if err:
        body.append(f'<div class="warn">scored 0: {esc(err.get("kind"))}: {esc(err.get("detail"))}</div>')
    if rec.get("judge_feedback"):
        body.append(f"<p>Judge feedback: {esc(rec['judge_feedback'])}</p>")
    art = rec.get("artifact") or {}
    if art.get("path"):
        body.append(f"<p>Answer: <code>{esc(art['path'])}</code>"
                    + (f", chosen frames {esc(art.get('pred_indices'))}"
                       if any(i is not None for i in art.get("pred_indices") or ()) else "") + "</p>")
    body.append(_detail_plots(rec.get("metric_details") or {}, times))
    return head + "".join(body)


def case_list(results: list[Results]) -> str:
    """The sortable, filterable list of every case with each run's mean score."""
    meta: dict[str, dict] = {}
    scores: dict[tuple[str, int], list[float]] = {}
    for i, r in enumerate(results):
        for rec in r.records:
            meta.setdefault(rec["case_id"], rec)
            if rec.get("score") is not None:
                scores.setdefault((rec["case_id"], i), []).append(float(rec["score"]))
    head = ["Case", "Task", "Pillar", "Source", *[f"Score {r.name}" for r in results]]
    rows = []
    for cid in sorted(meta):
        m = meta[cid]
        rows.append([f'<a href="{case_href(cid)}">{esc(cid)}</a>', esc(m.get("task")), esc(m.get("pillar")),
                     esc(m.get("source")),
                     *[num(mean(scores[(cid, i)]) if (cid, i) in scores else None) for i in range(len(results))]])
    filters = ('<p>Filter: task <input class="filter" data-col="1" size="14"> pillar <input class="filter" data-col="2" '
               'size="14"> source <input class="filter" data-col="3" size="5"> first score ≥ '
               '<input class="filter" data-col="4" data-min="1" size="4"></p>')
    return page("Cases", filters + table(head, rows, tid="cases"))
