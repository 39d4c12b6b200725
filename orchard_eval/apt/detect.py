"""Transitions detected from object tracks (world-frame centre positions, z up), for the Deduction
transition score.

The tracks may be dense (every frame) or sparse and uneven (the Deduction timestamps T_c plus t = 0,
which is what the run measures): every rule reads positions at the sample times and estimates an
event's time between samples from the motion on either side (a parabola in flight, a straight line
for uniform motion, a square law from rest), never from a fixed number of frames. Thresholds come
from geometry and the camera:

* `position_tolerance` — a located centre is trusted to PIX_TOL pixels, i.e. to that many pixels'
  worth of metres at the body's distance from the camera (5 mm without a camera);
* a body is on the floor when its centre is within that tolerance of its resting height (`half_extent`:
  its centre of mass above the support; a cone's is a quarter of its height);
* two bodies touch when their centres are within the sum of their radii plus both tolerances;
* a body is still over an interval when it moves less than the tolerance plus V_EPS × the interval.

Rules:

* gravity — a *flight* is the longest run of samples between floor contacts (and local minima of
  the height: a bounce between samples) that a parabola fits: downward acceleration ≥ A_MIN,
  horizontal acceleration ≤ H_RATIO of it, residuals within 1.5 tolerances (first with exact frame
  times, then with JITTER_FRAMES of timing slack: re-timed answers; a longer run from frame 0 that
  only the slack fits wins), the parabola above the floor at its samples; one repeated frame (a
  stutter) may be left out, and samples before it (a support, a ramp) or after it (a bounce the cut
  missed, a frozen answer) stay out of it. A cut sample goes to the flight on its side of the
  bounce: the flight before keeps it when, fitted without it, that flight reaches the floor after
  it; the flight after gets it when the flight before, fitted without it on four samples or more,
  reaches the floor before it. Off a support, a first interval that is level or runs on along the
  support's line is still the support.
  `projectile_apex`: the vertex of a flight's parabola when it lies inside the flight (after its
  start by more than the vertex time is known: a body released from rest has none) and the
  flight has at least four samples (three points fit any curve: the top of a loop looks like an
  apex at three samples) or three that rise from a detected landing (a first sample taken just
  before that landing is replaced by the landing point) or end in one. `landing` (+
  `elastic_rebound` when it rises again, `settling` when it stays down at every later sample,
  rolling or not: the build's settling is the capture onto the support, which ends the bouncing,
  not the motion): where the parabola meets the floor. A rebound whose flight lasts less than
  RESOLVED_FRAMES frame periods (to its parabola's landing, or to the clip's end) begins residual
  bouncing, which a video does not show hop by hop (`observable`): no rebound, apex or landing is
  reported from there on, and a body that then stays down and still settles at the last hop's
  landing. An apex is reported only where
  the parabola rises to it and falls from it by VISIBLE_PX pixels or more. `free_fall_onset`: a
  flight that starts at t = 0, or that takes off from a support (two samples or more left out
  before it, or a level start), then also `contact_break`: at the vertex off a level support, at
  the flight's first sample off a slope. Samples before a flight that fit no flight of their own
  (a fall seen at two samples) are the fall into a bounce where the flight, traced back, meets the
  floor between its first sample and the one before and they fall ballistically into that point:
  a landing and a rebound there (and the onset at t = 0). A flight that rises from a landing
  detected before its first sample falls as the body's other flights do: where its samples give it
  a gravity G_APART away from theirs, and the arc from the landing with their gravity runs through
  its first samples but misses its last one or two by PAST_BOUNCE_TOLS tolerances, it ends before
  them (they lie past another bounce).
* contact between two bodies — `contact_init` / `contact_break`: the separation crosses the contact
  distance, the time from the approach / retreat line extrapolated to it; `elastic_rebound`: they
  retreat after the contact; `inelastic_capture`: they stay in contact to the end; a collision
  inside a gap (no sample in contact) when the closing and opening lines either side reach the
  contact distance inside it at about one time.
* surfaces — `surface_transition`: off flight, the path turns by KINK_DEG–90° at a sample into a
  straight stretch (two intervals on one line: the floor after a ramp; a curved track turns at
  every sample and has no straight stretch).
* friction — `static_breakaway`: a body that was still moves off without flying, or one that starts
  from rest at t = 0 (its distance grows as t², not t) along a straight line (a body released on a
  curved track swings); `sliding_arrest`: a moving body decelerates into a rest (one that stops
  dead is a frozen answer). A single still interval between opposite motions is a turning point,
  and one too short to tell rest from motion (a body at V_EPS moves less than the tolerance in it)
  is no rest.
  Neither, nor a surface transition, is reported beside a contact, landing or onset of the same
  body (a struck body's start is the contact's).

Fixtures (the floor, ramps, tables, tracks) are not tracked; detected transitions name the bodies
only, and the score compares chains on their body ids (see `bodies_only`).
"""
from __future__ import annotations

import numpy as np

from ..cases import EvalCase, ObjectInfo, ObjectTracks
from .observable import RESOLVED_FRAMES
from .taxonomy import Transition

A_MIN = 1.0     # m/s²: the weakest gravity a case uses (Titan, 1.35) is above this
V_EPS = 0.05    # m/s: below this a body counts as at rest
H_RATIO = 0.2   # horizontal over vertical acceleration below which a flight is ballistic
PIX_TOL = 2.0   # px: how far a located centre may be from the true one (segmentation noise)
TOL_FALLBACK = 0.005   # m: the position tolerance without a camera
G_APART = 0.10   # a flight whose gravity is this far (relative) from the body's other flights' may hold two
PAST_BOUNCE_TOLS = 4.0   # tolerances a sample lies off the arc the body's gravity gives, past another bounce
JITTER_FRAMES = 0.5   # frames: how early or late an answer frame may show its content (flight fits' second try)
KINK_DEG = 8.0  # °: a bend of the path at least this sharp between straight stretches is a change of surface
VISIBLE_PX = 1.0   # px: the least rise to and fall from an apex the detector reports (`observable` shows one from 2)


def half_extent(o: ObjectInfo) -> float:
    """Height of a body's tracked centre (its centre of mass) above the support it rests on in its
    usual pose (metres); 0 when unknown. A cone's centre of mass is a quarter of its height above
    its base, a lying cylinder's centre its radius above the ground."""
    s = dict(o.size)
    if o.shape == "cone" and "height" in s:
        return float(s["height"]) / 4
    if o.shape == "cylinder" and o.rest_pose == "side" and "radius" in s:
        return float(s["radius"])
    if "height" in s:
        return float(s["height"]) / 2
    for k in ("radius", "half_z", "half_height"):
        if k in s:
            return float(s[k])
    vals = [float(v) for v in s.values()]
    return max(vals) / 2 if vals else 0.0


def contact_radius(o: ObjectInfo) -> float:
    s = dict(o.size)
    if "radius" in s:
        return float(s["radius"])
    vals = [float(v) for v in s.values()]
    return max(vals) / 2 if vals else 0.0


def bodies_only(chain, body_ids) -> list[Transition]:
    """The chain with fixture ids left out of every transition's objects (fixtures are not tracked)."""
    ids = set(body_ids)
    return [Transition(tr.type, tr.t, tuple(o for o in tr.objects if o in ids), tr.confidence) for tr in chain]


def position_tolerance(case: EvalCase, P: np.ndarray) -> float:
    """PIX_TOL pixels in metres at the body's median distance along the optical axis."""
    if case.intrinsic is None or case.extrinsic is None:
        return TOL_FALLBACK
    E = np.asarray(case.extrinsic, float)
    depth = (np.asarray(P, float) @ E[:, :3].T + E[:, 3])[:, 2]
    depth = depth[np.isfinite(depth) & (depth > 0)]
    if depth.size == 0:
        return TOL_FALLBACK
    f = float(np.asarray(case.intrinsic, float)[1, 1])
    return max(TOL_FALLBACK, PIX_TOL * float(np.median(depth)) / f)


# ---------------------------------------------------------------------------------------------
# fits
# ---------------------------------------------------------------------------------------------
def _quad(t: np.ndarray, y: np.ndarray, tol: float, jitter: float) -> tuple[np.ndarray, bool]:
    """Least-squares parabola (c2, c1, c0), and whether every sample lies within 1.5 tolerances of
    it plus the distance the parabola covers in `jitter` seconds there (a frame's time is known
    to half a frame: timestamps are rounded to frames, an answer may show a frame late)."""
    c = np.polyfit(t, y, 2)
    slope = np.abs(2 * c[0] * t + c[1])
    return c, bool(np.all(np.abs(np.polyval(c, t) - y) <= 1.5 * tol + slope * jitter))


class Flight:
    """A parabola fitted to a body's samples [i, j] (inclusive); `ok` when the motion is ballistic."""

    def __init__(self, t: np.ndarray, P: np.ndarray, i: int, j: int, tol: float, jitter: float = 0.0):
        self.i, self.j = i, j
        self.ok = False
        self.level_before = False
        self.cz = None
        if j - i + 1 < 3:
            return
        self.t0 = float(t[i])
        # an answer frame shown twice (a stutter: the body where it was one sample before) is left
        # out when four or more samples remain to fit
        rep = [m for m in range(i + 1, j + 1) if float(np.linalg.norm(P[m] - P[m - 1])) <= tol]
        drops = [None] + (rep if j - i + 1 >= 5 else [])
        for m in drops:
            keep = [k for k in range(i, j + 1) if k != m]
            tt = t[keep] - t[i]
            fits = [_quad(tt, P[keep, k], tol, jitter) for k in range(3)]
            az = 2 * fits[2][0][0]
            ah = float(np.hypot(2 * fits[0][0][0], 2 * fits[1][0][0]))
            self.cz = fits[2][0]
            self.ok = az <= -A_MIN and ah <= H_RATIO * abs(az) and all(f[1] for f in fits)
            if self.ok:
                return

    @property
    def n(self) -> int:
        return self.j - self.i + 1

    def vertex(self) -> float:
        return self.t0 - self.cz[1] / (2 * self.cz[0])

    def reaches(self, level: float, last: bool) -> float | None:
        """The time the parabola is at height `level` (the later root when `last`, else the earlier)."""
        r = _at_level(self.cz, level, last)
        return None if r is None else self.t0 + r

    def height(self, x: float) -> float:
        return float(np.polyval(self.cz, x - self.t0))


def _at_level(c: np.ndarray, level: float, last: bool) -> float | None:
    """Where the parabola c (highest power first) is at height `level`: its later root when `last`,
    else the earlier; None where it never is."""
    c = np.array(c, float)
    c[2] -= level
    r = np.roots(c)
    r = np.sort(r[np.isreal(r)].real)
    return None if r.size == 0 else float(r[-1] if last else r[0])


def _rising_arc(t_b: float, h: float, t: np.ndarray, z: np.ndarray, g: float | None = None) -> np.ndarray:
    """The parabola (clip time, highest power first) through the bounce point (t_b, h) exactly that
    fits the samples (t, z) best, z = h + v·s − g·s²/2 with s = t − t_b: v and g fitted, or v alone
    for a given gravity `g`."""
    s = np.asarray(t, float) - t_b
    dz = np.asarray(z, float) - h
    if g is None:
        (v, g), *_ = np.linalg.lstsq(np.stack([s, -0.5 * s * s], 1), dz, rcond=None)
    else:
        v = float(np.dot(s, dz + 0.5 * g * s * s) / max(float(np.dot(s, s)), 1e-12))
    return np.array([-0.5 * g, v + g * t_b, h - v * t_b - 0.5 * g * t_b * t_b])


def _fit_flight(t: np.ndarray, P: np.ndarray, a: int, b: int, tol: float, jitter: float,
                floor_z: float) -> Flight | None:
    """The ballistic flight among samples a … b: the longest run of them (the earliest of equal
    length) that a parabola fits, and whose parabola stays above the floor at its samples (a body
    does not fly through the floor). What it leaves out at the start is how the body moved before
    it flew (on a support, a ramp; or the cut sample belongs to the flight before); at the end, a
    bounce just before the cut sample, or an answer that froze. Tried first with exact frame
    times, then allowing `jitter` (an answer whose frames show their content a little early or
    late, e.g. re-timed): the slack would otherwise let a flight swallow the sample before a
    take-off or after a bounce. Frame 0 is the exception: its time is exact in any answer and
    nothing before it can take off, so where the exact fit leaves it out, a longer run from it
    that the slack fits is the flight (a re-timed launch)."""
    def longest(jit: float, from_a: bool = False) -> Flight | None:
        for length in range(b - a + 1, 2, -1):
            for i in ([a] if from_a else range(a, b - length + 2)):
                j = i + length - 1
                f = Flight(t, P, i, j, tol, jit)
                if f.ok and np.all(np.polyval(f.cz, t[i:j + 1] - f.t0) >= floor_z - tol):
                    return f
        return None

    f = longest(0.0)
    if jitter > 0:
        if f is None:
            f = longest(jitter)
        elif f.i > a and t[a] <= 1e-9:
            g = longest(jitter, from_a=True)
            f = g if g is not None and g.n > f.n else f
    return f


def _angle(u: np.ndarray, v: np.ndarray) -> float:
    nu, nv = float(np.linalg.norm(u)), float(np.linalg.norm(v))
    if nu == 0 or nv == 0:
        return 0.0
    return float(np.degrees(np.arccos(np.clip(np.dot(u, v) / (nu * nv), -1.0, 1.0))))


def _lands(t: np.ndarray, P: np.ndarray, i: int, j: int, tol: float, jitter: float, floor_z: float
           ) -> float | None:
    """When the flight fitted to samples i … j comes down to the floor (None: they are no flight)."""
    f = Flight(t, P, i, j, tol, jitter)
    return f.reaches(floor_z, last=True) if f.ok else None


def _runs_on(P: np.ndarray, i: int, tol: float) -> bool:
    """Whether sample i + 1 lies on the straight line through samples i − 1 and i (within the
    tolerance), that interval being longer than the tolerance: the motion into sample i goes on
    along one line."""
    if i < 1 or i + 1 >= len(P):
        return False
    u = P[i] - P[i - 1]
    nu = float(np.linalg.norm(u))
    if nu <= tol:
        return False
    w = P[i + 1] - P[i]
    return float(np.linalg.norm(w - np.dot(w, u) / nu ** 2 * u)) <= tol and float(np.dot(w, u)) > 0


def _clamp(x: float | None, lo: float, hi: float, default: float) -> float:
    if x is None or not np.isfinite(x):
        return default
    return float(min(max(x, lo), hi))


def _from_rest(ta: float, tb: float, tc: float, sb: float, sc: float) -> float:
    """When a motion that grows as (t − t0)² from rest started, from its distances sb, sc (from the
    rest position) at tb < tc; clamped to [ta, tb] (ta: the last time it was seen at rest)."""
    if sb <= 0 or sc <= sb:
        return ta
    r = np.sqrt(sb / sc)
    return _clamp((tb - r * tc) / (1 - r), ta, tb, ta)


def _falls_into(t: np.ndarray, P: np.ndarray, a: int, b: int, t_b: float, h: float) -> bool:
    """Whether samples a … b − 1 and a bounce at (t_b, floor height h) lie on one downward parabola
    (a ballistic fall: downward acceleration ≥ A_MIN, horizontal acceleration ≤ H_RATIO of it), the
    horizontal position at the bounce extrapolated from the last two samples."""
    tt = np.append(t[a:b], t_b)
    zz = np.append(P[a:b, 2], h)
    if tt.size < 3:
        return False
    az = 2 * float(np.polyfit(tt - tt[0], zz, 2)[0])
    rate = (P[b - 1] - P[b - 2]) / (t[b - 1] - t[b - 2])
    xy = [np.append(P[a:b, k], P[b - 1, k] + rate[k] * (t_b - t[b - 1])) for k in (0, 1)]
    ah = float(np.hypot(*[2 * np.polyfit(tt - tt[0], c, 2)[0] for c in xy]))
    return az <= -A_MIN and ah <= H_RATIO * abs(az) and bool(np.all(np.diff(zz) < 0))


def _apex_shows(arc, v: float, start: float, rises: bool, h: float, j: int, n: int, floor: np.ndarray,
                t: np.ndarray, tol: float) -> bool:
    """Whether the flight's parabola (`arc`: its height at a clip time) rises at least VISIBLE_PX
    pixels to its vertex from the flight's start (the floor where it rises from a landing) and falls
    as much from it to its landing (the floor) or the clip's end — `observable`'s rule for an apex a
    video shows; `tol` is PIX_TOL pixels in metres at the body's distance."""
    top = arc(v)
    low = h if rises else arc(start)
    high = h if floor[j] or j < n - 1 else arc(t[-1])
    return min(top - low, top - high) >= VISIBLE_PX * tol / PIX_TOL


# ---------------------------------------------------------------------------------------------
# one body
# ---------------------------------------------------------------------------------------------
def _body(o: ObjectInfo, t: np.ndarray, P: np.ndarray, tol: float, jitter: float = 0.0, span: float = 0.0
          ) -> list[Transition]:
    out: list[Transition] = []
    n = t.size
    z = P[:, 2]
    h = half_extent(o)
    floor = z - h <= tol
    step = np.linalg.norm(np.diff(P, axis=0), axis=1)
    still = step <= tol + V_EPS * np.diff(t)          # interval k: samples k → k+1
    ev = lambda typ, tt: out.append(Transition(typ, float(tt), (o.id,)))  # noqa: E731
    # flights: runs between floor samples, cut again at local minima of the height (a parabola
    # opening downwards has none: the body bounced between two samples)
    cuts = [k for k in range(n) if floor[k]]
    for k in range(1, n - 1):
        if not floor[k] and z[k] <= min(z[k - 1], z[k + 1]) and max(z[k - 1], z[k + 1]) > z[k] + tol:
            cuts.append(k)
    bounds = sorted(set([0, n - 1] + cuts))
    flights: list[Flight] = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        # a cut sample above the floor that the flight before, fitted without it, reaches the floor
        # after belongs to that flight (it was taken on the way down): the next flight starts after
        # it, even where the slack would let a parabola through both sides of the bounce
        prev = flights[-1] if flights else None
        lo = a
        if prev is not None and prev.j == a and not floor[a] and a - prev.i >= 3 and b - a >= 3:
            t_down = _lands(t, P, prev.i, a - 1, tol, jitter, h)
            if t_down is not None and t_down > t[a] + 1e-9:
                lo = a + 1
        # and a cut sample that the flight, fitted without it on four samples or more, reaches the
        # floor before was taken on the way up: it belongs to the flight after (with three left, the
        # sample may as well be the bounce itself, and the flight's apex needs the fourth)
        hi = b
        if b < n - 1 and not floor[b] and b - lo >= 4:
            t_down = _lands(t, P, lo, b - 1, tol, jitter, h)
            if t_down is not None and t_down < t[b] - 1e-9:
                hi = b - 1
        f = _fit_flight(t, P, lo, hi, tol, jitter, h)
        if f is not None and f.i > lo:
            # it flew off a support: a first interval that is level, or that runs on along the
            # support's straight line, is still the support (the body rolls to the edge; a parabola
            # through both samples would put its vertex between them, or its take-off a sample early)
            while f is not None and f.n >= 4 and (abs(z[f.i + 1] - z[f.i]) <= tol or _runs_on(P, f.i, tol)):
                g = Flight(t, P, f.i + 1, f.j, tol, jitter)
                f = g if g.ok else None
            if f is None:
                f = _fit_flight(t, P, lo, hi, tol, jitter, h)
        if f is not None:
            # it took off from a support when it leaves out two samples or more before it (a
            # bounce cuts one), or the clip's first sample resting or moving level
            f.level_before = f.i - a >= 2 or (f.i - a == 1 and a == 0 and abs(z[1] - z[0]) <= tol)
            flights.append(f)
    landings: list[float] = []       # times of the landings detected so far
    residual: float | None = None    # when residual bouncing began (a hop shorter than `span`): the last landing seen
    for k_f, f in enumerate(flights):
        i, j = f.i, f.j
        if residual is not None:
            # a hop of the residual bouncing: no transition of its own (`observable`), only its landing,
            # which the settling follows
            t_hop = f.reaches(h, last=True) if floor[j] or j < n - 1 else None
            if t_hop is not None and t[i] - 1e-9 <= t_hop <= t[-1] + 1e-9:
                residual = max(residual, t_hop)
            continue
        prev_j = flights[k_f - 1].j if k_f else -1
        if i - prev_j >= 3 and not floor[i] and not floor[prev_j + 1:i].any():
            # the samples before this flight fit no flight of their own: where its parabola, traced
            # back, meets the floor just before its first sample, the body bounced there, and those
            # samples with the bounce point may be the fall into it (a fall seen at two samples)
            t_b = f.reaches(h, last=False)
            if t_b is not None and t[i - 1] < t_b < t[i] and _falls_into(t, P, prev_j + 1, i, t_b, h):
                if prev_j < 0 and t[0] <= 1e-9:
                    ev("free_fall_onset", t[0])
                ev("landing", t_b)
                ev("elastic_rebound", t_b)
                landings.append(t_b)
        # onset: from t = 0, or off a support it moved level on (not after a bounce: the body never
        # rested); leaving a support inside the clip also breaks the contact with it
        if i == 0 and t[0] <= 1e-9 and not floor[0]:
            ev("free_fall_onset", t[0])
        elif i > 0 and f.level_before and not floor[i - 1]:
            # rolling off a level support the parabola starts at its vertex; off a slope it starts
            # descending already (vertex earlier): the flight's first sample bounds it then
            v = f.vertex()
            level = i >= 2 and abs(z[i - 1] - z[i - 2]) <= tol
            t_on = v if level and t[i - 1] <= v <= t[i] else t[i]
            ev("free_fall_onset", t_on)
            if t_on > t[0] + 1e-3:
                ev("contact_break", t_on)
        # apex inside the flight, seen from at least four samples, or from three when the flight
        # rises from a landing detected at its first sample or ends in one (the bounce vouches for
        # the flight)
        v, start, az = f.vertex(), t[i], 2 * float(f.cz[0])
        arc, t_down = f.height, f.reaches(h, last=True)
        rises = any((t[i - 1] if i > 0 else -1.0) < x <= t[i] + 1e-9 for x in landings)
        bounce = next((x for x in landings if t[i] + 1e-9 < x < t[i + 1]), None)
        if bounce is not None and f.n == 3:
            # its first sample was taken just before a bounce detected between it and the next: the
            # flight rises from the landing point, not from that sample
            c = np.polyfit([bounce, t[i + 1], t[i + 2]], [h, z[i + 1], z[i + 2]], 2)
            if 2 * c[0] <= -A_MIN:
                v, start, rises, az = float(-c[1] / (2 * c[0])), bounce, True, 2 * float(c[0])
        elif bounce is not None:
            # rising from that bounce, the flight falls as the body's other flights do: where its
            # samples give it another gravity, and an arc from the bounce with theirs runs through
            # its first samples but not its last one or two, those lie past another bounce (a sample
            # after the next bounce can sit where one weaker arc through the sample before the first
            # would put it)
            others = [-2 * float(g.cz[0]) for g in flights if g is not f]
            g_ref = float(np.median(others)) if others else None
            full = _rising_arc(bounce, h, t[i + 1:j + 1], z[i + 1:j + 1])
            if g_ref is not None and abs(-2 * full[0] - g_ref) > G_APART * g_ref:
                for m in (j - 1, j - 2):
                    if m < i + 2:
                        break
                    c = _rising_arc(bounce, h, t[i + 1:m + 1], z[i + 1:m + 1], g_ref)
                    miss = np.abs(np.polyval(c, t[i + 1:j + 1]) - z[i + 1:j + 1])
                    if (miss[:m - i] <= 1.5 * tol).all() and miss[m - i] > PAST_BOUNCE_TOLS * tol:
                        j = m
                        v, start, rises, az = float(-c[1] / (2 * c[0])), bounce, True, 2 * float(c[0])
                        arc, t_down = (lambda x, c=c: float(np.polyval(c, x))), _at_level(c, h, last=True)
                        break
        # the vertex's time is known to about 2 tol / (|a_z| · the flight's span) (a fitted parabola's
        # slope at its end is known to about two tolerances over its span): one nearer the start
        # than that is no apex (a body released from rest has its vertex at its start, and a located
        # one may put it a hair after)
        lead = 2 * tol / (abs(az) * (t[j] - start))
        # landing: the flight ends at a floor sample, or at a bounce after its last sample (before
        # the next-but-one: the sample after it may already be on the way up)
        lo, hi = (t[j - 1], t[j]) if floor[j] else (t[j], t[min(j + 2, n - 1)])
        lands = floor[j] or (j < n - 1 and t_down is not None and t_down <= hi + 1e-9)
        if (f.n >= 4 or (f.n == 3 and (rises or lands))) and start + lead < v < t[j] - 1e-6 \
                and _apex_shows(arc, v, start, rises, h, j, n, floor, t, tol):
            ev("projectile_apex", v)
        if lands:
            t_land = _clamp(t_down, lo, hi, t[j])
            ev("landing", t_land)
            landings.append(t_land)
            after = z[t > t_land + 1e-9]
            if after.size and after[:2].max() > h + tol:
                # it rises again: a rebound, unless the flight it starts lasts less than `span` (to its
                # own landing, or to the clip's end), which makes it and what follows residual bouncing
                nxt = flights[k_f + 1] if k_f + 1 < len(flights) else None
                t_next = t[-1]
                if nxt is not None and (floor[nxt.j] or nxt.j < n - 1):
                    t_next = min(_clamp(nxt.reaches(h, last=True), t_land, t[-1], t[-1]), t[-1])
                if t_next - t_land < span - 1e-9:
                    residual = t_land
                    continue
                ev("elastic_rebound", t_land)
            elif (rest := z[j + 1:] if floor[j] else after).size and (rest - h <= tol).all():
                # down at every sample after the landing's own: captured, whether it rolls on or not
                ev("settling", t_land)
    if residual is not None and n >= 2 and floor[-2:].all() and still[-1]:
        # the residual bouncing died out inside the clip: the body settles with its last landing
        ev("settling", residual)
    # breakaway / arrest: still ↔ moving, outside flights
    in_flight = np.zeros(n, bool)
    for f in flights:
        in_flight[f.i:f.j + 1] = True
    if n >= 3 and not still[0] and not in_flight[0] and t[0] <= 1e-9:
        # moving from the first interval: from rest at t = 0 when the distance grows as t²
        # (distance ∝ t^p: p = 2 from rest under a constant force, 1 for a body already moving, below
        # 1 on a curve); the midpoint 1.5 decides
        # and it slides along its support: in a straight line (a body released on a curved track
        # swings; that is not a breakaway)
        s1, s2 = np.linalg.norm(P[1] - P[0]), np.linalg.norm(P[2] - P[0])
        u = (P[2] - P[0]) / s2 if s2 > 0 else np.zeros(3)
        off_line = float(np.linalg.norm((P[1] - P[0]) - np.dot(P[1] - P[0], u) * u))
        if s1 > 0 and s2 > max(s1, 2 * tol) and np.log(s2 / s1) / np.log(t[2] / t[1]) >= 1.5 and off_line <= tol:
            ev("static_breakaway", t[0])
    # surface transition: off flight, the path turns at sample k into a straight stretch (the two
    # intervals after it on one line: the floor after a ramp, a ramp after the floor); a curved
    # track turns at every sample and has no straight stretch. Steps shorter than 5 tolerances are
    # left alone: their directions are not known to better than ~11°.
    moving = ~still
    for k in range(1, n - 2):
        if in_flight[k - 1:k + 3].any() or not moving[k - 1:k + 2].all():
            continue
        d = [P[m + 1] - P[m] for m in (k - 1, k, k + 1)]
        if min(float(np.linalg.norm(x)) for x in d) < 5 * tol:
            continue
        # (a turn of 90° or more is a reversal — a collision, a bounce off a wall — not a new surface)
        if KINK_DEG <= _angle(d[0], d[1]) < 90 and _angle(d[1], d[2]) < KINK_DEG / 2:
            ev("surface_transition", t[k])
    # a single still interval between two motions is no rest when they go opposite ways (a turning
    # point: a swing, a body rolling back), nor when it is too short to tell rest from motion (a body
    # at V_EPS covers less than the tolerance in it: two samples a frame apart on a slow body)
    turn = np.zeros(max(n - 1, 0), bool)
    for k in range(1, n - 2):
        if still[k] and not still[k - 1] and not still[k + 1]:
            turn[k] = (float(np.dot(P[k] - P[k - 1], P[k + 2] - P[k + 1])) < 0
                       or V_EPS * (t[k + 1] - t[k]) < tol)
    still = still & ~turn
    for k in range(1, n - 1):
        if still[k - 1] and not still[k] and not in_flight[k + 1]:
            if k + 2 < n:
                sb, sc = np.linalg.norm(P[k + 1] - P[k]), np.linalg.norm(P[k + 2] - P[k])
                ev("static_breakaway", _from_rest(t[k], t[k + 1], t[k + 2], sb, sc))
            else:
                ev("static_breakaway", t[k])
        # an arrest decelerates into the rest (friction); a body that stops dead from full speed is
        # a frozen answer, not an arrest
        # (from the first interval there is no earlier speed to compare: a body launched at t = 0
        # that comes to rest by the next sample)
        slowing = k < 2 or step[k - 1] / (t[k] - t[k - 1]) < step[k - 2] / (t[k - 1] - t[k - 2])
        if not still[k - 1] and still[k] and not in_flight[k - 1] and not in_flight[k] and slowing:
            # mirrored: distances to the rest position, decelerating to it
            sb = np.linalg.norm(P[k] - P[k - 1])
            sc = np.linalg.norm(P[k] - P[k - 2]) if k >= 2 else 2 * sb
            t_stop = -_from_rest(-t[k], -t[k - 1], -t[k - 2], sb, sc) if k >= 2 else t[k]
            ev("sliding_arrest", t_stop)
    return out


# ---------------------------------------------------------------------------------------------
# two bodies
# ---------------------------------------------------------------------------------------------
def _line_hit(ta: float, da: float, tb: float, db: float, level: float) -> float | None:
    """When the line through (ta, da), (tb, db) is at `level`."""
    if tb == ta or db == da:
        return None
    return ta + (level - da) * (tb - ta) / (db - da)


def _between(t: np.ndarray, d: np.ndarray, k: int, reach: float, tol: float) -> float | None:
    """The time of a collision inside the gap between samples k and k + 1 (neither in contact), or
    None: the approach line (samples k − 1, k, closing) and the retreat line (k + 1, k + 2, opening)
    must both reach the contact distance inside the gap — a line is extrapolated, and a body may
    speed up on the way in, so each hit may fall up to a gap outside and is clamped into it — at
    about one time (an impact is brief: within half the gap). At the clip's ends one line alone
    must hit strictly inside the gap."""
    n = t.size
    lo, hi = k, k + 1
    gap = t[hi] - t[lo]
    appr = (lo - 1, lo) if lo >= 1 and d[lo] < d[lo - 1] - tol else None
    retr = (hi, hi + 1) if hi + 1 < n and d[hi + 1] > d[hi] + tol else None
    if (appr is None and lo >= 1) or (retr is None and hi + 1 < n) or (appr is None and retr is None):
        return None
    hits = [_line_hit(t[p], d[p], t[q], d[q], reach) for p, q in (x for x in (appr, retr) if x is not None)]
    if any(x is None or not (t[lo] - gap <= x <= t[hi] + gap) for x in hits):
        return None
    if len(hits) == 1:
        return hits[0] if t[lo] < hits[0] < t[hi] else None
    hits = [_clamp(x, t[lo], t[hi], x) for x in hits]
    return float(np.mean(hits)) if max(hits) - min(hits) <= 0.5 * gap + 1e-9 else None


def _pair(oa: ObjectInfo, ob: ObjectInfo, t: np.ndarray, d: np.ndarray, tol: float) -> list[Transition]:
    out: list[Transition] = []
    n = t.size
    reach = contact_radius(oa) + contact_radius(ob)
    touch = d <= reach + tol
    pair = (oa.id, ob.id)
    ev = lambda typ, tt: out.append(Transition(typ, float(tt), pair))  # noqa: E731
    k = 0
    while k < n:
        if k >= 1 and touch[k] and not touch[k - 1]:
            # the contact run k … m
            m = k
            while m + 1 < n and touch[m + 1]:
                m += 1
            t_in = _line_hit(t[k - 2], d[k - 2], t[k - 1], d[k - 1], reach) if k >= 2 else None
            t_in = _clamp(t_in, t[k - 1], t[k], t[k])
            ev("contact_init", t_in)
            if m == n - 1 and m > k:
                ev("inelastic_capture", t_in)
            elif m < n - 1:
                t_out = _line_hit(t[m + 1], d[m + 1], t[m + 2], d[m + 2], reach) if m + 2 < n else None
                t_out = _clamp(t_out, t[m], t[m + 1], t[m])
                ev("elastic_rebound", t_in)
                ev("contact_break", t_out)
            k = m + 1
            continue
        if k < n - 1 and not touch[k] and not touch[k + 1]:
            # approach then retreat with no sample in contact: a collision between two samples
            t_c = _between(t, d, k, reach, tol)
            if t_c is not None:
                ev("contact_init", t_c)
                ev("elastic_rebound", t_c)
                ev("contact_break", t_c)
                k += 2
                continue
        k += 1
    return out


def detect_transitions(case: EvalCase, tracks: ObjectTracks) -> list[Transition]:
    t_all = np.asarray(tracks.times, float)
    if t_all.size < 3:
        return []
    out: list[Transition] = []
    objs = [o for o in case.objects if o.id in tracks.positions]
    tols: dict[str, float] = {}
    jitter = JITTER_FRAMES / case.gt_fps if case.gt_fps else 0.0
    span = RESOLVED_FRAMES / case.gt_fps if case.gt_fps else 0.0
    for o in objs:
        P = np.asarray(tracks.positions[o.id], float)
        ok = np.all(np.isfinite(P), axis=1)
        if ok.sum() < 3:
            continue
        tols[o.id] = position_tolerance(case, P[ok])
        out += _body(o, t_all[ok], P[ok], tols[o.id], jitter, span)
    for a in range(len(objs)):
        for b in range(a + 1, len(objs)):
            oa, ob = objs[a], objs[b]
            if oa.id not in tols or ob.id not in tols:
                continue
            pa, pb = np.asarray(tracks.positions[oa.id], float), np.asarray(tracks.positions[ob.id], float)
            ok = np.all(np.isfinite(pa), axis=1) & np.all(np.isfinite(pb), axis=1)
            if ok.sum() < 3:
                continue
            d = np.linalg.norm(pa[ok] - pb[ok], axis=1)
            out += _pair(oa, ob, t_all[ok], d, tols[oa.id] + tols[ob.id])
    # a struck body starts (and a body that catches another stops) at the contact, which is the
    # transition reported; one that takes off or lands is in flight, not sliding
    busy = [tr for tr in out if tr.type in ("contact_init", "contact_break", "landing", "free_fall_onset")]
    gap = float(np.max(np.diff(t_all))) if t_all.size > 1 else 0.0

    def beside(tr: Transition) -> bool:
        return any(tr.objects[0] in c.objects and abs(c.t - tr.t) <= gap + 1e-9 for c in busy)

    out = [tr for tr in out if tr.type not in ("static_breakaway", "sliding_arrest", "surface_transition")
           or not beside(tr)]
    return sorted(out, key=lambda tr: (tr.t, tr.type))
