"""The MuJoCo engine stays within the render producer's tolerance of the analytic ground truth.

A representative subset of the hand-written configs, one per engine setting that it exercises
(see orchard_build/engines/restitution.py for the settings and the measurements behind them), checked
with the render producer's own rule (`render_case.deviation_report`: max(1 % of the analytic travel,
5 mm) at every frame). Plus two single-mechanism checks: a sphere's oblique bounce ends rolling (Coulomb
impact with sticking) and object–object contacts are frictionless like the analytic collisions.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from orchard_build.engines import gl

gl.configure()  # before mujoco is imported
pytest.importorskip("mujoco")

from conftest import FIXTURES  # noqa: E402
from orchard_build.config import load_config  # noqa: E402
from orchard_build.engines import get_backend  # noqa: E402
from orchard_build.engines.mujoco_scene import build_mjcf  # noqa: E402
from orchard_build.mechanics import solve  # noqa: E402
from orchard_build.render_case import deviation_report  # noqa: E402
from test_mujoco_scene import make_raw, resolve  # noqa: E402

CASES = {
    "free_fall/000000.yaml": "contact stiffness: a 4.8 m/s bounce lags by the contact duration",
    "projectile_motion/000000.yaml": "friction damping: the bounce on concrete ends rolling",
    "composition/000002.yaml": "repeated bounces with spin on painted wood",
    "inclined_plane/000000.yaml": "slider friction damping: a sliding box neither rocks nor drifts",
    "inclined_plane/000003.yaml": "ccd_tolerance: exact normals for a cylinder rolling with slip",
    "circular_motion/000000.yaml": "track contacts: a fast loop keeps its energy",
    "circular_motion/000002.yaml": "track contacts: a cylinder on a polygonal loop",
    "inelastic_collision/000001.yaml": "frictionless object-object contacts (spinning spheres, oblique)",
    "composition/000003.yaml": "collision, platform edge, bounces",
}


def _deviations(rel: str):
    path = FIXTURES / rel
    if not path.is_file():
        pytest.fail(f"fixture {rel} is missing from the repository")
    cfg = load_config(path)
    times = cfg.timing.frame_times
    analytic = solve(cfg).sample(times)
    run = get_backend("mujoco").simulate(cfg, times)
    ids = [o.id for o in cfg.objects]
    return deviation_report(cfg, {i: analytic[i]["position"] for i in ids},
                            {i: run.states[i].position for i in ids}, times)


@pytest.mark.parametrize("rel", sorted(CASES))
def test_engine_within_tolerance(rel):
    report = _deviations(rel)
    bad = {i: (round(e["max_deviation"] * 1000, 1), round(e["tolerance"] * 1000, 1), round(e["max_deviation_time"], 3))
           for i, e in report["objects"].items() if not e["within_tolerance"]}
    assert not bad, f"{rel} ({CASES[rel]}): (deviation mm, tolerance mm, t) = {bad}"


def test_oblique_bounce_ends_rolling():
    """Steel ball on concrete at 2 m/s horizontal, 5.3 m/s down: Coulomb with sticking gives 5/7 of
    the horizontal speed and ω r = v after the bounce, and e = 0.6 vertically."""
    objs = [{"id": "ball", "shape": "sphere", "size": {"radius": 0.05}, "material": "steel",
             "placement": {"free": {"position": [0.0, 0.0, 0.2], "linear_velocity": [2.0, 0.0, -5.0]}}}]
    cfg = resolve(make_raw(objs, task="projectile_motion", duration=0.125))
    run = get_backend("mujoco").simulate(cfg, np.array([0.0, 0.125]))
    v, w = run.states["ball"].linear_velocity[-1], run.states["ball"].angular_velocity[-1]
    v_in = math.sqrt(5.0 ** 2 + 2 * 9.81 * 0.15)
    assert v[0] == pytest.approx(2.0 * 5.0 / 7.0, rel=0.02)
    assert w[1] * 0.05 == pytest.approx(v[0], rel=0.02)
    t_up = 0.125 - (v_in - 5.0) / 9.81  # time since the impact
    assert v[2] + 9.81 * t_up == pytest.approx(0.6 * v_in, abs=0.03)


def test_object_pairs_are_frictionless():
    objs = [{"id": "a", "shape": "sphere", "size": {"radius": 0.05}, "material": "rubber",
             "placement": {"free": {"position": [0.0, 0.0, 0.3]}}},
            {"id": "b", "shape": "sphere", "size": {"radius": 0.05}, "material": "rubber",
             "placement": {"free": {"position": [0.3, 0.0, 0.3]}}}]
    xml = build_mjcf(resolve(make_raw(objs, task="free_fall"))).xml
    pairs = [line for line in xml.splitlines() if "<pair " in line]
    between = [p for p in pairs if 'geom1="object:a"' in p and 'geom2="object:b"' in p]
    assert len(between) == 1 and 'condim="1"' in between[0]
    assert all('condim="3"' in p for p in pairs if p not in between)
    assert 'ccd_tolerance="1e-10"' in xml
