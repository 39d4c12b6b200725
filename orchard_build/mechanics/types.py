"""Data types of the analytic ground truth: body states, typed events, law stages, trajectories."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

# APT labels (seed 002, Table 2) used for events.
APT_LABELS = (
    "contact_init", "contact_break", "elastic_rebound", "inelastic_capture",
    "free_fall_onset", "projectile_apex", "landing",
    "static_breakaway", "sliding_arrest", "surface_transition",
    "rotation_onset", "toppling", "rotation_arrest", "settling",
)


@dataclass(frozen=True)
class BodyState:
    position: np.ndarray  # centre of mass, world, m
    quaternion: np.ndarray  # (w, x, y, z), body → world
    linear_velocity: np.ndarray  # m/s, world
    angular_velocity: np.ndarray  # rad/s, world

    @property
    def speed(self) -> float:
        return float(np.linalg.norm(self.linear_velocity))


@dataclass(frozen=True)
class Event:
    t: float
    label: str  # one of APT_LABELS
    objects: tuple[str, ...]  # object ids, plus a support id ('ground', a ramp/track/platform id) where one is involved
    stage: int  # index of the stage that this event opens or closes
    detail: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.label not in APT_LABELS:
            raise ValueError(f"unknown APT label {self.label!r}")


@dataclass(frozen=True)
class Stage:
    """One interval governed by one law, e.g. sliding on a ramp, free flight, rolling on a track."""
    index: int
    law: str  # a task name of the taxonomy ('inclined_plane', 'projectile_motion', …) or 'collision'
    t_start: float
    t_end: float
    objects: tuple[str, ...]
    parameters: dict[str, Any] = field(default_factory=dict)  # law inputs, e.g. {"theta": …, "mu": …, "a": …}


class Trajectory(Protocol):
    """Full analytic state of every object at any t in [0, duration]."""
    duration: float
    object_ids: tuple[str, ...]
    events: tuple[Event, ...]
    stages: tuple[Stage, ...]

    def state(self, object_id: str, t: float) -> BodyState: ...

    def mode(self, object_id: str, t: float) -> str: ...
