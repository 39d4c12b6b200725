"""Isaac Sim runner: the pure conversions (no Isaac Sim needed), the clear failure where Isaac Sim is absent,
the CLI's --backend / export-usd wiring, and — marked `isaac`, skipped without `isaacsim` — engine runs."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import numpy as np
import pytest

from orchard_build.camera import Camera
from orchard_build.cli import main
from orchard_build.config import load_config
from orchard_build.engines import HIDE_OBJECTS, HIDE_SUPPORTS, get_backend, get_renderer
from orchard_build.engines.isaac_backend import (FAR_DEPTH, ContactLog, IsaacUnavailableError, contact_kind,
                                                 continuous_quaternions, deg_to_rad, distance_to_depth, hidden_paths,
                                                 instance_lookup, instance_mask, isaac_status, quat_xyzw_to_wxyz,
                                                 rgba_to_rgb, step_indices)
from orchard_build.materials import load_materials

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "scenes"
MATERIALS = load_materials(SCENES / "materials.yaml")


def first_config(task: str) -> Path:
    """The first shipped config of a task (the suite's numbering may change when it is regenerated)."""
    found = sorted((SCENES / task).glob("*.yaml"))
    if not found:
        pytest.fail(f"no shipped config for {task} under {SCENES}")
    return found[0]
HAVE_ISAAC = importlib.util.find_spec("isaacsim") is not None
HAVE_PXR = importlib.util.find_spec("pxr") is not None
needs_isaac = pytest.mark.skipif(not HAVE_ISAAC, reason="NVIDIA Isaac Sim (`isaacsim`) is not importable here; "
                                                        "see docs/isaac-sim.md")


# ---------------------------------------------------------------------------------------------
# Pure conversions
# ---------------------------------------------------------------------------------------------
def test_quaternion_layout_and_continuity():
    assert np.allclose(quat_xyzw_to_wxyz([0.1, 0.2, 0.3, 0.9]), [0.9, 0.1, 0.2, 0.3])
    q = np.array([[1, 0, 0, 0], [-0.99, 0, 0, -0.1], [0.98, 0, 0, 0.2]], float)
    out = continuous_quaternions(q)
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0)
    assert all(np.dot(out[i], out[i + 1]) > 0 for i in range(2))
    assert np.allclose(np.abs(out), np.abs(q / np.linalg.norm(q, axis=1, keepdims=True)))  # same rotations
    # the first one follows the reference (the config's initial quaternion)
    assert continuous_quaternions([[-1.0, 0, 0, 0]], reference=[1.0, 0, 0, 0])[0, 0] == 1.0


def test_angular_velocity_units():
    # USD authors degrees/s; the tensor API reads rad/s
    assert np.allclose(deg_to_rad([180.0, -90.0, 360.0]), [math.pi, -math.pi / 2, 2 * math.pi])


def test_step_indices_on_the_grid():
    rate = 960
    times = np.arange(25) / 24.0
    assert np.array_equal(step_indices(times, rate), np.arange(25) * 40)
    with pytest.raises(ValueError, match="not on the physics step grid"):
        step_indices([0.0, 0.0001], rate)
    with pytest.raises(ValueError, match="non-decreasing"):
        step_indices([0.5, 0.1], rate)


def _cam(w=64, h=48):
    return Camera(np.array([0.0, -3.0, 1.0]), np.array([0.0, 0.0, 1.0]), np.array([0.0, 0.0, 1.0]), 40.0, w, h)


def test_distance_to_camera_becomes_optical_axis_depth():
    cam = _cam()
    # a plane facing the camera at z = 2.5 m along the optical axis: ray length at each pixel centre
    u = np.arange(cam.width) + 0.5
    v = np.arange(cam.height) + 0.5
    xn, yn = (u - cam.width / 2) / cam.fy, (v - cam.height / 2) / cam.fy
    dist = 2.5 * np.sqrt(1 + xn[None, :] ** 2 + yn[:, None] ** 2)
    dist[0, 0] = np.inf  # background
    dist[1, 1] = np.nan
    depth = distance_to_depth(dist.astype(np.float32), cam)
    assert depth.dtype == np.float32 and depth.shape == (cam.height, cam.width)
    assert depth[0, 0] == FAR_DEPTH and depth[1, 1] == FAR_DEPTH
    mask = np.ones_like(depth, bool)
    mask[0, 0] = mask[1, 1] = False
    assert np.allclose(depth[mask], 2.5, atol=1e-5)
    # the centre pixel's ray is (almost) the optical axis; a corner's is longest
    assert dist[cam.height // 2, cam.width // 2] == pytest.approx(2.5, rel=1e-3)
    # (H, W, 1) input is accepted
    assert distance_to_depth(dist[..., None], cam).shape == depth.shape


def test_distance_conversion_matches_projected_points():
    cam = _cam(160, 90)
    p = np.array([0.3, 0.4, 1.2])
    uv, z = cam.project(p)
    ray = np.linalg.norm(p - cam.position)
    dist = np.full((cam.height, cam.width), np.inf)
    col, row = int(uv[0]), int(uv[1])
    # the ray through the pixel centre that holds the point, to a point at the same optical depth
    x = ((col + 0.5) - cam.width / 2) / cam.fy
    y = ((row + 0.5) - cam.height / 2) / cam.fy
    dist[row, col] = z * math.sqrt(1 + x * x + y * y)
    assert distance_to_depth(dist, cam)[row, col] == pytest.approx(z, rel=1e-6)
    assert ray >= z


def test_segmentation_ids_become_instance_ids():
    object_paths = {"ball": "/World/Objects/ball", "ball2": "/World/Objects/ball2"}
    instances = {"ball": 1, "ball2": 2}
    labels = {"0": "BACKGROUND", "3": "/World/Objects/ball/geom", "7": "/World/Objects/ball2/geom",
              "9": "/World/Supports/ground/visual", "11": "/World/Objects/ball"}
    lut = instance_lookup(labels, object_paths, instances)
    assert lut == {3: 1, 7: 2, 11: 1}  # 'ball' is no prefix of 'ball2'
    ids = np.array([[0, 3, 7], [9, 11, 42]], np.uint32)
    mask = instance_mask(ids, lut, 2)
    assert mask.dtype == np.uint8 and mask.tolist() == [[0, 1, 2], [0, 1, 0]]
    assert instance_mask(ids[..., None], lut, 300).dtype == np.uint16


def test_rgba_to_rgb():
    rgba = np.zeros((2, 3, 4), np.uint8)
    rgba[..., 0] = 200
    rgba[..., 3] = 255
    out = rgba_to_rgb(rgba)
    assert out.shape == (2, 3, 3) and out.dtype == np.uint8 and out[0, 0].tolist() == [200, 0, 0]
    assert rgba_to_rgb(np.full((1, 1, 4), 0.5, np.float32))[0, 0].tolist() == [128, 128, 128]


class _Kind:
    def __init__(self, name):
        self.name = name


def test_contact_log_merges_collider_pairs_into_entity_events():
    assert contact_kind(_Kind("CONTACT_FOUND")) == "found"
    assert contact_kind("ContactEventType.CONTACT_LOST") == "lost"
    assert contact_kind(_Kind("CONTACT_PERSIST")) is None
    log = ContactLog()
    log.update(0.0, "found", "ball", "ramp", ("/a", "/r"))
    log.update(0.1, "found", "ramp", "ball", ("/a2", "/r"))  # a second collider pair of the same entities
    log.update(0.2, "lost", "ball", "ramp", ("/a", "/r"))  # still touching through the other pair
    log.update(0.3, "lost", "ball", "ramp", ("/a2", "/r"))
    log.update(0.3, "found", "ball", "ground", ("/a", "/g"))
    log.update(0.4, "lost", "ball", "ball", ("/a", "/a2"))  # same entity: ignored
    log.update(0.5, "lost", "box", "ground", ("/b", "/g"))  # never found: ignored
    ev = [(e.t, e.body_a, e.body_b, e.kind) for e in log.finish()]
    assert ev == [(0.0, "ball", "ramp", "begin"), (0.3, "ball", "ground", "begin"), (0.3, "ball", "ramp", "end")]


class _Scene:
    object_paths = {"ball": "/World/Objects/ball"}
    support_paths = {"ground": "/World/Supports/ground", "ramp": "/World/Supports/ramp"}


def test_hidden_paths():
    s = _Scene()
    assert hidden_paths(s, [HIDE_OBJECTS]) == ["/World/Objects/ball"]
    assert hidden_paths(s, [HIDE_SUPPORTS]) == ["/World/Supports/ground", "/World/Supports/ramp"]
    assert hidden_paths(s, ["ramp"]) == ["/World/Supports/ramp"]
    with pytest.raises(ValueError, match="unknown ids"):
        hidden_paths(s, ["nope"])


# ---------------------------------------------------------------------------------------------
# Without Isaac Sim: a clear error, not a traceback
# ---------------------------------------------------------------------------------------------
@pytest.mark.skipif(HAVE_ISAAC, reason="Isaac Sim is installed here")
def test_selecting_isaac_without_isaacsim_fails_clearly():
    st = isaac_status()
    assert not st["available"] and any("isaacsim" in m for m in st["missing"])
    assert "pip install" in st["message"] and "RTX" in st["message"]
    for factory in (get_backend, get_renderer):
        with pytest.raises(IsaacUnavailableError, match="isaacsim"):
            factory("isaac")


@pytest.mark.skipif(HAVE_ISAAC, reason="Isaac Sim is installed here")
def test_cli_backend_isaac_without_isaacsim(tmp_path, capsys):
    rc = main(["--task", "free_fall", "--backend", "isaac", "--out", str(tmp_path / "ds"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "isaacsim" in err and "pip install" in err and "Traceback" not in err
    assert not (tmp_path / "ds").exists()


def test_cli_backend_option_sets_the_render_backend(tmp_path):
    cfg = first_config("free_fall")
    out = tmp_path / "ds"
    assert main(["--config", str(cfg), "--backend", "mujoco", "--no-render", "--out", str(out), "--no-progress"]) == 0
    resolved = json.loads(next(out.glob("cases/*/*/*/config_resolved.json")).read_text())
    assert resolved["render"].get("backend") == "mujoco"
    # the next build without --backend is not affected
    out2 = tmp_path / "ds2"
    assert main(["--config", str(cfg), "--no-render", "--out", str(out2), "--no-progress"]) == 0
    resolved = json.loads(next(out2.glob("cases/*/*/*/config_resolved.json")).read_text())
    assert "backend" not in resolved["render"]


@pytest.mark.skipif(not HAVE_PXR, reason="usd-core is not installed (pip install -e '.[isaac]')")
def test_cli_export_usd(tmp_path, capsys):
    out = tmp_path / "ds"
    cfg = first_config("inclined_plane")
    assert main(["--config", str(cfg), "--no-render", "--out", str(out), "--no-progress"]) == 0
    case = next(out.glob("cases/*/*/*/"))
    assert main(["export-usd", str(case)]) == 0
    from pxr import Usd

    stage = Usd.Stage.Open(str(case / "scene.usda"))
    resolved = load_config(cfg, MATERIALS)
    assert stage.GetRootLayer().customLayerData["orchard"]["case_id"] == resolved.case_id
    assert stage.GetPrimAtPath(f"/World/Objects/{resolved.objects[0].id}").IsValid()
    assert main(["export-usd", str(cfg), "--out", str(tmp_path / "x.usdc")]) == 0
    assert Usd.Stage.Open(str(tmp_path / "x.usdc")).GetPrimAtPath("/World/Camera").IsValid()
    assert main(["export-usd", str(tmp_path / "missing")]) == 2
    assert "no case config" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# With Isaac Sim (RTX machine): engine runs
# ---------------------------------------------------------------------------------------------
@pytest.mark.isaac
@needs_isaac
def test_isaac_free_fall_matches_analytic():
    from orchard_build.mechanics import solve

    cfg = load_config(first_config("free_fall"), MATERIALS)
    times = cfg.timing.frame_times
    run = get_backend("isaac").simulate(cfg, times)
    traj = solve(cfg).sample(times)
    for o in cfg.objects:
        dev = np.linalg.norm(run.states[o.id].position - traj[o.id]["position"], axis=1)
        assert dev.max() < 5e-3, (o.id, dev.max())
    assert run.engine == "isaac" and run.info["device"] == "cpu"


@pytest.mark.isaac
@needs_isaac
def test_isaac_is_deterministic():
    cfg = load_config(first_config("inelastic_collision"), MATERIALS)
    a = get_backend("isaac").simulate(cfg)
    b = get_backend("isaac").simulate(cfg)
    for oid in a.states:
        assert np.array_equal(a.states[oid].position, b.states[oid].position)
    assert [(e.t, e.body_a, e.body_b, e.kind) for e in a.contacts] == [(e.t, e.body_a, e.body_b, e.kind) for e in b.contacts]


@pytest.mark.isaac
@needs_isaac
def test_isaac_render_passes_are_consistent():
    cfg = load_config(first_config("at_rest"), MATERIALS)
    poses = {o.id: (o.position[None], o.quaternion[None]) for o in cfg.objects}
    with get_renderer("isaac") as r:
        out = r.render(cfg, poses)
    h, w = cfg.camera.height, cfg.camera.width
    assert out.rgb.shape == (1, h, w, 3) and out.depth.shape == (1, h, w) and out.instance.shape == (1, h, w)
    for o in cfg.objects:
        uv, z = cfg.camera.project(o.position)
        col, row = int(uv[0]), int(uv[1])
        assert out.instance[0, row, col] == o.instance_id
        assert out.depth[0, row, col] < z  # the visible surface lies in front of the centre of mass
