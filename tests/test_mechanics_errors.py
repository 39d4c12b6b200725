"""Configurations the analytic model must refuse (PhysicsError naming the file, the object and the reason)."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from orchard_build.config import resolve_config
from orchard_build.errors import PhysicsError
from orchard_build.materials import load_materials
from orchard_build.mechanics import LAW_VARIANTS, MODES, solve

ROOT = Path(__file__).resolve().parents[1]
MATS = load_materials(ROOT / "scenes" / "materials.yaml")


def make(objects, supports=None, T=2.0, ground="concrete", task="composition"):
    raw = {"schema_version": 1, "task": task, "case_number": 1, "seed": 0, "environment": {"g": 9.81},
           "ground": {"material": ground}, "objects": objects,
           "camera": {"position": [0, -5, 1], "look_at": [0, 0, 0.5], "fov_deg": 40, "resolution": [64, 64]},
           "timing": {"fps": 120, "duration": T, "target_time": T / 2}}  # 120 fps: every test duration is whole frames
    if supports:
        raw["supports"] = supports
    return resolve_config(raw, "scenes/bad/000001.yaml", MATS)


def obj(oid, shape, size, mat, placement):
    return {"id": oid, "shape": shape, "size": size, "material": mat, "placement": placement}


RAMP = {"id": "ramp", "material": "oak", "angle_deg": 30, "length": 2.0, "width": 0.5, "foot": [1.0, 0.0, 0.0]}


def refused(cfg, oid, pattern):
    with pytest.raises(PhysicsError) as ei:
        solve(cfg)
    msg = str(ei.value)
    assert "scenes/bad/000001.yaml" in msg and (oid is None or repr(oid) in msg), msg
    assert re.search(pattern, msg), msg


def test_cube_on_steep_ramp_tips():
    cfg = make([obj("box", "cube", {"edge": 0.1}, "rubber", {"ramp": {"ramp": "ramp", "distance_from_top": 0.3}})],
               {"ramps": [dict(RAMP, angle_deg=60)]})
    refused(cfg, "box", "tips over")


def test_tall_cone_sliding_tips_on_rough_ground():
    cfg = make([obj("c", "cone", {"radius": 0.02, "height": 0.4}, "rubber", {"surface": {"xy": [0, 0], "velocity": [1, 0]}})])
    refused(cfg, "c", "tip")


def test_perfectly_inelastic_oblique_refused():
    cfg = make([obj("a", "sphere", {"radius": 0.05}, "putty", {"surface": {"xy": [0, 0], "velocity": [1, 0]}}),
                obj("b", "sphere", {"radius": 0.05}, "putty", {"surface": {"xy": [0.5, 0.04]}})], ground="air_table")
    refused(cfg, "a", "not central")


def test_cone_collision_refused():
    cfg = make([obj("a", "cube", {"edge": 0.1}, "steel", {"surface": {"xy": [0, 0], "velocity": [1, 0]}}),
                obj("k", "cone", {"radius": 0.05, "height": 0.1}, "steel", {"surface": {"xy": [0.5, 0]}})], ground="air_table")
    refused(cfg, None, "cone")


def test_cube_corner_collision_refused():
    cfg = make([obj("a", "cube", {"edge": 0.1}, "steel", {"surface": {"xy": [0, 0], "velocity": [1, 0]}}),
                obj("b", "cube", {"edge": 0.1}, "steel", {"surface": {"xy": [0.5, 0.06]}})], ground="air_table")
    refused(cfg, None, "head-on")


def test_ramp_top_edge_refused():
    cfg = make([obj("box", "cube", {"edge": 0.1}, "steel", {"ramp": {"ramp": "ramp", "distance_from_top": 1.0, "speed": -5.0}})],
               {"ramps": [RAMP]})
    refused(cfg, "box", "top edge")


def test_slow_platform_edge_refused():
    sup = {"platforms": [{"id": "table", "material": "air_table", "center": [0, 0, 0.4], "size": [1.0, 1.0, 0.8]}]}
    cfg = make([obj("s", "sphere", {"radius": 0.05}, "steel", {"surface": {"support": "table", "xy": [0.3, 0], "velocity": [0.5, 0]}})], sup)
    refused(cfg, "s", "too slowly")


def test_non_principal_spin_refused():
    cfg = make([obj("cyl", "cylinder", {"radius": 0.05, "height": 0.2}, "oak",
                    {"free": {"position": [0, 0, 1], "angular_velocity": [1.0, 0.0, 1.0]}})])
    refused(cfg, "cyl", "non-principal")


def test_tilted_landing_refused():
    cfg = make([obj("box", "cube", {"edge": 0.1}, "oak", {"free": {"position": [0, 0, 1], "orientation_deg": [20, 0, 0]}})])
    refused(cfg, "box", "tilted")


def test_cube_landing_with_horizontal_velocity_on_rough_ground_refused():
    cfg = make([obj("box", "cube", {"edge": 0.1}, "oak", {"free": {"position": [0, 0, 1], "linear_velocity": [1, 0, 0]}})])
    refused(cfg, "box", "horizontal velocity")


def test_initial_interpenetration_refused():
    cfg = make([obj("a", "sphere", {"radius": 0.1}, "steel", {"surface": {"xy": [0, 0]}}),
                obj("b", "sphere", {"radius": 0.1}, "steel", {"surface": {"xy": [0.15, 0]}})])
    refused(cfg, "a", "interpenetrating")


def test_track_rolling_needs_friction():
    sup = {"tracks": [{"id": "pipe", "material": "rubber", "radius": 0.5, "center": [0, 0, 0.5], "arc_deg": [-90, 0], "width": 0.2}]}
    cfg = make([obj("a", "sphere", {"radius": 0.05}, "steel", {"track": {"track": "pipe", "angle_deg": -70}})], sup)
    refused(cfg, "a", "static friction")


def test_track_rolling_threshold_both_sides():
    """Rolling from rest at phi0 needs mu_s >= k/(1+k) tan(phi0) at the start (the most demanding point)."""
    k = 0.4
    mu = MATS.pair("steel", "rubber").static_friction
    phi_c = math.degrees(math.atan(mu * (1 + k) / k))
    sup = {"tracks": [{"id": "pipe", "material": "rubber", "radius": 0.5, "center": [0, 0, 0.5], "arc_deg": [-90, 0], "width": 0.2}]}
    ok = make([obj("a", "sphere", {"radius": 0.05}, "steel", {"track": {"track": "pipe", "angle_deg": -(phi_c - 0.05)}})], sup, T=0.3)
    assert solve(ok).mode("a", 0.1) == "track"
    bad = make([obj("a", "sphere", {"radius": 0.05}, "steel", {"track": {"track": "pipe", "angle_deg": -(phi_c + 0.05)}})], sup, T=0.3)
    refused(bad, "a", "static friction")


def test_track_detachment_recontact_refused():
    sup = {"tracks": [{"id": "loop", "material": "air_table", "radius": 0.6, "center": [0, 0, 0.6], "arc_deg": [-180, 180], "width": 0.2}]}
    cfg = make([obj("a", "sphere", {"radius": 0.05}, "steel", {"track": {"track": "loop", "angle_deg": 0, "speed": 4.2}})], sup, T=1.5)
    refused(cfg, "a", "hit the track again")


def test_flight_into_ramp_refused():
    cfg = make([obj("s", "sphere", {"radius": 0.05}, "steel", {"free": {"position": [-2.0, 0, 1.2], "linear_velocity": [4, 0, 1]}})],
               {"ramps": [RAMP]}, T=1.0)
    refused(cfg, "s", "ramp")


def test_vocabulary_is_closed():
    assert set(LAW_VARIANTS) == {"free_fall", "projectile_motion", "inclined_plane", "circular_motion",
                                 "perfectly_elastic_collision", "perfectly_inelastic_collision", "inelastic_collision",
                                 "at_rest", "uniform_linear_motion", "bounce", "surface_friction"}
    assert "welded" in MODES and "track" in MODES


def test_oblique_roll_slip_orientation_matches_numerical_rotation():
    """The one non-coaxial spin regime (Magnus-integrated orientation) against solve_ivp of q' = ½ ω ⊗ q."""
    cfg = make([obj("a", "sphere", {"radius": 0.05}, "steel", {"surface": {"xy": [0, 0], "velocity": [1.5, 0.0]}}),
                obj("b", "sphere", {"radius": 0.05}, "steel", {"surface": {"xy": [0.4, 0.05]}})], T=0.6)
    tr = solve(cfg)
    segs = [s for s in tr.segments("a") if s[2] == "surface_roll_slip"]
    assert segs
    t0, t1, _ = segs[0]

    def rhs(t, q):
        w = tr.state("a", t).angular_velocity
        wq = np.array([0.0, *w])
        a, b = wq, q
        prod = np.array([a[0] * b[0] - a[1:] @ b[1:], *(a[0] * b[1:] + b[0] * a[1:] + np.cross(a[1:], b[1:]))])
        return 0.5 * prod

    q0 = tr.state("a", t0).quaternion
    sol = solve_ivp(rhs, (t0, t1), q0, rtol=1e-12, atol=1e-13, method="DOP853", dense_output=True)
    for t in np.linspace(t0, t1, 9):
        q = sol.sol(t)
        q = q / np.linalg.norm(q) * (1 if q[0] >= 0 else -1)
        assert np.allclose(tr.state("a", t).quaternion, q, atol=1e-8)
