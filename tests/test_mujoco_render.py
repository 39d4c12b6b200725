"""MuJoCo renderer: conventions of rgb / depth / instance passes, hiding, white background, determinism."""
from __future__ import annotations

import numpy as np
import pytest

from orchard_build.engines import gl

gl.configure()  # before mujoco is imported
mujoco = pytest.importorskip("mujoco")

from orchard_build.engines import HIDE_OBJECTS, HIDE_SUPPORTS, get_backend, get_renderer  # noqa: E402
from orchard_build.engines.mujoco_scene import GROUP_OBJECTS, GROUP_SUPPORTS, compile_model  # noqa: E402
from test_mujoco_scene import make_raw, resolve  # noqa: E402

W, H = 160, 90


def scene_raw():
    supports = {"ramps": [{"id": "ramp", "material": "oak", "angle_deg": 20, "length": 0.8, "width": 0.3,
                           "foot": [0.1, 0.25, 0.0], "downhill_yaw_deg": 0}],
                "platforms": [{"id": "table", "material": "ceramic", "center": [0.35, 0.2, 0.05], "size": [0.3, 0.3, 0.1]}]}
    objects = [
        {"id": "ball", "shape": "sphere", "size": {"radius": 0.06}, "material": "rubber",
         "placement": {"ramp": {"ramp": "ramp", "distance_from_top": 0.25}}},
        {"id": "box", "shape": "cube", "size": {"edge": 0.1}, "material": "steel",
         "placement": {"surface": {"xy": [0.0, -0.15], "yaw_deg": 25, "velocity": [0.4, 0.0]}}},
        {"id": "can", "shape": "cylinder", "size": {"radius": 0.05, "height": 0.12}, "material": "abs_plastic",
         "placement": {"surface": {"xy": [0.35, 0.2], "support": "table"}}},
        {"id": "cone", "shape": "cone", "size": {"radius": 0.06, "height": 0.14}, "material": "brass",
         "placement": {"surface": {"xy": [-0.25, -0.1]}}},
    ]
    camera = {"position": [0.0, -1.4, 0.7], "look_at": [0.0, 0.05, 0.1], "fov_deg": 40, "resolution": [W, H]}
    return make_raw(objects, supports, camera=camera, duration=0.5)


@pytest.fixture(scope="module")
def case():
    cfg = resolve(scene_raw())
    run = get_backend("mujoco").simulate(cfg, [0.0, 0.2, 0.4])
    return cfg, run


@pytest.fixture(scope="module")
def rendered(case):
    cfg, run = case
    r = get_renderer("mujoco")
    try:
        yield r.render(cfg, run.poses())
    finally:
        r.close()


def pixel_ray(cam, u, v):
    """World direction d (camera-z component 1) of the ray through continuous pixel coordinates (u, v)."""
    return cam.rotation.T @ (np.linalg.inv(cam.intrinsic) @ np.array([u, v, 1.0]))


def test_pass_shapes_and_types(rendered):
    assert rendered.rgb.shape == (3, H, W, 3) and rendered.rgb.dtype == np.uint8
    assert rendered.depth.shape == (3, H, W) and rendered.depth.dtype == np.float32
    assert rendered.instance.shape == (3, H, W) and rendered.instance.dtype == np.uint8
    assert set(np.unique(rendered.instance)) <= {0, 1, 2, 3, 4}


def test_instance_mask_contains_projected_com_and_depth_is_exact(case, rendered):
    cfg, run = case
    cam = cfg.camera
    model, _ = compile_model(cfg)
    data = mujoco.MjData(model)
    groups = np.zeros(6, np.uint8)
    groups[[GROUP_OBJECTS, GROUP_SUPPORTS]] = 1
    for f in range(len(run.times)):
        for o in cfg.objects:
            p = run.states[o.id].position[f]
            (u, v), _ = cam.project(p)
            col, row = int(np.floor(u)), int(np.floor(v))
            assert rendered.instance[f, row, col] == o.instance_id, (f, o.id)
            d = pixel_ray(cam, col + 0.5, row + 0.5)  # depth is sampled at the pixel centre
            if o.shape == "sphere":  # analytic ray–sphere intersection
                oc = cam.position - p
                a, b, c = d @ d, 2 * d @ oc, oc @ oc - o.primitive.size["radius"] ** 2
                z_true = (-b - np.sqrt(b * b - 4 * a * c)) / (2 * a)
            else:  # MuJoCo's exact ray intersection with the posed geoms
                for oo in cfg.objects:
                    jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, f"object:{oo.id}")
                    a = model.jnt_qposadr[jid]
                    data.qpos[a:a + 3] = run.states[oo.id].position[f]
                    data.qpos[a + 3:a + 7] = run.states[oo.id].quaternion[f]
                mujoco.mj_kinematics(model, data)
                gid = np.array([-1], np.int32)
                z_true = mujoco.mj_ray(model, data, cam.position, d, groups, 1, -1, gid, None)
            assert rendered.depth[f, row, col] == pytest.approx(z_true, abs=0.003), (f, o.id)


def test_sphere_mask_is_centred_on_projection(case):
    cfg, run = case
    r = get_renderer("mujoco", width=4 * W, height=4 * H)  # same camera, finer pixels
    try:
        res = r.render(cfg, {k: v for k, v in run.poses().items()}, passes=("instance",))
    finally:
        r.close()
    ball = cfg.obj("ball")
    rows, cols = np.nonzero(res.instance[0] == ball.instance_id)
    cam = cfg.camera
    (u, v), _ = cam.project(ball.position)
    assert cols.mean() + 0.5 == pytest.approx(4 * u, abs=0.6)
    assert rows.mean() + 0.5 == pytest.approx(4 * v, abs=0.6)


def test_renders_are_byte_identical(case):
    cfg, run = case
    outs = []
    for _ in range(2):
        r = get_renderer("mujoco")
        try:
            outs.append(r.render(cfg, run.poses()))
        finally:
            r.close()
    for p in ("rgb", "depth", "instance"):
        assert getattr(outs[0], p).tobytes() == getattr(outs[1], p).tobytes(), p


def test_hidden_objects_are_absent(case, rendered):
    cfg, run = case
    r = get_renderer("mujoco")
    try:
        one = r.render(cfg, run.poses(), hide=["ball"])
        plate = r.render(cfg, run.poses(), hide=[HIDE_OBJECTS])
        bare = r.render(cfg, run.poses(), passes=("instance", "depth"), hide=[HIDE_SUPPORTS])
        again = r.render(cfg, run.poses(), passes=("instance",))
    finally:
        r.close()
    ball = cfg.obj("ball").instance_id
    assert (rendered.instance == ball).any() and not (one.instance == ball).any()
    assert (one.instance == cfg.obj("box").instance_id).any()
    assert not plate.instance.any()  # clean plate: no objects at all
    assert not np.array_equal(plate.rgb, rendered.rgb)
    # with the supports hidden, objects stay and everything else is far background
    assert (bare.instance > 0).sum() >= (rendered.instance > 0).sum()
    assert (bare.depth[bare.instance == 0] > 100).all()
    # hiding is undone afterwards
    assert np.array_equal(again.instance, rendered.instance)


def test_white_background(case, rendered):
    cfg, run = case
    r = get_renderer("mujoco")
    try:
        white = r.render(cfg, run.poses(), passes=("rgb", "instance"), background="white")
    finally:
        r.close()
    bg = white.instance == 0
    assert bg.any() and (white.rgb[bg] == 255).all()
    assert set(np.unique(white.instance)) == {0, 1, 2, 3, 4}
    obj = white.rgb[~bg]
    assert (obj < 250).any(axis=-1).mean() > 0.5  # objects are drawn, not washed out
    with pytest.raises(ValueError):
        get_renderer("mujoco").render(cfg, run.poses(), hide=["nope"])


def test_analytic_playback_poses_render_like_engine_poses(case, rendered):
    """Any pose source works: a trajectory object with .state(id, t) (the analytic solver's interface)."""
    from types import SimpleNamespace

    from orchard_build.engines import poses_from_trajectory

    cfg, run = case

    class Replay:  # stands in for mechanics.solve(config)
        def state(self, oid, t):
            i = int(np.argmin(np.abs(run.times - t)))
            s = run.states[oid]
            return SimpleNamespace(position=s.position[i], quaternion=s.quaternion[i])

    poses = poses_from_trajectory(Replay(), [o.id for o in cfg.objects], run.times)
    r = get_renderer("mujoco")
    try:
        partial = r.render(cfg, {"ball": poses["ball"]}, passes=("instance",))  # others stay at t = 0
        res = r.render(cfg, poses, passes=("instance",))
    finally:
        r.close()
    assert np.array_equal(res.instance, rendered.instance)
    assert np.array_equal(partial.instance[0], rendered.instance[0])
    with pytest.raises(KeyError):
        get_renderer("nope")
