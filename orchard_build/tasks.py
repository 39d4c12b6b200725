"""The Apple-π task taxonomy: CLI names, PascalCase names, pillars and law levels."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TaskInfo:
    name: str  # snake_case, used on the command line and in configs
    pascal: str  # PascalCase, used in case ids
    pillar: str  # LawPillar as in published case ids
    pillar_short: str  # column name in the paper's tables
    law_level: str  # "single" or "multi"


_TASKS = (
    TaskInfo("free_fall", "FreeFall", "UniversalGravitation", "Grav.", "single"),
    TaskInfo("projectile_motion", "ProjectileMotion", "UniversalGravitation", "Grav.", "single"),
    TaskInfo("inclined_plane", "InclinedPlane", "UniversalGravitation", "Grav.", "single"),
    TaskInfo("circular_motion", "CircularMotion", "UniversalGravitation", "Grav.", "single"),
    TaskInfo("perfectly_elastic_collision", "PerfectlyElasticCollision", "ConservationOfMomentum", "Mom.", "single"),
    TaskInfo("perfectly_inelastic_collision", "PerfectlyInelasticCollision", "ConservationOfMomentum", "Mom.", "single"),
    TaskInfo("inelastic_collision", "InelasticCollision", "ConservationOfMomentum", "Mom.", "single"),
    TaskInfo("at_rest", "AtRest", "NewtonsFirstLaw", "N1", "single"),
    TaskInfo("uniform_linear_motion", "UniformLinearMotion", "NewtonsFirstLaw", "N1", "single"),
    TaskInfo("composition", "Composition", "MultiLaw", "Multi", "multi"),
)

TASKS: dict[str, TaskInfo] = {t.name: t for t in _TASKS}
TASK_NAMES: tuple[str, ...] = tuple(TASKS)
BY_PASCAL: dict[str, TaskInfo] = {t.pascal: t for t in _TASKS}


def task_info(name: str) -> TaskInfo:
    """Look a task up by its snake_case or PascalCase name."""
    if name in TASKS:
        return TASKS[name]
    if name in BY_PASCAL:
        return BY_PASCAL[name]
    raise KeyError(f"unknown task {name!r}; expected one of: {', '.join(TASK_NAMES)}")


def case_id(task: str, number: int) -> str:
    """Published case-id convention: <LawPillar>/<Task>/<six digits>."""
    info = task_info(task)
    if not 0 <= number <= 999_999:
        raise ValueError(f"case number {number} does not fit six digits")
    return f"{info.pillar}/{info.pascal}/{number:06d}"
