"""Inter-annotator agreement (App. B.6): Cohen's κ on categorical fields, ICC(2,1) on continuous ones.

`orchard-build agreement A.json B.json` compares two annotators' independent passes. A pass file is
`{"annotator": name, "cases": {case_id: {field: value, ...}}}` (what `annotate pull` style exports and
annotation/agreement.xml produce). Categorical fields (Table 9): object_naming, task_type,
formula_choice, camera_framing, velocity_label_legibility. Continuous fields (Table 10):
physics_duration, target_time, mass, height, restitution, v0 — quantised before the ICC to the protocol
grid (durations and times: one frame at the case's fps, `fps` in the case record, default 24) or the
instrument precision of Table 7 (mass 0.01 g, height 1 mm, e 0.02, v0 0.05 m/s).

ICC(2,1) is Shrout & Fleiss's two-way random-effects, absolute-agreement, single-rater coefficient:
(BMS − EMS) / (BMS + (k − 1)·EMS + k·(JMS − EMS)/n) for n targets and k raters.
"""
from __future__ import annotations

import math
from collections import Counter
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import OrchardError
from ..io import read_json

CATEGORICAL = ("object_naming", "task_type", "formula_choice", "camera_framing", "velocity_label_legibility")
CONTINUOUS = ("physics_duration", "target_time", "mass", "height", "restitution", "v0")
TABLE9_NAMES = {"object_naming": "Object naming convention compliance", "task_type": "Task-type classification",
                "formula_choice": "Formula correct-answer choice", "camera_framing": "Camera-framing acceptability",
                "velocity_label_legibility": "Velocity-label legibility"}
TABLE10_NAMES = {"physics_duration": "Physics duration", "target_time": "Target time",
                 "mass": "Real-world object mass", "height": "Real-world drop / launch height",
                 "restitution": "Real-world coefficient of restitution", "v0": "Real-world initial velocity"}
GRID = {"mass": 1e-5, "height": 1e-3, "restitution": 0.02, "v0": 0.05}  # Table 7 precisions (SI)
DEFAULT_FPS = 24.0


class AgreementError(OrchardError):
    pass


def cohen_kappa(a: Sequence[Any], b: Sequence[Any]) -> float:
    """κ = (p_o − p_e) / (1 − p_e). When both raters use one and the same category throughout (p_e = 1)
    the agreement is perfect and κ is reported as 1."""
    if len(a) != len(b) or not a:
        raise AgreementError("κ needs two equally long, non-empty rating lists")
    n = len(a)
    po = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    pe = sum(ca[c] * cb[c] for c in set(ca) | set(cb)) / (n * n)
    if math.isclose(pe, 1.0):
        return 1.0 if math.isclose(po, 1.0) else 0.0
    return (po - pe) / (1.0 - pe)


def icc_2_1(ratings: np.ndarray) -> float:
    """ICC(2,1) of an n×k matrix (n targets, k raters)."""
    x = np.asarray(ratings, dtype=float)
    if x.ndim != 2 or x.shape[0] < 2 or x.shape[1] < 2:
        raise AgreementError("ICC(2,1) needs at least two targets rated by at least two raters")
    n, k = x.shape
    grand = x.mean()
    ss_rows = k * np.sum((x.mean(axis=1) - grand) ** 2)
    ss_cols = n * np.sum((x.mean(axis=0) - grand) ** 2)
    ss_total = np.sum((x - grand) ** 2)
    ss_err = ss_total - ss_rows - ss_cols
    bms = ss_rows / (n - 1)
    jms = ss_cols / (k - 1)
    ems = ss_err / ((n - 1) * (k - 1))
    denom = bms + (k - 1) * ems + k * (jms - ems) / n
    if denom <= 0:
        return 1.0 if np.allclose(x, x[:, :1]) else 0.0
    return float((bms - ems) / denom)


def quantise(field: str, value: float, fps: float) -> float:
    step = 1.0 / fps if field in ("physics_duration", "target_time") else GRID[field]
    return round(round(float(value) / step) * step, 12)


def load_pass(path: str | Path) -> dict[str, Any]:
    try:
        doc = read_json(path)
    except (OSError, ValueError) as exc:
        raise AgreementError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("cases"), dict):
        raise AgreementError(f"{path}: expected {{'annotator': …, 'cases': {{case_id: {{field: value}}}}}}")
    return doc


def agreement(a: Mapping[str, Any], b: Mapping[str, Any]) -> dict[str, Any]:
    """Tables 9 and 10 from two passes: κ and ICC(2,1) per field over the cases both annotated."""
    ca, cb = a["cases"], b["cases"]
    common = sorted(set(ca) & set(cb))
    if not common:
        raise AgreementError("the two passes share no case")
    t9, t10 = [], []
    for f in CATEGORICAL:
        pairs = [(ca[c][f], cb[c][f]) for c in common if ca[c].get(f) is not None and cb[c].get(f) is not None]
        row = {"field": f, "name": TABLE9_NAMES[f], "n": len(pairs), "kappa": None}
        if pairs:
            row["kappa"] = cohen_kappa([p[0] for p in pairs], [p[1] for p in pairs])
            row["observed_agreement"] = sum(x == y for x, y in pairs) / len(pairs)
        t9.append(row)
    for f in CONTINUOUS:
        rows = []
        for c in common:
            va, vb = ca[c].get(f), cb[c].get(f)
            if va is None or vb is None:
                continue
            fps = float(ca[c].get("fps") or cb[c].get("fps") or DEFAULT_FPS)
            rows.append((quantise(f, va, fps), quantise(f, vb, fps)))
        grid = "one frame at the case fps" if f in ("physics_duration", "target_time") else f"{GRID[f]:g} (Table 7)"
        row = {"field": f, "name": TABLE10_NAMES[f], "n": len(rows), "quantisation": grid, "icc_2_1": None}
        if len(rows) >= 2:
            row["icc_2_1"] = icc_2_1(np.array(rows))
        t10.append(row)
    return {"annotators": [a.get("annotator"), b.get("annotator")], "cases": len(common),
            "table9_categorical": t9, "table10_continuous": t10}


def format_tables(result: Mapping[str, Any]) -> str:
    lines = [f"Inter-annotator agreement: {result['annotators'][0]} vs {result['annotators'][1]}, "
             f"{result['cases']} shared cases", "", "Table 9: categorical fields", f"{'Field':<40} {'n':>4}  Cohen's κ"]
    for r in result["table9_categorical"]:
        k = "—" if r["kappa"] is None else f"{r['kappa']:.2f}"
        lines.append(f"{r['name']:<40} {r['n']:>4}  {k}")
    lines += ["", "Table 10: continuous fields (quantised)", f"{'Field':<40} {'n':>4}  ICC(2,1)  grid"]
    for r in result["table10_continuous"]:
        v = "—" if r["icc_2_1"] is None else f"{r['icc_2_1']:.2f}"
        lines.append(f"{r['name']:<40} {r['n']:>4}  {v:<8}  {r['quantisation']}")
    return "\n".join(lines)
