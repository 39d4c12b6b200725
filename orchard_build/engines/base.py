"""Engine protocols: a simulation backend turns a case into per-frame states; a renderer turns any
pose sequence (engine states or analytic playback) into image passes.

Backends and renderers register by name (``@register_backend("mujoco")``), so adding one (Isaac Sim,
Blender) is one new module imported in ``engines/__init__.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Mapping, Protocol, Sequence, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from ..config import CaseConfig

PASSES = ("rgb", "depth", "instance")
# Group aliases accepted by `hide` (they are not valid ids, so they never clash with one).
HIDE_OBJECTS = "*objects"  # every dynamic object
HIDE_SUPPORTS = "*supports"  # ground, ramps, tracks and platforms

Poses = Mapping[str, tuple[np.ndarray, np.ndarray]]  # id -> (positions (N,3), quaternions (N,4) wxyz)


@dataclass
class ObjectTrack:
    """States of one object at the recorded times; all world frame, quaternion (w, x, y, z) body → world."""
    position: np.ndarray  # (N, 3) centre of mass
    quaternion: np.ndarray  # (N, 4)
    linear_velocity: np.ndarray  # (N, 3)
    angular_velocity: np.ndarray  # (N, 3)


@dataclass(frozen=True)
class ContactEvent:
    t: float
    body_a: str  # object id, support id or "ground"; (a, b) sorted by name
    body_b: str
    kind: str  # "begin" | "end"


@dataclass
class EngineRun:
    engine: str
    times: np.ndarray  # (N,)
    states: dict[str, ObjectTrack]
    contacts: list[ContactEvent] = field(default_factory=list)
    info: dict = field(default_factory=dict)  # engine version, timestep, …

    def poses(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The pose sequence a Renderer takes."""
        return {k: (s.position, s.quaternion) for k, s in self.states.items()}


@dataclass
class RenderResult:
    """Frames of the requested passes; a pass that was not requested is None."""
    rgb: np.ndarray | None = None  # (N, H, W, 3) uint8
    depth: np.ndarray | None = None  # (N, H, W) float32, metres along the optical axis
    instance: np.ndarray | None = None  # (N, H, W) uint8/uint16, 0 = background, else ObjectSpec.instance_id
    info: dict = field(default_factory=dict)


@runtime_checkable
class SimulationBackend(Protocol):
    name: str

    def simulate(self, config: "CaseConfig", times: Sequence[float] | np.ndarray) -> EngineRun: ...


@runtime_checkable
class Renderer(Protocol):
    name: str

    def render(self, config: "CaseConfig", poses: Poses, passes: Iterable[str] = PASSES,
               hide: Iterable[str] = (), background: str | None = None) -> RenderResult: ...

    def close(self) -> None: ...


BACKENDS: dict[str, Callable[..., SimulationBackend]] = {}
RENDERERS: dict[str, Callable[..., Renderer]] = {}


def register_backend(name: str):
    def deco(factory):
        BACKENDS[name] = factory
        return factory
    return deco


def register_renderer(name: str):
    def deco(factory):
        RENDERERS[name] = factory
        return factory
    return deco


def poses_from_trajectory(trajectory, object_ids: Iterable[str], times: Sequence[float]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Pose sequence from any object with `.state(id, t)` (the analytic solver's trajectory)."""
    out = {}
    for oid in object_ids:
        states = [trajectory.state(oid, float(t)) for t in times]
        out[oid] = (np.array([s.position for s in states], float), np.array([s.quaternion for s in states], float))
    return out
