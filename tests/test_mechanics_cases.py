"""Analytic ground truth vs an independent numerical integration (scipy solve_ivp + event functions).

The reference below is written from Newton's laws with forces (gravity, normal force, Coulomb friction)
and the impact laws, integrated numerically; it shares no code with orchard_build.mechanics.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from orchard_build.config import resolve_config
from orchard_build.materials import load_materials
from orchard_build.mechanics import BOUNCE_THRESHOLD, solve

ROOT = Path(__file__).resolve().parents[1]
MATS = load_materials(ROOT / "scenes" / "materials.yaml")
Z = np.array([0.0, 0.0, 1.0])
TOL_X, TOL_V, TOL_T = 1e-6, 1e-6, 1e-6


def make(task, objects, supports=None, g=9.81, T=2.0, ground="concrete"):
    raw = {"schema_version": 1, "task": task, "case_number": 1, "seed": 0, "environment": {"g": g},
           "ground": {"material": ground}, "objects": objects,
           "camera": {"position": [0, -5, 1], "look_at": [0, 0, 0.5], "fov_deg": 40, "resolution": [64, 64]},
           "timing": {"fps": 120, "duration": T, "target_time": T / 2}}  # 120 fps: every test duration is whole frames
    if supports:
        raw["supports"] = supports
    return resolve_config(raw, "test.yaml", MATS)


def sphere(oid, r, mat, placement):
    return {"id": oid, "shape": "sphere", "size": {"radius": r}, "material": mat, "placement": placement}


def cube(oid, e, mat, placement):
    return {"id": oid, "shape": "cube", "size": {"edge": e}, "material": mat, "placement": placement}


# ---------------------------------------------------------------------------------------------
# Independent reference: numerical integration of rigid bodies with piecewise contact regimes.
# ---------------------------------------------------------------------------------------------
class RefBody:
    def __init__(self, spec, cfg):
        self.id = spec.id
        self.shape = spec.shape
        self.m = spec.mass
        if spec.shape == "sphere":
            self.r = spec.primitive.size["radius"]
            self.k = 0.4
            self.half = self.r
        elif spec.shape == "cube":
            self.r = spec.primitive.size["edge"] / 2
            self.k = None
            self.half = self.r
        else:  # cylinder
            self.r = spec.primitive.size["radius"]
            self.k = 0.5 if spec.rest_pose == "side" else None
            self.half = self.r if spec.rest_pose == "side" or True else None
        self.roller = self.k is not None
        self.mat = spec.material


class Reference:
    """Rigid bodies on the ground / platforms / ramps / tracks, integrated with solve_ivp."""

    def __init__(self, cfg, modes, bounce_threshold=BOUNCE_THRESHOLD):
        self.cfg, self.g = cfg, cfg.g
        self.bodies = [RefBody(o, cfg) for o in cfg.objects]
        self.modes = list(modes)  # per body: tuple describing the regime
        y = []
        for o in cfg.objects:
            y += list(o.position) + list(o.linear_velocity) + list(o.angular_velocity)
        self.y = np.array(y, float)
        self.threshold = bounce_threshold
        self.segments = []  # (t0, t1, dense)
        self.events = []  # (t, label, ids)
        self.welded = set()

    # ---- helpers ---------------------------------------------------------------------------
    def parts(self, y, i):
        return y[9 * i:9 * i + 3], y[9 * i + 3:9 * i + 6], y[9 * i + 6:9 * i + 9]

    def mu(self, b, support_mat):
        return MATS.pair(b.mat, support_mat)

    def accel(self, t, y, i):
        b, mode = self.bodies[i], self.modes[i]
        p, v, w = self.parts(y, i)
        g = self.g
        kind = mode[0]
        if kind == "flight":
            return np.array([0, 0, -g]), np.zeros(3)
        if kind in ("rest", "uniform", "roll"):
            return np.zeros(3), np.zeros(3)
        if kind == "slip":  # sphere on a flat surface, slipping: Coulomb friction at the contact
            mu = mode[2]
            u = v + np.cross(w, -b.r * Z)
            uh = u / np.linalg.norm(u)
            F = -mu * g * uh
            return F, np.cross(-b.r * Z, F) / (b.k * b.r ** 2)
        if kind == "slide":
            mu = mode[2]
            return -mu * g * v / np.linalg.norm(v), np.zeros(3)
        if kind == "ramp":
            ramp, sub, pc = mode[1], mode[2], mode[3]
            th, sd = ramp.angle, ramp.slope_down
            if sub == "slide":
                vs = float(v @ sd)
                sgn = 1.0 if vs > 0 else -1.0
                return (g * math.sin(th) - sgn * pc.dynamic_friction * g * math.cos(th)) * sd, np.zeros(3)
            if sub == "roll":
                f = b.k * g * math.sin(th) / (1 + b.k)  # friction needed for rolling (per unit mass)
                assert f <= pc.static_friction * g * math.cos(th) + 1e-12
            else:
                f = pc.dynamic_friction * g * math.cos(th)
            return (g * math.sin(th) - f) * sd, f / (b.k * b.r) * ramp.lateral
        if kind == "track":
            tr, k = mode[1], mode[2]
            rho = tr.radius - b.r
            rel = p - tr.center
            phi = math.atan2(float(rel @ tr.direction), float(-rel @ Z))
            tang = math.cos(phi) * tr.direction + math.sin(phi) * Z
            radial = math.sin(phi) * tr.direction - math.cos(phi) * Z
            vt = float(v @ tang)
            at = -g * math.sin(phi) / (1 + k)
            a = at * tang - (vt ** 2 / rho) * radial
            alpha = (at / b.r) * tr.lateral if k > 0 else np.zeros(3)
            return a, alpha
        raise AssertionError(kind)

    def rhs(self, t, y):
        out = np.zeros_like(y)
        for i in range(len(self.bodies)):
            p, v, w = self.parts(y, i)
            a, al = self.accel(t, y, i)
            out[9 * i:9 * i + 3] = v
            out[9 * i + 3:9 * i + 6] = a
            out[9 * i + 6:9 * i + 9] = al
        return out

    def event_funcs(self):
        evs = []
        for i, (b, mode) in enumerate(zip(self.bodies, self.modes)):
            kind = mode[0]
            if kind == "flight":
                evs.append((lambda t, y, i=i, b=b: y[9 * i + 2] - b.r, -1, ("land", i)))
                evs.append((lambda t, y, i=i: y[9 * i + 5], -1, ("apex", i)))
            if kind == "slip":
                p, v, w = self.parts(self.y, i)
                u0 = v + np.cross(w, -b.r * Z)
                uh = u0 / np.linalg.norm(u0)
                evs.append((lambda t, y, i=i, uh=uh, b=b: float((y[9 * i + 3:9 * i + 6] + np.cross(y[9 * i + 6:9 * i + 9], -b.r * Z)) @ uh), -1, ("slip_end", i)))
            if kind == "slide":
                vh = self.y[9 * i + 3:9 * i + 6] / np.linalg.norm(self.y[9 * i + 3:9 * i + 6])
                evs.append((lambda t, y, i=i, vh=vh: float(y[9 * i + 3:9 * i + 6] @ vh), -1, ("stop", i)))
            if kind in ("slip", "slide", "roll", "uniform") and mode[1] != 0.0:
                plat = mode[3]
                for ax in (0, 1):
                    for sg in (-1, 1):
                        edge = plat.center[ax] + sg * plat.size[ax] / 2
                        evs.append((lambda t, y, i=i, ax=ax, edge=edge, sg=sg: sg * (y[9 * i + ax] - edge), 1, ("edge", i)))
            if kind == "ramp":
                ramp, sub = mode[1], mode[2]
                ground_foot = abs(ramp.foot[2]) < 1e-12
                dfoot = ramp.length - (b.r * math.tan(ramp.angle / 2) if ground_foot and b.roller else 0.0)
                a_c = b.r
                evs.append((lambda t, y, i=i, ramp=ramp, a_c=a_c, dfoot=dfoot:
                            float((y[9 * i:9 * i + 3] - a_c * ramp.normal - ramp.top) @ ramp.slope_down) - dfoot, 1, ("foot", i)))
                if sub == "slide" and float(self.y[9 * i + 3:9 * i + 6] @ ramp.slope_down) < 0:
                    evs.append((lambda t, y, i=i, ramp=ramp: float(y[9 * i + 3:9 * i + 6] @ ramp.slope_down), 1, ("turn", i)))
            if kind == "track":
                tr, k = mode[1], mode[2]
                rho = tr.radius - b.r

                def normal_force(t, y, i=i, tr=tr, rho=rho):
                    p, v = y[9 * i:9 * i + 3], y[9 * i + 3:9 * i + 6]
                    rel = p - tr.center
                    cphi = float(-rel @ Z) / np.linalg.norm(rel)
                    return float(v @ v) / rho + self.g * cphi
                evs.append((normal_force, -1, ("detach", i)))
                if tr.arc[1] - tr.arc[0] < 2 * math.pi - 1e-9:
                    for end in tr.arc:
                        def arc_ev(t, y, i=i, tr=tr, end=end):
                            rel = y[9 * i:9 * i + 3] - tr.center
                            phi = math.atan2(float(rel @ tr.direction), float(-rel @ Z))
                            return phi - end
                        evs.append((arc_ev, 1 if end == tr.arc[1] else -1, ("arc_end", i, end)))
        n = len(self.bodies)
        for i in range(n):
            for j in range(i + 1, n):
                bi, bj = self.bodies[i], self.bodies[j]
                if (i, j) in self.welded:
                    continue
                if bi.shape == "sphere" and bj.shape == "sphere":
                    d = bi.r + bj.r
                    evs.append((lambda t, y, i=i, j=j, d=d: np.linalg.norm(y[9 * j:9 * j + 3] - y[9 * i:9 * i + 3]) - d, -1, ("hit", i, j)))
                else:
                    d = bi.half + bj.half
                    evs.append((lambda t, y, i=i, j=j, d=d: np.linalg.norm(y[9 * j:9 * j + 2] - y[9 * i:9 * i + 2]) - d, -1, ("hit", i, j)))
        return evs

    def classify_surface(self, i, z_top=0.0, plat=None):
        b = self.bodies[i]
        p, v, w = self.parts(self.y, i)
        mat = plat.material if plat is not None else self.cfg.ground_material
        pc = MATS.pair(b.mat, mat)
        mu = pc.dynamic_friction
        if b.roller:
            u = v + np.cross(w, -b.r * Z)
            if np.linalg.norm(u) > 1e-9 and mu > 0:
                return ("slip", z_top, mu, plat)
            return ("roll" if np.linalg.norm(u) <= 1e-9 else "uniform", z_top, mu, plat)
        if np.linalg.norm(v) < 1e-12:
            return ("rest", z_top, mu, plat)
        return ("slide", z_top, mu, plat) if mu > 0 else ("uniform", z_top, mu, plat)

    # ---- transitions -----------------------------------------------------------------------
    def apply(self, t, tag):
        y = self.y
        kind, i = tag[0], tag[1]
        b = self.bodies[i]
        p, v, w = (x.copy() for x in self.parts(y, i))
        if kind == "land":
            pc = MATS.pair(b.mat, self.cfg.ground_material)
            e, mu = pc.restitution, pc.dynamic_friction
            vn = v[2]
            self.events.append((t, "landing", b.id))
            if b.roller and mu > 0:
                u = v + np.cross(w, -b.r * Z)
                u[2] = 0.0
                if np.linalg.norm(u) > 0:
                    uh = u / np.linalg.norm(u)
                    jt = min(mu * (1 + e) * abs(vn), b.k / (1 + b.k) * np.linalg.norm(u))
                    v = v - jt * uh
                    w = w + jt / (b.k * b.r) * np.cross(Z, uh)
            v[2] = -e * vn
            p[2] = b.r
            y[9 * i:9 * i + 9] = np.concatenate([p, v, w])
            if v[2] >= self.threshold:
                self.events.append((t, "elastic_rebound", b.id))
                self.modes[i] = ("flight",)
            else:
                y[9 * i + 5] = 0.0
                self.events.append((t, "capture", b.id))
                self.modes[i] = self.classify_surface(i)
        elif kind == "apex":
            self.events.append((t, "projectile_apex", b.id))
        elif kind == "slip_end":
            self.modes[i] = ("roll",) + self.modes[i][1:]
        elif kind == "stop":
            y[9 * i + 3:9 * i + 6] = 0.0
            self.events.append((t, "sliding_arrest", b.id))
            self.modes[i] = ("rest",) + self.modes[i][1:]
        elif kind == "edge":
            self.events.append((t, "contact_break", b.id))
            self.modes[i] = ("flight",)
        elif kind == "turn":
            ramp = self.modes[i][1]
            y[9 * i + 3:9 * i + 6] = 0.0
            self.events.append((t, "sliding_arrest", b.id))
            pc = self.modes[i][3]
            if pc.static_friction >= math.tan(ramp.angle):
                self.modes[i] = ("rest", None, 0.0, None)
        elif kind == "foot":
            ramp = self.modes[i][1]
            if abs(ramp.foot[2]) < 1e-12:
                self.events.append((t, "surface_transition", b.id))
                vs = float(v @ ramp.slope_down)
                v = vs * math.cos(ramp.angle) * ramp.downhill
                if not b.roller:
                    p[2] = b.r
                y[9 * i:9 * i + 9] = np.concatenate([p, v, w])
                self.modes[i] = self.classify_surface(i)
            else:
                self.events.append((t, "contact_break", b.id))
                self.modes[i] = ("flight",)
        elif kind == "detach":
            self.events.append((t, "contact_break", b.id))
            self.modes[i] = ("flight",)
        elif kind == "arc_end":
            self.events.append((t, "arc_end", b.id))
            if abs(tag[2]) < 1e-12:
                v[2] = 0.0
                p[2] = b.r
                y[9 * i:9 * i + 9] = np.concatenate([p, v, w])
                self.modes[i] = self.classify_surface(i)
            else:
                self.modes[i] = ("flight",)
        elif kind == "hit":
            j = tag[2]
            bj = self.bodies[j]
            pj, vj, wj = (x.copy() for x in self.parts(y, j))
            e = MATS.pair(b.mat, bj.mat).restitution
            d = pj - p
            if not (b.shape == "sphere" and bj.shape == "sphere"):
                d[2] = 0.0
            n = d / np.linalg.norm(d)
            # impulse J along n from the restitution law on the relative normal velocity
            vrel = float((v - vj) @ n)
            J = (1 + e) * vrel / (1 / b.m + 1 / bj.m)
            v = v - J / b.m * n
            vj = vj + J / bj.m * n
            y[9 * i + 3:9 * i + 6] = v
            y[9 * j + 3:9 * j + 6] = vj
            self.events.append((t, "contact_init", (b.id, bj.id)))
            for k_ in (i, j):
                if self.modes[k_][0] != "flight":
                    zt, plat = self.modes[k_][1], self.modes[k_][3]
                    self.modes[k_] = self.classify_surface(k_, zt, plat)
            if e == 0.0:
                self.welded.add((i, j))

    def run(self, T):
        t = 0.0
        guard = 0
        while t < T - 1e-12:
            guard += 1
            assert guard < 500
            evs = self.event_funcs()
            funcs = []
            for f, direction, tag in evs:
                def ff(tt, yy, f=f):
                    return f(tt, yy)
                ff.terminal = tag[0] != "apex"
                ff.direction = direction
                funcs.append(ff)
            sol = solve_ivp(self.rhs, (t, T), self.y, method="DOP853", rtol=1e-12, atol=1e-13,
                            events=funcs or None, dense_output=True, max_step=0.005)
            # first event strictly after t (ignore roots at the very start)
            t_hit, tag_hit, y_hit = None, None, None
            if sol.status == 1:
                for k, te in enumerate(sol.t_events):
                    for tt, yy in zip(te, sol.y_events[k]):
                        if tt > t + 1e-10 and evs[k][2][0] != "apex":
                            if t_hit is None or tt < t_hit:
                                t_hit, tag_hit, y_hit = tt, evs[k][2], yy
            if t_hit is None and sol.status == 1:
                raise AssertionError(f"reference event at start {[evs[k][2] for k, te in enumerate(sol.t_events) if len(te)]}")
            t_end = sol.t[-1] if t_hit is None else t_hit
            for k, te in enumerate(sol.t_events or []):
                if evs[k][2][0] == "apex":
                    for tt in te:
                        if t + 1e-10 < tt <= t_end:
                            self.events.append((tt, "projectile_apex", self.bodies[evs[k][2][1]].id))
            self.segments.append((t, t_end, sol.sol))
            if t_hit is None:
                break
            self.y = np.array(y_hit, float)
            self.apply(t_hit, tag_hit)
            # other bodies reaching the end of their slip at the same instant (e.g. a welded pair)
            for k_, (b, mode) in enumerate(zip(self.bodies, self.modes)):
                p, v, w = self.parts(self.y, k_)
                if mode[0] == "slide" and np.linalg.norm(v) < 1e-8:
                    self.apply(t_hit, ("stop", k_))
                if mode[0] == "slip" and np.linalg.norm(v + np.cross(w, -b.r * Z)) < 1e-8:
                    self.apply(t_hit, ("slip_end", k_))
            t = t_hit
        return self

    def state(self, t, i):
        for t0, t1, f in reversed(self.segments):
            if t0 <= t:
                y = f(min(t, t1))
                return y[9 * i:9 * i + 3], y[9 * i + 3:9 * i + 6], y[9 * i + 6:9 * i + 9]
        raise AssertionError


def initial_modes(cfg):
    modes = []
    for o in cfg.objects:
        if o.placement == "free":
            modes.append(("flight",))
        elif o.placement == "surface":
            modes.append(None)
        elif o.placement == "ramp":
            ramp = cfg.ramp(o.support)
            pc = MATS.pair(o.material, ramp.material)
            if o.primitive.rolls(o.rest_pose):
                k = o.primitive.rolling_inertia_ratio()
                sub = "roll" if pc.static_friction >= k * math.tan(ramp.angle) / (1 + k) else "roll_slip"
                modes.append(("ramp", ramp, sub, pc))
            elif np.linalg.norm(o.linear_velocity) == 0 and pc.static_friction >= math.tan(ramp.angle):
                modes.append(("rest", None, 0.0, None))
            else:
                modes.append(("ramp", ramp, "slide", pc))
        else:
            tr = cfg.track(o.support)
            pc = MATS.pair(o.material, tr.material)
            modes.append(("track", tr, o.primitive.rolling_inertia_ratio() if pc.static_friction > 0 else 0.0))
    return modes


def reference(cfg):
    ref = Reference(cfg, initial_modes(cfg))
    for i, (o, m) in enumerate(zip(cfg.objects, ref.modes)):
        if m is None:
            plat = cfg.platform(o.support) if o.support not in (None, "ground") else None
            ref.modes[i] = ref.classify_surface(i, plat.top_z if plat else 0.0, plat)
    return ref.run(cfg.timing.duration)


def compare(cfg, tr, ref, n=97, skip_events=True, check_w=True):
    T = cfg.timing.duration
    ev_t = sorted({e.t for e in tr.events})
    times = np.linspace(0.0, T, n)
    checked = 0
    for t in times:
        if skip_events and any(abs(t - te) < 1e-5 for te in ev_t):
            continue
        for i, o in enumerate(cfg.objects):
            s = tr.state(o.id, t)
            p, v, w = ref.state(t, i)
            assert np.allclose(s.position, p, atol=TOL_X, rtol=0), (o.id, t, s.position, p, tr.mode(o.id, t))
            assert np.allclose(s.linear_velocity, v, atol=TOL_V, rtol=0), (o.id, t, s.linear_velocity, v, tr.mode(o.id, t))
            if check_w:
                assert np.allclose(s.angular_velocity, w, atol=1e-5, rtol=0), (o.id, t, s.angular_velocity, w)
            q = s.quaternion
            assert abs(np.linalg.norm(q) - 1) < 1e-12
        checked += 1
    assert checked > n // 2


def event_times(tr, label, oid=None):
    return [e.t for e in tr.events if e.label == label and (oid is None or oid in e.objects)]


def ref_times(ref, label, oid=None):
    return [e[0] for e in ref.events if e[1] == label and (oid is None or oid == e[2] or (isinstance(e[2], tuple) and oid in e[2]))]


def assert_times(a, b):
    assert len(a) == len(b), (a, b)
    assert np.allclose(a, b, atol=TOL_T, rtol=0), (a, b)


def chain(tr):
    return [(s.law, s.variant) for s in tr.law_steps()]


# ---------------------------------------------------------------------------------------------
# Free fall and projectile motion
# ---------------------------------------------------------------------------------------------
def test_free_fall_thrown_moon_bounces_to_rest():
    cfg = make("free_fall", [sphere("ball", 0.05, "rubber", {"free": {"position": [0, 0, 1.2], "linear_velocity": [0, 0, 1.5]}})],
               g=1.62, T=8.0)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert_times(event_times(tr, "landing"), ref_times(ref, "landing"))
    assert_times(event_times(tr, "projectile_apex"), ref_times(ref, "projectile_apex"))
    # exact first landing from the quadratic
    g, v0, h = 1.62, 1.5, 1.2 - 0.05
    assert abs(event_times(tr, "landing")[0] - (v0 + math.sqrt(v0 ** 2 + 2 * g * h)) / g) < 1e-12
    steps = chain(tr)
    assert steps[0] == ("free_fall", "thrown") and ("bounce", "inelastic") in steps
    assert tr.law_steps()[0].parameters["g"] == 1.62
    labels = [e.label for e in tr.events]
    assert labels[0] == "free_fall_onset" and "settling" in labels
    assert tr.mode("ball", 8.0) == "rest"


def test_free_fall_drop_variant_and_mode():
    cfg = make("free_fall", [cube("box", 0.1, "oak", {"free": {"position": [0, 0, 2.0]}})], T=0.5)
    tr = solve(cfg)
    assert chain(tr) == [("free_fall", "drop")]
    s = tr.state("box", 0.5)
    assert abs(s.position[2] - (2.0 - 0.5 * 9.81 * 0.25)) < 1e-12
    assert tr.mode("box", 0.3) == "flight"
    with pytest.raises(ValueError):
        tr.state("box", 0.6)


@pytest.mark.parametrize("vel", [[2.0, 0.0, 3.0], [1.5, -1.0, 2.5]])
def test_projectile_apex_landing_and_bounces(vel):
    cfg = make("projectile_motion", [sphere("ball", 0.04, "rubber", {"free": {"position": [0, 0, 0.6], "linear_velocity": vel}})],
               T=2.5)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    for lab in ("landing", "projectile_apex"):
        assert_times(event_times(tr, lab), ref_times(ref, lab))
    assert chain(tr)[0] == ("projectile_motion", "launch")
    assert ("bounce", "inelastic") in chain(tr)
    p0 = tr.law_steps()[0].parameters
    assert np.allclose(p0["v0_vec"], vel) and abs(p0["h0"] - 0.6) < 1e-12


def test_projectile_frictionless_elastic_bounces_keep_horizontal_velocity():
    cfg = make("projectile_motion", [sphere("ball", 0.05, "elastic_polymer", {"free": {"position": [0, 0, 1.0], "linear_velocity": [1, 0.5, 0]}})],
               ground="air_table", T=2.0)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert ("bounce", "elastic") in chain(tr)
    for t in np.linspace(0, 2, 21):
        assert np.allclose(tr.state("ball", t).linear_velocity[:2], [1, 0.5])


# ---------------------------------------------------------------------------------------------
# Inclined plane
# ---------------------------------------------------------------------------------------------
RAMP = {"id": "ramp", "material": "oak", "angle_deg": 30, "length": 2.0, "width": 0.5, "foot": [1.0, 0.0, 0.0]}


def ramp_case(obj, ramp=None, T=1.5, task="inclined_plane", ground="concrete"):
    return make(task, [obj], {"ramps": [dict(RAMP, **(ramp or {}))]}, T=T, ground=ground)


def test_ramp_slide_then_ground():
    cfg = ramp_case(cube("c", 0.1, "steel", {"ramp": {"ramp": "ramp", "distance_from_top": 0.15}}), T=2.2)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert_times(event_times(tr, "surface_transition"), ref_times(ref, "surface_transition"))
    assert_times(event_times(tr, "sliding_arrest"), ref_times(ref, "sliding_arrest"))
    st = tr.law_steps()[0]
    mu = MATS.pair("steel", "oak").dynamic_friction
    assert (st.law, st.variant) == ("inclined_plane", "slide")
    assert abs(st.parameters["a"] - 9.81 * (math.sin(math.pi / 6) - mu * math.cos(math.pi / 6))) < 1e-12
    assert chain(tr)[:2] == [("inclined_plane", "slide"), ("surface_friction", "slide")]
    assert event_times(tr, "static_breakaway") == [0.0]


def test_ramp_static():
    cfg = ramp_case(cube("c", 0.1, "rubber", {"ramp": {"ramp": "ramp", "distance_from_top": 0.5}}), {"material": "concrete"})
    tr = solve(cfg)
    assert chain(tr) == [("inclined_plane", "static")]
    assert np.allclose(tr.state("c", 1.5).position, cfg.objects[0].position)
    assert tr.mode("c", 1.0) == "rest"
    cfg2 = ramp_case(cube("c", 0.1, "rubber", {"ramp": {"ramp": "ramp", "distance_from_top": 0.5}}), {"material": "concrete"}, task="at_rest")
    assert chain(solve(cfg2)) == [("at_rest", "ramp")]


def test_ramp_uphill_then_back():
    cfg = ramp_case(cube("c", 0.1, "steel", {"ramp": {"ramp": "ramp", "distance_from_top": 1.5, "speed": -2.0}}), T=1.6)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert_times(event_times(tr, "sliding_arrest"), ref_times(ref, "sliding_arrest"))
    labels = [e.label for e in tr.events]
    assert labels[:2] == ["sliding_arrest", "static_breakaway"]
    steps = tr.law_steps()
    assert steps[0].law == "inclined_plane" and len(steps[0].parameters["pieces"]) == 2
    mu = MATS.pair("steel", "oak").dynamic_friction
    assert abs(steps[0].parameters["a"] - 9.81 * (0.5 + mu * math.cos(math.pi / 6))) < 1e-12


@pytest.mark.parametrize("mat,angle,variant", [("rubber", 30, "roll"), ("steel", 60, "roll_slip")])
def test_ramp_roll_and_roll_slip(mat, angle, variant):
    obj = sphere("ball", 0.05, mat, {"ramp": {"ramp": "ramp", "distance_from_top": 0.1}})
    cfg = ramp_case(obj, {"material": "glass", "angle_deg": angle, "foot": [1.0, 0.0, 0.0]}, T=1.2)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert chain(tr)[0] == ("inclined_plane", variant)
    assert tr.mode("ball", 0.1) == ("ramp_roll" if variant == "roll" else "ramp_roll_slip")


def test_roll_vs_slip_threshold_both_sides():
    """Rolling iff mu_s >= k tan(theta) / (1 + k): probe just either side of the threshold angle."""
    pc = MATS.pair("steel", "glass")
    k = 0.4
    th = math.degrees(math.atan(pc.static_friction * (1 + k) / k))
    for angle, want in ((th - 0.01, "ramp_roll"), (th + 0.01, "ramp_roll_slip")):
        obj = sphere("ball", 0.05, "steel", {"ramp": {"ramp": "ramp", "distance_from_top": 0.1}})
        cfg = ramp_case(obj, {"material": "glass", "angle_deg": angle, "foot": [1.0, 0.0, 0.0]}, T=0.2)
        assert solve(cfg).mode("ball", 0.1) == want


# ---------------------------------------------------------------------------------------------
# Circular track
# ---------------------------------------------------------------------------------------------
def track_case(obj, track, T=2.0, ground="concrete"):
    return make("circular_motion", [obj], {"tracks": [track]}, T=T, ground=ground)


def test_track_full_loop_rolling():
    track = {"id": "loop", "material": "rubber", "radius": 0.5, "center": [0, 0, 0.5], "arc_deg": [-180, 180], "width": 0.2}
    obj = sphere("ball", 0.05, "rubber", {"track": {"track": "loop", "angle_deg": 0, "speed": 5.0}})
    cfg = track_case(obj, track, T=1.5)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert chain(tr) == [("circular_motion", "roll")]
    st = tr.law_steps()[0]
    assert abs(st.parameters["R"] - 0.45) < 1e-12 and st.parameters["k"] == 0.4
    # passes the top: phi covers more than 2 pi
    zs = [tr.state("ball", t).position[2] for t in np.linspace(0, 1.5, 300)]
    assert max(zs) > 0.94


def test_track_oscillation_rolling():
    track = {"id": "bowl", "material": "concrete", "radius": 1.0, "center": [0, 0, 1.0], "arc_deg": [-90, 90], "width": 0.2}
    obj = sphere("ball", 0.1, "rubber", {"track": {"track": "bowl", "angle_deg": 40}})
    cfg = track_case(obj, track, T=4.0)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert tr.stages[0].law == "circular_motion"


def test_track_detachment_then_landing():
    track = {"id": "loop", "material": "air_table", "radius": 0.6, "center": [0, 0, 0.6], "arc_deg": [60, 170], "width": 0.2}
    obj = sphere("ball", 0.05, "elastic_polymer", {"track": {"track": "loop", "angle_deg": 60, "speed": 3.5}})
    cfg = track_case(obj, track, T=1.3, ground="air_table")
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref, check_w=False)
    assert_times(event_times(tr, "contact_break"), ref_times(ref, "contact_break"))
    assert_times(event_times(tr, "landing"), ref_times(ref, "landing"))
    # detachment angle from N = 0 with energy conservation: cos(phi) = (2 g cos(phi0) - v0^2/rho) / (3 g)
    rho, v0 = 0.55, 3.5
    tb = event_times(tr, "contact_break")[0]
    p = tr.state("ball", tb).position
    phi = math.atan2(p[0], -(p[2] - 0.6))
    assert abs(math.cos(phi) - (2 * 9.81 * 0.5 - v0 ** 2 / rho) / (3 * 9.81)) < 1e-9
    assert chain(tr)[:2] == [("circular_motion", "slide"), ("projectile_motion", "launch")]


# ---------------------------------------------------------------------------------------------
# At rest and uniform motion
# ---------------------------------------------------------------------------------------------
def test_at_rest_objects():
    cfg = make("at_rest", [cube("c", 0.2, "oak", {"surface": {"xy": [0, 0]}}),
                           sphere("s", 0.1, "steel", {"surface": {"xy": [1, 0]}})], T=1.0)
    tr = solve(cfg)
    assert chain(tr) == [("at_rest", "surface")]
    assert tr.mode("c", 0.5) == "rest" and tr.events == ()
    assert abs(tr.state("c", 1.0).position[2] - 0.1) < 1e-15


def test_uniform_sliding_and_rolling():
    cfg = make("uniform_linear_motion", [cube("c", 0.1, "oak", {"surface": {"xy": [0, 0], "velocity": [1.0, 0.5]}}),
                                         sphere("s", 0.05, "steel", {"surface": {"xy": [0, 1], "velocity": [0.8, 0.0]}})],
               ground="air_table", T=1.0)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert set(chain(tr)) == {("uniform_linear_motion", "slide"), ("uniform_linear_motion", "roll")}
    cfg2 = make("uniform_linear_motion", [sphere("s", 0.05, "steel", {"surface": {"xy": [0, 1], "velocity": [0.8, 0.3]}})], T=1.0)
    tr2 = solve(cfg2)
    assert chain(tr2) == [("uniform_linear_motion", "roll")]
    s = tr2.state("s", 1.0)
    assert np.allclose(s.position[:2], [0.8, 1.3]) and np.allclose(s.angular_velocity, np.cross(Z, [0.8, 0.3, 0]) / 0.05)


def test_surface_friction_slide_arrest():
    cfg = make("uniform_linear_motion", [cube("c", 0.1, "oak", {"surface": {"xy": [0, 0], "velocity": [2.0, 0.0]}})], T=1.0)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    mu = MATS.pair("oak", "concrete").dynamic_friction
    assert_times(event_times(tr, "sliding_arrest"), [2.0 / (mu * 9.81)])
    assert chain(tr) == [("surface_friction", "slide"), ("at_rest", "surface")]


# ---------------------------------------------------------------------------------------------
# Collisions
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("offset,variant", [(0.0, "head_on"), (0.06, "oblique")])
def test_elastic_collision_spheres(offset, variant):
    cfg = make("perfectly_elastic_collision",
               [sphere("a", 0.05, "elastic_polymer", {"surface": {"xy": [0, 0], "velocity": [1.0, 0.0]}}),
                sphere("b", 0.05, "air_table", {"surface": {"xy": [0.6, offset]}})], ground="air_table", T=1.5)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert_times(event_times(tr, "contact_init"), ref_times(ref, "contact_init"))
    step = next(s for s in tr.law_steps() if s.law == "perfectly_elastic_collision")
    assert step.variant == variant and step.t_start == step.t_end and step.objects == ("a", "b")
    p = step.parameters
    m1, m2 = p["m1"], p["m2"]
    ke = lambda a, b: 0.5 * m1 * np.dot(a, a) + 0.5 * m2 * np.dot(b, b)
    assert abs(ke(p["u1"], p["u2"]) - ke(p["v1"], p["v2"])) < 1e-12 * ke(p["u1"], p["u2"])
    labels = [e.label for e in tr.events if e.t == step.t_start]
    assert labels == ["contact_init", "elastic_rebound", "contact_break"]


def test_inelastic_collision_cubes_head_on():
    cfg = make("inelastic_collision",
               [cube("a", 0.1, "steel", {"surface": {"xy": [0, 0], "velocity": [1.2, 0.0]}}),
                cube("b", 0.1, "steel", {"surface": {"xy": [0.5, 0], "velocity": [-0.4, 0.0]}})], ground="air_table", T=1.0)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    step = next(s for s in tr.law_steps() if s.law == "inelastic_collision")
    assert step.variant == "head_on" and step.parameters["e"] == 0.6
    u_rel = np.subtract(step.parameters["u1"], step.parameters["u2"])
    v_rel = np.subtract(step.parameters["v1"], step.parameters["v2"])
    assert abs(v_rel[0] + 0.6 * u_rel[0]) < 1e-12


def test_perfectly_inelastic_weld_slides_with_friction():
    cfg = make("perfectly_inelastic_collision",
               [cube("a", 0.1, "putty", {"surface": {"xy": [0, 0], "velocity": [3.0, 0.0]}}),
                cube("b", 0.1, "putty", {"surface": {"xy": [0.3, 0]}})], T=1.0)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    tc = event_times(tr, "inelastic_capture")[0]
    assert tr.mode("a", tc + 0.01) == "welded" == tr.mode("b", tc + 0.01)
    assert chain(tr)[:4] == [("surface_friction", "slide"), ("at_rest", "surface"),
                             ("perfectly_inelastic_collision", "head_on"), ("surface_friction", "slide")]
    assert np.allclose(tr.state("a", 0.9).position - tr.state("b", 0.9).position, [-0.1, 0, 0], atol=1e-12)


def test_rollers_after_impact_roll_slip_then_roll():
    cfg = make("inelastic_collision",
               [sphere("a", 0.05, "steel", {"surface": {"xy": [0, 0], "velocity": [1.5, 0.0]}}),
                sphere("b", 0.05, "steel", {"surface": {"xy": [0.4, 0.03]}})], T=1.5)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    modes = [m for _, _, m in tr.segments("b")]
    assert modes == ["rest", "surface_roll_slip", "surface_roll"]
    assert "surface_roll_slip" in [m for _, _, m in tr.segments("a")]


# ---------------------------------------------------------------------------------------------
# Compositions
# ---------------------------------------------------------------------------------------------
def test_composition_ramp_projectile_landing():
    sup = {"ramps": [{"id": "ramp", "material": "oak", "angle_deg": 25, "length": 1.0, "width": 0.4, "foot": [0.5, 0, 0.6]}]}
    cfg = make("composition", [sphere("ball", 0.04, "rubber", {"ramp": {"ramp": "ramp", "distance_from_top": 0.05}})], sup, T=1.6)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    for lab in ("contact_break", "landing"):
        assert_times(event_times(tr, lab), ref_times(ref, lab))
    c = chain(tr)
    assert c[:3] == [("inclined_plane", "roll"), ("projectile_motion", "launch"), ("bounce", "inelastic")]


def test_composition_track_ground_collision():
    sup = {"tracks": [{"id": "pipe", "material": "rubber", "radius": 0.5, "center": [0, 0, 0.5], "arc_deg": [-90, 0], "width": 0.2}]}
    cfg = make("composition", [sphere("a", 0.05, "steel", {"track": {"track": "pipe", "angle_deg": -50}}),
                               sphere("b", 0.05, "glass", {"surface": {"xy": [0.8, 0.0]}})], sup, T=1.5)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    assert_times(event_times(tr, "surface_transition"), ref_times(ref, "arc_end"))
    assert_times(event_times(tr, "contact_init"), ref_times(ref, "contact_init"))
    c = chain(tr)
    assert c[0] == ("circular_motion", "roll") and ("uniform_linear_motion", "roll") in c
    assert ("inelastic_collision", "head_on") in c


def test_composition_uniform_collision_off_platform_edge():
    sup = {"platforms": [{"id": "table", "material": "air_table", "center": [0.5, 0, 0.4], "size": [1.2, 0.6, 0.8]}]}
    cfg = make("composition", [sphere("a", 0.05, "elastic_polymer", {"surface": {"support": "table", "xy": [0.0, 0], "velocity": [2.0, 0]}}),
                               sphere("b", 0.05, "elastic_polymer", {"surface": {"support": "table", "xy": [0.6, 0]}})], sup, T=1.5)
    tr = solve(cfg)
    ref = reference(cfg)
    compare(cfg, tr, ref)
    for lab in ("contact_init", "landing"):
        assert_times(event_times(tr, lab), ref_times(ref, lab))
    assert_times(event_times(tr, "contact_break", "table"), ref_times(ref, "contact_break"))
    c = chain(tr)
    assert c[:3] == [("uniform_linear_motion", "roll"), ("at_rest", "surface"), ("perfectly_elastic_collision", "head_on")]
    assert ("projectile_motion", "launch") in c
    # stage bookkeeping: contiguous, cover [0, T], events point at valid stages
    st = tr.stages
    assert st[0].t_start == 0.0 and abs(st[-1].t_end - 1.5) < 1e-15
    assert all(abs(a.t_end - b.t_start) < 1e-15 for a, b in zip(st, st[1:]))
    assert all(0 <= e.stage < len(st) for e in tr.events)
    s = tr.sample(np.linspace(0, 1.5, 7))
    assert s["b"]["position"].shape == (7, 3) and s["b"]["quaternion"].shape == (7, 4)
