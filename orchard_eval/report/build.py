"""Writing the report folder atomically: everything goes into a temporary directory next to --out,
which replaces --out only when complete, so a failure leaves nothing half-written."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from . import case_pages, comparison, overview
from .html import CSS, JS
from .load import Results, check_same_dataset, dataset_case_ids, dataset_root, find_missing, load_results


class ReportError(ValueError):
    """Nothing can be shown (no readable results directory)."""


def write_report(dirs: Sequence[str | Path], out: str | Path, jobs: int = 1, progress: bool = True,
                 predictions: Sequence[str | Path | None] = (), cache_dir: str | Path | None = None,
                 stats: dict | None = None) -> list[str]:
    """Write the report into `out`; returns the problems shown in it (partial runs, other datasets...).
    `predictions[i]` is the prediction dir that results dir i scored (its answer files are drawn);
    the provenance does not record it, so without it the answer thumbnails say "missing".
    The answers' visual data is cached (`cache.py`) in `cache_dir`, or by default in `out/cache/`,
    carried over from the report that `out` replaces. `stats`, when given, receives cache hits/misses."""
    preds = {str(Path(d).resolve()): str(p) for d, p in zip(dirs, predictions) if p}
    results: list[Results] = []
    problems: list[str] = []
    for d in dirs:
        try:
            results.append(load_results(d))
        except FileNotFoundError as exc:
            problems.append(str(exc))
    if not results:
        raise ReportError("; ".join(problems) or "no results directories")
    for r in results:
        d = r.dataset_key()[0]
        find_missing(r, dataset_case_ids(Path(d)) if d and Path(d).is_dir() else None)
        problems.extend(f"{r.path}: {p}" for p in r.problems)
    foreign = check_same_dataset(results)
    problems.extend(foreign)
    same = [results[0]] + [r for r in results[1:] if r.dataset_key()[1] == results[0].dataset_key()[1]]
    dataset = dataset_root(same)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        (tmp / "assets").mkdir()
        (tmp / "cases").mkdir()
        (tmp / "assets" / "report.css").write_text(CSS, encoding="utf-8")
        (tmp / "assets" / "report.js").write_text(JS, encoding="utf-8")
        cids = sorted({c for r in same for c in r.case_ids()})
        by_case = {c: [] for c in cids}
        for r in same:
            grouped: dict[str, list] = {}
            missing: dict[str, list] = {}
            logged: dict[str, dict] = {}
            for rec in r.records:
                grouped.setdefault(rec["case_id"], []).append(rec)
            for k in r.missing:
                missing.setdefault(k[0], []).append(k[1:])
            for k, v in r.log_zero.items():
                logged.setdefault(k[0], {})[k[1:]] = v
            for c in cids:
                by_case[c].append((r.name, grouped.get(c, []), preds.get(str(Path(r.path).resolve())),
                                   missing.get(c, []), logged.get(c, {})))
        if cache_dir is not None:
            caching = (str(Path(cache_dir).resolve()), ())
        else:
            # the new report's own cache; entries of the one it replaces are linked over when used
            caching = (str(tmp / "cache"), (str(out / "cache"),) if (out / "cache").is_dir() else ())
        jobs_in = [(c, by_case[c], str(dataset) if dataset else None, str(tmp), caching) for c in cids]
        hits = misses = 0
        bar = tqdm(total=len(jobs_in) + 3, desc="report", unit="page", disable=not progress)
        if jobs > 1 and len(jobs_in) > 1:
            from orchard_build.pool import process_pool

            with process_pool(jobs) as pool:
                for name, html, (h, m) in pool.map(case_pages.render_case, jobs_in, chunksize=4):
                    (tmp / "cases" / name).write_text(html, encoding="utf-8")
                    hits, misses = hits + h, misses + m
                    bar.update()
        else:
            for j in jobs_in:
                name, html, (h, m) = case_pages.render_case(j)
                (tmp / "cases" / name).write_text(html, encoding="utf-8")
                hits, misses = hits + h, misses + m
                bar.update()
        if stats is not None:
            stats.update(cache_hits=hits, cache_misses=misses)
        (tmp / "index.html").write_text(overview.render(results, problems), encoding="utf-8")
        bar.update()
        (tmp / "cases.html").write_text(case_pages.case_list(same), encoding="utf-8")
        bar.update()
        (tmp / "compare.html").write_text(comparison.render(same, foreign), encoding="utf-8")
        bar.update()
        bar.close()
        old = None
        if out.exists():
            old = out.with_name(f".{out.name}.old.{os.getpid()}")
            out.rename(old)
        tmp.rename(out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return problems
