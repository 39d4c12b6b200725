import math

import numpy as np
import pytest
import yaml

from orchard_build.config import load_config, resolve_config
from orchard_build.errors import ConfigError
from tests.conftest import FIXTURES, SCENES

ALL_CONFIGS = sorted(FIXTURES.glob("*/*.yaml")) + sorted(SCENES.glob("*/*.yaml"))


@pytest.mark.parametrize("path", ALL_CONFIGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_every_shipped_config_resolves(path, materials):
    cfg = load_config(path, materials)
    assert cfg.task.name == path.parent.name
    for o in cfg.objects:
        assert o.mass == pytest.approx(materials[o.material].density * o.primitive.volume, rel=1e-12)
        assert np.linalg.norm(o.quaternion) == pytest.approx(1.0)


def test_placement_on_ramp_touches_the_surface(scene_raw, materials):
    cfg = resolve_config(scene_raw("inclined_plane/000000.yaml"), "t.yaml", materials)
    ramp, cube = cfg.ramps[0], cfg.objects[0]
    # COM is half an edge above the sliding surface
    offset = np.dot(cube.position - ramp.surface_point(0.15), ramp.normal)
    assert offset == pytest.approx(0.05)
    # body z axis along the surface normal
    w, x, y, z = cube.quaternion
    body_z = np.array([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)])
    assert np.allclose(body_z, ramp.normal)


def test_rolling_bodies_start_with_consistent_spin(scene_raw, materials):
    cfg = resolve_config(scene_raw("uniform_linear_motion/000001.yaml"), "t.yaml", materials)
    ball = cfg.objects[0]
    r = ball.primitive.size["radius"]
    contact_velocity = ball.linear_velocity + np.cross(ball.angular_velocity, np.array([0, 0, -r]))
    assert np.allclose(contact_velocity, 0.0)


def _err(raw, materials):
    with pytest.raises(ConfigError) as info:
        resolve_config(raw, "bad.yaml", materials)
    return info.value


def test_unknown_material(scene_raw, materials):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["objects"][0]["material"] = "unobtainium"
    e = _err(raw, materials)
    assert e.field == "objects[0].material" and "unknown material" in e.reason and e.file == "bad.yaml"


def test_unknown_shape(scene_raw, materials):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["objects"][0]["shape"] = "torus"
    assert _err(raw, materials).field == "objects[0].shape"


@pytest.mark.parametrize("value", [-0.1, 0.0, float("nan"), float("inf")])
def test_bad_dimension(scene_raw, materials, value):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["objects"][0]["size"]["edge"] = value
    e = _err(raw, materials)
    assert e.field == "objects[0].size.edge"


def test_wrong_size_keys(scene_raw, materials):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["objects"][0]["size"] = {"radius": 0.1}
    e = _err(raw, materials)
    assert e.field == "objects[0].size" and "edge" in e.reason


@pytest.mark.parametrize("angle", [0, 90, -10, 120])
def test_ramp_angle_outside_open_interval(scene_raw, materials, angle):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["supports"]["ramps"][0]["angle_deg"] = angle
    e = _err(raw, materials)
    assert e.field == "supports.ramps[0].angle_deg" and "between 0° and 90°" in e.reason


def test_target_time_after_duration(scene_raw, materials):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["timing"]["target_time"] = 2.0
    e = _err(raw, materials)
    assert e.field == "timing.target_time" and "after T" in e.reason


@pytest.mark.parametrize("where", ["objects", "placement", "top"])
def test_mass_in_config_refused(scene_raw, materials, where):
    raw = scene_raw("inclined_plane/000000.yaml")
    if where == "objects":
        raw["objects"][0]["mass"] = 1.0
    elif where == "placement":
        raw["objects"][0]["placement"]["ramp"]["mass"] = 1.0
    else:
        raw["mass"] = 2.0
    e = _err(raw, materials)
    assert "must not state a mass" in e.reason


def test_duplicate_object_id(scene_raw, materials):
    raw = scene_raw("perfectly_elastic_collision/000000.yaml")
    raw["objects"][1]["id"] = raw["objects"][0]["id"]
    e = _err(raw, materials)
    assert "duplicate" in e.reason


def test_density_must_come_from_the_library(scene_raw, materials):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["objects"][0]["density"] = 100.0
    e = _err(raw, materials)
    assert e.field == "objects[0]" and "density" in e.reason


def test_not_yaml(tmp_path, materials):
    p = tmp_path / "broken.yaml"
    p.write_text("task: [unclosed\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(p, materials)


def test_missing_file(tmp_path, materials):
    with pytest.raises(ConfigError, match="cannot read config"):
        load_config(tmp_path / "nope.yaml", materials)


def test_rest_pose_not_allowed(scene_raw, materials):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["objects"][0]["placement"]["ramp"]["rest_pose"] = "side"
    e = _err(raw, materials)
    assert e.field.endswith("rest_pose") and "cube" in e.reason


def test_placement_beyond_ramp(scene_raw, materials):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["objects"][0]["placement"]["ramp"]["distance_from_top"] = 5.0
    e = _err(raw, materials)
    assert e.field.endswith("distance_from_top")


def test_camera_degenerate(scene_raw, materials):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["camera"]["look_at"] = raw["camera"]["position"]
    assert _err(raw, materials).field == "camera"


def test_camera_projection_roundtrip(scene_raw, materials):
    cfg = resolve_config(scene_raw("inclined_plane/000000.yaml"), "t.yaml", materials)
    cam = cfg.camera
    uv, depth = cam.project(cam.look_at)
    assert np.allclose(uv, [cam.width / 2, cam.height / 2])
    assert depth == pytest.approx(np.linalg.norm(cam.look_at - cam.position))
    # a point above the look-at point appears higher in the image (smaller v)
    uv_up, _ = cam.project(cam.look_at + np.array([0, 0, 0.1]))
    assert uv_up[1] < uv[1]
    assert cam.intrinsic[1, 1] == pytest.approx((cam.height / 2) / math.tan(math.radians(cam.fov_deg / 2)))


def test_duration_must_be_whole_frames(scene_raw, materials):
    raw = scene_raw("inclined_plane/000000.yaml")
    raw["timing"]["duration"] = 1.01
    e = _err(raw, materials)
    assert e.field == "timing.duration" and "whole number of frames" in e.reason
