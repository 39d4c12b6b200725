"""The APT chain request: which frames a model sees, at which times, and the one shared prompt.

A model gets `n_frames` frames spread evenly over the GT video (first and last included), each
preceded by a marker `[Frame i/N, t=<ms>ms]` giving its physical time, so that it answers in time,
not in frame numbers. The prompt lists the 14 transition types with a one-line definition each and
asks for a JSON array of `{"type", "t_ms", "objects"}` records in time order, nothing else.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..cases import EvalCase
from .taxonomy import APT_TYPES, DOMAIN_OF

PROMPT_VERSION = "orchard-apt-1"
DEFAULT_FRAMES = 16

DEFINITIONS = {
    "contact_init": "two bodies, or a body and a surface, that were apart touch (the gap closes)",
    "contact_break": "bodies that were touching separate (a gap opens)",
    "elastic_rebound": "a body that was approaching another body or a surface moves away from it after contact",
    "inelastic_capture": "after contact the bodies move on together or stop, instead of bouncing apart",
    "free_fall_onset": "a body loses its support (or is released) and starts to fall under gravity",
    "projectile_apex": "a body in flight stops rising and starts to descend",
    "landing": "a falling body comes down onto a surface that supports it",
    "static_breakaway": "a body at rest on a surface starts to slide (static friction is overcome)",
    "sliding_arrest": "a sliding body comes to rest through friction",
    "surface_transition": "a moving body passes from one supporting surface onto another",
    "rotation_onset": "a body that was not turning starts to rotate",
    "toppling": "a standing body loses its balance and starts to tip over",
    "rotation_arrest": "a rotating body stops turning",
    "settling": "the last residual motion (bouncing, wobbling) dies out and the body is at rest",
}
assert set(DEFINITIONS) == set(APT_TYPES)


@dataclass(frozen=True)
class FrameSample:
    index: int      # GT frame index
    t: float        # physical time, seconds

    @property
    def t_ms(self) -> int:
        return int(round(self.t * 1000.0))


def sample_frames(case: EvalCase, n_frames: int = DEFAULT_FRAMES) -> list[FrameSample]:
    """`n_frames` GT frames spread evenly over the video (first and last included, no repeats)."""
    n = case.n_gt_frames()
    if n <= 0:
        return []
    idx = range(n) if n <= n_frames else sorted({int(round(x)) for x in np.linspace(0, n - 1, n_frames)})
    return [FrameSample(int(i), float(i) / case.gt_fps) for i in idx]


def object_names(case: EvalCase) -> list[str]:
    """The names a reply may use for the bodies (the case's object ids) and the fixtures its events
    mention (ground, ramp, table, track …)."""
    names = [o.id for o in case.objects]
    for e in case.events or ():
        for o in e.objects:
            if o not in names:
                names.append(o)
    return names


def chain_prompt(case: EvalCase, frames: list[FrameSample]) -> str:
    """The text that comes before the frames (each frame then follows its own marker)."""
    duration_ms = int(round(case.physics_duration * 1000.0))
    lines = [
        "You are shown frames of one video of a simple mechanics scene, in time order.",
        f"There are {len(frames)} frames; the clip lasts {duration_ms} ms (native frame rate "
        f"{case.gt_fps:g} fps). Each frame is preceded by a marker [Frame i/{len(frames)}, t=<ms>ms] "
        "giving its time; valid times are 0 to " f"{duration_ms} ms.",
        "",
        "List every atomic physical transition you can see: a brief change of physical state of one "
        "body or between bodies. Use only these types:",
    ]
    for domain in ("contact", "gravity", "friction", "rotation"):
        for t in APT_TYPES:
            if DOMAIN_OF[t] == domain:
                lines.append(f"- {t} ({domain}): {DEFINITIONS[t]}")
    lines += [
        "",
        "Objects may be named: " + ", ".join(object_names(case)) + ".",
        "",
        'Answer with a JSON array only, in time order, one record per transition: '
        '{"type": "<one of the types above>", "t_ms": <integer milliseconds>, "objects": ["<name>", ...]}. '
        "Give the time at which the transition happens, which may lie between the frames shown. "
        "Several transitions may share one time. If you see none, answer [].",
    ]
    return "\n".join(lines)


def frame_marker(k: int, n: int, sample: FrameSample) -> str:
    return f"[Frame {k + 1}/{n}, t={sample.t_ms}ms]"
