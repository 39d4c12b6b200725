"""Data types of the analytic ground truth: body states, typed events, law stages, law steps, trajectories."""
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

# Vocabulary of the law chain (`LawStep.law` → allowed `LawStep.variant`s). The formula bank is
# written against exactly these names.
LAW_VARIANTS: dict[str, tuple[str, ...]] = {
    "free_fall": ("drop", "thrown"),
    "projectile_motion": ("launch",),
    "inclined_plane": ("static", "slide", "roll", "roll_slip"),
    "circular_motion": ("roll", "slide"),
    "perfectly_elastic_collision": ("head_on", "oblique"),
    "perfectly_inelastic_collision": ("head_on", "oblique"),
    "inelastic_collision": ("head_on", "oblique"),
    "at_rest": ("surface", "ramp"),
    "uniform_linear_motion": ("slide", "roll"),
    "bounce": ("elastic", "inelastic"),
    "surface_friction": ("slide", "roll_slip"),
}

# Motion modes an object can be in (`Trajectory.mode`).
MODES = (
    "rest", "flight", "ramp_slide", "ramp_roll", "ramp_roll_slip",
    "surface_slide", "surface_roll", "surface_roll_slip", "track", "welded",
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
    """One interval in which no object changes its motion mode.

    `law` is the law of the most dynamic object in the interval (see `LAW_RANK`); it is a name of the
    `LAW_VARIANTS` vocabulary. `parameters` holds per-object `modes`, `laws` and law `inputs`.
    """
    index: int
    law: str
    t_start: float
    t_end: float
    objects: tuple[str, ...]
    parameters: dict[str, Any] = field(default_factory=dict)


# Dynamic rank used to name a stage after its most dynamic object (higher wins).
LAW_RANK = {
    "at_rest": 0, "uniform_linear_motion": 1, "surface_friction": 2, "inclined_plane": 3,
    "free_fall": 4, "projectile_motion": 5, "circular_motion": 6,
    "bounce": 7, "inelastic_collision": 8, "perfectly_inelastic_collision": 8, "perfectly_elastic_collision": 8,
}


@dataclass(frozen=True)
class LawStep:
    """One link of the chain of laws a case exercises; an instantaneous impact has t_start == t_end."""
    law: str
    variant: str
    objects: tuple[str, ...]
    t_start: float
    t_end: float
    parameters: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.law not in LAW_VARIANTS or self.variant not in LAW_VARIANTS[self.law]:
            raise ValueError(f"unknown law/variant {self.law!r}/{self.variant!r}")


class Trajectory(Protocol):
    """Full analytic state of every object at any t in [0, duration]."""
    duration: float
    object_ids: tuple[str, ...]
    events: tuple[Event, ...]
    stages: tuple[Stage, ...]

    def state(self, object_id: str, t: float) -> BodyState: ...

    def mode(self, object_id: str, t: float) -> str: ...
