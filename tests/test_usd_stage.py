"""USD stage for Isaac Sim (CPU, usd-core): every value read back from the written file against the config and
the analytic mass properties, for every shipped config of all ten tasks; pair coefficients; camera projection."""
from __future__ import annotations

import copy
import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest

pxr = pytest.importorskip("pxr", reason="usd-core is not installed (pip install -e '.[isaac]')")
from pxr import Gf, Usd, UsdGeom, UsdPhysics, UsdShade  # noqa: E402

from orchard_build.config import load_config, resolve_config  # noqa: E402
from orchard_build.engines.mujoco_scene import TRACK_THICKNESS, _ramp_vertices, build_mjcf  # noqa: E402
from orchard_build.engines.usd_stage import (BOUNCE_THRESHOLD, ENTITY_ATTR, INSTANCE_ATTR, PairPlan,  # noqa: E402
                                             PhysMat, combine, effective_pair_coefficients, pair_plan,
                                             steps_per_second, write_stage)
from orchard_build.materials import MaterialLibrary, load_materials  # noqa: E402
from orchard_build.tasks import TASK_NAMES  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "scenes"
MATERIALS = load_materials(SCENES / "materials.yaml")


def first_config(task: str) -> Path:
    """The first shipped config of a task (the suite's numbering may change when it is regenerated)."""
    found = sorted((SCENES / task).glob("*.yaml"))
    if not found:
        pytest.fail(f"no shipped config for {task} under {SCENES}")
    return found[0]
CONFIGS = sorted(p for p in SCENES.glob("*/*.yaml"))
F32 = dict(rel=2e-7, abs=1e-9)  # values stored as 32-bit floats


def test_every_task_is_covered():
    assert {p.parent.name for p in CONFIGS} == set(TASK_NAMES)


@pytest.fixture(scope="module", params=CONFIGS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def written(request, tmp_path_factory):
    cfg = load_config(request.param, MATERIALS)
    out = tmp_path_factory.mktemp("usd") / "scene.usda"
    scene = write_stage(cfg, out)
    stage = Usd.Stage.Open(str(out))  # everything below is read back from the file
    assert stage is not None
    return cfg, scene, stage


def _attr(prim, name):
    a = prim.GetAttribute(name)
    assert a and a.HasAuthoredValue(), f"{prim.GetPath()}: {name} not authored"
    return a.Get()


def _api_schemas(prim) -> list[str]:
    """Applied-schema names as authored (GetAppliedSchemas drops PhysxSchema names that usd-core does not know)."""
    op = prim.GetMetadata("apiSchemas")
    return list(op.GetAddedOrExplicitItems()) if op else []


def _world(prim) -> np.ndarray:
    """4×4 local-to-world, column-vector convention."""
    m = UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(Usd.TimeCode.Default())
    return np.array(m, float).T


def _quat_to_mat(q):
    w, x, y, z = np.asarray(q, float) / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


# ---------------------------------------------------------------------------------------------
def test_stage_metadata_and_scene(written):
    cfg, scene, stage = written
    assert UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.z
    assert UsdGeom.GetStageMetersPerUnit(stage) == 1.0
    assert UsdPhysics.GetStageKilogramsPerUnit(stage) == 1.0
    assert stage.GetTimeCodesPerSecond() == cfg.timing.fps
    assert stage.GetEndTimeCode() == cfg.timing.n_frames - 1
    assert stage.GetDefaultPrim().GetPath() == "/World"
    data = stage.GetRootLayer().customLayerData["orchard"]
    assert data["case_id"] == cfg.case_id and data["config_sha256"] == cfg.config_sha256
    assert data["materials_sha256"] == cfg.materials_sha256

    prim = stage.GetPrimAtPath("/World/PhysicsScene")
    ps = UsdPhysics.Scene(prim)
    assert ps
    assert tuple(ps.GetGravityDirectionAttr().Get()) == (0.0, 0.0, -1.0)
    assert ps.GetGravityMagnitudeAttr().Get() == pytest.approx(cfg.g, **F32)
    assert "PhysxSceneAPI" in _api_schemas(prim)
    rate = _attr(prim, "physxScene:timeStepsPerSecond")
    assert rate == scene.steps_per_second == steps_per_second(cfg.timing.fps)
    assert rate % cfg.timing.fps == 0 and rate >= 960
    assert np.allclose(cfg.timing.frame_times * rate, np.round(cfg.timing.frame_times * rate))
    assert _attr(prim, "physxScene:enableEnhancedDeterminism") is True
    assert _attr(prim, "physxScene:enableStabilization") is False
    assert _attr(prim, "physxScene:enableCCD") is True
    assert _attr(prim, "physxScene:enableGPUDynamics") is False
    assert _attr(prim, "physxScene:broadphaseType") == "MBP"
    assert _attr(prim, "physxScene:solverType") == "TGS"
    assert _attr(prim, "physxScene:bounceThreshold") == pytest.approx(BOUNCE_THRESHOLD, **F32)


def test_objects_poses_velocities_and_mass_properties(written):
    cfg, scene, stage = written
    for o in cfg.objects:
        body = stage.GetPrimAtPath(f"/World/Objects/{o.id}")
        assert body.HasAPI(UsdPhysics.RigidBodyAPI) and body.HasAPI(UsdPhysics.MassAPI)
        assert _attr(body, ENTITY_ATTR) == o.id and _attr(body, INSTANCE_ATTR) == o.instance_id
        m = _world(body)
        assert np.allclose(m[:3, 3], o.position, atol=1e-12)
        assert np.allclose(m[:3, :3], _quat_to_mat(o.quaternion), atol=1e-12)
        # analytic mass properties, m = ρV
        mass = o.primitive.mass(MATERIALS[o.material].density)
        assert mass == pytest.approx(o.mass, rel=1e-12)
        mapi = UsdPhysics.MassAPI(body)
        assert mapi.GetMassAttr().Get() == pytest.approx(mass, **F32)
        assert np.allclose(mapi.GetDiagonalInertiaAttr().Get(), o.primitive.inertia_diagonal(mass), rtol=2e-7, atol=0)
        assert tuple(mapi.GetCenterOfMassAttr().Get()) == (0.0, 0.0, 0.0)
        pa = mapi.GetPrincipalAxesAttr().Get()
        assert (pa.GetReal(), tuple(pa.GetImaginary())) == (1.0, (0.0, 0.0, 0.0))
        rb = UsdPhysics.RigidBodyAPI(body)
        assert np.allclose(rb.GetVelocityAttr().Get(), o.linear_velocity, rtol=2e-7, atol=1e-9)
        # USD angular velocity is in degrees per second (world frame: /World has the identity transform)
        assert np.allclose(rb.GetAngularVelocityAttr().Get(), np.degrees(o.angular_velocity), rtol=2e-7, atol=1e-6)
        assert np.allclose(_world(stage.GetPrimAtPath("/World")), np.eye(4))
        # PhysX body settings
        for name in ("PhysxRigidBodyAPI", "PhysxContactReportAPI"):
            assert name in _api_schemas(body)
        assert _attr(body, "physxRigidBody:sleepThreshold") == 0.0
        assert _attr(body, "physxRigidBody:stabilizationThreshold") == 0.0
        assert _attr(body, "physxRigidBody:angularDamping") == 0.0
        assert _attr(body, "physxRigidBody:linearDamping") == 0.0
        assert _attr(body, "physxRigidBody:enableCCD") is True
        assert _attr(body, "physxContactReport:threshold") == 0.0


def test_object_geometry_has_exact_dimensions_about_the_com(written):
    cfg, scene, stage = written
    cache = UsdGeom.BBoxCache(Usd.TimeCode.Default(), [UsdGeom.Tokens.default_, UsdGeom.Tokens.render])
    for o in cfg.objects:
        body = stage.GetPrimAtPath(f"/World/Objects/{o.id}")
        geom = stage.GetPrimAtPath(f"/World/Objects/{o.id}/geom")
        assert geom.HasAPI(UsdPhysics.CollisionAPI)
        s = o.primitive.size
        box = cache.ComputeRelativeBound(geom, body).ComputeAlignedRange()
        lo, hi = np.array(box.GetMin()), np.array(box.GetMax())
        if o.shape == "sphere":
            assert _attr(geom, "radius") == s["radius"]
            want_lo, want_hi = -np.full(3, s["radius"]), np.full(3, s["radius"])
        elif o.shape == "cube":
            assert _attr(geom, "size") == s["edge"]
            want_lo, want_hi = -np.full(3, s["edge"] / 2), np.full(3, s["edge"] / 2)
        else:
            assert _attr(geom, "radius") == s["radius"] and _attr(geom, "height") == s["height"]
            assert _attr(geom, "axis") == "Z"
            r, h = s["radius"], s["height"]
            z0 = -h / 4 if o.shape == "cone" else -h / 2  # base; the body origin is the COM
            want_lo, want_hi = np.array([-r, -r, z0]), np.array([r, r, z0 + h])
        assert np.allclose(lo, want_lo, atol=1e-7) and np.allclose(hi, want_hi, atol=1e-7), (o.id, lo, hi)
        # the geometry is what segmentation reports for this object
        assert scene.instance_of_path[str(geom.GetPath())] == o.instance_id


def test_materials_looks_and_physics(written):
    cfg, scene, stage = written
    for o in cfg.objects:
        geom = stage.GetPrimAtPath(f"/World/Objects/{o.id}/geom")
        look, _ = UsdShade.MaterialBindingAPI(geom).ComputeBoundMaterial()
        assert look.GetPath() == f"/World/Looks/{o.material}"
        shader = UsdShade.Shader(stage.GetPrimAtPath(f"/World/Looks/{o.material}/Shader"))
        assert shader.GetIdAttr().Get() == "UsdPreviewSurface"
        lk = MATERIALS[o.material].look
        assert np.allclose(shader.GetInput("diffuseColor").Get(), lk.base_color, atol=1e-7)
        assert shader.GetInput("roughness").Get() == pytest.approx(lk.roughness, **F32)
        assert shader.GetInput("metallic").Get() == pytest.approx(lk.metallic, **F32)
        phys, _ = UsdShade.MaterialBindingAPI(geom).ComputeBoundMaterial("physics")
        prim = phys.GetPrim()
        assert prim.GetPath() == f"/World/PhysicsMaterials/{o.material}"
        assert prim.HasAPI(UsdPhysics.MaterialAPI) and "PhysxMaterialAPI" in _api_schemas(prim)
        m = MATERIALS[o.material]
        # friction rule geometric mean → √μ with the multiply combine mode; restitution rule min → e with min
        assert _attr(prim, "physxMaterial:frictionCombineMode") == "multiply"
        assert _attr(prim, "physxMaterial:restitutionCombineMode") == "min"
        assert _attr(prim, "physics:staticFriction") == pytest.approx(math.sqrt(m.static_friction), **F32)
        assert _attr(prim, "physics:dynamicFriction") == pytest.approx(math.sqrt(m.dynamic_friction), **F32)
        assert _attr(prim, "physics:restitution") == pytest.approx(m.restitution, **F32)
        assert _attr(prim, "orchard:staticFriction") == m.static_friction


def test_every_contact_pair_gets_the_library_coefficients(written):
    cfg, scene, stage = written
    eff = effective_pair_coefficients(stage)
    supports = {"ground": cfg.ground_material, **{s.id: s.material for s in (*cfg.ramps, *cfg.tracks, *cfg.platforms)}}
    expected = {}
    for i, o in enumerate(cfg.objects):
        for sid, smat in supports.items():
            expected[tuple(sorted((o.id, sid)))] = cfg.materials.pair(o.material, smat)
        for o2 in cfg.objects[i + 1:]:
            expected[tuple(sorted((o.id, o2.id)))] = cfg.materials.pair(o.material, o2.material)
    assert set(eff) == set(expected)  # no support–support pair, every object pair present
    for key, want in expected.items():
        got = eff[key]
        assert len(got) == 1, (key, got)
        (mus, mud, e), = got
        assert (mus, mud, e) == pytest.approx((want.static_friction, want.dynamic_friction, want.restitution),
                                              rel=5e-7, abs=1e-9), key
    assert scene.inexact_pairs == ()


def test_supports(written):
    cfg, scene, stage = written
    ground = stage.GetPrimAtPath("/World/Supports/ground/collider")
    assert ground.IsA(UsdGeom.Plane) and ground.HasAPI(UsdPhysics.CollisionAPI)
    assert _attr(ground, "axis") == "Z" and np.allclose(_world(ground), np.eye(4))
    assert stage.GetPrimAtPath("/World/Supports/ground/visual").IsA(UsdGeom.Mesh)
    for ramp in cfg.ramps:
        mesh = stage.GetPrimAtPath(f"/World/Supports/{ramp.id}/body")
        assert mesh.HasAPI(UsdPhysics.CollisionAPI)
        assert UsdPhysics.MeshCollisionAPI(mesh).GetApproximationAttr().Get() == "convexHull"
        pts = np.array(UsdGeom.Mesh(mesh).GetPointsAttr().Get(), float)
        assert np.allclose(pts, _ramp_vertices(ramp), atol=1e-6)
        # the sliding surface: foot and top edges are vertices
        assert np.min(np.linalg.norm(pts - ramp.top, axis=1)) < 1e-6 + ramp.width / 2
    mj = build_mjcf(cfg)
    for track in cfg.tracks:
        boxes = [p for p in stage.GetPrimAtPath(f"/World/Supports/{track.id}").GetChildren() if p.IsA(UsdGeom.Cube)]
        assert len(boxes) == len(mj.support_geoms[track.id])  # the MuJoCo scene's segments and rails
        assert all(p.HasAPI(UsdPhysics.CollisionAPI) for p in boxes)
        # running-surface segments: centred half a thickness outside the running circle, in its plane,
        # with their thin (local z) axis radial
        seg = [p for p in boxes if p.GetName().startswith("seg")]
        for p in seg[:: max(1, len(seg) // 7)]:
            m = _world(p)
            rel = m[:3, 3] - track.center
            assert abs(np.dot(rel, track.lateral)) < 1e-9
            assert np.linalg.norm(rel) == pytest.approx(track.radius + TRACK_THICKNESS / 2, abs=1e-9)
            assert abs(np.dot(m[:3, 2] / np.linalg.norm(m[:3, 2]), rel / np.linalg.norm(rel))) == pytest.approx(1.0)
            assert np.linalg.norm(m[:3, 2]) == pytest.approx(TRACK_THICKNESS)
    for plat in cfg.platforms:
        box = stage.GetPrimAtPath(f"/World/Supports/{plat.id}/box")
        rng = UsdGeom.BBoxCache(Usd.TimeCode.Default(), [UsdGeom.Tokens.default_]).ComputeWorldBound(box).ComputeAlignedRange()
        assert np.allclose(rng.GetMin(), plat.center - plat.size / 2, atol=1e-9)
        assert np.allclose(rng.GetMax(), plat.center + plat.size / 2, atol=1e-9)
    for sid, root in scene.support_paths.items():
        assert _attr(stage.GetPrimAtPath(root), ENTITY_ATTR) == sid


def test_camera_projects_like_the_opencv_camera(written):
    cfg, scene, stage = written
    cam = cfg.camera
    prim = stage.GetPrimAtPath("/World/Camera")
    ucam = UsdGeom.Camera(prim)
    assert tuple(_attr(prim, "orchard:resolution")) == (cam.width, cam.height)
    assert tuple(ucam.GetClippingRangeAttr().Get()) == pytest.approx((0.02, 200.0))
    # square pixels: apertures in the ratio of the resolution, vertical fov = config fov
    f, ha, va = (ucam.GetFocalLengthAttr().Get(), ucam.GetHorizontalApertureAttr().Get(),
                 ucam.GetVerticalApertureAttr().Get())
    assert ha / va == pytest.approx(cam.width / cam.height, rel=1e-6)
    assert math.degrees(2 * math.atan(va / 2 / f)) == pytest.approx(cam.fov_deg, rel=1e-6)
    # USD camera: looks down its −z, +y up
    m = _world(prim)
    assert np.allclose(m[:3, 3], cam.position)
    assert np.allclose(-m[:3, 2], (cam.look_at - cam.position) / np.linalg.norm(cam.look_at - cam.position))
    frustum = ucam.GetCamera(Usd.TimeCode.Default()).frustum
    view_proj = frustum.ComputeViewMatrix() * frustum.ComputeProjectionMatrix()
    view = frustum.ComputeViewMatrix()
    pts = [cam.look_at] + [o.position for o in cfg.objects]
    for p in pts:
        ndc = view_proj.Transform(Gf.Vec3d(*map(float, p)))
        uv_usd = np.array([(ndc[0] + 1) / 2 * cam.width, (1 - ndc[1]) / 2 * cam.height])
        uv_cv, z_cv = cam.project(np.asarray(p, float))
        assert np.allclose(uv_usd, uv_cv, atol=2e-3), (p, uv_usd, uv_cv)
        assert -view.Transform(Gf.Vec3d(*map(float, p)))[2] == pytest.approx(z_cv, abs=1e-9)


def test_stage_text_is_deterministic(tmp_path):
    cfg = load_config(first_config("composition"), MATERIALS)
    a, b = tmp_path / "a.usda", tmp_path / "b.usda"
    write_stage(cfg, a)
    write_stage(cfg, b)
    assert a.read_bytes() == b.read_bytes()


# ---------------------------------------------------------------------------------------------
# Pair-coefficient strategy beyond the shipped library
# ---------------------------------------------------------------------------------------------
def _config_with(library: MaterialLibrary):
    raw = {
        "schema_version": 1, "task": "composition", "case_number": 1, "seed": 1, "environment": {"g": 9.81},
        "ground": {"material": "concrete"},
        "supports": {"ramps": [{"id": "ramp", "material": "oak", "angle_deg": 25, "length": 1.2, "width": 0.4,
                                "foot": [0.0, 0.0, 0.0]}],
                     "platforms": [{"id": "table", "material": "air_table", "center": [1.4, -0.4, 0.1],
                                    "size": [0.6, 0.4, 0.2]}]},
        "objects": [
            {"id": "ball", "shape": "sphere", "size": {"radius": 0.05}, "material": "rubber",
             "placement": {"ramp": {"ramp": "ramp", "distance_from_top": 0.2}}},
            {"id": "box", "shape": "cube", "size": {"edge": 0.1}, "material": "steel",
             "placement": {"surface": {"xy": [1.3, -0.4], "support": "table"}}},
            {"id": "cone", "shape": "cone", "size": {"radius": 0.06, "height": 0.15}, "material": "putty",
             "placement": {"surface": {"xy": [0.6, 0.3]}}},
        ],
        "camera": {"position": [0.5, -4.0, 1.2], "look_at": [0.5, 0.0, 0.4], "fov_deg": 40, "resolution": [160, 90]},
        "timing": {"fps": 24, "duration": 1.0, "target_time": 0.5},
    }
    return resolve_config(copy.deepcopy(raw), "t.yaml", library)


def _check_exact(cfg, tmp_path):
    scene = write_stage(cfg, tmp_path / "s.usda")
    stage = Usd.Stage.Open(str(tmp_path / "s.usda"))
    eff = effective_pair_coefficients(stage)
    ents = {"ground": cfg.ground_material, "ramp": "oak", "table": "air_table",
            **{o.id: o.material for o in cfg.objects}}
    objs = [o.id for o in cfg.objects]
    checked = 0
    for i, a in enumerate(objs):
        for b in ["ground", "ramp", "table"] + objs[i + 1:]:
            key = tuple(sorted((a, b)))
            want = cfg.materials.pair(ents[a], ents[b])
            if (a, b) in scene.inexact_pairs:
                continue
            assert len(eff[key]) == 1, (key, eff[key])
            assert next(iter(eff[key])) == pytest.approx(
                (want.static_friction, want.dynamic_friction, want.restitution), rel=5e-7, abs=1e-9), key
            checked += 1
    return scene, stage, checked


def test_overrides_get_dedicated_pair_colliders(tmp_path):
    ov = {frozenset(("rubber", "oak")): {"static_friction": 1.1, "dynamic_friction": 0.95, "restitution": 0.9},
          frozenset(("steel", "air_table")): {"static_friction": 0.2, "dynamic_friction": 0.1},
          frozenset(("rubber", "steel")): {"restitution": 0.1}}
    lib = dataclasses.replace(MATERIALS, overrides=ov)
    cfg = _config_with(lib)
    scene, stage, checked = _check_exact(cfg, tmp_path)
    assert checked == 3 * 3 + 3 and scene.inexact_pairs == ()
    assert set(scene.plan.dedicated) == {("ball", "ramp"), ("box", "table"), ("ball", "box")}
    ded = stage.GetPrimAtPath("/World/Objects/ball/geom_for_ramp")
    assert ded.HasAPI(UsdPhysics.CollisionAPI)
    assert UsdGeom.Imageable(ded).ComputeVisibility() == UsdGeom.Tokens.invisible
    assert stage.GetPrimAtPath("/World/CollisionGroups/pair_ball__ramp").IsA(UsdPhysics.CollisionGroup)
    assert "dedicated" in stage.GetRootLayer().customLayerData["orchard"]["pair_strategy"]


@pytest.mark.parametrize("friction,restitution", [("average", "max"), ("min", "average"), ("max", "multiply"),
                                                  ("multiply", "geometric_mean")])
def test_other_pair_rules_are_exact_with_per_key_materials(tmp_path, friction, restitution):
    lib = dataclasses.replace(MATERIALS, friction_rule=friction, restitution_rule=restitution)
    scene, stage, checked = _check_exact(_config_with(lib), tmp_path)
    assert checked == 12 and not scene.plan.dedicated


def test_inexpressible_pairs_are_reported(tmp_path):
    # a `max` rule with an override below either material's value: no PhysX combine mode reaches it
    lib = dataclasses.replace(MATERIALS, friction_rule="max",
                              overrides={frozenset(("rubber", "oak")): {"static_friction": 0.1, "dynamic_friction": 0.1}})
    scene, stage, checked = _check_exact(_config_with(lib), tmp_path)
    assert scene.inexact_pairs == (("ball", "ramp"),) and checked == 11
    assert list(stage.GetRootLayer().customLayerData["orchard"]["inexact_pairs"]) == ["ball|ramp"]


def test_combine_priority_and_plan_helpers():
    assert combine("average", 0.2, "min", 0.6) == 0.2  # min outranks average
    assert combine("multiply", 0.5, "min", 0.6) == pytest.approx(0.3)
    assert combine("max", 0.1, "multiply", 0.6) == 0.6
    assert combine("average", 0.2, "average", 0.6) == pytest.approx(0.4)
    pm = PhysMat(math.sqrt(0.5), math.sqrt(0.4), 0.6, "multiply", "min")
    assert pm.with_partner(PhysMat(math.sqrt(0.8), math.sqrt(0.2), 0.3, "multiply", "min")) == pytest.approx(
        (math.sqrt(0.4), math.sqrt(0.08), 0.3))
    cfg = _config_with(MATERIALS)
    plan = pair_plan(cfg)
    assert isinstance(plan, PairPlan) and plan.strategy == "encoded per-key materials"
    assert plan.entities == ("ball", "box", "cone", "ground", "ramp", "table")
