"""MJCF generation: every support and shape builds, poses and mass properties match the config."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from orchard_build.config import resolve_config
from orchard_build.materials import load_materials
from orchard_build.resources import scenes_dir

from orchard_build.engines import gl

gl.configure()  # before mujoco is imported
mujoco = pytest.importorskip("mujoco")

from orchard_build.engines.mujoco_scene import build_mjcf, compile_model, entity_of  # noqa: E402

MATERIALS = load_materials(scenes_dir() / "materials.yaml")


def make_raw(objects, supports=None, task="composition", camera=None, ground="concrete", g=9.81,
             fps=24, duration=1.0, resolution=(160, 90)):
    raw = {
        "schema_version": 1, "task": task, "case_number": 1, "seed": 1, "environment": {"g": g},
        "ground": {"material": ground}, "objects": objects,
        "camera": camera or {"position": [0.5, -4.0, 1.2], "look_at": [0.5, 0.0, 0.4], "fov_deg": 40,
                             "resolution": list(resolution)},
        "timing": {"fps": fps, "duration": duration, "target_time": duration / 2},
    }
    if supports:
        raw["supports"] = supports
    return raw


def resolve(raw):
    return resolve_config(copy.deepcopy(raw), "t.yaml", MATERIALS)


def all_kinds_raw(resolution=(160, 90)):
    """One case with every kind of support and every shape."""
    supports = {
        "ramps": [{"id": "ramp", "material": "oak", "angle_deg": 25, "length": 1.2, "width": 0.4, "foot": [0.0, 0.0, 0.0]},
                  {"id": "high", "material": "painted_wood", "angle_deg": 30, "length": 0.6, "width": 0.3,
                   "foot": [-1.2, 1.0, 0.3], "downhill_yaw_deg": 90}],
        "tracks": [{"id": "loop", "material": "steel", "radius": 0.4, "center": [1.6, 0.8, 0.45],
                    "arc_deg": [-120, 120], "width": 0.12}],
        "platforms": [{"id": "table", "material": "air_table", "center": [1.4, -0.4, 0.1], "size": [0.6, 0.4, 0.2]}],
    }
    objects = [
        {"id": "ball", "shape": "sphere", "size": {"radius": 0.05}, "material": "rubber",
         "placement": {"ramp": {"ramp": "ramp", "distance_from_top": 0.2}}},
        {"id": "box", "shape": "cube", "size": {"edge": 0.1}, "material": "steel",
         "placement": {"ramp": {"ramp": "high", "distance_from_top": 0.1}}},
        {"id": "can", "shape": "cylinder", "size": {"radius": 0.04, "height": 0.12}, "material": "aluminium",
         "placement": {"surface": {"xy": [1.3, -0.4], "support": "table"}}},
        {"id": "roller", "shape": "cylinder", "size": {"radius": 0.04, "height": 0.08}, "material": "abs_plastic",
         "placement": {"surface": {"xy": [0.8, -0.6], "rest_pose": "side", "velocity": [0.3, 0.0]}}},
        {"id": "cone", "shape": "cone", "size": {"radius": 0.06, "height": 0.15}, "material": "brass",
         "placement": {"surface": {"xy": [0.6, 0.3]}}},
        {"id": "marble", "shape": "sphere", "size": {"radius": 0.03}, "material": "glass",
         "placement": {"track": {"track": "loop", "angle_deg": 30}}},
        {"id": "drop", "shape": "cube", "size": {"edge": 0.08}, "material": "ceramic",
         "placement": {"free": {"position": [0.3, -0.3, 0.8], "orientation_deg": [10, 20, 30],
                                "angular_velocity": [0.5, -1.0, 2.0]}}},
    ]
    return make_raw(objects, supports, resolution=resolution)


@pytest.fixture(scope="module")
def all_kinds():
    cfg = resolve(all_kinds_raw())
    model, scene = compile_model(cfg)
    return cfg, model, scene


def test_mjcf_is_deterministic():
    cfg = resolve(all_kinds_raw())
    a, b = build_mjcf(cfg).xml, build_mjcf(resolve(all_kinds_raw())).xml
    assert a == b


def test_every_kind_builds(all_kinds):
    cfg, model, scene = all_kinds
    assert model.nbody == 1 + len(cfg.objects)
    assert model.njnt == len(cfg.objects)
    assert model.ncam == 1 and model.nlight == 1
    assert model.opt.timestep <= 1e-3
    assert model.opt.cone == mujoco.mjtCone.mjCONE_ELLIPTIC and model.opt.impratio == 10
    names = {mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, i) for i in range(model.ngeom)}
    assert {"ground", "ramp:ramp:surface", "ramp:high:body", "platform:table", "track:loop:seg0"} <= names
    # every geom only collides through explicit pairs
    assert not model.geom_contype.any() and not model.geom_conaffinity.any()
    assert model.npair == len(scene.pairs)
    assert entity_of("track:loop:rail3a") == "loop" and entity_of("object:ball") == "ball"


def test_mass_and_inertia_are_exact(all_kinds):
    cfg, model, _ = all_kinds
    for o in cfg.objects:
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"object:{o.id}")
        assert model.body_mass[bid] == pytest.approx(o.density * o.primitive.volume, rel=1e-12)
        assert np.allclose(model.body_inertia[bid], o.inertia, rtol=1e-12)
        assert np.allclose(model.body_ipos[bid], 0.0, atol=1e-12)
        # principal axes coincide with the body frame (MuJoCo may permute equal moments)
        iq = model.body_iquat[bid]
        rot = np.zeros(9)
        mujoco.mju_quat2Mat(rot, iq)
        full = rot.reshape(3, 3) @ np.diag(model.body_inertia[bid]) @ rot.reshape(3, 3).T
        assert np.allclose(full, np.diag(o.inertia), atol=1e-12 * max(o.inertia))


def test_initial_state_matches_config(all_kinds):
    cfg, model, _ = all_kinds
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    for o in cfg.objects:
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"object:{o.id}")
        assert np.allclose(data.xpos[bid], o.position, atol=1e-12)
        q = data.xquat[bid]
        assert min(np.abs(q - o.quaternion).max(), np.abs(q + o.quaternion).max()) < 1e-9


def _gap(model, data, g1: str, g2: str) -> float:
    fromto = np.zeros(6)
    i1 = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g1)
    i2 = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, g2)
    return mujoco.mj_geomDistance(model, data, i1, i2, 1.0, fromto)


def test_initial_keyframe_matches_backend_state(all_kinds):
    from orchard_build.engines.mujoco_backend import _Bodies

    cfg, model, scene = all_kinds
    data = mujoco.MjData(model)
    mujoco.mj_resetDataKeyframe(model, data, 0)
    other = mujoco.MjData(model)
    _Bodies(cfg, model, scene).set_initial(cfg, other)
    assert np.allclose(data.qpos, other.qpos, atol=1e-12) and np.allclose(data.qvel, other.qvel, atol=1e-12)
    mujoco.mj_forward(model, data)
    for o in cfg.objects:  # world angular velocity of each body = config's
        bid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"object:{o.id}")
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(model, data, mujoco.mjtObj.mjOBJ_BODY, bid, vel, 0)
        assert np.allclose(vel[:3], o.angular_velocity, atol=1e-9)
        assert np.allclose(vel[3:], o.linear_velocity, atol=1e-9)


def test_geoms_sit_on_their_supports(all_kinds):
    """Cone re-centring, ramp slab, platform, ground and track surface: gaps at t = 0 are ~0."""
    cfg, model, scene = all_kinds
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    for o in cfg.objects:
        if o.placement == "free":
            continue
        support = o.support or "ground"
        gap = min(_gap(model, data, scene.object_geoms[o.id], g) for g in scene.support_geoms[support])
        assert abs(gap) < 2e-4, (o.id, support, gap)


def test_track_running_surface_is_at_radius():
    raw = make_raw([{"id": "ball", "shape": "sphere", "size": {"radius": 0.05}, "material": "steel",
                     "placement": {"track": {"track": "loop", "angle_deg": 0}}}],
                   {"tracks": [{"id": "loop", "material": "steel", "radius": 0.5, "center": [0, 0, 0.6],
                                "arc_deg": [-180, 180], "width": 0.1}]})
    cfg = resolve(raw)
    model, scene = compile_model(cfg)
    data = mujoco.MjData(model)
    track = cfg.tracks[0]
    seg = [g for g in scene.support_geoms["loop"] if ":seg" in g]
    for deg in np.arange(-179.0, 180.0, 7.3):
        phi = math.radians(deg)
        data.qpos[:3] = track.center + (track.radius - 0.05) * track.radial(phi)
        mujoco.mj_forward(model, data)
        gap = min(_gap(model, data, "object:ball", g) for g in seg)
        assert gap == pytest.approx(0.0, abs=2e-4), deg


def test_gl_platform_is_chosen_and_probe_rejects_a_broken_platform():
    import os

    assert gl.configure() in ("egl", "osmesa", "glfw", "default") and os.environ.get("MUJOCO_GL")
    assert gl._probe("no_such_platform") is False
