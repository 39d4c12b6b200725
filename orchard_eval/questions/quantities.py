"""Scalar quantities a question compares to a threshold. Each is a function of tracks (times, world
positions and velocities per object) and the typed events, so one template serves every task: which
questions a case gets is decided by its data (objects, events), never by its task name."""
from __future__ import annotations

import math

import numpy as np

from ..cases import ObjectTracks


def _vec(tracks: ObjectTracks, which: str, obj: str, t: float) -> np.ndarray:
    arr = (tracks.positions if which == "pos" else tracks.velocities)[obj]
    return np.array([np.interp(t, tracks.times, arr[:, d]) for d in range(3)])


def speed(tracks, events, obj, t):
    return float(np.linalg.norm(_vec(tracks, "vel", obj, t)))


def height(tracks, events, obj, t):
    return float(_vec(tracks, "pos", obj, t)[2])


def displacement(tracks, events, obj, t0, t1):
    return float(np.linalg.norm(_vec(tracks, "pos", obj, t1) - _vec(tracks, "pos", obj, t0)))


def heading_cosine(tracks, events, obj, t0, t1):
    """Cosine between the velocity at t0 and at t1: below 0 means the body reversed direction."""
    a, b = _vec(tracks, "vel", obj, t0), _vec(tracks, "vel", obj, t1)
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 1e-9 and nb > 1e-9 else math.nan


def speed_gap(tracks, events, obj, other, t):
    return speed(tracks, events, obj, t) - speed(tracks, events, other, t)


def event_time(tracks, events, label, obj):
    """Time of the first event of type `label` involving `obj` (nan when there is none)."""
    for e in sorted(events or (), key=lambda e: e.t):
        if e.type == label and (not e.objects or obj in e.objects):
            return float(e.t)
    return math.nan


QUANTITIES = {"speed": speed, "height": height, "displacement": displacement,
              "heading_cosine": heading_cosine, "speed_gap": speed_gap, "event_time": event_time}


def evaluate(kind: str, args: dict, tracks: ObjectTracks, events) -> float:
    try:
        return float(QUANTITIES[kind](tracks, events, **args))
    except KeyError:
        return math.nan  # an object the measured tracks lack: undecidable, not a crash
