"""The JSON/text artifacts of a case, computed from a resolved config and its analytic trajectory.

Each function returns a plain dict that validates against its schema in `schemas/`; writing is the
build module's job.
"""
from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import numpy as np

from .config import CaseConfig
from .io import canonical
from .mechanics.types import Trajectory

REST_SPEED = 0.005  # m/s: below this the label reads "v = 0" (it would print as 0.00) and no arrow is drawn
EVENT_MERGE = 1e-6  # s: timestamps closer than this are one timestamp


def frame_of(t: float, fps: float) -> int:
    return int(math.floor(t * fps + 0.5))


def speed_label(speed: float) -> str:
    return "v = 0" if speed < REST_SPEED else f"v = {speed:.2f}"


def timestamp_grid(T: float, fps: float, tstar: float, events: list[tuple[float, str]],
                   grid_points: int = 4) -> dict[str, Any]:
    """timestamps.json: a uniform grid over (0, T], t*, and every event time in (0, T], merged when
    closer than EVENT_MERGE. Frames come from the stored (canonical) times, so a reader recomputing
    them always agrees."""
    kinds: dict[float, list[str]] = {}

    def add(t: float, kind: str) -> None:
        for known in kinds:
            if abs(known - t) <= EVENT_MERGE:
                if kind not in kinds[known]:
                    kinds[known].append(kind)
                return
        kinds[t] = [kind]

    for k in range(1, grid_points + 1):
        add(T * k / grid_points, "grid")
    add(tstar, "target")
    for t, label in events:
        if EVENT_MERGE < t <= T + 1e-12:
            add(min(t, T), f"event:{label}")
    entries = [{"t": canonical(t), "frame": max(1, frame_of(canonical(t), fps)), "kinds": kinds[t]}
               for t in sorted(kinds)]
    return {"fps": fps, "physics_duration": T, "target_time": tstar,
            "timestamps": [e["t"] for e in entries], "entries": entries}


def timestamps_doc(cfg: CaseConfig, traj: Trajectory) -> dict[str, Any]:
    return timestamp_grid(cfg.timing.duration, cfg.timing.fps, cfg.timing.target_time,
                          [(e.t, e.label) for e in traj.events], cfg.timing.grid_points)


def velocity_doc(cfg: CaseConfig, traj: Trajectory) -> dict[str, Any]:
    t = cfg.timing.target_time
    cam = cfg.camera
    objects = []
    for o in cfg.objects:
        s = traj.state(o.id, t)
        uv, depth = cam.project(s.position)
        speed = canonical(s.speed)  # the label is printed from the stored value (0.665 → "0.67" both ways)
        moving = speed >= REST_SPEED
        arrow = cam.project_direction(s.position, s.linear_velocity) if moving else None
        objects.append({
            "id": o.id, "instance_id": o.instance_id,
            "center_world": s.position, "quaternion_wxyz": s.quaternion,
            "center_image": uv, "depth": float(depth),
            "in_frame": bool(0 <= uv[0] < cam.width and 0 <= uv[1] < cam.height and depth > 0),
            "velocity_world": s.linear_velocity, "angular_velocity_world": s.angular_velocity,
            "speed": speed, "label": speed_label(speed), "moving": moving,
            "arrow_direction_image": None if arrow is None or not np.any(arrow) else arrow,
            "mode": traj.mode(o.id, t),
        })
    return {"target_time": t, "frame": max(1, frame_of(canonical(t), cfg.timing.fps)), "source": "analytic",
            "speed_decimals": 2, "objects": objects}


def events_doc(cfg: CaseConfig, traj: Trajectory) -> dict[str, Any]:
    fps = cfg.timing.fps
    return {
        "physics_duration": cfg.timing.duration,
        "events": [{"t": e.t, "frame": frame_of(canonical(e.t), fps), "label": e.label, "objects": list(e.objects),
                    "stage": e.stage, "detail": dict(e.detail)} for e in traj.events],
        "stages": [{"index": s.index, "law": s.law, "t_start": s.t_start, "t_end": s.t_end,
                    "objects": list(s.objects), "parameters": dict(s.parameters)} for s in traj.stages],
        "law_steps": [{"law": s.law, "variant": s.variant, "objects": list(s.objects), "t_start": s.t_start,
                       "t_end": s.t_end, "parameters": dict(s.parameters)} for s in traj.law_steps()],
    }


def resolved_sha256(cfg: CaseConfig) -> str:
    text = json.dumps(canonical(cfg.to_resolved_dict()), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def case_doc(cfg: CaseConfig, artifacts: dict[str, str], provenance: dict[str, Any],
             source: str = "simulated") -> dict[str, Any]:
    resolved = cfg.to_resolved_dict()
    objects = []
    for o, r in zip(cfg.objects, resolved["objects"]):
        support_mat = cfg.support_material(o.support) if o.support else cfg.ground_material
        objects.append({
            "id": o.id, "instance_id": o.instance_id, "shape": o.shape, "size": dict(o.primitive.size),
            "material": o.material, "density": o.density, "volume": o.primitive.volume, "mass": o.mass,
            "inertia_diagonal": o.inertia, "rest_pose": o.rest_pose, "placement": o.placement,
            "support": o.support, "restitution": cfg.materials.pair(o.material, support_mat).restitution,
            "annotate": list(o.annotate),
        })
    return {
        "schema_version": 1,
        "case_id": cfg.case_id,
        "source": source,
        "pillar": cfg.task.pillar,
        "task": cfg.task.name,
        "task_pascal": cfg.task.pascal,
        "law_level": cfg.task.law_level,
        "description": cfg.description,
        "seed": cfg.seed,
        "gt_fps": cfg.timing.fps,
        "n_frames": cfg.timing.n_frames,
        "frame_size": {"width": cfg.camera.width, "height": cfg.camera.height},
        "physics_duration": cfg.timing.duration,
        "target_time": cfg.timing.target_time,
        "environment": {"g": cfg.g, "gravity": cfg.gravity, "body": cfg.world_name,
                        "ground_material": cfg.ground_material},
        "objects": objects,
        "supports": {"ramps": resolved["ramps"], "tracks": resolved["tracks"], "platforms": resolved["platforms"]},
        "camera": resolved["camera"],
        "config": {"file": "config.yaml", "sha256": cfg.config_sha256, "materials_sha256": cfg.materials_sha256,
                   "resolved_sha256": resolved_sha256(cfg)},
        "provenance": provenance,
        "artifacts": dict(sorted(artifacts.items())),
    }
