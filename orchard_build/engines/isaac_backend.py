"""NVIDIA Isaac Sim simulation backend and renderer (registered as ``isaac``).

Both read the stage that :mod:`.usd_stage` authors from the resolved config, so physics, geometry,
materials and camera are the same description the CPU tests check value by value.

* :class:`IsaacBackend` — ``simulate(config, times)``: PhysX on the CPU (deterministic dynamics, enhanced
  determinism, fixed ``dt = 1 / steps_per_second``, a whole fraction of the frame period), stepping exactly
  to every requested time (they must lie on the step grid, which every frame time does), recording each
  object's COM position, (w, x, y, z) orientation, world linear velocity and world angular velocity (rad/s),
  and contact begin/end events between entities from PhysX contact reports.
* :class:`IsaacRenderer` — ``render(config, poses, passes, hide, background)``: RTX through a Replicator
  render product at the config resolution on ``/World/Camera``, with the annotators ``rgb``,
  ``instance_id_segmentation`` (prim paths mapped to ``ObjectSpec.instance_id``, 0 = background) and
  ``distance_to_camera`` (converted to depth along the optical axis, background = the far clip, like the
  MuJoCo renderer). Poses are written into the stage's xform ops with the timeline stopped.

Two API generations are supported and chosen at run time (``ORCHARD_ISAAC_API=5|6`` overrides):
Isaac Sim 5.x (Python 3.11: ``isaacsim.core.api.World`` + ``isaacsim.core.prims.RigidPrim``) and 6.x (Python
3.12: ``isaacsim.core.simulation_manager.SimulationManager`` + ``isaacsim.core.experimental.prims.RigidPrim``).
A ``SimulationApp`` (headless) is started once per process, before any other Omniverse import.

Everything that converts data (quaternion layout and continuity, degrees ↔ radians, step grid, ray distance →
optical-axis depth, segmentation ids → instance ids, contact bookkeeping) is a pure function here, tested
without Isaac Sim. Without ``isaacsim`` importable, constructing either class raises
:class:`IsaacUnavailableError` with install instructions.
"""
from __future__ import annotations

import atexit
import importlib.util
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import OrchardError
from .base import (HIDE_OBJECTS, HIDE_SUPPORTS, PASSES, ContactEvent, EngineRun, ObjectTrack, Poses, RenderResult,
                   register_backend, register_renderer)

SUPPORTED_PYTHON = {5: (3, 11), 6: (3, 12)}
INSTALL = {
    5: 'pip install "isaacsim[all,extscache]==5.1.0" --extra-index-url https://pypi.nvidia.com  (Python 3.11)',
    6: 'pip install "isaacsim[all,extscache]==6.2.0.0"  (Python 3.12)',
}
RT_SUBFRAMES = 8  # RTX sub-frames rendered per captured frame, so a moved object leaves no trail
FAR_DEPTH = 200.0  # m: depth reported for background pixels (the MuJoCo renderer's far plane)


class IsaacUnavailableError(OrchardError):
    """Isaac Sim (or what it needs) is not installed in this Python environment."""


# ---------------------------------------------------------------------------------------------
# Availability
# ---------------------------------------------------------------------------------------------
def _isaacsim_version() -> str | None:
    try:
        from importlib.metadata import version

        return version("isaacsim")
    except Exception:
        return None


def isaac_status() -> dict[str, Any]:
    """What is present: {available, generation, version, python, missing: [...], message}."""
    py = sys.version_info[:2]
    missing = []
    if importlib.util.find_spec("isaacsim") is None:
        missing.append("the `isaacsim` package (NVIDIA Isaac Sim)")
    if importlib.util.find_spec("pxr") is None:
        missing.append("OpenUSD's Python bindings `pxr` (usd-core, or the copy Isaac Sim ships)")
    ver = _isaacsim_version()
    forced = os.environ.get("ORCHARD_ISAAC_API")
    if forced in ("5", "6"):
        gen = int(forced)
    elif ver and ver.split(".")[0] in ("5", "6"):
        gen = int(ver.split(".")[0])
    else:
        gen = 6 if py >= (3, 12) else 5
    if py not in SUPPORTED_PYTHON.values():
        missing.append(f"a supported Python (Isaac Sim 5.x needs 3.11, 6.x needs 3.12; this is {py[0]}.{py[1]})")
    if missing:
        message = ("the Isaac Sim backend needs " + "; ".join(missing) + ". Install on a Linux machine with an "
                   "NVIDIA RTX GPU (rendering needs RT cores):\n  " + INSTALL[6] + "\n  or " + INSTALL[5]
                   + '\nand the stage writer: pip install -e ".[isaac]". See docs/isaac-sim.md.')
    else:
        message = f"Isaac Sim {ver or '?'} (API generation {gen}.x) on Python {py[0]}.{py[1]}"
    return {"available": not missing, "generation": gen, "version": ver, "python": f"{py[0]}.{py[1]}",
            "missing": missing, "message": message}


def require_isaac() -> dict[str, Any]:
    status = isaac_status()
    if not status["available"]:
        raise IsaacUnavailableError(status["message"])
    return status


# ---------------------------------------------------------------------------------------------
# Pure conversions (tested without Isaac Sim)
# ---------------------------------------------------------------------------------------------
def quat_xyzw_to_wxyz(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, float)
    return q[..., [3, 0, 1, 2]]


def continuous_quaternions(q: np.ndarray, reference: np.ndarray | None = None) -> np.ndarray:
    """Unit (w, x, y, z) quaternions (N, 4) with signs chosen so that consecutive ones (and the first and
    `reference`) have a non-negative dot product: the same rotations, no sign jumps."""
    q = np.array(q, float)
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    prev = None if reference is None else np.asarray(reference, float)
    for i in range(len(q)):
        if prev is not None and float(np.dot(q[i], prev)) < 0:
            q[i] = -q[i]
        prev = q[i]
    return q


def deg_to_rad(v: np.ndarray) -> np.ndarray:
    return np.radians(np.asarray(v, float))


def step_indices(times: Sequence[float] | np.ndarray, rate: int, tol: float = 1e-6) -> np.ndarray:
    """Physics step index of each time at `rate` steps per second; every time must lie on the step grid."""
    times = np.asarray(times, float)
    if times.ndim != 1 or (times.size and (times.min() < 0 or np.any(np.diff(times) < 0))):
        raise ValueError("times must be a non-decreasing 1-D sequence of non-negative seconds")
    k = times * rate
    r = np.round(k)
    off = np.abs(k - r) > tol
    if np.any(off):
        bad = times[off][0]
        raise ValueError(f"time {bad!r} s is not on the physics step grid (1/{rate} s); the Isaac backend samples "
                         "frame times, which always are")
    return r.astype(np.int64)


def distance_to_depth(distance: np.ndarray, camera, far: float = FAR_DEPTH) -> np.ndarray:
    """Replicator's ``distance_to_camera`` (metres from the camera centre along each pixel's ray, sampled at the
    pixel centre) → depth along the optical axis (our convention); background (inf, NaN, ≤ 0) → `far`."""
    d = np.asarray(distance, np.float64)
    if d.ndim == 3:
        d = d[..., 0]
    h, w = d.shape
    f = camera.fy
    cx, cy = camera.width / 2.0, camera.height / 2.0
    sx, sy = camera.width / w, camera.height / h  # a render at another size keeps the same field of view
    u = (np.arange(w) + 0.5) * sx
    v = (np.arange(h) + 0.5) * sy
    xn = (u - cx) / f
    yn = (v - cy) / f
    ray = np.sqrt(1.0 + xn[None, :] ** 2 + yn[:, None] ** 2)
    z = d / ray
    z[~np.isfinite(z) | (d <= 0)] = far
    return z.astype(np.float32)


def instance_lookup(id_to_labels: dict, object_paths: dict[str, str], instance_ids: dict[str, int]) -> dict[int, int]:
    """Segmentation id → instance id, from Replicator's ``idToLabels`` (id → prim path): a path at or below
    an object's rigid-body prim belongs to that object; anything else is background (0)."""
    out = {}
    roots = sorted(((p, instance_ids[oid]) for oid, p in object_paths.items()), key=lambda x: -len(x[0]))
    for key, label in id_to_labels.items():
        path = label if isinstance(label, str) else (label.get("path") or label.get("class") or "") \
            if isinstance(label, dict) else str(label)
        for root, inst in roots:
            if path == root or path.startswith(root + "/"):
                out[int(key)] = inst
                break
    return out


def instance_mask(ids: np.ndarray, lookup: dict[int, int], max_instance: int) -> np.ndarray:
    """(H, W) segmentation ids → instance mask (uint8, or uint16 beyond 255 objects)."""
    ids = np.asarray(ids)
    if ids.ndim == 3:
        ids = ids[..., 0]
    dtype = np.uint8 if max_instance < 256 else np.uint16
    out = np.zeros(ids.shape, dtype)
    for sid, inst in lookup.items():
        out[ids == sid] = inst
    return out


def rgba_to_rgb(rgba: np.ndarray) -> np.ndarray:
    a = np.asarray(rgba)
    if a.dtype != np.uint8:
        a = np.clip(np.round(a * 255.0 if a.max(initial=0) <= 1.0 else a), 0, 255).astype(np.uint8)
    return np.ascontiguousarray(a[..., :3])


class ContactLog:
    """Entity-level contact begin/end events from PhysX's per-collider-pair FOUND/LOST reports: an entity pair
    touches while any of its collider pairs does."""

    def __init__(self):
        self.active: dict[tuple[str, str], set] = {}
        self.events: list[ContactEvent] = []

    def update(self, t: float, kind: str, entity_a: str, entity_b: str, collider_pair: Any) -> None:
        if entity_a is None or entity_b is None or entity_a == entity_b:
            return
        pair = (entity_a, entity_b) if entity_a <= entity_b else (entity_b, entity_a)
        live = self.active.setdefault(pair, set())
        if kind == "found":
            if not live:
                self.events.append(ContactEvent(float(t), pair[0], pair[1], "begin"))
            live.add(collider_pair)
        elif kind == "lost" and collider_pair in live:
            live.discard(collider_pair)
            if not live:
                self.events.append(ContactEvent(float(t), pair[0], pair[1], "end"))

    def finish(self) -> list[ContactEvent]:
        return sorted(self.events, key=lambda e: (e.t, e.body_a, e.body_b, e.kind))


def contact_kind(event_type: Any) -> str | None:
    """'found' / 'lost' / None (persist) from a ContactEventType of either omni.physx or omni.physics.core."""
    name = getattr(event_type, "name", None) or str(event_type)
    if name.endswith("CONTACT_FOUND"):
        return "found"
    if name.endswith("CONTACT_LOST"):
        return "lost"
    return None


def hidden_paths(scene, hide: Iterable[str]) -> list[str]:
    """Prim paths to make invisible for a `hide` list (ids, HIDE_OBJECTS, HIDE_SUPPORTS)."""
    hide = set(hide)
    known = set(scene.object_paths) | set(scene.support_paths)
    unknown = {h for h in hide if h not in (HIDE_OBJECTS, HIDE_SUPPORTS)} - known
    if unknown:
        raise ValueError(f"cannot hide unknown ids {sorted(unknown)}")
    out = []
    for oid, p in scene.object_paths.items():
        if oid in hide or HIDE_OBJECTS in hide:
            out.append(p)
    for sid, p in scene.support_paths.items():
        if sid in hide or HIDE_SUPPORTS in hide:
            out.append(p)
    return out


# ---------------------------------------------------------------------------------------------
# Runtime: one SimulationApp per process, API-generation adapters
# ---------------------------------------------------------------------------------------------
class _Runtime:
    app = None
    status: dict | None = None

    @classmethod
    def start(cls) -> dict:
        if cls.app is not None:
            return cls.status
        status = require_isaac()
        from isaacsim import SimulationApp  # must precede every other Omniverse import

        cls.app = SimulationApp({"headless": True})
        cls.status = status
        import carb

        settings = carb.settings.get_settings()
        # exact (custom-geometry) cylinders and cones instead of convex approximations
        settings.set_bool("/physics/collisionConeCustomGeometry", True)
        settings.set_bool("/physics/collisionCylinderCustomGeometry", True)
        atexit.register(cls.close)
        return status

    @classmethod
    def close(cls) -> None:
        if cls.app is not None:
            try:
                cls.app.close()
            except Exception:  # pragma: no cover - shutdown
                pass
            cls.app = None


class _Physics5:
    """Isaac Sim 5.x: isaacsim.core.api.World + isaacsim.core.prims.RigidPrim (numpy backend, CPU)."""

    def __init__(self, stage_path: str, body_paths: list[str], dt: float, scene_path: str):
        from isaacsim.core.api import World
        from isaacsim.core.prims import RigidPrim
        from isaacsim.core.utils.stage import open_stage

        World.clear_instance()
        if not open_stage(stage_path):
            raise OrchardError(f"Isaac Sim could not open the stage {stage_path}")
        self.world = World(physics_dt=dt, rendering_dt=dt, stage_units_in_meters=1.0, physics_prim_path=scene_path,
                           set_defaults=False, backend="numpy", device="cpu")
        self.view = RigidPrim(prim_paths_expr=body_paths, name="orchard_objects", reset_xform_properties=False)
        self.world.scene.add(self.view)
        self.world.reset()
        if not self.view.is_physics_handle_valid():  # reads would fall back to (static) USD values
            raise OrchardError("Isaac Sim: the physics view of the objects is not valid after World.reset()")

    def set_state(self, pos, quat, lin, ang_rad) -> None:
        self.view.set_world_poses(positions=np.asarray(pos, np.float32), orientations=np.asarray(quat, np.float32))
        self.view.set_linear_velocities(np.asarray(lin, np.float32))
        self.view.set_angular_velocities(np.asarray(ang_rad, np.float32))

    def read(self):
        p, q = self.view.get_world_poses()
        return (np.asarray(p, float), np.asarray(q, float), np.asarray(self.view.get_linear_velocities(), float),
                np.asarray(self.view.get_angular_velocities(), float))

    def step(self) -> None:
        self.world.step(render=False)

    def stop(self) -> None:
        self.world.stop()
        from isaacsim.core.api import World

        World.clear_instance()


class _Physics6:
    """Isaac Sim 6.x: SimulationManager + isaacsim.core.experimental.prims.RigidPrim (CPU device)."""

    def __init__(self, stage_path: str, body_paths: list[str], dt: float, scene_path: str):
        import isaacsim.core.experimental.utils.app as app_utils
        import isaacsim.core.experimental.utils.stage as stage_utils
        from isaacsim.core.experimental.prims import RigidPrim
        from isaacsim.core.simulation_manager import SimulationManager

        ok, _ = stage_utils.open_stage(stage_path)
        if not ok:
            raise OrchardError(f"Isaac Sim could not open the stage {stage_path}")
        self.sm, self.app_utils = SimulationManager, app_utils
        try:  # track the stage's own scene, so that setup_simulation does not add a second one
            SimulationManager.set_default_physics_scene(scene_path)
        except Exception:  # deprecated since 6.0; setup_simulation then sets dt on every scene it tracks
            pass
        SimulationManager.setup_simulation(dt=dt, device="cpu")
        app_utils.play()  # the warm-start callback initialises physics; the explicit call is a no-op then
        SimulationManager.initialize_physics()
        self.view = RigidPrim(body_paths)
        if not self.view.is_physics_tensor_entity_valid():  # reads would fall back to (static) USD values
            raise OrchardError("Isaac Sim: the physics tensor view of the objects is not valid after initialisation")

    def set_state(self, pos, quat, lin, ang_rad) -> None:
        self.view.set_world_poses(positions=np.asarray(pos, np.float32), orientations=np.asarray(quat, np.float32))
        self.view.set_velocities(linear_velocities=np.asarray(lin, np.float32),
                                 angular_velocities=np.asarray(ang_rad, np.float32))

    def read(self):
        p, q = self.view.get_world_poses()
        lin, ang = self.view.get_velocities()
        return tuple(np.asarray(a.numpy() if hasattr(a, "numpy") else a, float) for a in (p, q, lin, ang))

    def step(self) -> None:
        self.sm.step()

    def stop(self) -> None:
        self.app_utils.stop()


def _subscribe_contacts(callback):
    """Subscription to PhysX contact reports, whichever interface this Isaac Sim has (kept alive by the caller)."""
    try:  # Isaac Sim 6.x
        from omni.physics.core import get_physics_simulation_interface

        return get_physics_simulation_interface().subscribe_physics_contact_report_events(callback)
    except (ImportError, AttributeError):
        from omni.physx import get_physx_simulation_interface  # Isaac Sim 5.x

        return get_physx_simulation_interface().subscribe_contact_report_events(callback)


def _int_to_path(value) -> str:
    from pxr import PhysicsSchemaTools

    return str(PhysicsSchemaTools.intToSdfPath(value))


def _write_stage(config, tag: str):
    from .usd_stage import write_stage

    folder = Path(tempfile.mkdtemp(prefix=f"orchard-isaac-{tag}-"))
    path = folder / "scene.usda"
    return path, write_stage(config, path)


# ---------------------------------------------------------------------------------------------
# Simulation
# ---------------------------------------------------------------------------------------------
@register_backend("isaac")
class IsaacBackend:
    """Rigid-body simulation of a case in Isaac Sim / PhysX (see the module docstring)."""

    name = "isaac"

    def __init__(self):
        self.status = require_isaac()

    def simulate(self, config, times: Sequence[float] | np.ndarray | None = None) -> EngineRun:
        times = np.asarray(config.timing.frame_times if times is None else times, float)
        status = _Runtime.start()
        path, scene = _write_stage(config, "sim")
        rate = scene.steps_per_second
        dt = 1.0 / rate
        steps = step_indices(times, rate)
        ids = [o.id for o in config.objects]
        body_paths = [scene.object_paths[i] for i in ids]
        physics = (_Physics6 if status["generation"] >= 6 else _Physics5)(str(path), body_paths, dt, "/World/PhysicsScene")
        log = ContactLog()
        clock = {"step": 0}

        def on_contacts(headers, *rest):
            t = 0.0 if clock["step"] <= 1 else clock["step"] * dt  # pairs touching at the start are found on step 1
            for h in headers:
                kind = contact_kind(h.type)
                if kind is None:
                    continue
                c0, c1 = _int_to_path(h.collider0), _int_to_path(h.collider1)
                log.update(t, kind, scene.entity_of_collider.get(c0) or scene.entity_of_path(c0),
                           scene.entity_of_collider.get(c1) or scene.entity_of_path(c1), tuple(sorted((c0, c1))))

        sub = _subscribe_contacts(on_contacts)
        n = len(times)
        rec = {i: [np.zeros((n, 3)), np.zeros((n, 4)), np.zeros((n, 3)), np.zeros((n, 3))] for i in ids}
        try:
            physics.set_state(np.array([config.obj(i).position for i in ids]),
                              np.array([config.obj(i).quaternion for i in ids]),
                              np.array([config.obj(i).linear_velocity for i in ids]),
                              np.array([config.obj(i).angular_velocity for i in ids]))  # rad/s, world frame
            for k, target in enumerate(steps):
                while clock["step"] < target:
                    clock["step"] += 1
                    physics.step()
                p, q, v, w = physics.read()
                for j, oid in enumerate(ids):
                    rec[oid][0][k], rec[oid][1][k], rec[oid][2][k], rec[oid][3][k] = p[j], q[j], v[j], w[j]
        finally:
            sub = None  # noqa: F841 - dropping the subscription unsubscribes
            physics.stop()
        states = {}
        for oid in ids:
            pos, quat, lin, ang = rec[oid]
            states[oid] = ObjectTrack(pos, continuous_quaternions(quat, config.obj(oid).quaternion), lin, ang)
        info = {"engine": "isaac", "isaac_sim_version": status["version"], "api_generation": status["generation"],
                "python": status["python"], "timestep": dt, "steps_per_second": rate, "steps": int(clock["step"]),
                "device": "cpu", "solver": "TGS", "pair_strategy": scene.plan.strategy,
                "inexact_pairs": [list(p) for p in scene.plan.inexact], "stage": str(path)}
        return EngineRun("isaac", times, states, log.finish(), info)


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------
@dataclass
class _Prepared:
    key: tuple
    scene: Any
    stage: Any
    render_product: Any
    annotators: dict
    size: tuple[int, int]


@register_renderer("isaac")
class IsaacRenderer:
    """RTX renderer through Replicator (see the module docstring). Call :meth:`close` when done."""

    name = "isaac"

    def __init__(self, width: int | None = None, height: int | None = None, rt_subframes: int = RT_SUBFRAMES):
        self.status = require_isaac()
        self.size = (width, height) if width and height else None
        self.rt_subframes = rt_subframes
        self._prepared: _Prepared | None = None

    def _prepare(self, config) -> _Prepared:
        w, h = self.size or (config.camera.width, config.camera.height)
        key = (id(config), config.config_sha256, w, h)
        if self._prepared is not None and self._prepared.key == key:
            return self._prepared
        self.close()
        status = _Runtime.start()
        path, scene = _write_stage(config, "render")
        if status["generation"] >= 6:
            import isaacsim.core.experimental.utils.stage as stage_utils

            ok, stage = stage_utils.open_stage(str(path))
        else:
            from isaacsim.core.utils.stage import get_current_stage, open_stage

            ok = open_stage(str(path))
            stage = get_current_stage()
        if not ok:
            raise OrchardError(f"Isaac Sim could not open the stage {path}")
        import omni.replicator.core as rep

        try:
            rep.orchestrator.set_capture_on_play(False)
        except AttributeError:  # pragma: no cover - older Replicator
            pass
        rp = rep.create.render_product("/World/Camera", (w, h))
        annotators = {"rgb": rep.AnnotatorRegistry.get_annotator("rgb"),
                      "instance": rep.AnnotatorRegistry.get_annotator("instance_id_segmentation",
                                                                      init_params={"colorize": False}),
                      "depth": rep.AnnotatorRegistry.get_annotator("distance_to_camera")}
        for a in annotators.values():
            a.attach(rp)
        self._prepared = _Prepared(key, scene, stage, rp, annotators, (w, h))
        return self._prepared

    def close(self) -> None:
        prep, self._prepared = self._prepared, None
        if prep is None:
            return
        for a in prep.annotators.values():
            try:
                a.detach()
            except Exception:  # pragma: no cover
                pass
        try:
            prep.render_product.destroy()
        except Exception:  # pragma: no cover
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def render(self, config, poses: Poses, passes: Iterable[str] = PASSES, hide: Iterable[str] = (),
               background: str | None = None) -> RenderResult:
        passes = tuple(passes)
        bad = set(passes) - set(PASSES)
        if bad:
            raise ValueError(f"unknown passes {sorted(bad)}; known: {', '.join(PASSES)}")
        if background not in (None, "white"):
            raise ValueError(f"background must be None or 'white', got {background!r}")
        prep = self._prepare(config)
        scene = prep.scene
        unknown = set(poses) - set(scene.object_paths)
        if unknown:
            raise ValueError(f"poses given for unknown objects {sorted(unknown)}")
        hide = set(hide) | ({HIDE_SUPPORTS} if background == "white" else set())
        need = set(passes) | ({"instance"} if background == "white" else set())
        ns = {len(p) for p, _ in poses.values()} | {len(q) for _, q in poses.values()}
        if len(ns) > 1:
            raise ValueError(f"every pose sequence needs the same number of frames, got {sorted(ns)}")
        n = ns.pop() if ns else 1
        import omni.replicator.core as rep
        from pxr import Gf, UsdGeom

        stage = prep.stage
        hidden = hidden_paths(scene, hide)
        for p in hidden:
            UsdGeom.Imageable(stage.GetPrimAtPath(p)).MakeInvisible()
        frames: dict[str, list] = {p: [] for p in need}
        max_inst = max((o.instance_id for o in config.objects), default=0)
        instance_ids = {o.id: o.instance_id for o in config.objects}
        try:
            for o in config.objects:  # objects without a pose sequence stay at their initial pose
                self._set_pose(stage, scene.object_paths[o.id], o.position, o.quaternion, Gf)
            for f in range(n):
                for oid, (p, q) in poses.items():
                    self._set_pose(stage, scene.object_paths[oid], p[f], q[f], Gf)
                rep.orchestrator.step(rt_subframes=self.rt_subframes, delta_time=0.0, pause_timeline=False)
                if "rgb" in need:
                    frames["rgb"].append(rgba_to_rgb(prep.annotators["rgb"].get_data()))
                if "depth" in need:
                    frames["depth"].append(distance_to_depth(prep.annotators["depth"].get_data(), config.camera))
                if "instance" in need:
                    data = prep.annotators["instance"].get_data()
                    lut = instance_lookup(data["info"]["idToLabels"], scene.object_paths, instance_ids)
                    frames["instance"].append(instance_mask(data["data"], lut, max_inst))
        finally:
            for p in hidden:
                UsdGeom.Imageable(stage.GetPrimAtPath(p)).MakeVisible()
        out = RenderResult(info={"renderer": "isaac", "isaac_sim_version": self.status["version"],
                                 "rt_subframes": self.rt_subframes, "background": background, "hide": sorted(set(hide))})
        for p in need:
            arr = np.stack(frames[p]) if frames[p] else None
            if p == "rgb" and background == "white" and arr is not None:
                arr = arr.copy()
                arr[np.stack(frames["instance"]) == 0] = 255
            if p in passes:
                setattr(out, p, arr)
        return out

    @staticmethod
    def _set_pose(stage, path: str, position, quaternion, Gf) -> None:
        prim = stage.GetPrimAtPath(path)
        q = np.asarray(quaternion, float)
        q = q / np.linalg.norm(q)
        prim.GetAttribute("xformOp:translate").Set(Gf.Vec3d(*map(float, position)))
        prim.GetAttribute("xformOp:orient").Set(Gf.Quatd(float(q[0]), Gf.Vec3d(*map(float, q[1:]))))


__all__ = ["IsaacBackend", "IsaacRenderer", "IsaacUnavailableError", "ContactLog", "continuous_quaternions",
           "contact_kind", "deg_to_rad", "distance_to_depth", "hidden_paths", "instance_lookup", "instance_mask",
           "isaac_status", "quat_xyzw_to_wxyz", "require_isaac", "rgba_to_rgb", "step_indices"]
