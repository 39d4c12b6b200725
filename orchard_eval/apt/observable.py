"""Which of a case's events a video of it shows: APT's admission rules applied to the analytic events.

`events.json` lists every state change of the analytic solution, down to bounces a few milliseconds
long. APT admits a transition only where the video shows it: its before and after regimes each
visible over a neighbourhood of frames, residual motion that dies out labelled `settling` rather
than split into its oscillations, nothing that only a hidden variable reveals (the APT paper, §3
and App. B). Scored against the full list, a perfect answer loses every bounce that happens between
two of its frames. The Deduction transition score therefore splits a case's events in two:

* **shown** — what a video at the case's frame rate and resolution shows: these are the truth an
  answer is scored on (missed, they count);
* **unsure** — real transitions a video may or may not show: an answer that reports one is not
  wrong (the prediction is excused, as a detection of a "difficult" object is in PASCAL VOC), one
  that does not is not wrong either.

An event is unsure when
* **residual bouncing** — it is a rebound off a support whose flight (to the body's next landing,
  or to the clip's end) lasts less than RESOLVED_FRAMES frame periods or rises less than SHOWN_PX
  pixels to its apex, or any later landing, rebound off a support or apex of that body: the
  bouncing no longer lasts the frames, or rises the pixels, a regime needs to be seen (the landing
  that begins it and the `settling` or `inelastic_capture` that ends it are shown). Where the
  bouncing turns residual inside the clip (a hop lands again before the clip's end) but the clip
  ends before it dies out, a `settling` at the landing that begins it is unsure too: the video
  shows a body that stays down, which APT labels settling, though events.json has no capture
  inside the clip;
* **a landing just after the clip** — a body that falls towards the support it last bounced off
  and is less than SHOWN_PX pixels above it at the clip's last frame is seen down there: a
  `landing` at that frame is unsure (events.json stops at the clip's end);
* **an apex too small to see** — a `projectile_apex` whose flight rises less than SHOWN_PX pixels to
  it (from the flight's start: a launch, a rebound, a roll-off) or falls less than that from it (to
  its landing, or to the clip's end): a body launched almost level, an apex a frame before the clip
  ends. A parabola fitted to the whole flight places such an apex, but no turn is seen (measured on
  the case's tracks at the body's distance from the camera; without tracks or a camera every apex
  is shown);
* **a turning point** — a `sliding_arrest` and a `static_breakaway` of one body less than
  RESOLVED_FRAMES frame periods apart: a reversal with no rest a video shows.

The rules read event times, the bodies, the frame rate and (for apexes) heights, so the same
function serves a case's own events, a counterfactual build's and a re-timed answer's
(`benchmarks/bench_transitions.py`). The detector (`detect.py`) follows them: a hop shorter than the
resolved span is residual bouncing, an apex is reported where its fitted parabola turns by at least
`detect.VISIBLE_PX`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from .taxonomy import Transition

RESOLVED_FRAMES = 2.0   # frame periods a regime must last to be seen as one (APT: a neighbourhood of three frames)
SHOWN_PX = 2.0          # pixels an apex's flight must rise to it and fall from it to be shown (the detector's PIX_TOL)
_EPS = 1e-9

# the height (m) of a body's centre at time t and how many pixels a metre spans at its distance; None
# where unknown
Heights = Callable[[str, float], "tuple[float, float] | None"]


@dataclass(frozen=True)
class Observable:
    shown: tuple[Transition, ...]    # the truth an answer is scored on
    unsure: tuple[Transition, ...]   # excused where reported, never required


def _on_support(tr: Transition, body: str, bodies: set[str]) -> bool:
    """The transition is the body's own against fixtures only (a floor, a ramp), not another body's."""
    return body in tr.objects and all(o == body or o not in bodies for o in tr.objects)


def observable_events(events: Iterable[Transition], body_ids: Sequence[str], fps: float, duration: float,
                      heights: Heights | None = None) -> Observable:
    """`events` split into what a video at `fps` frames per second, `duration` seconds long, shows and
    what it may not (the module's rules), each in time order."""
    ev = sorted(events, key=lambda e: e.t)
    if not fps or fps <= 0:
        return Observable(tuple(ev), ())
    span = RESOLVED_FRAMES / fps
    bodies = set(body_ids)
    unsure: set[int] = set()
    read_as: list[Transition] = []   # unsure readings a video allows that events.json does not list
    for b in sorted(bodies):
        mine = [(i, e) for i, e in enumerate(ev) if b in e.objects]
        for (i, e), (j, g) in zip(mine, mine[1:]):
            if e.type == "sliding_arrest" and g.type == "static_breakaway" and g.t - e.t < span - _EPS:
                unsure.update((i, j))
        turns = {} if heights is None else {i: _apex_turn(e, b, mine, bodies, duration, fps, heights)
                                             for i, e in mine if e.type == "projectile_apex"}
        unsure.update(i for i, (rise, fall) in turns.items() if min(rise, fall) < SHOWN_PX)
        for i, e in mine:
            if e.type != "elastic_rebound" or not _on_support(e, b, bodies):
                continue
            land = next((g.t for _, g in mine if g.type == "landing" and g.t > e.t + _EPS), duration)
            top = next((j for j, g in mine if g.type == "projectile_apex" and e.t < g.t < land), None)
            # a hop is judged by how long it lasts and how high it rises; a fall the clip's end cuts
            # short hides its apex only
            if land - e.t >= span - _EPS and (top is None or turns.get(top, (np.inf,))[0] >= SHOWN_PX):
                continue
            # a hop too short or too low to be seen: from here on the bouncing is residual
            unsure.add(i)
            unsure.update(j for j, g in mine if g.t > e.t + _EPS and (
                g.type == "projectile_apex"
                or (g.type in ("landing", "elastic_rebound") and _on_support(g, b, bodies))))
            if land < duration - _EPS and not any(
                    g.type in ("settling", "inelastic_capture") and g.t > e.t - _EPS for _, g in mine):
                # the bouncing turned residual inside the clip (not a hop the clip's end cuts short) and
                # the clip ends before it dies out: a video shows a body that stays down, which APT
                # labels settling — that reading, from where the bouncing turned residual
                read_as.append(Transition("settling", e.t, e.objects))
            break
        if heights is not None:
            read_as += _landing_at_the_end(b, mine, bodies, duration, fps, heights)
    return Observable(tuple(e for i, e in enumerate(ev) if i not in unsure),
                      tuple(sorted([e for i, e in enumerate(ev) if i in unsure] + read_as, key=lambda e: e.t)))


def _landing_at_the_end(b: str, mine, bodies: set[str], duration: float, fps: float, heights: Heights
                        ) -> list[Transition]:
    """A landing at the clip's last frame, unsure, where the body falls into it less than SHOWN_PX
    pixels above the support it last bounced off or landed on: the video's last frame shows it down,
    though it lands only after the clip (events.json stops at the clip's end)."""
    contact = [g for _, g in mine if g.type in ("landing", "elastic_rebound") and _on_support(g, b, bodies)]
    if not contact or any(g.type in ("settling", "inelastic_capture") for _, g in mine):
        return []
    last = contact[-1]
    if last.type == "landing" and not any(g.type == "elastic_rebound" and abs(g.t - last.t) <= _EPS for g in contact):
        return []   # it is down already
    end = np.floor(duration * fps + 1e-6) / fps
    floor, here, before = heights(b, last.t), heights(b, end), heights(b, end - 1.0 / fps)
    if floor is None or here is None or before is None or end - last.t < 1.0 / fps:
        return []
    if here[0] < before[0] and (here[0] - floor[0]) * here[1] < SHOWN_PX:
        return [Transition("landing", float(end), last.objects)]
    return []


def _apex_turn(e: Transition, b: str, mine, bodies: set[str], duration: float, fps: float, heights: Heights
               ) -> tuple[float, float]:
    """How many pixels the apex's flight rises to it from the flight's start and falls from it to its
    landing (or the clip's end), read at the frames: the top from the parabola through the flight's
    frames (a straight line between two frames cuts it short), a start or landing between frames at
    the lower of the two frames around it; (inf, inf) where a height is unknown."""
    start = max((g.t for _, g in mine if g.t <= e.t + _EPS and (
        g.type == "free_fall_onset" or (g.type == "elastic_rebound" and _on_support(g, b, bodies)))), default=0.0)
    end = min(min((g.t for _, g in mine if g.type == "landing" and g.t > e.t + _EPS), default=duration), duration)
    last = int(np.floor(duration * fps + 1e-6))
    inside = [k / fps for k in range(int(np.ceil(start * fps - 1e-6)), int(np.floor(end * fps + 1e-6)) + 1)
              if 0 <= k <= last and start - _EPS <= k / fps <= end + _EPS]
    here = heights(b, e.t)
    zs = [heights(b, x) for x in inside]
    if here is None or any(z is None for z in zs):
        return np.inf, np.inf
    top = here[0]
    if len(inside) >= 3:
        c = np.polyfit(np.asarray(inside) - e.t, [z[0] for z in zs], 2)
        if c[0] < 0:
            top = max(top, float(c[2]))

    def lowest(t: float) -> float | None:
        around = [heights(b, x) for x in {np.floor(t * fps + 1e-6) / fps, min(np.ceil(t * fps - 1e-6), last) / fps}]
        return None if any(z is None for z in around) else min(z[0] for z in around)

    low, high = lowest(start), lowest(end)
    if low is None or high is None:
        return np.inf, np.inf
    return (top - low) * here[1], (top - high) * here[1]


def track_heights(tracks, intrinsic, extrinsic) -> Heights | None:
    """`Heights` from object tracks (world frame, z up) and a camera; None without them."""
    if tracks is None or intrinsic is None or extrinsic is None:
        return None
    E = np.asarray(extrinsic, float)
    fy = float(np.asarray(intrinsic, float)[1, 1])
    ts = np.asarray(tracks.times, float)

    def heights(body: str, t: float):
        if body not in tracks.positions or ts.size < 2:
            return None
        P = np.asarray(tracks.positions[body], float)
        X = np.array([np.interp(t, ts, P[:, d]) for d in range(3)])
        depth = float(E[2, :3] @ X + E[2, 3])
        if not np.all(np.isfinite(X)) or depth <= 0:
            return None
        return float(X[2]), fy / depth
    return heights


def case_observable(case) -> Observable | None:
    """The case's events.json transitions split for a video at its own frame rate; None without events.json."""
    if case.events is None:
        return None
    return observable_events(case.events, [o.id for o in case.objects], case.gt_fps, case.physics_duration,
                             track_heights(case.object_tracks(), case.intrinsic, case.extrinsic))


def shown_events(case) -> tuple:
    """The case's events a video of it shows (its `case_observable` shown side); () without events.json."""
    ob = case_observable(case)
    return () if ob is None else tuple(ob.shown)
