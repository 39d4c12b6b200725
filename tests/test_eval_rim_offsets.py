"""Rim offsets that stay behind when a body moves (hand-written fixture composition/000000, built and
scored for real). On the condition frame the rubber ball rests on an oak ramp; its rim towards the
ramp reads a whole EDGE_SHIFT_MAX outside the outline (the contact edge, not the ball's shading). At
t* = 0.9 s the ball has left the ramp: carried there, that offset pulled the oracle's F-G fit
0.45 px off (mask IoU 0.976). Offsets at the bound are dropped for a body that has moved; a body
that has not moved keeps them (the contact is still there)."""
import numpy as np
import pytest
from calibration_helpers import oracle_scorer

from orchard_eval.cases import load_dataset
from orchard_eval.segment import classical as C
from orchard_eval.segment.shape_prior import EDGE_SHIFT_MAX, LIMB_BINS, LimbModel

CASE = "MultiLaw/Composition/000000"
CONFIG = "tests/fixtures/scenes/composition/000000.yaml"


def _model(shift) -> LimbModel:
    return LimbModel(np.zeros((LIMB_BINS, 3)), None if shift is None else np.asarray(shift, float))


def test_offsets_at_the_bound_stay_behind_only_when_the_body_moved():
    shift = np.zeros(LIMB_BINS)
    shift[3], shift[7], shift[12] = EDGE_SHIFT_MAX, -EDGE_SHIFT_MAX, 0.15
    start = _model(shift)
    colours = LimbModel(np.full((LIMB_BINS, 3), 2.0), None)

    kept = C._rim_colours_from(colours, start, moved=False)
    assert np.array_equal(kept.edge_shift, shift) and np.all(kept.delta == 2.0)
    moved = C._rim_colours_from(colours, start, moved=True)
    expected = shift.copy()
    expected[[3, 7]] = 0.0
    assert np.array_equal(moved.edge_shift, expected) and np.all(moved.delta == 2.0)
    # no rim colours at t: the condition frame's colours, the same rule for the offsets
    alone = C._rim_colours_from(None, start, moved=True)
    assert np.array_equal(alone.edge_shift, expected) and alone.delta is start.delta
    assert C._rim_colours_from(None, _model(None), moved=True).edge_shift is None
    assert np.array_equal(start.edge_shift, shift)          # the condition frame's model is not changed


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return oracle_scorer(tmp_path_factory.mktemp("offsets"), CONFIG)


def test_a_moved_body_leaves_its_contact_offset_behind(built):
    ds, scorer = built
    case = load_dataset(ds, case_ids=[CASE]).cases[CASE]
    start = C.limbs_at(case, 0.0)["ball"]
    at_bound = np.abs(start.edge_shift) >= EDGE_SHIFT_MAX - 1e-9
    assert at_bound.any()                                      # the ramp contact on the condition frame
    assert C._moved_bodies(case, 0.0) == set() and C._moved_bodies(case, case.target_time) == {"ball"}
    later = C.limbs_at(case, case.target_time)["ball"]
    assert np.all(later.edge_shift[at_bound] == 0.0)
    assert np.array_equal(later.edge_shift[~at_bound], start.edge_shift[~at_bound])

    rec = scorer.score(CASE, "formulation_graphic", 0)
    assert rec["valid"], rec["error"]
    assert rec["metrics"]["mask_iou"] >= 0.98, rec["metrics"]      # 0.976 with the contact offset carried


def test_unreadable_gt_frame_still_drops_the_contact_offset(built, monkeypatch):
    """Without the GT masks at t (a damaged case) the rim colours are the condition frame's, and the
    offsets follow the same rule: where the body went is known from its track, not from the frame."""
    from collections import OrderedDict

    from orchard_eval import cases
    from orchard_eval.cases import CaseFormatError

    monkeypatch.setattr(cases, "_MEMO", OrderedDict())   # models learned by the test before are not reused
    ds, _ = built
    case = load_dataset(ds, case_ids=[CASE]).cases[CASE]
    start = C.limbs_at(case, 0.0)["ball"]

    def unreadable(index):
        raise CaseFormatError("masks missing")

    monkeypatch.setattr(case, "gt_object_masks", unreadable)
    later = C.limbs_at(case, case.target_time)["ball"]
    assert np.array_equal(later.delta, start.delta, equal_nan=True)
    at_bound = np.abs(start.edge_shift) >= EDGE_SHIFT_MAX - 1e-9
    assert np.all(later.edge_shift[at_bound] == 0.0)
