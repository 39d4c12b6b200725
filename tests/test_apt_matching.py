"""The APT matcher: one-to-one, same type, ±200 ms, greedy in given order or by confidence."""
from __future__ import annotations

import pytest

from orchard_eval.apt.matching import TOLERANCE_S, frame_grid_ceiling, match_chains, pooled
from orchard_eval.apt.taxonomy import APT_TYPES, DOMAIN_OF, Transition as T

GT = [T("contact_init", 0.50, ("a", "b")), T("elastic_rebound", 0.52, ("a", "b")),
      T("contact_break", 0.55, ("a", "b")), T("landing", 1.10, ("a", "ground"))]


def test_taxonomy_has_the_fourteen_types_in_four_domains():
    assert len(APT_TYPES) == 14
    assert set(DOMAIN_OF.values()) == {"contact", "gravity", "friction", "rotation"}


def test_truth_scores_one_and_a_300_ms_shift_scores_zero():
    assert match_chains(GT, GT).overall.f1 == 1.0
    shifted = [T(g.type, g.t + 0.3, g.objects) for g in GT]
    r = match_chains(shifted, GT)
    assert r.overall.tp == 0 and r.overall.f1 == 0.0
    inside = [T(g.type, g.t + TOLERANCE_S - 0.01, g.objects) for g in GT]
    assert match_chains(inside, GT).overall.f1 == 1.0


def test_missing_transition_and_duplicates_cost_what_they_should():
    r = match_chains(GT[:3], GT)
    assert (r.overall.precision, r.overall.recall) == (1.0, 0.75)
    assert r.overall.f1 == pytest.approx(2 * 3 / 7)
    # the same landing claimed three times: one hit, two false alarms
    r = match_chains(GT + [GT[3], GT[3]], GT)
    assert r.overall.tp == 4 and r.overall.precision == pytest.approx(4 / 6)


def test_reversed_order_keeps_hits_when_times_are_right_and_loses_them_when_times_follow_the_order():
    assert match_chains(list(reversed(GT)), GT).overall.f1 == 1.0
    # the chain's order reversed in time: the types now sit at the wrong times
    times = [g.t for g in GT]
    rev = [T(g.type, t, g.objects) for g, t in zip(reversed(GT), times)]
    r = match_chains(rev, GT)
    # the three contact types lie within 50 ms of each other and still match; the landing does not
    assert r.overall.tp == 2 and r.per_type["landing"].tp == 0


def test_objects_must_agree_only_when_asked():
    wrong = [T(g.type, g.t, ("x",)) for g in GT]
    assert match_chains(wrong, GT).overall.f1 == 1.0
    assert match_chains(wrong, GT, match_objects=True).overall.tp == 0
    swapped = [T(g.type, g.t, tuple(reversed(g.objects))) for g in GT]
    assert match_chains(swapped, GT, match_objects=True).overall.f1 == 1.0


def test_greedy_order_and_confidence():
    gt = [T("landing", 1.0), T("landing", 1.3)]
    # in given order the first prediction (at 1.15) takes the nearest truth (1.0 vs 1.3: 1.3 is 0.15,
    # 1.0 is 0.15 - tie broken by the first); the second (1.25) then takes 1.3
    pred = [T("landing", 1.12), T("landing", 1.25)]
    assert match_chains(pred, gt).overall.tp == 2
    # with confidences the more confident prediction chooses first
    pred = [T("landing", 1.16, confidence=0.1), T("landing", 1.05, confidence=0.9)]
    r = match_chains(pred, gt)
    assert r.pairs[0] == (1, 0) and r.overall.tp == 2


def test_type_accuracy_separates_naming_from_finding_and_unknown_types_are_reported():
    pred = [T("contact_init", 0.5), T("toppling", 1.1), T("bounce", 3.0)]
    r = match_chains(pred, GT)
    assert r.overall.tp == 1
    assert r.type_accuracy == pytest.approx(1 / 2)
    assert r.unknown_types == ["bounce"]
    assert r.per_domain["contact"].n_gt == 3 and r.per_domain["unknown"].n_pred == 1


def test_empty_chains_and_pooling():
    assert match_chains([], []).overall.f1 == 1.0
    assert match_chains([], GT).overall.recall == 0.0
    assert match_chains(GT, []).overall.precision == 0.0
    pool = pooled([match_chains(GT, GT), match_chains([], GT)])
    assert pool["overall"].recall == 0.5 and pool["domain:contact"].n_gt == 6


def test_frame_grid_ceiling():
    c = frame_grid_ceiling(GT, [0.0, 0.25, 0.75, 1.0])
    # contact events at 0.50 / 0.52 / 0.55 lie 0.25 / 0.23 / 0.20 s from the grid, the landing 0.10 s
    assert c.tp == 2 and c.recall == 0.5 and c.precision == 1.0
