"""Cohen's κ and ICC(2,1) against hand-computed values and the Shrout & Fleiss (1979) example."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from orchard_build.realworld.agreement import (AgreementError, agreement, cohen_kappa, format_tables, icc_2_1,
                                               quantise)

# Shrout & Fleiss (1979), Table 2: 6 targets rated by 4 judges. ICC(2,1) = 0.29 in the paper.
SHROUT_FLEISS = np.array([[9, 2, 5, 8], [6, 1, 3, 2], [8, 4, 6, 8], [7, 1, 2, 6], [10, 5, 6, 9], [6, 2, 4, 7]])


def test_icc_2_1_shrout_fleiss_example():
    # mean squares by hand: BMS = 11.24, JMS = 32.49, EMS = 1.02 (n = 6, k = 4)
    # ICC(2,1) = (11.24 − 1.02) / (11.24 + 3·1.02 + 4·(32.49 − 1.02)/6) = 0.2898
    assert icc_2_1(SHROUT_FLEISS) == pytest.approx(0.28976, abs=1e-4)
    assert round(icc_2_1(SHROUT_FLEISS), 2) == 0.29


def test_icc_two_raters_by_hand():
    # targets 1..4, rater B = A + 1 everywhere: BMS = 10/3, JMS = 2, EMS = 0
    # ICC(2,1) = (10/3) / (10/3 + 0 + 2·2/4) = 10/13
    x = np.array([[1, 2], [2, 3], [3, 4], [4, 5]])
    assert icc_2_1(x) == pytest.approx(10 / 13)
    assert icc_2_1(np.array([[1, 1], [2, 2], [5, 5]])) == pytest.approx(1.0)
    with pytest.raises(AgreementError):
        icc_2_1(np.array([[1, 2]]))


def test_cohen_kappa_by_hand():
    # 10 items: p_o = 0.8; A and B: 6 yes / 4 no each → p_e = 0.6² + 0.4² = 0.52 → κ = 0.28/0.48 = 7/12
    a = list("YYYYYYNNNN")
    b = list("YYYYYNYNNN")
    assert sum(x == y for x, y in zip(a, b)) == 8
    assert cohen_kappa(a, b) == pytest.approx(7 / 12)
    assert cohen_kappa(list("ABCD"), list("ABCD")) == 1.0
    assert cohen_kappa(list("AAAA"), list("AAAA")) == 1.0   # one shared category: perfect agreement
    # chance-level: κ = 0
    assert cohen_kappa(list("AABB"), list("ABAB")) == pytest.approx(0.0)


def test_quantisation_grid():
    assert quantise("mass", 0.052314, 30) == 0.05231
    assert quantise("height", 0.8004, 30) == 0.8
    assert quantise("restitution", 0.71, 30) == 0.72
    assert quantise("v0", 1.02, 30) == 1.0
    assert quantise("physics_duration", 0.51, 30) == pytest.approx(15 / 30)


def _passes():
    a = {"annotator": "ann1", "cases": {}}
    b = {"annotator": "ann2", "cases": {}}
    for i in range(6):
        cid = f"UniversalGravitation/FreeFall/{i:06d}"
        base = {"object_naming": "compliant", "task_type": "free_fall", "formula_choice": "ABCD"[i % 4],
                "camera_framing": "acceptable", "velocity_label_legibility": "legible", "fps": 30,
                "physics_duration": 0.5 + 0.1 * i, "target_time": 0.2 + 0.05 * i, "mass": 0.05 + 0.01 * i,
                "height": 0.5 + 0.1 * i, "restitution": 0.5 + 0.05 * i, "v0": 0.1 * i}
        a["cases"][cid] = dict(base)
        b["cases"][cid] = dict(base, mass=base["mass"] + 0.000004,  # within the balance's 0.01 g grid
                               formula_choice="A" if i == 5 else base["formula_choice"])
    return a, b


def test_agreement_tables(tmp_path):
    a, b = _passes()
    res = agreement(a, b)
    t9 = {r["field"]: r for r in res["table9_categorical"]}
    t10 = {r["field"]: r for r in res["table10_continuous"]}
    assert t9["task_type"]["kappa"] == 1.0 and t9["object_naming"]["kappa"] == 1.0
    # formula choices A B C D A B vs A B C D A A: p_o = 5/6; p_e = (2·3 + 2·1 + 1·1 + 1·1)/36 = 10/36
    assert t9["formula_choice"]["kappa"] == pytest.approx((5 / 6 - 10 / 36) / (1 - 10 / 36))
    assert t10["mass"]["icc_2_1"] == pytest.approx(1.0)
    assert t10["physics_duration"]["icc_2_1"] == pytest.approx(1.0)
    text = format_tables(res)
    assert "Cohen's κ" in text and "ICC(2,1)" in text
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    pa.write_text(json.dumps(a))
    pb.write_text(json.dumps(b))
    out = subprocess.run([sys.executable, "-m", "orchard_build.cli", "agreement", str(pa), str(pb), "--json",
                          str(tmp_path / "t.json")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "Formula correct-answer choice" in out.stdout
    assert json.loads((tmp_path / "t.json").read_text())["cases"] == 6
