"""MuJoCo simulation backend and offscreen renderer.

* :class:`MujocoBackend` — ``simulate(config, times)`` steps the generated model at the fine timestep
  (``restitution.TIMESTEP``) and records every object's state at the requested times (exact where a
  time falls on the step grid, which holds for the frame times of 24/25/30/48/50/60 … fps; otherwise
  linear interpolation between the two neighbouring steps, slerp for orientations), plus contact
  begin/end events between entities (objects, supports, ``ground``). ``playback(config, poses)`` is the
  kinematic mode: poses are written into ``qpos`` and ``mj_forward`` runs, so any pose sequence
  (e.g. the analytic ground truth) can be checked for contacts and interpenetration.
* :class:`MujocoRenderer` — ``render(config, poses, passes, hide, background)`` draws any pose
  sequence with MuJoCo's offscreen OpenGL renderer: RGB (uint8), depth (float32 metres along the
  optical axis) and instance masks (0 = background, else ``ObjectSpec.instance_id``). Per frame it
  draws twice: a lit colour pass, and a segmentation pass whose depth buffer gives the depth pass.
"""
from __future__ import annotations

import math
from typing import Iterable, Iterator, Sequence

import numpy as np

from . import gl as _gl

_gl.configure()

import mujoco  # noqa: E402  (after the GL platform is chosen)

from ..errors import OrchardError  # noqa: E402
from . import restitution as _rest  # noqa: E402
from .base import (HIDE_OBJECTS, HIDE_SUPPORTS, PASSES, ContactEvent, EngineRun, ObjectTrack, Poses,  # noqa: E402
                   RenderResult, register_backend, register_renderer)
from .mujoco_scene import GROUP_COLLISION, GROUP_OBJECTS, GROUP_SUPPORTS, compile_model, entity_of  # noqa: E402

HIDDEN_GROUP = 5  # geoms moved here are not drawn

# A contact deeper than this is not a penetration the contact springs allow (sub-millimetre at the
# suite's stiffness and 19.2 kHz steps) but a failed convex-collision solve: MuJoCo's native CCD at
# the tight tolerance the suite uses returned a cylinder-on-ramp contact 0.81 m deep with a wrong
# normal on one CPU (AVX-512) and launched a resting body at 84 m/s.
BOGUS_CONTACT_DEPTH = 0.01  # m
# collision settings tried, in order, for a step whose contacts are bogus: (ccd_tolerance, or None for
# the model's own; disable flags added to the model's)
_CCD_FALLBACKS = ((1e-8, 0), (1e-6, 0), (None, int(mujoco.mjtDisableBit.mjDSBL_NATIVECCD)))


class EngineContactError(OrchardError):
    """MuJoCo's collision detection gave contacts no collision setting makes physically possible."""


def _bogus_contacts(data) -> bool:
    # checked on every step: a ufunc reduction is the cheapest test (≈ 1 µs against a 10 µs step)
    return bool(np.minimum.reduce(data.contact.dist, initial=0.0) < -BOGUS_CONTACT_DEPTH)


def repair_collisions(model, data, compute, strict: bool) -> int:
    """After `compute(model, data)` (``mj_step1`` or ``mj_forward``: the position stage with collision
    detection) left a bogus contact: run it again with each looser convex-collision setting of
    `_CCD_FALLBACKS` until the contacts are sane, then restore the model's own settings. Returns how
    many settings were tried. Where every setting gives the same deep contact it is real: `strict`
    raises `EngineContactError` (dynamics would integrate a launch that never happened), otherwise the
    contacts of the model's own settings stand (a pose sequence that does interpenetrate, reported as
    such)."""
    saved = (model.opt.ccd_tolerance, model.opt.disableflags)
    try:
        for tries, (tolerance, flags) in enumerate(_CCD_FALLBACKS, 1):
            model.opt.ccd_tolerance = saved[0] if tolerance is None else tolerance
            model.opt.disableflags = saved[1] | flags
            compute(model, data)
            if not _bogus_contacts(data):
                return tries
        if strict:
            raise EngineContactError(f"MuJoCo collision detection gave a contact "
                                     f"{-float(data.contact.dist.min()):.3f} m deep at "
                                     f"t = {data.time:.5f} s with every convex-collision setting tried")
    finally:
        model.opt.ccd_tolerance, model.opt.disableflags = saved
    compute(model, data)
    return len(_CCD_FALLBACKS)


def guarded_step(model, data) -> int:
    """One ``mj_step`` (as ``mj_step1`` + ``mj_step2``, identical for the Euler integrator) whose
    collision pass is redone with looser convex-collision settings when it produced a bogus contact
    (`repair_collisions`, strict). Returns how many settings that took (0 on an ordinary step)."""
    mujoco.mj_step1(model, data)
    tries = repair_collisions(model, data, mujoco.mj_step1, strict=True) if _bogus_contacts(data) else 0
    mujoco.mj_step2(model, data)
    return tries


# ---------------------------------------------------------------------------------------------
# quaternion helpers (w, x, y, z)
# ---------------------------------------------------------------------------------------------
def _quat_to_mat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _slerp(q0: np.ndarray, q1: np.ndarray, s: float) -> np.ndarray:
    d = float(np.dot(q0, q1))
    if d < 0:
        q1, d = -q1, -d
    if d > 0.9995:
        q = q0 + s * (q1 - q0)
        return q / np.linalg.norm(q)
    th = math.acos(min(d, 1.0))
    return (math.sin((1 - s) * th) * q0 + math.sin(s * th) * q1) / math.sin(th)


class _Bodies:
    """Index bookkeeping of the objects of a compiled model."""

    def __init__(self, config, model, scene):
        self.ids = [o.id for o in config.objects]
        self.qpos_adr, self.qvel_adr, self.geom = {}, {}, {}
        for oid in self.ids:
            jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"object:{oid}")
            self.qpos_adr[oid] = int(model.jnt_qposadr[jid])
            self.qvel_adr[oid] = int(model.jnt_dofadr[jid])
            self.geom[oid] = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, scene.object_geoms[oid])
        self.geom_entity = [entity_of(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, i) or "")
                            for i in range(model.ngeom)]

    def set_initial(self, config, data) -> None:
        for o in config.objects:
            a, v = self.qpos_adr[o.id], self.qvel_adr[o.id]
            q = np.asarray(o.quaternion, float)
            q = q / np.linalg.norm(q)
            data.qpos[a:a + 3] = o.position
            data.qpos[a + 3:a + 7] = q
            data.qvel[v:v + 3] = o.linear_velocity
            data.qvel[v + 3:v + 6] = _quat_to_mat(q).T @ np.asarray(o.angular_velocity, float)  # body frame

    def set_pose(self, data, oid: str, position, quaternion) -> None:
        a = self.qpos_adr[oid]
        q = np.asarray(quaternion, float)
        data.qpos[a:a + 3] = position
        data.qpos[a + 3:a + 7] = q / np.linalg.norm(q)

    def state(self, data, oid: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        a, v = self.qpos_adr[oid], self.qvel_adr[oid]
        q = np.array(data.qpos[a + 3:a + 7])
        q /= np.linalg.norm(q)
        w_body = np.array(data.qvel[v + 3:v + 6])
        return np.array(data.qpos[a:a + 3]), q, np.array(data.qvel[v:v + 3]), _quat_to_mat(q) @ w_body

    def touching(self, data) -> dict[tuple[str, str], tuple[float, int, int]]:
        """Entity pairs in contact now: deepest penetration (positive metres) and that contact's geoms."""
        out: dict[tuple[str, str], tuple[float, int, int]] = {}
        for i in range(data.ncon):
            c = data.contact[i]
            if c.exclude:
                continue
            a, b = self.geom_entity[c.geom1], self.geom_entity[c.geom2]
            key = (a, b) if a <= b else (b, a)
            pen = -float(c.dist)
            if key not in out or pen > out[key][0]:
                out[key] = (pen, int(c.geom1), int(c.geom2))
        return out


class _ContactLog:
    """Begin/end events between entity pairs.

    A pair that stops touching is only reported as ended (at the time it stopped) once its gap exceeds
    `separation` metres, so micro-rebounds on a resting or rolling contact (e.g. at the joints of a
    track's segments, sub-0.1 mm) do not produce spurious events.
    """

    def __init__(self, separation: float, distance):
        self.separation = separation
        self.distance = distance  # (geom1, geom2) -> current gap in metres
        self.active: dict[tuple[str, str], tuple[float | None, int, int]] = {}  # pair -> (apart since, geoms)
        self.events: list[ContactEvent] = []

    def update(self, t: float, touching: dict[tuple[str, str], tuple[float, int, int]]) -> None:
        for pair in sorted(touching):
            if pair not in self.active:
                self.events.append(ContactEvent(t, pair[0], pair[1], "begin"))
            self.active[pair] = (None, touching[pair][1], touching[pair][2])
        for pair in sorted(set(self.active) - set(touching)):
            apart, g1, g2 = self.active[pair]
            if apart is None:
                apart = t
                self.active[pair] = (apart, g1, g2)
            if self.distance(g1, g2) > self.separation:
                self.events.append(ContactEvent(apart, pair[0], pair[1], "end"))
                del self.active[pair]

    def finish(self) -> list[ContactEvent]:
        return sorted(self.events, key=lambda e: (e.t, e.body_a, e.body_b, e.kind))


def _distance_fn(model, data, cutoff: float):
    fromto = np.zeros(6)

    def distance(g1: int, g2: int) -> float:
        return float(mujoco.mj_geomDistance(model, data, g1, g2, cutoff, fromto))
    return distance


# ---------------------------------------------------------------------------------------------
# Simulation
# ---------------------------------------------------------------------------------------------
@register_backend("mujoco")
class MujocoBackend:
    """Rigid-body simulation of a case in MuJoCo (see the module docstring)."""

    name = "mujoco"

    def __init__(self, friction: str = "dynamic", contact_separation: float = 5e-4):
        self.friction = friction
        self.contact_separation = contact_separation

    def build(self, config):
        """(model, data, MjcfScene) with the config's initial state loaded."""
        model, scene = compile_model(config, friction=self.friction)
        data = mujoco.MjData(model)
        bodies = _Bodies(config, model, scene)
        bodies.set_initial(config, data)
        mujoco.mj_forward(model, data)
        return model, data, scene, bodies

    def info(self, model) -> dict:
        return {"engine": "mujoco", "mujoco_version": mujoco.__version__, "timestep": float(model.opt.timestep),
                "integrator": _rest.INTEGRATOR, "cone": _rest.CONE, "impratio": _rest.IMPRATIO,
                "contact_stiffness": _rest.STIFFNESS, "track_contact_stiffness": _rest.TRACK_STIFFNESS,
                "friction_damping": _rest.FRICTION_DAMPING,
                "slider_friction_damping": _rest.SLIDER_FRICTION_DAMPING, "ccd_tolerance": _rest.CCD_TOLERANCE,
                "solimp": list(_rest.SOLIMP), "friction": self.friction}

    def _initial_contacts(self, model, data, bodies, distance) -> dict[tuple[str, str], tuple[float, int, int]]:
        """Pairs touching at t = 0: penetrating, or closer than the separation threshold (bodies placed
        exactly on a support start with a zero gap, and MuJoCo only reports them once they sink in)."""
        out = bodies.touching(data)
        for g1, g2 in zip(model.pair_geom1, model.pair_geom2):
            a, b = bodies.geom_entity[g1], bodies.geom_entity[g2]
            key = (a, b) if a <= b else (b, a)
            if key not in out and distance(int(g1), int(g2)) <= self.contact_separation:
                out[key] = (0.0, int(g1), int(g2))
        return out

    def simulate(self, config, times: Sequence[float] | np.ndarray | None = None) -> EngineRun:
        times = np.asarray(config.timing.frame_times if times is None else times, float)
        if times.ndim != 1 or (times.size and (times.min() < 0 or np.any(np.diff(times) < 0))):
            raise ValueError("times must be a non-decreasing 1-D sequence of non-negative seconds")
        model, data, scene, bodies = self.build(config)
        dt = float(model.opt.timestep)
        n = len(times)
        rec = {oid: [np.zeros((n, 3)), np.zeros((n, 4)), np.zeros((n, 3)), np.zeros((n, 3))] for oid in bodies.ids}
        distance = _distance_fn(model, data, 10 * self.contact_separation + 1e-3)
        log = _ContactLog(self.contact_separation, distance)
        log.update(0.0, self._initial_contacts(model, data, bodies, distance))

        def snapshot():
            return {oid: bodies.state(data, oid) for oid in bodies.ids}

        step = 0
        prev = None
        max_pen = 0.0
        collision_retries = 0
        for i, t in enumerate(times):
            k = t / dt
            k_round = round(k)
            exact = abs(k - k_round) < 1e-6
            target = int(k_round) if exact else int(math.ceil(k))
            while step < target:
                if step == target - 1 and not exact:
                    prev = snapshot()  # the interpolation needs the step before `target`
                collision_retries += guarded_step(model, data) > 0
                step += 1
                touching = bodies.touching(data)
                if touching:
                    max_pen = max(max_pen, max(v[0] for v in touching.values()))
                log.update(step * dt, touching)
            cur = snapshot()
            for oid in bodies.ids:
                if exact or prev is None:
                    vals = cur[oid]
                else:
                    s = (t - (step - 1) * dt) / dt
                    a, b = prev[oid], cur[oid]
                    vals = (a[0] + s * (b[0] - a[0]), _slerp(a[1], b[1], s), a[2] + s * (b[2] - a[2]),
                            a[3] + s * (b[3] - a[3]))
                for j in range(4):
                    rec[oid][j][i] = vals[j]
        states = {oid: ObjectTrack(*rec[oid]) for oid in bodies.ids}
        info = self.info(model)
        info.update(steps=step, max_penetration=max_pen, collision_retries=collision_retries)
        return EngineRun("mujoco", times, states, log.finish(), info)

    def playback(self, config, poses: Poses, times: Sequence[float] | np.ndarray | None = None) -> EngineRun:
        """Kinematic mode: set each frame's poses, run mj_forward, report contacts and penetration.

        Velocities are not known to a pose sequence and are returned as zeros. `info["penetration"]`
        holds, per frame, the deepest interpenetration (m) between any two entities.
        """
        model, data, scene, bodies = self.build(config)
        n = _n_frames(poses)
        times = np.arange(n, dtype=float) / config.timing.fps if times is None else np.asarray(times, float)
        log = _ContactLog(0.0, _distance_fn(model, data, 1e-3))
        pen = np.zeros(n)
        states = {}
        for f in range(n):
            for oid, (p, q) in poses.items():
                bodies.set_pose(data, oid, p[f], q[f])
            data.qvel[:] = 0.0
            mujoco.mj_forward(model, data)
            if _bogus_contacts(data):
                repair_collisions(model, data, mujoco.mj_forward, strict=False)
            touching = bodies.touching(data)
            pen[f] = max((v[0] for v in touching.values()), default=0.0)
            log.update(float(times[f]), touching)
        for oid in bodies.ids:
            if oid in poses:
                p, q = (np.asarray(a, float) for a in poses[oid])
            else:
                o = config.obj(oid)
                p, q = np.tile(o.position, (n, 1)), np.tile(o.quaternion, (n, 1))
            states[oid] = ObjectTrack(p, q, np.zeros((n, 3)), np.zeros((n, 3)))
        info = self.info(model)
        info.update(mode="kinematic", penetration=pen)
        return EngineRun("mujoco-kinematic", times, states, log.finish(), info)


def _n_frames(poses: Poses) -> int:
    ns = {len(p) for p, _ in poses.values()} | {len(q) for _, q in poses.values()}
    if len(ns) != 1:
        raise ValueError(f"every pose sequence needs the same number of frames, got {sorted(ns)}")
    return ns.pop()


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------
class _Prepared:
    """A compiled model with its GPU context, scene and lookup tables, for one config."""

    def __init__(self, config, width: int, height: int, shadow_size: int):
        self.model, self.scene_desc = compile_model(config, offscreen=(width, height), shadow_size=shadow_size)
        self.data = mujoco.MjData(self.model)
        self.bodies = _Bodies(config, self.model, self.scene_desc)
        self.bodies.set_initial(config, self.data)
        self.groups = np.array(self.model.geom_group)
        self.instance_of_geom = np.zeros(self.model.ngeom, np.int64)
        for o in config.objects:
            self.instance_of_geom[self.bodies.geom[o.id]] = o.instance_id
        self.entity = np.array(self.bodies.geom_entity, dtype=object)
        self.object_ids = set(self.bodies.ids)
        self.sky = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_TEXTURE, "sky")
        self.ctx = None
        self.scn = mujoco.MjvScene(self.model, maxgeom=max(1000, 2 * self.model.ngeom + 100))
        self.cam = mujoco.MjvCamera()
        self.cam.type = mujoco.mjtCamera.mjCAMERA_FIXED
        self.cam.fixedcamid = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_CAMERA, "main")
        self.vopt = mujoco.MjvOption()
        self.vopt.geomgroup[:] = 0
        self.vopt.geomgroup[GROUP_OBJECTS] = 1
        self.vopt.geomgroup[GROUP_SUPPORTS] = 1
        self.vopt.geomgroup[GROUP_COLLISION] = 0
        self.max_instance = max((o.instance_id for o in config.objects), default=0)

    def hidden_mask(self, hide: Iterable[str]) -> np.ndarray:
        names = set(hide)
        mask = np.zeros(self.model.ngeom, bool)
        for i, ent in enumerate(self.entity):
            is_obj = ent in self.object_ids
            if ent in names or (HIDE_OBJECTS in names and is_obj) or (HIDE_SUPPORTS in names and not is_obj):
                mask[i] = True
        return mask


@register_renderer("mujoco")
class MujocoRenderer:
    """Offscreen MuJoCo renderer (see the module docstring). Call :meth:`close` when done."""

    name = "mujoco"

    def __init__(self, width: int | None = None, height: int | None = None, shadows: bool = True,
                 shadow_size: int = 2048):
        self.size = (width, height) if width and height else None
        self.shadows = shadows
        self.shadow_size = shadow_size
        self._gl = None
        self._gl_size = (0, 0)
        self._prepared: _Prepared | None = None
        self._key = None

    # ---- context management ------------------------------------------------------------------
    def _prepare(self, config) -> _Prepared:
        w, h = self.size or (config.camera.width, config.camera.height)
        key = (id(config), config.config_sha256, w, h)
        if self._prepared is not None and self._key == key:
            return self._prepared
        self._free_prepared()
        if self._gl is None or self._gl_size[0] < w or self._gl_size[1] < h:
            if self._gl is not None:
                self._gl.free()
            self._gl = _gl.context_class()(w, h)
            self._gl_size = (w, h)
        self._gl.make_current()
        prep = _Prepared(config, w, h, self.shadow_size)
        prep.ctx = mujoco.MjrContext(prep.model, mujoco.mjtFontScale.mjFONTSCALE_100)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN, prep.ctx)
        prep.ctx.readDepthMap = mujoco.mjtDepthMap.mjDEPTH_ZEROFAR
        prep.rect = mujoco.MjrRect(0, 0, w, h)
        prep.size = (w, h)
        self._prepared, self._key = prep, key
        return prep

    def _free_prepared(self) -> None:
        if self._prepared is not None and self._prepared.ctx is not None and self._gl is not None:
            self._gl.make_current()
            self._prepared.ctx.free()
        self._prepared, self._key = None, None

    def close(self) -> None:
        self._free_prepared()
        if self._gl is not None:
            self._gl.free()
            self._gl = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # pragma: no cover - interpreter shutdown
            pass

    # ---- rendering ---------------------------------------------------------------------------
    def render(self, config, poses: Poses, passes: Iterable[str] = PASSES, hide: Iterable[str] = (),
               background: str | None = None) -> RenderResult:
        passes = tuple(passes)
        frames = list(self.frames(config, poses, passes, hide, background))
        out = RenderResult(info={"renderer": "mujoco", "mujoco_version": mujoco.__version__,
                                 "gl": _gl.configure(), "background": background, "hide": sorted(set(hide))})
        for p in passes:
            setattr(out, p, np.stack([f[p] for f in frames]) if frames else None)
        return out

    def frames(self, config, poses: Poses, passes: Iterable[str] = PASSES, hide: Iterable[str] = (),
               background: str | None = None) -> Iterator[dict[str, np.ndarray]]:
        """Frame-by-frame form of :meth:`render` (constant memory): yields {pass: array}."""
        passes = tuple(passes)
        bad = set(passes) - set(PASSES)
        if bad:
            raise ValueError(f"unknown passes {sorted(bad)}; known: {', '.join(PASSES)}")
        if background not in (None, "white"):
            raise ValueError(f"background must be None or 'white', got {background!r}")
        hide = set(hide)
        prep = self._prepare(config)
        unknown = {h for h in hide if h not in (HIDE_OBJECTS, HIDE_SUPPORTS)} - set(prep.entity)
        if unknown:
            raise ValueError(f"cannot hide unknown ids {sorted(unknown)}")
        unknown = set(poses) - prep.object_ids
        if unknown:
            raise ValueError(f"poses given for unknown objects {sorted(unknown)}")
        if background == "white":
            hide |= {HIDE_SUPPORTS}
            if "rgb" in passes and "instance" not in passes:
                passes = passes + ("instance",)
        n = _n_frames(poses) if poses else 1
        model, data = prep.model, prep.data
        prep.bodies.set_initial(config, data)  # objects without a pose sequence stay at their initial pose
        hidden = prep.hidden_mask(hide)
        model.geom_group[:] = np.where(hidden, HIDDEN_GROUP, prep.groups)
        self._gl.make_current()
        white_sky = background == "white" and prep.sky >= 0
        if white_sky:
            self._set_sky(prep, white=True)
        try:
            for f in range(n):
                for oid, (p, q) in poses.items():
                    prep.bodies.set_pose(data, oid, p[f], q[f])
                mujoco.mj_kinematics(model, data)
                mujoco.mj_camlight(model, data)
                yield self._draw(prep, passes, background)
        finally:
            model.geom_group[:] = prep.groups
            if white_sky:
                self._set_sky(prep, white=False)

    def _set_sky(self, prep: _Prepared, white: bool) -> None:
        m = prep.model
        adr = int(m.tex_adr[prep.sky])
        size = int(m.tex_width[prep.sky]) * int(m.tex_height[prep.sky]) * int(m.tex_nchannel[prep.sky])
        if white:
            prep.sky_backup = np.array(m.tex_data[adr:adr + size])
            m.tex_data[adr:adr + size] = 255
        else:
            m.tex_data[adr:adr + size] = prep.sky_backup
        mujoco.mjr_uploadTexture(m, prep.ctx, prep.sky)

    def _draw(self, prep: _Prepared, passes: tuple[str, ...], background: str | None) -> dict[str, np.ndarray]:
        w, h = prep.size
        scn, ctx, rect = prep.scn, prep.ctx, prep.rect
        mujoco.mjv_updateScene(prep.model, prep.data, prep.vopt, None, prep.cam, mujoco.mjtCatBit.mjCAT_ALL, scn)
        flags = scn.flags
        flags[mujoco.mjtRndFlag.mjRND_SHADOW] = 1 if self.shadows else 0
        flags[mujoco.mjtRndFlag.mjRND_REFLECTION] = 0
        flags[mujoco.mjtRndFlag.mjRND_SKYBOX] = 1
        flags[mujoco.mjtRndFlag.mjRND_FOG] = 0
        flags[mujoco.mjtRndFlag.mjRND_HAZE] = 0
        flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 0
        flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 0
        out: dict[str, np.ndarray] = {}
        if "rgb" in passes:
            rgb = np.empty((h, w, 3), np.uint8)
            mujoco.mjr_render(rect, scn, ctx)
            mujoco.mjr_readPixels(rgb, None, rect, ctx)
            out["rgb"] = np.ascontiguousarray(rgb[::-1])
        if "depth" in passes or "instance" in passes:
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 1
            flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 1
            seg = np.empty((h, w, 3), np.uint8)
            depth = np.empty((h, w), np.float32)
            mujoco.mjr_render(rect, scn, ctx)
            mujoco.mjr_readPixels(seg, depth, rect, ctx)
            flags[mujoco.mjtRndFlag.mjRND_SEGMENT] = 0
            flags[mujoco.mjtRndFlag.mjRND_IDCOLOR] = 0
            if "depth" in passes:
                out["depth"] = self._metric_depth(prep, depth[::-1])
            if "instance" in passes:
                out["instance"] = self._instances(prep, seg[::-1])
        if background == "white" and "rgb" in out:
            rgb = out["rgb"]
            rgb[out["instance"] == 0] = 255
            if "instance" not in passes:
                del out["instance"]
        return out

    @staticmethod
    def _metric_depth(prep: _Prepared, window: np.ndarray) -> np.ndarray:
        """Reversed window depth (1 at the near plane, 0 at the far plane) → metres along the optical axis."""
        ext = float(prep.model.stat.extent)
        n = float(np.float32(prep.model.vis.map.znear * ext))
        f = float(np.float32(prep.model.vis.map.zfar * ext))
        w64 = window.astype(np.float64)
        return (f * n / (n + w64 * (f - n))).astype(np.float32)

    @staticmethod
    def _instances(prep: _Prepared, seg: np.ndarray) -> np.ndarray:
        scn = prep.scn
        lut = np.zeros(scn.ngeom + 2, np.int64)
        geom_type = int(mujoco.mjtObj.mjOBJ_GEOM)
        for i in range(scn.ngeom):
            g = scn.geoms[i]
            if g.segid >= 0 and g.objtype == geom_type and 0 <= g.objid < prep.model.ngeom:
                lut[g.segid + 1] = prep.instance_of_geom[g.objid]
        ids = seg[..., 0].astype(np.int64) | (seg[..., 1].astype(np.int64) << 8) | (seg[..., 2].astype(np.int64) << 16)
        ids = np.where(ids < lut.size, ids, 0)
        dtype = np.uint8 if prep.max_instance < 256 else np.uint16
        return lut[ids].astype(dtype)
