"""Rim colours learned at the time being scored (shipped case projectile_motion/000048, built and scored
for real). A glass sphere's rim is lit differently at launch (the condition frame, where the rim
model used to be learned) and at t* = 0.75 s on the far side of the plate: read with the launch rim
colours, the oracle's F-G answer fits 0.57 px too low (mask IoU 0.971). The rim colours now come
from the GT frame at t*, the rim offsets stay the condition frame's (test_eval_rim_offsets.py for
the ones a moved body leaves behind)."""
import numpy as np
import pytest
from calibration_helpers import oracle_scorer

from orchard_eval.cases import load_dataset
from orchard_eval.segment import classical as C

CASE = "UniversalGravitation/ProjectileMotion/000048"


def test_formulation_answer_is_read_with_the_rim_colours_of_its_time(tmp_path):
    ds, scorer = oracle_scorer(tmp_path, "scenes/projectile_motion/000048.yaml")
    case = load_dataset(ds, case_ids=[CASE]).cases[CASE]
    start = C.limbs_at(case, 0.0)["body"]
    later = C.limbs_at(case, case.target_time)["body"]
    assert later is C.limbs_at(case, case.target_time)["body"]           # learned once per case and frame
    # offsets: the condition frame's (less those at the bound, which a moved body leaves behind)
    assert np.array_equal(later.edge_shift, C._rim_colours_from(None, start, moved=True).edge_shift)
    known = np.isfinite(later.delta).all(axis=1)
    assert known.sum() >= 8 and not np.allclose(later.delta[known], start.delta[known], equal_nan=True)

    rec = scorer.score(CASE, "formulation_graphic", 0)
    assert rec["valid"], rec["error"]
    assert rec["metrics"]["mask_iou"] >= 0.98, rec["metrics"]


@pytest.mark.parametrize("error", ["case", "media"])
def test_rim_colours_fall_back_to_the_condition_frame(tmp_path, monkeypatch, error):
    """Without a readable GT frame or masks at t (a damaged case, another layout) the condition frame's
    rim colours are used, never an error (its offsets as always at t: those at the bound dropped for
    a body that moved, test_eval_rim_offsets.py)."""
    from orchard_eval.cases import CaseFormatError
    from orchard_eval.media import MediaError

    ds, _ = oracle_scorer(tmp_path, "scenes/projectile_motion/000048.yaml")
    case = load_dataset(ds, case_ids=[CASE]).cases[CASE]
    start = C.limbs_at(case, None)
    assert start is C.limbs_at(case, 0.0) and set(start) == {"body"}

    def unreadable(index):
        if error == "case":
            raise CaseFormatError("masks missing")
        raise MediaError("undecodable", ds / "masks", "truncated PNG")

    monkeypatch.setattr(case, "gt_object_masks", unreadable)
    later = C.limbs_at(case, 0.5)["body"]
    assert np.array_equal(later.delta, start["body"].delta, equal_nan=True)
    assert np.array_equal(later.edge_shift, C._rim_colours_from(None, start["body"], moved=True).edge_shift)
