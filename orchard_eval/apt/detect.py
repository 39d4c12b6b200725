"""Transitions detected from object tracks (world-frame centre positions, z up), for the Deduction
transition score. General rules with thresholds from physics, geometry and the frame rate:

* gravity — `projectile_apex`: the vertical velocity changes sign + → − (hysteresis: beyond
  V_EPS on both sides); `free_fall_onset`: the body is in flight (downward acceleration ≥ A_MIN, no horizontal
  acceleration) while the body is clear of the floor and was not already falling; `landing` (+ `elastic_rebound`
  when it leaves again upward): a descending body reaches the floor, i.e. its centre height ≤ its
  vertical half-extent + a tolerance of one frame's travel.
* contact between two bodies — `contact_init` / `contact_break`: the centre separation crosses the
  sum of their radii/half-extents + tolerance; `elastic_rebound`: the separation rate turns from
  approach to retreat during a contact; `inelastic_capture`: they stay in contact with relative speed
  below V_EPS.
* friction — `static_breakaway` / `sliding_arrest`: speed crosses V_EPS upward / downward.

Fixtures (the floor, ramps, tables, tracks) are not tracked; detected transitions name the bodies
only, and the score compares chains on their body ids (see `bodies_only`).
"""
from __future__ import annotations

import numpy as np

from ..cases import EvalCase, ObjectInfo, ObjectTracks
from .taxonomy import Transition

A_MIN = 1.0   # m/s²: the weakest gravity a case uses is well above this (Moon 1.62)
V_EPS = 0.05   # m/s: below this a body counts as at rest (a few pixels per second at the usual scale)


def half_extent(o: ObjectInfo) -> float:
    """Vertical half-extent of a body at rest in its usual pose (metres); 0 when unknown."""
    s = dict(o.size)
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


def _crossings(flag: np.ndarray) -> tuple[list[int], list[int]]:
    """Indices where a boolean sequence turns on / off."""
    f = flag.astype(int)
    d = np.diff(f)
    return list(np.nonzero(d == 1)[0] + 1), list(np.nonzero(d == -1)[0] + 1)


def detect_transitions(case: EvalCase, tracks: ObjectTracks) -> list[Transition]:
    t = np.asarray(tracks.times, float)
    if t.size < 3:
        return []
    dt = float(np.median(np.diff(t)))
    out: list[Transition] = []
    objs = [o for o in case.objects if o.id in tracks.positions]
    for o in objs:
        p = np.asarray(tracks.positions[o.id], float)
        v = np.asarray(tracks.velocities[o.id], float)
        if not np.isfinite(p).any():
            continue
        z, vz = p[:, 2], v[:, 2]
        speed = np.linalg.norm(v, axis=1)
        h = half_extent(o)
        floor = z - h <= 1.5 * np.abs(vz) * dt + 0.005
        az = np.gradient(vz, t)
        # ballistic: vertical acceleration ≈ −g and clear of the floor (a body on a circle or a
        # string changes vertical direction too, but not under gravity alone)
        # the case's g is not exposed by the readers (cases on other planets exist): flight is a
        # downward acceleration of at least A_MIN with no horizontal acceleration beside it
        ah = np.linalg.norm(np.stack([np.gradient(v[:, k], t) for k in (0, 1)], axis=1), axis=1)
        ballistic = (az < -A_MIN) & (ah < 0.2 * np.abs(az)) & ~floor
        near = lambda i: bool(ballistic[max(0, i - 2):i + 2].any())  # noqa: E731
        # flight that lasts: ballistic on every frame of i−2…i+2 (the top of a circle is briefly
        # "ballistic" too, but the horizontal acceleration grows back within a frame or two)
        held = lambda i: bool(ballistic[max(0, i - 2):i + 3].all())  # noqa: E731
        # apex: + → − with hysteresis, while ballistic
        state = 0
        for i in range(t.size):
            if vz[i] > V_EPS:
                state = 1
            elif vz[i] < -V_EPS:
                if state == 1:
                    j = i - 1 if abs(vz[i - 1]) < abs(vz[i]) else i
                    if held(j):
                        out.append(Transition("projectile_apex", float(t[j]), (o.id,)))
                state = -1
        # landing at the floor after ballistic flight; rebound if it leaves upward afterwards
        for i in range(1, t.size):
            if floor[i] and not floor[i - 1] and vz[i - 1] < -V_EPS and near(i - 1):
                out.append(Transition("landing", float(t[i]), (o.id,)))
                after = vz[i:min(t.size, i + 3)]
                if after.size and after.max() > V_EPS:
                    out.append(Transition("elastic_rebound", float(t[i]), (o.id,)))
        # free-fall onset: ballistic from the start, or after the body was at rest (a rebound's
        # flight is not an onset: the body was never supported in between)
        rest = speed <= V_EPS
        if ballistic[:3].any():
            out.append(Transition("free_fall_onset", float(t[0]), (o.id,)))
        on, _ = _crossings(ballistic)
        for i in on:
            if i >= 3 and rest[max(0, i - 3):i].any():
                out.append(Transition("free_fall_onset", float(t[i]), (o.id,)))
        # breakaway / arrest: speed crosses V_EPS while not in flight
        moving = speed > V_EPS
        on, off = _crossings(moving)
        for i in on:
            if not near(i):
                out.append(Transition("static_breakaway", float(t[i - 1]), (o.id,)))
        for i in off:
            if not near(i):
                out.append(Transition("sliding_arrest", float(t[i]), (o.id,)))
    for a in range(len(objs)):
        for b in range(a + 1, len(objs)):
            oa, ob = objs[a], objs[b]
            pa, pb = np.asarray(tracks.positions[oa.id]), np.asarray(tracks.positions[ob.id])
            va, vb = np.asarray(tracks.velocities[oa.id]), np.asarray(tracks.velocities[ob.id])
            d = np.linalg.norm(pa - pb, axis=1)
            rel = np.linalg.norm(va - vb, axis=1)
            reach = contact_radius(oa) + contact_radius(ob)
            touch = d <= reach + np.maximum(0.005, rel * dt)
            on, off = _crossings(touch)
            pair = (oa.id, ob.id)
            for i in on:
                out.append(Transition("contact_init", float(t[i]), pair))
                before = rel[max(0, i - 2):i + 1].max()
                after = rel[min(t.size - 1, i + 1):min(t.size, i + 4)]
                rate = np.gradient(d, t)
                if after.size and after.max() < max(2 * V_EPS, 0.2 * before) and touch[i:].all():
                    out.append(Transition("inelastic_capture", float(t[i]), pair))
                elif rate[i:min(t.size, i + 3)].max() > V_EPS or (i in [k - 1 for k in off]):
                    out.append(Transition("elastic_rebound", float(t[i]), pair))
            for i in off:
                out.append(Transition("contact_break", float(t[i]), pair))
    contacts = [tr for tr in out if tr.type == "contact_init"]
    out = [tr for tr in out if tr.type not in ("static_breakaway", "sliding_arrest")
           or not any(tr.objects[0] in c.objects and abs(c.t - tr.t) <= 3 * dt for c in contacts)]
    return sorted(out, key=lambda tr: tr.t)
