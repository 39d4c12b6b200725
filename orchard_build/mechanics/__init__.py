"""Exact analytic ground truth: an event-driven hybrid solver over closed-form motion modes.

Public API: `solve(config) -> AnalyticTrajectory`, plus the data types of `types.py`.
"""
from .solver import BOUNCE_THRESHOLD, AnalyticTrajectory, collision_velocities, solve
from .types import APT_LABELS, LAW_VARIANTS, MODES, BodyState, Event, LawStep, Stage, Trajectory

__all__ = ["solve", "collision_velocities", "AnalyticTrajectory", "BOUNCE_THRESHOLD", "BodyState", "Event", "Stage", "LawStep",
           "Trajectory", "APT_LABELS", "LAW_VARIANTS", "MODES"]
