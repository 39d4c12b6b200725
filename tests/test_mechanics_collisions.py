"""Impact law properties (hypothesis) for the analytic collision model, standalone and inside solve()."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings, strategies as st

from orchard_build.config import resolve_config
from orchard_build.materials import load_materials
from orchard_build.mechanics import collision_velocities, solve

ROOT = Path(__file__).resolve().parents[1]
MATS = load_materials(ROOT / "scenes" / "materials.yaml")

vec = st.lists(st.floats(-20, 20, allow_nan=False), min_size=3, max_size=3).map(np.array)
mass = st.floats(0.01, 100.0)
coef = st.floats(0.0, 1.0)


def _normal(data):
    n = data.draw(vec)
    if np.linalg.norm(n) < 1e-3:
        n = np.array([1.0, 0.0, 0.0])
    return n / np.linalg.norm(n)


@settings(max_examples=300, deadline=None)
@given(m1=mass, m2=mass, u1=vec, u2=vec, e=coef, data=st.data())
def test_impulse_laws(m1, m2, u1, u2, e, data):
    n = _normal(data)
    if float((u1 - u2) @ n) < 0:
        n = -n  # n points from body 1 to body 2 along the approach
    v1, v2 = collision_velocities(m1, m2, u1, u2, n, e)
    p0, p1 = m1 * u1 + m2 * u2, m1 * v1 + m2 * v2
    scale = m1 * np.linalg.norm(u1) + m2 * np.linalg.norm(u2) + 1e-300
    assert np.linalg.norm(p1 - p0) <= 1e-9 * scale
    # restitution law on the normal relative velocity, tangential parts untouched (frictionless contact)
    un, vn = float((u1 - u2) @ n), float((v1 - v2) @ n)
    assert abs(vn + e * un) <= 1e-9 * (abs(un) + np.linalg.norm(u1) + np.linalg.norm(u2) + 1e-12)
    for u, v in ((u1, v1), (u2, v2)):
        assert np.allclose(u - (u @ n) * n, v - (v @ n) * n, atol=1e-9 * (1 + np.linalg.norm(u)))
    ke0 = 0.5 * m1 * u1 @ u1 + 0.5 * m2 * u2 @ u2
    ke1 = 0.5 * m1 * v1 @ v1 + 0.5 * m2 * v2 @ v2
    mu = m1 * m2 / (m1 + m2)
    loss = 0.5 * mu * (1 - e * e) * un * un  # exact kinetic-energy loss of the restitution law
    assert abs((ke0 - ke1) - loss) <= 1e-9 * (ke0 + 1e-12)
    if e == 1.0:
        assert abs(ke1 - ke0) <= 1e-9 * (ke0 + 1e-12)
    elif un > 1e-3 and e < 1.0 - 1e-6:
        assert ke1 < ke0


SPHERE_MATS = ["steel", "rubber", "glass", "putty", "elastic_polymer", "oak", "abs_plastic"]


@settings(max_examples=25, deadline=None)
@given(r1=st.floats(0.03, 0.12), r2=st.floats(0.03, 0.12), m1=st.sampled_from(SPHERE_MATS),
       m2=st.sampled_from(SPHERE_MATS), speed=st.floats(2.2, 6.0), off=st.floats(-0.9, 0.9),
       side=st.floats(-0.9, 0.9))
def test_midair_sphere_collisions_in_solve(r1, r2, m1, m2, speed, off, side):
    """Two spheres meet in mid-air (3D, oblique): the solver's impact obeys the impulse laws."""
    e = MATS.pair(m1, m2).restitution
    reach = r1 + r2
    offset = [0.0, off * reach, side * reach * 0.4] if e > 0 else [0.0, 0.0, 0.0]
    objects = [
        {"id": "a", "shape": "sphere", "size": {"radius": r1}, "material": m1,
         "placement": {"free": {"position": [-0.5, 0, 2.0], "linear_velocity": [speed, 0, 0]}}},
        {"id": "b", "shape": "sphere", "size": {"radius": r2}, "material": m2,
         "placement": {"free": {"position": [0.5, offset[1], 2.0 + offset[2]], "linear_velocity": [-speed, 0, 0]}}},
    ]
    raw = {"schema_version": 1, "task": "inelastic_collision", "case_number": 1, "seed": 0, "environment": {"g": 9.81},
           "ground": {"material": "concrete"}, "objects": objects,
           "camera": {"position": [0, -5, 1], "look_at": [0, 0, 0.5], "fov_deg": 40, "resolution": [64, 64]},
           "timing": {"fps": 24, "duration": 0.5, "target_time": 0.2}}
    tr = solve(resolve_config(raw, "test.yaml", MATS))
    steps = [s for s in tr.law_steps() if s.law.endswith("collision")]
    assert len(steps) == 1
    s = steps[0]
    p = s.parameters
    want = {1.0: "perfectly_elastic_collision", 0.0: "perfectly_inelastic_collision"}.get(e, "inelastic_collision")
    assert s.law == want and s.objects == ("a", "b") and s.t_start == s.t_end
    u1, u2, v1, v2, n = (np.array(p[k]) for k in ("u1", "u2", "v1", "v2", "n"))
    mom0, mom1 = p["m1"] * u1 + p["m2"] * u2, p["m1"] * v1 + p["m2"] * v2
    assert np.linalg.norm(mom1 - mom0) <= 1e-9 * np.linalg.norm(p["m1"] * u1) + 1e-12
    assert abs(float((v1 - v2) @ n) + e * float((u1 - u2) @ n)) < 1e-9 * speed
    # the trajectory itself carries those velocities just before / at the impact
    t = s.t_start
    assert np.allclose(tr.state("a", t).linear_velocity, v1, atol=1e-12)
    assert np.allclose(tr.state("a", t - 1e-9).linear_velocity, u1, atol=1e-7)
    # at contact the centres are exactly r1 + r2 apart
    d = tr.state("b", t).position - tr.state("a", t).position
    assert abs(np.linalg.norm(d) - (r1 + r2)) < 1e-9
    assert s.variant == ("head_on" if np.linalg.norm(np.cross(u1 - u2, n)) <= 1e-9 * np.linalg.norm(u1 - u2) else "oblique")
