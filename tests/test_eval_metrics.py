"""Objective metrics: exact values on hand-made inputs, property tests for ranges, symmetry and
degenerate inputs, and the velocity error through the camera."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from orchard_eval import metrics as M
from orchard_eval import synthetic as syn

masks = arrays(np.bool_, st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 6)))
imgs = arrays(np.uint8, (5, 4, 3))


def disc(h, w, cx, cy, r):
    yy, xx = np.mgrid[0:h, 0:w] + 0.5
    return (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r


def test_iou_values():
    a = np.zeros((4, 4), bool); a[:2] = True
    b = np.zeros((4, 4), bool); b[1:3] = True
    assert M.iou(a, b) == pytest.approx(4 / 12)
    assert M.iou(np.zeros((3, 3)), np.zeros((3, 3))) == 1.0
    assert M.iou(a, np.zeros_like(a)) == 0.0


def test_physics_iq_ious_on_a_moving_square():
    gt = np.zeros((3, 6, 6), bool)
    for t in range(3):
        gt[t, 2:4, t:t + 2] = True
    late = np.zeros_like(gt)
    late[0], late[1], late[2] = gt[1], gt[2], gt[2]  # right places, wrong times
    assert M.spatial_iou(gt, gt) == M.spatiotemporal_iou(gt, gt) == M.weighted_spatial_iou(gt, gt) == 1.0
    assert M.spatial_iou(late, gt) == pytest.approx(6 / 8)
    assert M.spatiotemporal_iou(late, gt) == pytest.approx((2 / 6 + 2 / 6 + 1) / 3)
    assert 0 < M.weighted_spatial_iou(late, gt) < M.spatial_iou(late, gt)
    empty = np.zeros_like(gt)
    assert M.spatial_iou(empty, empty) == M.spatiotemporal_iou(empty, empty) == M.weighted_spatial_iou(empty, empty) == 1.0
    assert M.spatial_iou(empty, gt) == M.weighted_spatial_iou(gt, empty) == 0.0
    with pytest.raises(ValueError):
        M.spatial_iou(gt[:2], gt)


@settings(max_examples=150, deadline=None)
@given(a=masks, data=st.data())
def test_iou_family_ranges_and_symmetry(a, data):
    b = data.draw(arrays(np.bool_, a.shape))
    for f in (M.spatial_iou, M.spatiotemporal_iou, M.weighted_spatial_iou):
        v = f(a, b)
        assert 0.0 <= v <= 1.0 and not math.isnan(v)
        assert v == pytest.approx(f(b, a))
        assert f(a, a) == 1.0


def test_psnr_values_and_caps():
    a = np.zeros((4, 4, 3), np.uint8)
    assert M.psnr(a, a) == 40.0 and M.psnr_score(M.psnr(a, a)) == 1.0
    b = a.copy(); b[...] = 255
    assert M.psnr(a, b) == pytest.approx(0.0) and M.psnr_score(0.0) == 0.0
    c = a.copy(); c[0, 0, 0] = 16  # MSE = 256/48
    assert M.psnr(a, c) == pytest.approx(min(10 * math.log10(255 ** 2 / (256 / 48)), 40))
    assert M.psnr_score(20.0) == 0.5


@settings(max_examples=150, deadline=None)
@given(a=imgs, b=imgs, m=arrays(np.bool_, (5, 4)))
def test_psnr_properties(a, b, m):
    v = M.psnr(a, b)
    assert 0.0 <= v <= 40.0 and v == M.psnr(b, a)
    s = M.psnr_score(v)
    assert 0.0 <= s <= 1.0
    mv = M.masked_psnr(a, b, m)
    if not m.any():
        assert mv is None
    else:
        assert 0.0 <= mv <= 40.0 and mv == M.masked_psnr(b, a, m)
    assert M.masked_psnr(a, a, m) in (None, 40.0)


def test_masked_psnr_degenerate_inputs_are_defined():
    a = np.zeros((6, 6, 3), np.uint8)
    gt_region = np.zeros((6, 6), bool)
    assert M.masked_psnr(a, a, gt_region) is None          # empty GT region: not applicable
    gt_region[2:4, 2:4] = True
    b = a.copy(); b[2:4, 2:4] = 255                         # object missing in the prediction
    assert M.masked_psnr(a, b, gt_region) == pytest.approx(0.0)
    assert M.mean_defined([None, 1.0, None, 3.0]) == 2.0 and M.mean_defined([None]) is None


def test_object_mask_iou_identity_and_hungarian():
    h, w = 40, 60
    g1, g2 = disc(h, w, 15, 20, 6), disc(h, w, 45, 20, 6)
    gt = {"a": g1, "b": g2}
    assert M.object_mask_iou({"a": g1, "b": g2}, gt).value == 1.0
    r = M.object_mask_iou({"a": g1}, gt)                    # b missing -> 0
    assert r.value == 0.5 and r.per_object["b"] == 0.0 and r.mode == "identity"
    # unlabeled predictions (keys unknown) are matched by position and box overlap
    shifted = {7: disc(h, w, 46, 21, 6), 9: disc(h, w, 14, 20, 6)}
    r = M.object_mask_iou(shifted, gt)
    assert r.mode == "hungarian" and r.matching == {"a": 9, "b": 7} and r.value > 0.6
    # extra predictions do not help; an empty prediction is never matched
    r = M.object_mask_iou({1: np.zeros((h, w), bool), 2: g1}, gt, match="hungarian")
    assert r.matching["b"] is None and r.value == 0.5
    assert M.object_mask_iou({}, {}).value == 1.0 and M.object_mask_iou({"x": g1}, {}).value == 0.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 30), st.integers(1, 8)), min_size=1, max_size=4),
       st.lists(st.tuples(st.integers(0, 50), st.integers(0, 30), st.integers(0, 8)), max_size=5))
def test_object_mask_iou_range(gts, preds):
    gt = {i: disc(32, 52, x, y, r) for i, (x, y, r) in enumerate(gts)}
    pr = {f"p{i}": disc(32, 52, x, y, r) for i, (x, y, r) in enumerate(preds)}
    v = M.object_mask_iou(pr, gt).value
    assert 0.0 <= v <= 1.0 and not math.isnan(v)


# ------------------------------------------------------------------------------------------------
# Velocity
# ------------------------------------------------------------------------------------------------
def test_backprojection_inverts_projection():
    sc = syn.Scene()
    X = np.array([[0.3, 0.0, 1.2], [-0.7, 0.0, 0.4]])
    uv = np.stack([sc.project(x) for x in X])
    back = M.backproject_to_plane(uv, sc.K, sc.E, np.zeros(3), np.array([0.0, 1.0, 0.0]))
    assert np.allclose(back, X)
    # a ray parallel to the plane gives NaN, not an exception
    centre = [[sc.K[0, 2], sc.K[1, 2]]]  # the ray along the optical axis (+y) never meets the plane x = 0
    assert np.isnan(M.backproject_to_plane(centre, sc.K, sc.E, np.zeros(3), np.array([1.0, 0, 0]))).all()
    # a plane behind the camera is not met either
    assert np.isnan(M.backproject_to_plane(centre, sc.K, sc.E, np.array([0, -9.0, 0]), np.array([0, 1.0, 0]))).all()


def test_motion_planes():
    sc = syn.Scene()
    t = np.linspace(0, 0.5, 7)
    fall = np.stack([[-0.5, 0.0, 1.8 - 4.9 * s * s] for s in t])   # a vertical line
    p, n = M.motion_plane(fall, sc.E)
    assert abs(np.dot(n, [0, 0, 1])) < 1e-9 and abs(abs(n[1]) - 1) < 1e-9  # faces the camera, contains the line
    proj = np.stack([[s, 0.0, 1 - s * s] for s in t])                  # a parabola in y = 0
    assert abs(abs(M.motion_plane(proj, sc.E)[1][1]) - 1) < 1e-9
    rest = np.repeat([[0.2, 0.0, 0.3]], 5, axis=0)
    assert np.allclose(np.abs(M.motion_plane(rest, sc.E)[1]), M.optical_axis(sc.E))
    # a simulator's fall drifts a few hundredths of a millimetre off its line: still the line's plane
    # that faces the camera, not the best-fit plane of the drift (which here is edge-on to the camera)
    drift = fall + np.outer(t * t, [0.0, 4e-5, 0.0])
    n_drift = M.motion_plane(drift, sc.E)[1]
    assert abs(abs(n_drift[1]) - 1) < 1e-6
    uv = M.project_points(drift, sc.K, sc.E) + [0.3, 0.0]               # a 0.3-px error across the line
    X = M.backproject_to_plane(uv, sc.K, sc.E, *M.motion_plane(drift, sc.E))
    in_plane = np.max(np.linalg.norm(X - drift, axis=1))
    assert in_plane < 0.03                                                # 0.3 px at this scale
    X_edge = M.backproject_to_plane(uv, sc.K, sc.E, drift.mean(axis=0), np.array([1.0, 0.0, 0.0]))
    assert not np.all(np.linalg.norm(X_edge - drift, axis=1) < 10 * in_plane)  # the drift's own plane


def test_velocity_error_zero_for_the_truth_and_grows_with_speed_error():
    sc = syn.Scene()
    times = np.arange(1, 13) / 24
    planes, gt_pos, gt_vel, uv_true, uv_fast = {}, {}, {}, {}, {}
    for d in sc.discs:
        P = np.stack([d.motion(t) for t in times])
        planes[d.id] = M.motion_plane(P, sc.E)
        gt_pos[d.id] = P
        gt_vel[d.id] = np.stack([d.velocity(t) for t in times])
        uv_true[d.id] = np.stack([sc.project(x) for x in P])
        uv_fast[d.id] = np.stack([sc.project(d.motion(min(1.5 * t, 0.5))) for t in times])
    e0 = M.velocity_error(uv_true, times, sc.K, sc.E, planes, gt_positions=gt_pos)
    assert e0 == pytest.approx(0.0, abs=1e-9) and M.velocity_score(e0) == pytest.approx(1.0)
    e_mid = M.velocity_error(uv_true, times, sc.K, sc.E, planes, gt_velocity=gt_vel)
    assert e_mid < 0.05  # endpoint-mean GT velocity is exact for constant acceleration
    e1 = M.velocity_error(uv_fast, times, sc.K, sc.E, planes, gt_positions=gt_pos)
    assert e1 > 0.5 and 0 < M.velocity_score(e1) < 1
    lost = dict(uv_true)
    lost["ball"] = np.full((len(times), 2), np.nan)
    e2 = M.velocity_error(lost, times, sc.K, sc.E, planes, gt_positions=gt_pos)
    assert e2 == pytest.approx(M.LOST_OBJECT_ERROR / 2)
    assert M.velocity_error(uv_true, times[:1], sc.K, sc.E, planes, gt_positions=gt_pos) is None
    assert M.velocity_score(None) is None and M.velocity_score(float("inf")) == 0.0


@settings(max_examples=100, deadline=None)
@given(st.floats(0, 1e6, allow_nan=False))
def test_velocity_score_range(e):
    assert 0.0 < M.velocity_score(e) <= 1.0


def test_mostly_hidden_objects_leave_the_mask_iou():
    a = np.zeros((20, 20), bool)
    a[2:8, 2:8] = True
    b = np.zeros((20, 20), bool)
    b[10:16, 10:16] = True
    hide = np.zeros((20, 20), bool)
    hide[10:16, 10:15] = True                      # 5/6 of b
    pred = {"a": a, "b": np.zeros_like(b)}         # b not found where a sliver of it shows
    assert M.object_mask_iou(pred, {"a": a, "b": b}, ignore=hide).value == pytest.approx(0.5)
    assert M.object_mask_iou(pred, {"a": a, "b": b}, ignore=hide, hidden_share=0.5).value == pytest.approx(1.0)
    # every object hidden: all are kept (the value stays defined)
    assert M.object_mask_iou(pred, {"b": b}, ignore=hide, hidden_share=0.5).value == 0.0


def test_a_body_not_shown_where_its_track_runs_under_a_label_is_hidden_not_lost():
    from orchard_eval.objective import _hidden_on_track

    # a body located at t = 0 and t = 1 (x 40 → 120), not shown at t = 0.5; a label left on covers
    # where its track puts it then (x 80), or lies elsewhere
    uv = np.array([[40.0, 50.0], [np.nan, np.nan], [120.0, 50.0]])
    times = np.array([0.0, 0.5, 1.0])
    label = np.zeros((100, 200), bool)
    label[30:72, 60:102] = True
    area = np.pi * 12 ** 2
    assert _hidden_on_track(uv, times, 1, label, area)
    elsewhere = np.roll(label, 80, axis=1)
    assert not _hidden_on_track(uv, times, 1, elsewhere, area)
    # a body shown is never hidden; one never located anywhere is lost, not hidden
    assert not _hidden_on_track(np.array([[40.0, 50.0], [80.0, 50.0], [120.0, 50.0]]), times, 1, label, area)
    assert not _hidden_on_track(np.full((3, 2), np.nan), times, 1, label, area)
    # located on one side only: where it was last (or is next) seen
    assert _hidden_on_track(np.array([[80.0, 50.0], [np.nan, np.nan], [np.nan, np.nan]]), times, 2, label, area)
