"""Event-driven hybrid analytic solver: exact ground truth for every Orchard task.

Every object is at every instant in exactly one closed-form motion mode (see `motion.py`). The solver
finds the next event of every object and every pair in closed form (polynomial roots, inverse Jacobi
elliptic functions), advances all objects to the earliest one, applies the transition and repeats until
T = config.timing.duration.

Modelling rules and the approximations they make (each is documented where it is applied):

* Flight: ballistic, constant spin about a principal axis (or any axis of an isotropic body).
* Impacts on a fixed surface: v_n' = −e v_n with e from `materials.pair`; tangential Coulomb impulse
  with a sticking limit for rollers; a rebound slower than BOUNCE_THRESHOLD is captured (Zeno sequences
  end there).
* Flat surfaces: rest / kinetic-friction sliding / rolling / rolling with slip. A body whose COM passes a
  platform edge leaves it in free flight at once (the pivot about the edge is neglected; refused when
  v² < 4 g r_support, where the neglected pivot would matter).
* Ramps: static, sliding, rolling, rolling with slip; at a ground-level foot the velocity keeps only its
  component along the ground (normal part absorbed by the corner). Rollers cross at the exact double-contact
  point (position continuous); flat-based bodies cross when the contact point reaches the foot and are laid
  flat there (a documented jump of a(1 − cos θ) in COM height and of θ in tilt).
* Circular tracks (inside of a vertical circle): energy conservation with k = I/(m r²) (k = 0 on a
  frictionless track: pure sliding, spin unchanged); detachment where N = 0.
* Collisions between objects: frictionless impulse along the contact normal with e_pair (spins
  unchanged, whatever the materials' friction); e = 0 welds the pair. Spheres in any geometry; cubes and
  cylinders only head-on along a horizontal face normal. The MuJoCo engine's object–object contact pairs
  are frictionless to match (engines/mujoco_scene.py).
* Support clearance (bodies running into ramps, tracks or platform sides) is checked on a dense sample of
  every segment (`GUARD_SAMPLES` points); such contacts are refused, never modelled.

Outputs:

* Events carry APT labels; an impact emits `landing` then `elastic_rebound` or `settling` /
  `inelastic_capture`; a collision emits `contact_init`, then `elastic_rebound` + `contact_break` or
  `inelastic_capture`, all at the same t.
* Stages: a new stage opens whenever any object starts a new motion segment (a mode change or an impact).
  `Stage.law` is the law of the most dynamic object by `types.LAW_RANK`
  (circular_motion > projectile_motion > free_fall > inclined_plane > surface_friction >
  uniform_linear_motion > at_rest; ties go to the object listed first).
* Law steps: one per motion segment and one (t_start == t_end) per impact, ordered by start time (impacts
  before segments that start at the same instant, then by object order); consecutive equal (law, variant)
  segments are merged (objects united, `parameters` of the first, every merged piece in
  `parameters["pieces"]`). A body static on a ramp is `inclined_plane/static`, or `at_rest/ramp` when the
  case's task is `at_rest`.
* States are right-continuous at impacts (post-impact velocity at the impact instant).
"""
from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..config import CaseConfig, ObjectSpec, Platform, Ramp, Track
from ..errors import PhysicsError
from .motion import PolyMotion, TrackMotion, qexp, qmat, qmul
from .types import LAW_RANK, BodyState, Event, LawStep, Stage

BOUNCE_THRESHOLD = 0.10  # m/s: a rebound whose normal speed is below this is captured (settling / inelastic_capture)
TIME_EPS = 1e-12  # s: events closer than this to the current time are simultaneous
GEOM_TOL = 1e-9  # m
GUARD_SAMPLES = 96  # samples per segment of the support-clearance check
MAX_EVENTS = 20000
Z = np.array([0.0, 0.0, 1.0])


def _norm(v) -> float:
    return float(np.linalg.norm(v))


def _unit(v) -> np.ndarray:
    n = _norm(v)
    return np.asarray(v, float) / n if n > 0 else np.zeros(3)


def _fl(v) -> Any:
    if isinstance(v, np.ndarray):
        return [float(x) for x in v.ravel()]
    return float(v)


# ---------------------------------------------------------------------------------------------
@dataclass
class _Seg:
    t0: float
    mode: str
    motion: Any
    law: str
    variant: str
    params: dict
    support: str | None
    extra: dict = field(default_factory=dict)
    t1: float | None = None


@dataclass
class _Body:
    spec: ObjectSpec
    index: int
    segs: list = field(default_factory=list)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def cur(self) -> _Seg:
        return self.segs[-1]

    @property
    def m(self) -> float:
        return float(self.spec.mass)


# ---------------------------------------------------------------------------------------------
class AnalyticTrajectory:
    """Piecewise closed-form trajectory of every object over [0, duration].

    States are right-continuous: at an impact time `state` returns the post-impact velocity.
    """

    def __init__(self, duration: float, object_ids: tuple[str, ...], segments: dict[str, list[_Seg]],
                 events: tuple[Event, ...], stages: tuple[Stage, ...], law_steps: tuple[LawStep, ...]):
        self.duration = float(duration)
        self.object_ids = tuple(object_ids)
        self.events = events
        self.stages = stages
        self._segments = segments
        self._starts = {k: [s.t0 for s in v] for k, v in segments.items()}
        self._law_steps = law_steps

    def _seg(self, object_id: str, t: float) -> _Seg:
        if object_id not in self._segments:
            raise KeyError(f"unknown object {object_id!r}; known: {', '.join(self.object_ids)}")
        t = float(t)
        if not (-1e-12 <= t <= self.duration + 1e-12) or math.isnan(t):
            raise ValueError(f"t = {t} lies outside [0, {self.duration}]")
        starts = self._starts[object_id]
        i = max(0, bisect.bisect_right(starts, t) - 1)
        return self._segments[object_id][i]

    def state(self, object_id: str, t: float) -> BodyState:
        t = min(max(float(t), 0.0), self.duration) if -1e-12 <= float(t) <= self.duration + 1e-12 else float(t)
        return self._seg(object_id, t).motion.state(t)

    def mode(self, object_id: str, t: float) -> str:
        return self._seg(object_id, t).mode

    def segments(self, object_id: str) -> tuple[tuple[float, float, str], ...]:
        return tuple((s.t0, s.t1, s.mode) for s in self._segments[object_id])

    def sample(self, times) -> dict[str, dict[str, np.ndarray]]:
        times = np.asarray(times, float).ravel()
        out: dict[str, dict[str, np.ndarray]] = {}
        for oid in self.object_ids:
            pos, quat, lin, ang = (np.zeros((len(times), n)) for n in (3, 4, 3, 3))
            for i, t in enumerate(times):
                s = self.state(oid, t)
                pos[i], quat[i], lin[i], ang[i] = s.position, s.quaternion, s.linear_velocity, s.angular_velocity
            out[oid] = {"position": pos, "quaternion": quat, "linear_velocity": lin, "angular_velocity": ang}
        return out

    def law_steps(self) -> tuple[LawStep, ...]:
        return self._law_steps


# ---------------------------------------------------------------------------------------------
def _quartic_roots(c0: np.ndarray, c1: np.ndarray, c2: np.ndarray, dist: float, smax: float,
                   allow_zero: bool = True) -> list[float]:
    """Real roots s in [0, smax] of |c0 + c1 s + c2 s²|² = dist², polished by Newton, ascending."""
    coeffs = np.array([
        np.dot(c2, c2), 2.0 * np.dot(c1, c2), np.dot(c1, c1) + 2.0 * np.dot(c0, c2), 2.0 * np.dot(c0, c1),
        np.dot(c0, c0) - dist * dist,
    ])
    scale = np.max(np.abs(coeffs))
    if scale == 0.0:
        return []
    nz = np.nonzero(np.abs(coeffs) > 1e-300)[0]
    if len(nz) == 0:
        return []
    poly = coeffs[nz[0]:]
    if len(poly) < 2:
        return []
    roots = np.roots(poly)
    dpoly = np.polyder(poly)
    out = []
    for r in roots:
        if abs(r.imag) > 1e-6 * max(1.0, abs(r.real)):
            continue
        s = float(r.real)
        for _ in range(6):
            d = np.polyval(dpoly, s)
            if d == 0.0:
                break
            step = np.polyval(poly, s) / d
            s -= step
            if abs(step) < 1e-16 * max(1.0, abs(s)):
                break
        lo = -1e-12 if allow_zero else 1e-12
        if lo <= s <= smax + 1e-12:
            out.append(max(0.0, s))
    return sorted(out)


def _quad_roots(a: float, b: float, c: float) -> list[float]:
    """Real roots of a s² + b s + c = 0 (stable formulas)."""
    if a == 0.0:
        return [] if b == 0.0 else [-c / b]
    disc = b * b - 4.0 * a * c
    if disc < 0.0:
        if disc > -1e-14 * (b * b + abs(4 * a * c)):
            disc = 0.0
        else:
            return []
    sq = math.sqrt(disc)
    q = -0.5 * (b + math.copysign(sq, b)) if b != 0.0 else -0.5 * sq
    roots = []
    if q != 0.0:
        roots += [q / a, c / q]
    else:
        roots += [0.0]
    return sorted(roots)


def collision_velocities(m1: float, m2: float, u1, u2, n, e: float) -> tuple[np.ndarray, np.ndarray]:
    """Post-impact velocities of a frictionless impact along the unit normal n (pointing from 1 to 2).

    v1' = v1 − (1+e)·m2/(m1+m2)·((v1−v2)·n)·n,  v2' = v2 + (1+e)·m1/(m1+m2)·((v1−v2)·n)·n.
    """
    u1, u2, n = (np.asarray(x, float) for x in (u1, u2, n))
    un = float((u1 - u2) @ n)
    return u1 - (1.0 + e) * m2 / (m1 + m2) * un * n, u2 + (1.0 + e) * m1 / (m1 + m2) * un * n


# ---------------------------------------------------------------------------------------------
class _Solver:
    def __init__(self, config: CaseConfig):
        self.cfg = config
        self.g = float(config.g)
        self.T = float(config.timing.duration)
        self.bodies = [_Body(o, i) for i, o in enumerate(config.objects)]
        self.by_id = {b.id: b for b in self.bodies}
        self.raw_events: list[tuple[float, str, tuple[str, ...], dict]] = []
        self.instants: list[tuple[float, str, str, tuple[str, ...], dict]] = []
        self.t = 0.0

    # ---- errors and small helpers --------------------------------------------------------------
    def fail(self, body: _Body | str | None, reason: str) -> PhysicsError:
        oid = body.id if isinstance(body, _Body) else body
        who = f"object {oid!r}" if oid else "case"
        return PhysicsError(f"{self.cfg.source_path}: {who}: {reason}")

    def emit(self, t: float, label: str, objects: tuple[str, ...], **detail) -> None:
        self.raw_events.append((float(t), label, tuple(objects), {k: _fl(v) if isinstance(v, (np.ndarray, float, np.floating)) else v
                                                                   for k, v in detail.items()}))

    def pair(self, mat_a: str, mat_b: str):
        return self.cfg.materials.pair(mat_a, mat_b)

    def is_roller(self, b: _Body, q: np.ndarray | None = None) -> bool:
        prim = b.spec.primitive
        if prim.shape == "sphere":
            return True
        if prim.shape == "cylinder":
            q = b.spec.quaternion if q is None else q
            return abs(float(qmat(q)[:, 2] @ Z)) < 1e-9
        return False

    def k_of(self, b: _Body) -> float:
        return b.spec.primitive.rolling_inertia_ratio()

    def surface_below(self, xy: np.ndarray) -> tuple[float, str]:
        best_z, best_id = 0.0, "ground"
        for p in self.cfg.platforms:
            if p.contains_xy(xy) and p.top_z > best_z:
                best_z, best_id = p.top_z, p.id
        return best_z, best_id

    def flat_pose(self, b: _Body, q: np.ndarray) -> tuple[str, float] | None:
        """('upright'|'side', contact distance) when the body rests flat in orientation q, else None."""
        prim = b.spec.primitive
        R = qmat(q)
        bz = R[:, 2]
        if prim.shape == "sphere":
            return "any", prim.size["radius"]
        if prim.shape == "cube":
            if any(abs(abs(R[2, j]) - 1.0) < 1e-9 for j in range(3)):
                return "upright", prim.size["edge"] / 2.0
            return None
        if prim.shape == "cylinder":
            if abs(abs(bz[2]) - 1.0) < 1e-9:
                return "upright", prim.size["height"] / 2.0
            if abs(bz[2]) < 1e-9:
                return "side", prim.size["radius"]
            return None
        if abs(bz[2] - 1.0) < 1e-9:  # cone: base down
            return "upright", prim.size["height"] / 4.0
        return None

    def lowest_extent(self, b: _Body, q: np.ndarray) -> float:
        """Distance from the COM down to the body's lowest point in orientation q."""
        prim = b.spec.primitive
        R = qmat(q)
        if prim.shape == "sphere":
            return prim.size["radius"]
        if prim.shape == "cube":
            return prim.size["edge"] / 2.0 * float(np.sum(np.abs(R[2, :])))
        r, h = prim.size["radius"], prim.size["height"]
        c = float(R[2, 2])
        s = math.sqrt(max(0.0, 1.0 - c * c))
        if prim.shape == "cylinder":
            return r * s + h / 2.0 * abs(c)
        # cone: base circle centre at −h/4 along the axis, apex at +3h/4
        return max(h / 4.0 * c + r * s, -0.75 * h * c)

    def horizontal_extent(self, b: _Body) -> float:
        prim = b.spec.primitive
        if prim.shape == "cube":
            return prim.size["edge"] / math.sqrt(2.0)
        if prim.shape == "cylinder" and self.is_roller(b, b.cur.motion.state(self.t).quaternion if b.segs else None):
            return math.hypot(prim.size["radius"], prim.size["height"] / 2.0)
        return prim.size["radius"]

    def check_principal(self, b: _Body, q: np.ndarray, w: np.ndarray) -> None:
        prim = b.spec.primitive
        if prim.shape in ("sphere", "cube") or _norm(w) == 0.0:
            return
        bz = qmat(q)[:, 2]
        wn = _unit(w)
        if abs(abs(float(wn @ bz)) - 1.0) > 1e-9 and abs(float(wn @ bz)) > 1e-9:
            raise self.fail(b, "free spin about a non-principal axis (torque-free precession is not modelled)")

    # ---- segment bookkeeping -----------------------------------------------------------------
    def push(self, b: _Body, t: float, mode: str, motion, law: str, variant: str, params: dict,
             support: str | None, **extra) -> None:
        if b.segs:
            b.cur.t1 = t
        params = dict(params)
        params.setdefault("m", {b.id: b.m})
        params.setdefault("g", self.g)
        st = motion.state(t)
        z_below, _ = self.surface_below(st.position)
        params.setdefault("h0", float(st.position[2] - z_below))
        params.setdefault("v0", st.speed)
        params.setdefault("v0_vec", _fl(st.linear_velocity))
        b.segs.append(_Seg(t, mode, motion, law, variant, params, support, dict(extra)))

    def state(self, b: _Body, t: float) -> BodyState:
        return b.cur.motion.state(t)

    # ---- entering modes ------------------------------------------------------------------------
    def enter_flight(self, b: _Body, t: float, st: BodyState, onset: bool = True) -> None:
        self.check_principal(b, st.quaternion, st.angular_velocity)
        v = st.linear_velocity
        motion = PolyMotion(t, st.position, v, -self.g * Z, st.quaternion, st.angular_velocity)
        if math.hypot(v[0], v[1]) <= 1e-12:
            law, variant = "free_fall", ("drop" if _norm(v) == 0.0 else "thrown")
            params = {}
        else:
            law, variant = "projectile_motion", "launch"
            params = {"theta": math.atan2(v[2], math.hypot(v[0], v[1]))}
        if b.spec.primitive.shape == "sphere":
            params["r"] = b.spec.primitive.size["radius"]
        if onset:
            self.emit(t, "free_fall_onset", (b.id,))
        self.push(b, t, "flight", motion, law, variant, params, None, apex_done=v[2] <= 0.0)
        self.check_track_recontact(b)

    def enter_surface(self, b: _Body, t: float, st: BodyState, support: str, z_top: float,
                      contact: float | None = None) -> None:
        pose = self.flat_pose(b, st.quaternion)
        if pose is None:
            raise self.fail(b, "the body reaches a flat surface in a tilted pose (toppling is not modelled)")
        rest_pose, a = pose
        if contact is not None:
            a = contact
        pos = np.array([st.position[0], st.position[1], z_top + a])
        v = np.array([st.linear_velocity[0], st.linear_velocity[1], 0.0])
        w = np.array(st.angular_velocity, float)
        mat = self.cfg.support_material(support)
        pc = self.pair(b.spec.material, mat)
        mu_s, mu_k = pc.static_friction, pc.dynamic_friction
        base = {"mu_s": mu_s, "mu_k": mu_k}
        speed = _norm(v)
        q = st.quaternion
        if self.is_roller(b, q):
            r = b.spec.primitive.rolling_radius()
            k = self.k_of(b)
            base.update(k=k, r=r)
            slip = v + np.cross(w, -r * Z)
            if _norm(slip) <= 1e-12 * max(1.0, speed):
                if speed == 0.0 and _norm(w) == 0.0:
                    motion = PolyMotion(t, pos, v, np.zeros(3), q, w)
                    self.push(b, t, "rest", motion, "at_rest", "surface", base, support, z_top=z_top, a=a)
                    return
                w = np.cross(Z, v) / r + float(w @ Z) * Z  # exact rolling (keep any spin about the normal)
                motion = PolyMotion(t, pos, v, np.zeros(3), q, w)
                self.push(b, t, "surface_roll", motion, "uniform_linear_motion", "roll", dict(base, a=0.0),
                          support, z_top=z_top, a=a)
                return
            if mu_k == 0.0:
                motion = PolyMotion(t, pos, v, np.zeros(3), q, w)
                self.push(b, t, "surface_slide", motion, "uniform_linear_motion", "slide", dict(base, a=0.0),
                          support, z_top=z_top, a=a)
                return
            uhat = _unit(slip)
            if b.spec.primitive.shape == "cylinder":
                axis = qmat(q)[:, 2]
                if abs(float(uhat @ axis)) > 1e-9:
                    raise self.fail(b, "a cylinder on its side slipping along its axis is not modelled")
            acc = -mu_k * self.g * uhat
            alpha = mu_k * self.g / (k * r) * np.cross(Z, uhat)
            t_end = _norm(slip) / (mu_k * self.g * (1.0 + 1.0 / k))
            motion = PolyMotion(t, pos, v, acc, q, w, alpha)
            self.push(b, t, "surface_roll_slip", motion, "surface_friction", "roll_slip",
                      dict(base, a=mu_k * self.g, slip0=_norm(slip), t_slip=t_end), support,
                      z_top=z_top, a=a, t_nat=t + t_end, nat="slip_end")
            return
        # flat-based body
        if _norm(w) > 0.0:
            raise self.fail(b, "a non-round body spinning on a flat surface is not modelled")
        prim = b.spec.primitive
        if speed == 0.0:
            motion = PolyMotion(t, pos, v, np.zeros(3), q, w)
            self.push(b, t, "rest", motion, "at_rest", "surface", base, support, z_top=z_top, a=a)
            return
        if mu_k == 0.0:
            motion = PolyMotion(t, pos, v, np.zeros(3), q, w)
            self.push(b, t, "surface_slide", motion, "uniform_linear_motion", "slide", dict(base, a=0.0),
                      support, z_top=z_top, a=a)
            return
        if mu_k > math.tan(prim.tipping_angle(rest_pose)):
            raise self.fail(b, f"kinetic friction mu_k = {mu_k:.3g} would tip the sliding {prim.shape} over "
                               "(toppling is not modelled)")
        acc = -mu_k * self.g * _unit(v)
        t_end = speed / (mu_k * self.g)
        motion = PolyMotion(t, pos, v, acc, q, w)
        self.push(b, t, "surface_slide", motion, "surface_friction", "slide", dict(base, a=mu_k * self.g),
                  support, z_top=z_top, a=a, t_nat=t + t_end, nat="arrest")

    def ramp_static_law(self) -> tuple[str, str]:
        return ("at_rest", "ramp") if self.cfg.task.name == "at_rest" else ("inclined_plane", "static")

    def enter_ramp(self, b: _Body, t: float, st: BodyState, ramp: Ramp, released: bool = False) -> None:
        prim = b.spec.primitive
        th = ramp.angle
        sd, n = ramp.slope_down, ramp.normal
        q = st.quaternion
        pc = self.pair(b.spec.material, ramp.material)
        mu_s, mu_k = pc.static_friction, pc.dynamic_friction
        vs = float(st.linear_velocity @ sd)
        v = vs * sd
        w = np.array(st.angular_velocity, float)
        roller = self.is_roller(b, q)
        a_c = prim.rolling_radius() if roller else prim.support_distance("upright")
        d_top = float((st.position - a_c * n - ramp.top) @ sd)
        base = {"theta": th, "mu_s": mu_s, "mu_k": mu_k, "L": ramp.length, "d0": d_top,
                "d_to_foot": ramp.length - d_top, "foot_z": float(ramp.foot[2])}
        extra = {"ramp": ramp.id, "a": a_c}
        if roller:
            k, r = self.k_of(b), prim.rolling_radius()
            base.update(k=k, r=r)
            slip = vs - float(w @ ramp.lateral) * r
            if abs(slip) > 1e-9 * max(1.0, abs(vs)) or _norm(w - float(w @ ramp.lateral) * ramp.lateral) > 1e-9:
                raise self.fail(b, "entering a ramp with slip or with spin off the rolling axis is not modelled")
            if released and vs == 0.0:
                self.emit(t, "static_breakaway", (b.id, ramp.id))
            if mu_s >= k * math.tan(th) / (1.0 + k):
                acc = self.g * math.sin(th) / (1.0 + k)
                motion = PolyMotion(t, st.position, v, acc * sd, q, w, acc / r * ramp.lateral)
                self.push(b, t, "ramp_roll", motion, "inclined_plane", "roll", dict(base, a=acc), ramp.id, **extra)
            else:
                acc = self.g * (math.sin(th) - mu_k * math.cos(th))
                alpha = mu_k * self.g * math.cos(th) / (k * r)
                motion = PolyMotion(t, st.position, v, acc * sd, q, w, alpha * ramp.lateral)
                self.push(b, t, "ramp_roll_slip", motion, "inclined_plane", "roll_slip", dict(base, a=acc),
                          ramp.id, **extra)
            return
        if _norm(w) > 0.0:
            raise self.fail(b, "a non-round body spinning on a ramp is not modelled")
        if th > prim.tipping_angle("upright") + 1e-12:
            raise self.fail(b, f"the {prim.shape} tips over on the {math.degrees(th):.1f}° ramp {ramp.id!r} "
                               f"(tipping angle {math.degrees(prim.tipping_angle('upright')):.1f}°; toppling is not modelled)")
        if vs == 0.0 and mu_s >= math.tan(th):
            law, variant = self.ramp_static_law()
            motion = PolyMotion(t, st.position, np.zeros(3), np.zeros(3), q, w)
            self.push(b, t, "rest", motion, law, variant, dict(base, a=0.0), ramp.id, **extra)
            return
        if mu_k > math.tan(prim.tipping_angle("upright")):
            raise self.fail(b, f"kinetic friction mu_k = {mu_k:.3g} would tip the sliding {prim.shape} over")
        if vs >= 0.0:
            acc = self.g * (math.sin(th) - mu_k * math.cos(th))
            if vs == 0.0:
                self.emit(t, "static_breakaway", (b.id, ramp.id))
            t_nat = t + vs / -acc if acc < 0.0 and vs > 0.0 else math.inf
        else:
            acc = self.g * (math.sin(th) + mu_k * math.cos(th))
            t_nat = t + (-vs) / acc
        motion = PolyMotion(t, st.position, v, acc * sd, q, w)
        self.push(b, t, "ramp_slide", motion, "inclined_plane", "slide", dict(base, a=abs(acc), a_signed=acc),
                  ramp.id, t_nat=t_nat, nat="arrest", **extra)

    def enter_track(self, b: _Body, t: float, st: BodyState, track: Track) -> None:
        prim = b.spec.primitive
        a = prim.rolling_radius()
        rho = track.radius - a
        rel = st.position - track.center
        phi0 = math.atan2(float(rel @ track.direction), float(-rel @ Z))
        if abs(float(rel @ track.lateral)) > track.width / 2.0 + GEOM_TOL:
            raise self.fail(b, "the body is beside the track")
        phidot0 = float(st.linear_velocity @ track.tangent(phi0)) / rho
        pc = self.pair(b.spec.material, track.material)
        mu_s, mu_k = pc.static_friction, pc.dynamic_friction
        rolling = mu_s > 0.0
        k = self.k_of(b) if rolling else 0.0
        base = {"R": rho, "R_track": track.radius, "phi0": phi0, "mu_s": mu_s, "mu_k": mu_k, "k": k, "r": a}
        if phi0 == 0.0 and phidot0 == 0.0:
            motion = PolyMotion(t, st.position, np.zeros(3), np.zeros(3), st.quaternion, st.angular_velocity)
            self.push(b, t, "rest", motion, "at_rest", "surface", base, track.id, track=track.id)
            return
        gp = self.g / (1.0 + k)
        # contact force per unit mass: N/m = v²/ρ + g cos φ = Acoef + Bcoef cos φ (energy conservation)
        v0sq = (rho * phidot0) ** 2
        Acoef = v0sq / rho - 2.0 * gp * math.cos(phi0)
        Bcoef = 2.0 * gp + self.g
        if Acoef + Bcoef * math.cos(phi0) <= 0.0:
            raise self.fail(b, "the body starts on the track without contact force (it would fall off at once)")
        motion = TrackMotion(t, track.center, track.direction, rho, a, k, phi0, phidot0, self.g,
                             st.quaternion, st.angular_velocity, rolling)
        variant = "roll" if rolling else "slide"
        self.push(b, t, "track", motion, "circular_motion", variant,
                  dict(base, N_A=Acoef, N_B=Bcoef, regime=motion.regime, modulus=motion.m), track.id,
                  track=track.id, N=(Acoef, Bcoef))

    # ---- initial modes -------------------------------------------------------------------------
    def init_body(self, b: _Body) -> None:
        o = b.spec
        st = BodyState(o.position.copy(), o.quaternion.copy(), o.linear_velocity.copy(), o.angular_velocity.copy())
        if o.placement == "free":
            self.check_principal(b, st.quaternion, st.angular_velocity)
            low = self.lowest_extent(b, st.quaternion)
            z_below, sup = self.surface_below(st.position)
            gap = st.position[2] - low - z_below
            if gap < -GEOM_TOL:
                raise self.fail(b, "the object starts interpenetrating the ground or a platform")
            if gap <= GEOM_TOL and st.linear_velocity[2] == 0.0:
                self.enter_surface(b, 0.0, st, sup, z_below)
                return
            self.enter_flight(b, 0.0, st)
        elif o.placement == "surface":
            sup = o.support or "ground"
            z_top = 0.0 if sup == "ground" else self.cfg.platform(sup).top_z
            self.enter_surface(b, 0.0, st, sup, z_top)
        elif o.placement == "ramp":
            self.enter_ramp(b, 0.0, st, self.cfg.ramp(o.support), released=True)
        else:
            self.enter_track(b, 0.0, st, self.cfg.track(o.support))

    # ---- next events -----------------------------------------------------------------------
    def next_internal(self, b: _Body) -> tuple[float, str, dict]:
        seg = b.cur
        mode = seg.mode
        t = self.t
        if mode == "welded":
            return self.next_welded(b)
        if mode == "flight":
            return self.next_flight(b)
        if mode == "track":
            return self.next_track(b)
        if seg.support is not None and seg.extra.get("ramp"):
            return self.next_ramp(b)
        if seg.extra.get("track"):
            return (math.inf, "none", {})
        # flat surface modes
        t_nat = seg.extra.get("t_nat", math.inf)
        best = (t_nat, seg.extra.get("nat", "none"), {})
        if seg.support != "ground" and mode != "rest":
            plat = self.cfg.platform(seg.support)
            te = self.edge_time(seg.motion, plat, t, min(t_nat, self.T))
            if te < best[0]:
                best = (te, "edge", {"platform": plat.id})
        return best

    def edge_time(self, motion: PolyMotion, plat: Platform, t_now: float, t_max: float) -> float:
        best = math.inf
        tau0 = t_now - motion.t0
        for ax in (0, 1):
            for sgn in (-1.0, 1.0):
                edge = plat.center[ax] + sgn * plat.size[ax] / 2.0
                for s in _quad_roots(0.5 * motion.acc[ax], motion.v0[ax], motion.r0[ax] - edge):
                    if s > tau0 + TIME_EPS and motion.t0 + s <= t_max + TIME_EPS:
                        if sgn * float(motion.velocity(s)[ax]) > 0.0:
                            best = min(best, motion.t0 + s)
        return best

    def next_flight(self, b: _Body) -> tuple[float, str, dict]:
        seg, mo = b.cur, b.cur.motion
        tau0 = self.t - mo.t0
        best: tuple[float, str, dict] = (math.inf, "none", {})
        if not seg.extra.get("apex_done") and mo.v0[2] > 0.0:
            ta = mo.t0 + mo.v0[2] / self.g
            if ta > self.t + TIME_EPS:
                best = (ta, "apex", {})
            else:
                seg.extra["apex_done"] = True
        q = mo.q0
        pose = self.flat_pose(b, q)
        h_c = pose[1] if pose is not None else self.lowest_extent(b, q)
        cands = [(0.0, "ground")] + [(p.top_z, p.id) for p in self.cfg.platforms]
        for z_s, sid in cands:
            # z0 + vz s − ½ g s² = z_s + h_c, descending root
            c = mo.r0[2] - z_s - h_c
            if c < -1e-9 and sid != "ground":
                continue
            disc = mo.v0[2] ** 2 + 2.0 * self.g * c
            if disc < 0.0:
                continue
            s = (mo.v0[2] + math.sqrt(disc)) / self.g
            if s < tau0 - TIME_EPS or (sid != "ground" and (c <= GEOM_TOL or s <= tau0 + TIME_EPS)):
                continue
            tl = mo.t0 + s
            if sid != "ground":
                plat = self.cfg.platform(sid)
                xy = mo.position(s)
                if not plat.contains_xy(xy, margin=-h_c):
                    continue
                if not plat.contains_xy(xy):
                    raise self.fail(b, f"the body would land on the edge of platform {sid!r} (edge contact is not modelled)")
            if tl < best[0] or (best[1] == "apex" and tl <= best[0]):
                best = (tl, "landing", {"support": sid, "z": z_s, "h_c": h_c})
        return best

    def next_ramp(self, b: _Body) -> tuple[float, str, dict]:
        seg, mo = b.cur, b.cur.motion
        ramp = self.cfg.ramp(seg.extra["ramp"])
        a_c = seg.extra["a"]
        t_nat = seg.extra.get("t_nat", math.inf)
        if seg.mode == "rest":
            return (math.inf, "none", {})
        sd = ramp.slope_down
        # contact distance from the top: d(s) = (r(s) − a n − top)·sd
        d0 = float((mo.r0 - a_c * ramp.normal - ramp.top) @ sd)
        v0 = float(mo.v0 @ sd)
        ac = float(mo.acc @ sd)
        tau0 = self.t - mo.t0
        best = (t_nat, seg.extra.get("nat", "none"), {})
        ground_foot = abs(float(ramp.foot[2])) <= GEOM_TOL
        roller = self.is_roller(b, mo.q0)
        d_foot = ramp.length - (a_c * math.tan(ramp.angle / 2.0) if (ground_foot and roller) else 0.0)
        for target, kind in ((d_foot, "foot"), (0.0, "top")):
            for s in _quad_roots(0.5 * ac, v0, d0 - target):
                tt = mo.t0 + s
                if s > tau0 + TIME_EPS and tt < best[0]:
                    vel = v0 + ac * s
                    if (kind == "foot" and vel > 0) or (kind == "top" and vel < 0):
                        best = (tt, kind, {"ground_foot": ground_foot})
        return best

    def next_track(self, b: _Body) -> tuple[float, str, dict]:
        seg, mo = b.cur, b.cur.motion
        track = self.cfg.track(seg.extra["track"])
        tau0 = self.t - mo.t0
        best = (math.inf, "none", {})
        full = track.arc[1] - track.arc[0] >= 2.0 * math.pi - 1e-9
        if not full:
            for end in track.arc:
                te = mo.time_to_angle(end, tau0)
                if mo.t0 + te < best[0]:
                    best = (mo.t0 + te, "arc_end", {"phi": end})
        A, B = seg.extra["N"]
        cstar = -A / B
        if -1.0 < cstar < 1.0:
            ang = math.acos(cstar)
            for target in (ang, -ang):
                te = mo.time_to_angle(target, tau0)
                if mo.t0 + te < best[0] - TIME_EPS:
                    best = (mo.t0 + te, "detach", {"phi": target})
        if not seg.extra.get("friction_checked"):
            self.check_track_friction(b, min(best[0], self.T))
            seg.extra["friction_checked"] = True
        return best

    def check_track_friction(self, b: _Body, t_end: float) -> None:
        seg, mo = b.cur, b.cur.motion
        if not mo.rolling:
            return
        mu_s = seg.params["mu_s"]
        A, B = seg.extra["N"]
        kp = mo.k / (1.0 + mo.k) * self.g
        # visited angles in [t0, t_end]
        tau_end = t_end - mo.t0
        phis = [mo.angle(0.0)[0], mo.angle(tau_end)[0]]
        if mo.regime == "rotation" and abs(phis[1] - phis[0]) >= 2 * math.pi:
            lo, hi = -math.pi, math.pi
            wrap = True
        else:
            wrap = mo.regime == "rotation"
            if mo.regime == "libration":
                for tp in (mo.amplitude, -mo.amplitude):
                    if mo.time_to_angle(tp * (1 - 1e-12)) <= tau_end:
                        phis.append(tp)
            lo, hi = min(phis), max(phis)
        cands = [lo, hi]
        c = kp / (mu_s * B) if mu_s > 0 else math.inf
        base_angles = [0.0, math.pi, -math.pi, math.atan(c), math.atan(c) - math.pi, -math.atan(c), math.pi - math.atan(c)]
        for ang in base_angles:
            for j in range(-3, 4):
                x = ang + 2 * math.pi * j
                if lo <= x <= hi:
                    cands.append(x)
        for x in cands:
            need = kp * abs(math.sin(x))
            have = mu_s * (A + B * math.cos(x))
            if need > have + 1e-12 * max(1.0, need):
                raise self.fail(b, f"rolling on track {seg.support!r} needs more static friction than mu_s = {mu_s:.3g} "
                                   f"provides at phi = {math.degrees(x):.1f}° (rolling with slip on a track is not modelled)")

    def next_welded(self, b: _Body) -> tuple[float, str, dict]:
        seg = b.cur
        if seg.extra.get("flight"):
            te, kind, info = self.next_flight(b)
            return (te, "weld_landing", info) if kind == "landing" else (math.inf, "none", {})
        best = (seg.extra.get("t_nat", math.inf), seg.extra.get("nat", "none"), {})
        if seg.support not in (None, "ground") and seg.law != "at_rest":
            te = self.edge_time(seg.motion, self.cfg.platform(seg.support), self.t, min(best[0], self.T))
            if te < best[0]:
                best = (te, "weld_edge", {})
        return best

    # ---- pair contacts -------------------------------------------------------------------------
    def contact_dist(self, b1: _Body, b2: _Body) -> tuple[bool, float, float]:
        """(3D?, bounding contact distance, exact contact distance for allowed geometry)."""
        p1, p2 = b1.spec.primitive, b2.spec.primitive
        if p1.shape == "sphere" and p2.shape == "sphere":
            d = p1.size["radius"] + p2.size["radius"]
            return True, d, d
        hb = self.horizontal_extent(b1) + self.horizontal_extent(b2)
        s = sum((p.size["edge"] / 2.0 if p.shape == "cube" else p.size["radius"]) for p in (p1, p2))
        return False, hb, s

    def next_pair(self, b1: _Body, b2: _Body, t_max: float) -> tuple[float, dict] | None:
        s1, s2 = b1.cur, b2.cur
        if s1.mode == "welded" and s1.extra.get("partner") == b2.id:
            return None
        if s1.motion.kind != "poly" or s2.motion.kind != "poly":
            return None  # checked by sampling at segment close
        st1, st2 = self.state(b1, self.t), self.state(b2, self.t)
        c0 = st2.position - st1.position
        c1 = st2.linear_velocity - st1.linear_velocity
        c2 = 0.5 * (s2.motion.acc - s1.motion.acc)
        smax = t_max - self.t
        three_d, d_bound, d_exact = self.contact_dist(b1, b2)
        if not three_d:
            c0, c1, c2 = (np.array([v[0], v[1], 0.0]) for v in (c0, c1, c2))
            lo1, hi1 = st1.position[2] - self.lowest_extent(b1, st1.quaternion), st1.position[2] + self.lowest_extent(b1, st1.quaternion)
            lo2, hi2 = st2.position[2] - self.lowest_extent(b2, st2.quaternion), st2.position[2] + self.lowest_extent(b2, st2.quaternion)
            if (s1.mode != "flight" and s2.mode != "flight") and (hi1 <= lo2 + GEOM_TOL or hi2 <= lo1 + GEOM_TOL):
                return None
        roots = _quartic_roots(c0, c1, c2, d_bound, smax)
        hit = None
        for s in roots:
            d = c0 + c1 * s + c2 * s * s
            dd = c1 + 2.0 * c2 * s
            if float(d @ dd) < 0.0:
                hit = s
                break
        if hit is None:
            return None
        if three_d:
            n = _unit(c0 + c1 * hit + c2 * hit * hit)
            return self.t + hit, {"n": n}
        # non-spheres: only head-on along a horizontal face normal, both on a surface
        shapes = {b1.spec.primitive.shape, b2.spec.primitive.shape}
        if "cone" in shapes:
            raise self.fail(b1, f"collision with {b2.id!r} involves a cone (cone contacts are not modelled)")
        for bb in (b1, b2):
            if bb.cur.mode == "flight" or bb.cur.extra.get("ramp") or bb.cur.mode == "track":
                raise self.fail(bb, "a collision of a non-spherical body off a flat surface is not modelled")
        roots = _quartic_roots(c0, c1, c2, d_exact, smax)
        exact = None
        for s in roots:
            d = c0 + c1 * s + c2 * s * s
            dd = c1 + 2.0 * c2 * s
            if float(d @ dd) < 0.0:
                exact = s
                break
        d_at = c0 + c1 * (exact if exact is not None else hit) + c2 * (exact if exact is not None else hit) ** 2
        rel_v = c1 + 2.0 * c2 * (exact if exact is not None else hit)
        n = _unit(d_at)
        if exact is None or _norm(np.cross(n, _unit(rel_v))) > 1e-7 or _norm(np.cross(_unit(c0), n)) > 1e-7:
            raise self.fail(b1, f"collision with {b2.id!r} is not head-on along the line of centres "
                                "(only spheres may collide obliquely)")
        for bb in (b1, b2):
            st = self.state(bb, self.t + exact)
            R = qmat(st.quaternion)
            prim = bb.spec.primitive
            if prim.shape == "cube" and not any(abs(abs(float(R[:, j] @ n)) - 1.0) < 1e-7 for j in range(3)):
                raise self.fail(bb, "the cube is not hit on a face (edge and corner contacts are not modelled)")
            if prim.shape == "cylinder" and self.is_roller(bb, st.quaternion) and abs(float(R[:, 2] @ n)) > 1e-7:
                raise self.fail(bb, "a side-lying cylinder hit off its curved face is not modelled")
        return self.t + exact, {"n": n}

    # ---- transitions -----------------------------------------------------------------------
    def do_internal(self, b: _Body, t: float, kind: str, info: dict) -> None:
        st = self.state(b, t)
        seg = b.cur
        if kind == "apex":
            seg.extra["apex_done"] = True
            self.emit(t, "projectile_apex", (b.id,), height=float(st.position[2]))
            return
        if kind == "landing":
            self.impact_surface(b, t, st, info["support"], info["z"], info["h_c"])
            return
        if kind == "arrest":
            if seg.extra.get("ramp"):
                ramp = self.cfg.ramp(seg.extra["ramp"])
                self.emit(t, "sliding_arrest", (b.id, ramp.id))
                st0 = BodyState(st.position, st.quaternion, np.zeros(3), st.angular_velocity)
                self.enter_ramp(b, t, st0, ramp)
                return
            self.emit(t, "sliding_arrest", (b.id, seg.support))
            st0 = BodyState(st.position, st.quaternion, np.zeros(3), np.zeros(3))
            self.enter_surface(b, t, st0, seg.support, seg.extra["z_top"], seg.extra["a"])
            return
        if kind == "slip_end":
            r = b.spec.primitive.rolling_radius()
            v = np.array([st.linear_velocity[0], st.linear_velocity[1], 0.0])
            w = np.cross(Z, v) / r + float(st.angular_velocity @ Z) * Z
            self.enter_surface(b, t, BodyState(st.position, st.quaternion, v, w), seg.support,
                               seg.extra["z_top"], seg.extra["a"])
            return
        if kind == "edge":
            a = seg.extra["a"]
            v2 = float(st.linear_velocity @ st.linear_velocity)
            if v2 < 4.0 * self.g * a:
                raise self.fail(b, f"leaves platform {info['platform']!r} too slowly (v² = {v2:.3g} < 4 g r = "
                                   f"{4 * self.g * a:.3g}); the pivot about the edge is not modelled")
            self.emit(t, "contact_break", (b.id, info["platform"]))
            self.enter_flight(b, t, st)
            return
        if kind == "top":
            raise self.fail(b, f"reaches the top edge of ramp {seg.extra['ramp']!r} (not modelled)")
        if kind == "foot":
            ramp = self.cfg.ramp(seg.extra["ramp"])
            if info["ground_foot"]:
                self.emit(t, "surface_transition", (b.id, ramp.id, "ground"))
                vs = float(st.linear_velocity @ ramp.slope_down)
                v = vs * math.cos(ramp.angle) * ramp.downhill
                if self.is_roller(b, st.quaternion):
                    pos = st.position
                    q = st.quaternion
                else:
                    pos = st.position
                    q = qmul(qexp(-ramp.angle * ramp.lateral), st.quaternion)
                self.enter_surface(b, t, BodyState(pos, q, v, st.angular_velocity), "ground", 0.0)
            else:
                self.emit(t, "contact_break", (b.id, ramp.id))
                self.enter_flight(b, t, st)
            return
        if kind == "arc_end":
            track = self.cfg.track(seg.extra["track"])
            on_ground = abs(info["phi"]) <= 1e-12 and abs(float(track.center[2]) - track.radius) <= GEOM_TOL
            if on_ground:
                self.emit(t, "surface_transition", (b.id, track.id, "ground"))
                v = np.array([st.linear_velocity[0], st.linear_velocity[1], 0.0])
                pos = np.array([st.position[0], st.position[1], st.position[2]])
                self.enter_surface(b, t, BodyState(pos, st.quaternion, v, st.angular_velocity), "ground", 0.0,
                                   b.spec.primitive.rolling_radius())
            else:
                self.emit(t, "contact_break", (b.id, track.id))
                self.enter_flight(b, t, st)
            return
        if kind == "detach":
            track = self.cfg.track(seg.extra["track"])
            self.emit(t, "contact_break", (b.id, track.id), phi=info["phi"])
            self.enter_flight(b, t, st)
            return
        if kind == "weld_arrest":
            partner = self.by_id[seg.extra["partner"]]
            self.emit(t, "sliding_arrest", (b.id, partner.id, seg.support))
            for bb in (b, partner):
                s = self.state(bb, t)
                mo = PolyMotion(t, s.position, np.zeros(3), np.zeros(3), s.quaternion, s.angular_velocity)
                self.push(bb, t, "welded", mo, "at_rest", "surface", dict(bb.cur.params, a=0.0), bb.cur.support,
                          partner=bb.cur.extra["partner"], z_top=bb.cur.extra.get("z_top"))
            return
        if kind in ("weld_landing", "weld_edge"):
            raise self.fail(b, "a welded pair landing or leaving a platform edge is not modelled")
        raise AssertionError(kind)

    def impact_surface(self, b: _Body, t: float, st: BodyState, support: str, z_s: float, h_c: float) -> None:
        mat = self.cfg.support_material(support)
        pc = self.pair(b.spec.material, mat)
        e, mu = pc.restitution, pc.dynamic_friction
        vn = float(st.linear_velocity[2])
        self.emit(t, "landing", (b.id, support), impact_speed=-vn)
        pos = np.array([st.position[0], st.position[1], z_s + h_c])
        vt = np.array([st.linear_velocity[0], st.linear_velocity[1], 0.0])
        w = np.array(st.angular_velocity, float)
        pose = self.flat_pose(b, st.quaternion)
        if pose is None:
            raise self.fail(b, f"lands on {support!r} in a tilted pose (toppling is not modelled)")
        roller = self.is_roller(b, st.quaternion)
        jt = 0.0
        if roller:
            if mu > 0.0:
                r, k, m = b.spec.primitive.rolling_radius(), self.k_of(b), b.m
                slip = vt + np.cross(w, -r * Z)
                us = _norm(slip)
                if us > 0.0:
                    uh = slip / us
                    if b.spec.primitive.shape == "cylinder" and abs(float(uh @ qmat(st.quaternion)[:, 2])) > 1e-9:
                        raise self.fail(b, "a side-lying cylinder landing with slip along its axis is not modelled")
                    jn = m * (1.0 + e) * abs(vn)
                    jt = min(mu * jn, m * k / (1.0 + k) * us)
                    vt = vt - jt / m * uh
                    w = w + jt / (k * m * r) * np.cross(Z, uh)
        else:
            if _norm(w) > 0.0:
                raise self.fail(b, f"lands on {support!r} while spinning (toppling is not modelled)")
            if mu > 0.0 and _norm(vt) > 1e-12:
                raise self.fail(b, f"a non-round body lands on rough {support!r} with horizontal velocity "
                                   "(tipping is not modelled)")
        vn_post = -e * vn
        pre = st.linear_velocity
        post = vt + vn_post * Z
        captured = vn_post < BOUNCE_THRESHOLD
        self.instants.append((t, "bounce", "elastic" if e == 1.0 else "inelastic", (b.id,),
                              {"e": e, "mu_k": mu, "mu_s": pc.static_friction, "g": self.g, "m": {b.id: b.m},
                               "u1": _fl(pre), "v1": _fl(post if not captured else vt), "n": _fl(Z),
                               "v0": _norm(pre), "v0_vec": _fl(pre), "h0": float(pos[2] - z_s),
                               "tangential_impulse": jt, "captured": bool(captured),
                               "threshold": BOUNCE_THRESHOLD}))
        new = BodyState(pos, st.quaternion, post, w)
        if not captured:
            self.emit(t, "elastic_rebound", (b.id, support), rebound_speed=vn_post)
            self.enter_flight(b, t, new, onset=False)
        else:
            self.emit(t, "settling" if e > 0.0 else "inelastic_capture", (b.id, support))
            self.enter_surface(b, t, BodyState(pos, st.quaternion, vt, w), support, z_s, h_c)

    def collide(self, b1: _Body, b2: _Body, t: float, n: np.ndarray) -> None:
        for bb in (b1, b2):
            if bb.cur.extra.get("ramp"):
                raise self.fail(bb, "a collision on a ramp is not modelled")
            if bb.cur.mode == "welded":
                raise self.fail(bb, "a welded pair colliding with a third body is not modelled")
            if bb.cur.extra.get("track"):
                raise self.fail(bb, "a collision with a body on a track is not modelled")
        st1, st2 = self.state(b1, t), self.state(b2, t)
        m1, m2 = b1.m, b2.m
        e = self.pair(b1.spec.material, b2.spec.material).restitution
        u1, u2 = st1.linear_velocity, st2.linear_velocity
        urel = u1 - u2
        un = float(urel @ n)
        perp = urel - un * n
        central = _norm(perp) <= 1e-9 * max(_norm(urel), 1e-300)
        ids = (b1.id, b2.id)
        self.emit(t, "contact_init", ids, normal=n)
        law = "perfectly_elastic_collision" if e == 1.0 else ("perfectly_inelastic_collision" if e == 0.0 else "inelastic_collision")
        if e == 0.0:
            if not central:
                raise self.fail(b1, f"perfectly inelastic collision with {b2.id!r} is not central "
                                    "(relative velocity not along the line of centres; sticking would need friction)")
            vc = (m1 * u1 + m2 * u2) / (m1 + m2)
            v1 = v2 = vc
        else:
            v1, v2 = collision_velocities(m1, m2, u1, u2, n, e)
        self.instants.append((t, law, "head_on" if central else "oblique", ids,
                              {"m1": m1, "m2": m2, "m": {b1.id: m1, b2.id: m2}, "u1": _fl(u1), "u2": _fl(u2),
                               "v1": _fl(v1), "v2": _fl(v2), "n": _fl(n), "e": e, "g": self.g,
                               "v0": _norm(urel), "v0_vec": _fl(urel)}))
        if e == 0.0:
            self.emit(t, "inelastic_capture", ids)
            self.weld(b1, b2, t, st1, st2, vc)
            return
        self.emit(t, "elastic_rebound", ids)
        self.emit(t, "contact_break", ids)
        for bb, st, v in ((b1, st1, v1), (b2, st2, v2)):
            self.reenter(bb, t, BodyState(st.position, st.quaternion, v, st.angular_velocity))

    def reenter(self, b: _Body, t: float, st: BodyState) -> None:
        seg = b.cur
        if seg.mode == "flight":
            self.enter_flight(b, t, st, onset=False)
            return
        vz = float(st.linear_velocity[2])
        scale = max(1.0, st.speed)
        if vz < -1e-9 * scale:
            raise self.fail(b, "a collision drives the body into its support (simultaneous impacts are not modelled)")
        if vz > 1e-9 * scale:
            self.emit(t, "contact_break", (b.id, seg.support))
            self.enter_flight(b, t, st)
            return
        v = np.array([st.linear_velocity[0], st.linear_velocity[1], 0.0])
        self.enter_surface(b, t, BodyState(st.position, st.quaternion, v, st.angular_velocity), seg.support,
                           seg.extra["z_top"], seg.extra["a"])

    def weld(self, b1: _Body, b2: _Body, t: float, st1: BodyState, st2: BodyState, vc: np.ndarray) -> None:
        s1, s2 = b1.cur, b2.cur
        if s1.mode == "flight" or s2.mode == "flight":
            if not (s1.mode == "flight" and s2.mode == "flight"):
                raise self.fail(b1, f"a flying body sticking to a supported one ({b2.id!r}) is not modelled")
            for bb, st in ((b1, st1), (b2, st2)):
                if _norm(st.angular_velocity) > 0.0:
                    raise self.fail(bb, "a spinning body welding in flight is not modelled")
            for bb, st, other in ((b1, st1, b2), (b2, st2, b1)):
                mo = PolyMotion(t, st.position, vc, -self.g * Z, st.quaternion, np.zeros(3))
                self.push(bb, t, "welded", mo, "projectile_motion" if math.hypot(vc[0], vc[1]) > 1e-12 else "free_fall",
                          "launch" if math.hypot(vc[0], vc[1]) > 1e-12 else "thrown", {}, None, partner=other.id,
                          flight=True, t_nat=math.inf)
            return
        if s1.support != s2.support:
            raise self.fail(b1, f"welding to {b2.id!r} resting on a different support is not modelled")
        support = s1.support
        mus = []
        for bb, st in ((b1, st1), (b2, st2)):
            pc = self.pair(bb.spec.material, self.cfg.support_material(support))
            mus.append(pc.dynamic_friction)
            if pc.dynamic_friction > 0.0 and _norm(st.angular_velocity) > 0.0:
                raise self.fail(bb, "a welded pair of spinning rollers on a rough surface is not modelled")
        mu_eff = (mus[0] * b1.m + mus[1] * b2.m) / (b1.m + b2.m)
        speed = _norm(vc)
        for bb, st, other in ((b1, st1, b2), (b2, st2, b1)):
            base = {"mu_k": mu_eff, "m": {b1.id: b1.m, b2.id: b2.m}}
            if speed == 0.0:
                mo = PolyMotion(t, st.position, vc, np.zeros(3), st.quaternion, st.angular_velocity)
                law, variant, t_nat = "at_rest", "surface", math.inf
            elif mu_eff == 0.0:
                mo = PolyMotion(t, st.position, vc, np.zeros(3), st.quaternion, st.angular_velocity)
                law, variant, t_nat = "uniform_linear_motion", "slide", math.inf
            else:
                acc = -mu_eff * self.g * _unit(vc)
                mo = PolyMotion(t, st.position, vc, acc, st.quaternion, st.angular_velocity)
                law, variant, t_nat = "surface_friction", "slide", t + speed / (mu_eff * self.g)
                base["a"] = mu_eff * self.g
            self.push(bb, t, "welded", mo, law, variant, base, support, partner=other.id,
                      t_nat=t_nat if bb is b1 else math.inf, nat="weld_arrest", z_top=s1.extra.get("z_top"),
                      a=bb.cur.extra.get("a"))

    # ---- checks --------------------------------------------------------------------------
    def check_track_recontact(self, b: _Body) -> None:
        """A body flying off a track must not re-meet its running surface (quartic in t)."""
        mo = b.cur.motion
        prim = b.spec.primitive
        a = prim.rolling_radius() if prim.shape in ("sphere", "cylinder") else self.lowest_extent(b, mo.q0)
        for tr in self.cfg.tracks:
            rho = tr.radius - a
            rel0 = mo.r0 - tr.center
            if abs(float(rel0 @ tr.lateral)) > tr.width / 2.0 + a:
                continue
            P = np.stack([tr.direction, Z])
            c0, c1, c2 = P @ rel0, P @ mo.v0, P @ (0.5 * mo.acc)
            if not (float(c0 @ c0) <= (rho + 1e-9) ** 2):
                continue
            for s in _quartic_roots(np.append(c0, 0.0), np.append(c1, 0.0), np.append(c2, 0.0), rho, self.T - mo.t0):
                if s <= 1e-6:
                    continue
                rel = c0 + c1 * s + c2 * s * s
                phi = math.atan2(rel[0], -rel[1])
                full = tr.arc[1] - tr.arc[0] >= 2 * math.pi - 1e-9
                if full or tr.arc[0] <= phi <= tr.arc[1]:
                    # the landing on a surface may come first
                    tl, kind, _ = self.next_flight(b)
                    if kind == "landing" and tl < mo.t0 + s:
                        break
                    raise self.fail(b, f"after leaving track {tr.id!r} the body would hit the track again at "
                                       f"t = {mo.t0 + s:.6g} s (re-contact is not modelled)")

    def clearance_check(self, b: _Body, seg: _Seg, t0: float, t1: float) -> None:
        """Sampled check that a segment keeps clear of the supports it does not run on."""
        prim = b.spec.primitive
        if prim.shape == "sphere" or self.is_roller(b, seg.motion.state(t0).quaternion):
            a = prim.size["radius"]
        else:
            a = min(prim.support_distance("upright"), self.lowest_extent(b, seg.motion.state(t0).quaternion))
        times = np.linspace(t0, t1, GUARD_SAMPLES + 1) if t1 > t0 else np.array([t0])
        own = seg.support
        for t in times:
            p = seg.motion.state(float(t)).position
            for ramp in self.cfg.ramps:
                if ramp.id == own:
                    continue
                rel = p - ramp.top
                u = min(max(float(rel @ ramp.slope_down), 0.0), ramp.length)
                l = min(max(float(rel @ ramp.lateral), -ramp.width / 2), ramp.width / 2)
                near = ramp.top + u * ramp.slope_down + l * ramp.lateral
                if _norm(p - near) < a - 1e-6:
                    raise self.fail(b, f"runs into ramp {ramp.id!r} at t = {t:.4g} s (entering a ramp is not modelled)")
            for plat in self.cfg.platforms:
                if plat.id == own:
                    continue
                lo, hi = plat.center - plat.size / 2, plat.center + plat.size / 2
                near = np.minimum(np.maximum(p, lo), hi)
                if _norm(p - near) < a - 1e-6:
                    raise self.fail(b, f"runs into platform {plat.id!r} at t = {t:.4g} s")
            for tr in self.cfg.tracks:
                if tr.id == own:
                    continue
                rel = p - tr.center
                uu, ww, ll = float(rel @ tr.direction), float(rel @ Z), float(rel @ tr.lateral)
                phi = math.atan2(uu, -ww)
                full = tr.arc[1] - tr.arc[0] >= 2 * math.pi - 1e-9
                if full or tr.arc[0] <= phi <= tr.arc[1]:
                    dp = abs(math.hypot(uu, ww) - tr.radius)
                else:
                    ends = [tr.center + tr.radius * tr.radial(x) for x in tr.arc]
                    dp = min(math.hypot(float((p - e_) @ tr.direction), float((p - e_) @ Z)) for e_ in ends)
                dl = max(0.0, abs(ll) - tr.width / 2)
                if math.hypot(dp, dl) < a - 1e-6:
                    raise self.fail(b, f"runs into track {tr.id!r} at t = {t:.4g} s (entering a track is not modelled)")

    def check_initial_overlaps(self) -> None:
        for i, b1 in enumerate(self.bodies):
            for b2 in self.bodies[i + 1:]:
                st1, st2 = self.state(b1, 0.0), self.state(b2, 0.0)
                three_d, _, d_exact = self.contact_dist(b1, b2)
                d = st2.position - st1.position
                if three_d:
                    if _norm(d) < d_exact - GEOM_TOL:
                        raise self.fail(b1, f"starts interpenetrating {b2.id!r}")
                else:
                    z_over = (abs(d[2]) < self.lowest_extent(b1, st1.quaternion) + self.lowest_extent(b2, st2.quaternion) - GEOM_TOL)
                    if z_over and math.hypot(d[0], d[1]) < d_exact - GEOM_TOL:
                        raise self.fail(b1, f"starts interpenetrating {b2.id!r}")

    def proximity_check(self, t0: float, t1: float) -> None:
        """Bodies on tracks are not part of the closed-form pair search: refuse any contact by sampling."""
        track_bodies = [b for b in self.bodies if b.cur.motion.kind == "track"]
        if not track_bodies or t1 <= t0:
            return
        times = np.linspace(t0, t1, GUARD_SAMPLES + 1)
        for b1 in track_bodies:
            for b2 in self.bodies:
                if b2 is b1:
                    continue
                lim = b1.spec.primitive.bounding_radius + b2.spec.primitive.bounding_radius
                for t in times:
                    if _norm(self.state(b1, t).position - self.state(b2, t).position) < lim:
                        raise self.fail(b1, f"comes into contact with {b2.id!r} while on a track (not modelled)")

    # ---- main loop -----------------------------------------------------------------------
    def run(self) -> AnalyticTrajectory:
        for b in self.bodies:
            self.init_body(b)
        self.check_initial_overlaps()
        n_events = 0
        while True:
            internal = []
            for b in self.bodies:
                te, kind, info = self.next_internal(b)
                internal.append((te, kind, info, b, b.cur))
            t_int = min([x[0] for x in internal] + [self.T])
            pairs = []
            for i, b1 in enumerate(self.bodies):
                for b2 in self.bodies[i + 1:]:
                    hit = self.next_pair(b1, b2, t_int)
                    if hit is not None:
                        pairs.append((hit[0], b1, b2, hit[1]))
            t_pair = min([p[0] for p in pairs] + [math.inf])
            t_next = min(t_int, t_pair)
            if t_next >= self.T - TIME_EPS and t_next >= self.T:
                t_next = self.T
            self.proximity_check(self.t, min(t_next, self.T))
            if t_next >= self.T:
                break
            t_next = max(t_next, self.t)
            n_events += 1
            if n_events > MAX_EVENTS:
                raise self.fail(None, "too many events (the motion does not settle)")
            pair_hits = [p for p in pairs if p[0] <= t_next + TIME_EPS]
            if len(pair_hits) > 1:
                raise self.fail(pair_hits[0][1], "simultaneous collisions are not modelled")
            involved: set[str] = set()
            if pair_hits:
                _, b1, b2, info = pair_hits[0]
                self.collide(b1, b2, t_next, info["n"])
                involved = {b1.id, b2.id}
            firing = [x for x in internal if x[0] <= t_next + TIME_EPS and x[3].id not in involved]
            for te, kind, info, b, seg in firing:
                if b.cur is seg:  # not already replaced at this instant (e.g. by a welded partner)
                    self.do_internal(b, t_next, kind, info)
            self.t = t_next
        for b in self.bodies:
            b.cur.t1 = self.T
            for seg in b.segs:
                self.clearance_check(b, seg, seg.t0, seg.t1)
        return self.build()

    # ---- output ----------------------------------------------------------------------------
    def build(self) -> AnalyticTrajectory:
        # stages: break at every segment start
        cuts = sorted({s.t0 for b in self.bodies for s in b.segs} | {0.0})
        bounds: list[float] = []
        for c in cuts:
            if not bounds or c - bounds[-1] > TIME_EPS:
                bounds.append(c)
        bounds = [x for x in bounds if x < self.T - TIME_EPS] or [0.0]
        stages = []
        segmaps = {b.id: (b.segs, [s.t0 for s in b.segs]) for b in self.bodies}

        def seg_at(bid: str, t: float) -> _Seg:
            segs, starts = segmaps[bid]
            return segs[max(0, bisect.bisect_right(starts, t + TIME_EPS) - 1)]

        for i, t0 in enumerate(bounds):
            t1 = bounds[i + 1] if i + 1 < len(bounds) else self.T
            modes, laws, inputs = {}, {}, {}
            for b in self.bodies:
                s = seg_at(b.id, t0)
                modes[b.id], laws[b.id] = s.mode, f"{s.law}/{s.variant}"
                inputs[b.id] = s.params
            top = max(self.bodies, key=lambda bb: (LAW_RANK[seg_at(bb.id, t0).law], -bb.index))
            moving = tuple(b.id for b in self.bodies if seg_at(b.id, t0).law != "at_rest") or tuple(b.id for b in self.bodies)
            stages.append(Stage(i, seg_at(top.id, t0).law, t0, t1, moving,
                                {"modes": modes, "laws": laws, "inputs": inputs}))
        starts = [s.t_start for s in stages]
        events = []
        for t, label, objs, detail in self.raw_events:
            idx = max(0, bisect.bisect_right(starts, t + TIME_EPS) - 1)
            events.append(Event(t, label, objs, idx, detail))
        steps = self.build_law_steps()
        return AnalyticTrajectory(self.T, tuple(b.id for b in self.bodies), {b.id: b.segs for b in self.bodies},
                                  tuple(events), tuple(stages), steps)

    def build_law_steps(self) -> tuple[LawStep, ...]:
        items = []
        for b in self.bodies:
            for s in b.segs:
                if s.t1 - s.t0 <= TIME_EPS and not (s.t0 == s.t1 == self.T):
                    continue
                items.append((s.t0, 1, b.index, s.law, s.variant, (b.id,), s.t1, s.params))
        for t, law, variant, objs, params in self.instants:
            items.append((t, 0, self.by_id[objs[0]].index, law, variant, objs, t, params))
        items.sort(key=lambda x: (x[0], x[1], x[2]))
        steps: list[dict] = []
        for t0, is_segment, _, law, variant, objs, t1, params in items:
            piece = dict(params, objects=list(objs), t_start=t0, t_end=t1)
            if steps and steps[-1]["law"] == law and steps[-1]["variant"] == variant and is_segment \
                    and steps[-1]["t_start"] != steps[-1]["t_end"]:
                st = steps[-1]
                st["objects"] = tuple(dict.fromkeys(st["objects"] + objs))
                st["t_end"] = max(st["t_end"], t1)
                st["pieces"].append(piece)
                if "m" in params:
                    st["parameters"]["m"] = {**st["parameters"].get("m", {}), **params["m"]}
                continue
            steps.append({"law": law, "variant": variant, "objects": tuple(objs), "t_start": t0, "t_end": t1,
                          "parameters": dict(params), "pieces": [piece]})
        out = []
        for st in steps:
            p = dict(st["parameters"])
            if len(st["pieces"]) > 1:
                p["pieces"] = st["pieces"]
            out.append(LawStep(st["law"], st["variant"], st["objects"], st["t_start"], st["t_end"], p))
        return tuple(out)


def solve(config: CaseConfig) -> AnalyticTrajectory:
    """Exact piecewise closed-form trajectory of every object of `config` over [0, T].

    Raises PhysicsError (naming the config file, the object and the reason) when the configuration asks
    for motion the model cannot represent honestly.
    """
    return _Solver(config).run()
