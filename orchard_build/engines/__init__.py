"""Simulation and rendering engines behind small protocols (see `base.py`).

`get_backend("mujoco")` / `get_renderer("mujoco")` build a registered engine by name. Engine modules
are imported lazily so that importing this package never pulls in MuJoCo or OpenGL.
"""
from __future__ import annotations

import importlib

from .base import (BACKENDS, HIDE_OBJECTS, HIDE_SUPPORTS, PASSES, RENDERERS, ContactEvent, EngineRun, ObjectTrack,
                   RenderResult, Renderer, SimulationBackend, poses_from_trajectory, register_backend,
                   register_renderer)

# name -> module that registers it on import
_MODULES = {"mujoco": ".mujoco_backend", "isaac": ".isaac_backend"}


def _load(name: str) -> None:
    mod = _MODULES.get(name)
    if mod is not None:
        importlib.import_module(mod, __name__)


def get_backend(name: str = "mujoco", **kwargs) -> SimulationBackend:
    if name not in BACKENDS:
        _load(name)
    if name not in BACKENDS:
        raise KeyError(f"unknown simulation backend {name!r}; known: {', '.join(sorted(set(BACKENDS) | set(_MODULES)))}")
    return BACKENDS[name](**kwargs)


def get_renderer(name: str = "mujoco", **kwargs) -> Renderer:
    if name not in RENDERERS:
        _load(name)
    if name not in RENDERERS:
        raise KeyError(f"unknown renderer {name!r}; known: {', '.join(sorted(set(RENDERERS) | set(_MODULES)))}")
    return RENDERERS[name](**kwargs)


__all__ = ["BACKENDS", "RENDERERS", "PASSES", "HIDE_OBJECTS", "HIDE_SUPPORTS", "ContactEvent", "EngineRun",
           "ObjectTrack", "RenderResult", "Renderer", "SimulationBackend", "get_backend", "get_renderer",
           "poses_from_trajectory", "register_backend", "register_renderer"]
