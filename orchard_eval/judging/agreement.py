"""Judge cross-check (App. F.2, Table 14): how well two result directories — the same responses
scored under two judges — agree.

`agreement(results_a, results_b)` reads each directory's per-response records (`records.jsonl`, one
JSON object per line with at least `case_id`, `subtrack`, `rollout`, `model` and the fused `score`;
records of invalid responses carry score 0 and count as such, records with `score: null` — a
subtrack that has no score in that mode — are left out). Responses are paired by
(model, case_id, subtrack, rollout); only pairs present in both directories count.

Reported, overall and per subtrack:
* `model`: Pearson r and Spearman ρ of the per-model mean scores (the Table 14 form; "overall" uses
  each model's mean over all its paired responses);
* `response`: Pearson r and Spearman ρ over the paired responses themselves;
* the counts behind each figure. A correlation over fewer than 3 points, or with a constant side,
  is None (undefined), never NaN.
"""
from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from ..cases import SUBTRACKS

RECORDS_FILE = "records.jsonl"


def _records_path(path: str | Path) -> Path:
    p = Path(path)
    if p.is_dir():
        p = p / RECORDS_FILE
    if not p.is_file():
        raise FileNotFoundError(f"{p}: no per-response records")
    return p


def read_scores(path: str | Path) -> dict[tuple[str, str, str, int], float]:
    """{(model, case_id, subtrack, rollout): score} from a results directory, a records file, or a folder
    of results directories (one per model, e.g. results/judge_a/<model>/). A torn last line is ignored;
    a later record for the same response replaces an earlier one."""
    root = Path(path)
    if root.is_dir() and not (root / RECORDS_FILE).is_file():
        runs = sorted(d for d in root.iterdir() if (d / RECORDS_FILE).is_file())
        if runs:
            merged: dict[tuple[str, str, str, int], float] = {}
            for d in runs:
                merged.update(read_scores(d))
            return merged
    p = _records_path(path)
    out: dict[tuple[str, str, str, int], float] = {}
    lines = p.read_text(encoding="utf-8").splitlines()
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            if i == len(lines) - 1:
                continue
            raise ValueError(f"{p}: line {i + 1} is not JSON")
        if not isinstance(rec, Mapping):
            continue
        score = rec.get("score")
        if score is None and isinstance(rec.get("fusion"), Mapping):
            score = rec["fusion"].get("score")
        if score is None:
            continue
        model = rec.get("model") or p.parent.name
        try:
            key = (str(model), str(rec["case_id"]), str(rec["subtrack"]), int(rec.get("rollout", 0)))
            out[key] = float(score)
        except (KeyError, TypeError, ValueError):
            continue
    return out


def _rank(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), float)
    i = 0
    xs = x[order]
    while i < len(x):
        j = i
        while j + 1 < len(x) and xs[j + 1] == xs[i]:
            j += 1
        ranks[order[i:j + 1]] = 0.5 * (i + j) + 1.0
        i = j + 1
    return ranks


def pearson(a: Iterable[float], b: Iterable[float]) -> float | None:
    x, y = np.asarray(list(a), float), np.asarray(list(b), float)
    if len(x) < 3 or len(x) != len(y) or np.std(x) == 0 or np.std(y) == 0:
        return None
    r = float(np.corrcoef(x, y)[0, 1])
    return None if not math.isfinite(r) else max(-1.0, min(1.0, r))


def spearman(a: Iterable[float], b: Iterable[float]) -> float | None:
    x, y = np.asarray(list(a), float), np.asarray(list(b), float)
    if len(x) < 3 or len(x) != len(y):
        return None
    return pearson(_rank(x), _rank(y))


def _block(pairs: list[tuple[tuple, float, float]]) -> dict[str, Any]:
    by_model: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for k, a, b in pairs:
        by_model[k[0]].append((a, b))
    models = sorted(by_model)
    ma = [float(np.mean([p[0] for p in by_model[m]])) for m in models]
    mb = [float(np.mean([p[1] for p in by_model[m]])) for m in models]
    ra = [p[1] for p in pairs]
    rb = [p[2] for p in pairs]
    return {
        "model": {"pearson": pearson(ma, mb), "spearman": spearman(ma, mb), "n_models": len(models),
                  "means": {m: {"a": x, "b": y} for m, x, y in zip(models, ma, mb)}},
        "response": {"pearson": pearson(ra, rb), "spearman": spearman(ra, rb), "n_responses": len(pairs)},
    }


def agreement(results_a: str | Path, results_b: str | Path) -> dict[str, Any]:
    """Agreement of two scorings of the same responses (see the module docstring)."""
    A, B = read_scores(results_a), read_scores(results_b)
    common = sorted(set(A) & set(B))
    pairs = [(k, A[k], B[k]) for k in common]
    out: dict[str, Any] = {"a": str(results_a), "b": str(results_b), "n_paired": len(pairs),
                           "only_a": len(set(A) - set(B)), "only_b": len(set(B) - set(A)),
                           "overall": _block(pairs), "subtracks": {}}
    for st in SUBTRACKS:
        sub = [p for p in pairs if p[0][2] == st]
        if sub:
            out["subtracks"][st] = _block(sub)
    return out


def format_table(result: Mapping[str, Any]) -> str:
    """Table 14 layout: one row per comparison with Pearson r and Spearman ρ of per-model means."""
    from ..cases import SUBTRACK_SHORT

    def f(v):
        return "  n/a" if v is None else f"{v:5.2f}"

    rows = [("Overall model average", result["overall"])]
    rows += [(SUBTRACK_SHORT.get(k, k), v) for k, v in result["subtracks"].items()]
    out = [f"{'comparison':24s} {'r':>5s} {'rho':>5s} {'r(resp)':>8s} {'rho(resp)':>9s} models responses"]
    for name, b in rows:
        out.append(f"{name:24s} {f(b['model']['pearson'])} {f(b['model']['spearman'])} "
                   f"{f(b['response']['pearson']):>8s} {f(b['response']['spearman']):>9s} "
                   f"{b['model']['n_models']:6d} {b['response']['n_responses']:9d}")
    return "\n".join(out)
