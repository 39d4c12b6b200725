"""CaseConfig → OpenUSD stage for NVIDIA Isaac Sim (PhysX), on the CPU with ``usd-core`` (``pxr``).

The stage is a complete, self-describing simulation and render input: the Isaac runner
(:mod:`.isaac_backend`) only opens it, steps it and reads it back, and ``orchard-build export-usd``
writes it next to a case for inspection in any USD tool.

Layout
------
* Stage metadata: ``upAxis = Z``, ``metersPerUnit = 1``, ``kilogramsPerUnit = 1`` (SI throughout),
  ``timeCodesPerSecond = fps``, time codes 0 … n_frames − 1, ``defaultPrim = /World``. The layer's
  ``customLayerData["orchard"]`` records the case id, config/material SHA-256s, the physics rate and the
  pair-coefficient strategy.
* ``/World/PhysicsScene`` — ``UsdPhysics.Scene`` (gravity direction −z, magnitude g) with the PhysX scene
  settings as raw ``physxScene:*`` attributes (usd-core has no PhysxSchema; the applied-schema names are
  added to ``apiSchemas`` so Isaac Sim parses them): fixed ``timeStepsPerSecond`` (a whole multiple of the
  fps, so every frame time falls on a step), TGS solver, CPU dynamics with the MBP broad phase, CCD, enhanced
  determinism, stabilisation off and an explicit bounce threshold.
* ``/World/Objects/<id>`` — one rigid body per object: an ``Xform`` at the centre of mass (translate, orient
  (w, x, y, z), unit scale) carrying ``PhysicsRigidBodyAPI`` (initial ``physics:velocity`` in m/s and
  ``physics:angularVelocity`` in DEGREES per second, both in the parent frame, and ``/World`` has the
  identity transform, so world frame), ``PhysicsMassAPI`` authored from the analytic values (mass = ρV,
  ``diagonalInertia`` = principal moments, ``centerOfMass`` = 0, ``principalAxes`` = identity: the body
  frame is the principal frame), ``PhysxRigidBodyAPI`` (sleeping off: ``sleepThreshold`` 0, no
  stabilisation, no damping, CCD) and ``PhysxContactReportAPI`` (threshold 0). Its child ``geom`` is the
  primitive with exact dimensions: ``Sphere``/``Cube``/``Cylinder``/``Cone`` (USD centres cylinders and
  cones on their axis midpoint; the cone is shifted by +h/4 so that the body origin is its centre of mass,
  base at −h/4, apex at +3h/4). ``geom`` is both the visible prim and the collider.
* ``/World/Supports/<id>`` — static colliders: ``ground`` (an invisible ``Plane`` collider + a visible quad),
  ramps (one convex prism ``Mesh``, collision approximation ``convexHull``: exact for a convex prism), tracks
  (the MuJoCo scene's segment boxes and side rails, same constants), platforms (a box).
* ``/World/Looks/<material>`` — one ``UsdPreviewSurface`` material per material key (base colour,
  roughness, metallic; procedural textures are not exported).
* ``/World/PhysicsMaterials/<material>`` — one physics material per key (``PhysicsMaterialAPI`` +
  ``physxMaterial:*CombineMode``), bound with purpose ``physics``; see *pair coefficients* below.
* ``/World/Camera`` — ``UsdGeom.Camera`` converted from the OpenCV camera (USD cameras look down −z with +y
  up): focal length and apertures reproduce the config's vertical field of view with square pixels,
  clipping range [0.02, 200] m like the MuJoCo renderer. ``/World/Lights`` holds a sun and a dim sky.
* Every prim that belongs to an entity carries ``orchard:entity`` (object id, support id or ``ground``);
  object bodies carry ``orchard:instanceId`` (the mask value).

Pair coefficients
-----------------
Every consumer must see ``config.materials.pair(a, b)`` for a contact. PhysX combines the two colliders'
materials with the combine mode of higher priority (average < min < multiply < max). Strategy:

1. *Encoded per-key materials* (exact for every pair under the library's rules, no per-pair state): each
   key's physics material stores ``encode(rule, value)`` with the combine mode that realises the rule:
   geometric mean → ``multiply`` of square roots (√μa·√μb = √(μa μb)), min → ``min``, max → ``max``,
   average → ``average``, multiply → ``multiply``. With the shipped rules (friction geometric mean,
   restitution min) the per-key material therefore holds √μs, √μd (friction mode ``multiply``) and e
   (restitution mode ``min``); the true coefficients are kept beside them as ``orchard:*`` attributes.
2. *Dedicated pair colliders* (library ``overrides``, or anything step 1 cannot express): the object (the
   first of the pair in config order when both are objects) gets an extra invisible collider
   ``geom_for_<partner>`` with the same geometry and a dedicated material whose values and combine modes
   make PhysX's combination with the partner's material equal the pair value; collision groups route
   that partner's contacts to the dedicated collider only (``/World/CollisionGroups``). A pair that no
   combine mode can express (e.g. a ``max`` library rule with a smaller override) is listed in
   ``UsdScene.inexact_pairs`` and in the layer metadata.

:func:`effective_pair_coefficients` evaluates the stage with PhysX's documented combine and group
filtering rules (a model, not PhysX itself), which the tests compare with ``materials.pair``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OrchardError

# Geometry shared with the MuJoCo scene, so both engines simulate the same supports.
from .mujoco_scene import (RAIL_STEP_DEG, RAIL_WIDTH, TRACK_STEP_DEG, TRACK_THICKNESS, ZFAR, ZNEAR, _ramp_vertices,
                           _track_rails, scene_bounds)

INSTALL_HINT = 'pip install "usd-core>=24.0"  (or: pip install -e ".[isaac]")'

# ---- physics settings -------------------------------------------------------------------------
TARGET_RATE_HZ = 960  # physics steps per second are the smallest multiple of the fps at or above this
BOUNCE_THRESHOLD = 0.05  # m/s: relative normal speed below which PhysX does not bounce (its default is 0.2)
SOLVER_POSITION_ITERATIONS = 16
SOLVER_VELOCITY_ITERATIONS = 4
CONTACT_REPORT_THRESHOLD = 0.0
REST_OFFSET = 0.0
GROUND_HALF_SIZE = 100.0  # m, visible ground quad
FOCAL_LENGTH = 24.0  # camera focal length (tenths of a stage unit; only focal/aperture ratios matter)

COMBINE_PRIORITY = {"average": 0, "min": 1, "multiply": 2, "max": 3}  # PhysX: the higher one wins
RULE_MODE = {"geometric_mean": "multiply", "multiply": "multiply", "min": "min", "max": "max", "average": "average"}

# raw PhysxSchema names (usd-core ships UsdPhysics but not PhysxSchema)
PHYSX_SCENE_API = "PhysxSceneAPI"
PHYSX_RIGID_BODY_API = "PhysxRigidBodyAPI"
PHYSX_MATERIAL_API = "PhysxMaterialAPI"
PHYSX_COLLISION_API = "PhysxCollisionAPI"
PHYSX_CONTACT_REPORT_API = "PhysxContactReportAPI"
FRICTION_COMBINE = "physxMaterial:frictionCombineMode"
RESTITUTION_COMBINE = "physxMaterial:restitutionCombineMode"

WORLD = "/World"
OBJECTS = "/World/Objects"
SUPPORTS = "/World/Supports"
LOOKS = "/World/Looks"
PHYSICS_MATERIALS = "/World/PhysicsMaterials"
GROUPS = "/World/CollisionGroups"
CAMERA = "/World/Camera"
SCENE = "/World/PhysicsScene"
ENTITY_ATTR = "orchard:entity"
INSTANCE_ATTR = "orchard:instanceId"


class UsdUnavailableError(OrchardError):
    """usd-core (pxr) is not installed."""


def _pxr():
    try:
        from pxr import Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt
    except ImportError as exc:  # pragma: no cover - exercised only without usd-core
        raise UsdUnavailableError(f"writing a USD stage needs OpenUSD's Python bindings (pxr): {INSTALL_HINT}") from exc
    return Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt


# ---------------------------------------------------------------------------------------------
# Pure helpers (no pxr)
# ---------------------------------------------------------------------------------------------
def steps_per_second(fps: int, target: int = TARGET_RATE_HZ) -> int:
    """Physics rate: a whole multiple of the fps (every frame time is a step time), at least `target`."""
    return int(fps) * max(1, int(math.ceil(target / int(fps))))


def encode(rule: str, value: float) -> float:
    """Value a per-key PhysX material stores so that PhysX's combine mode realises `rule`."""
    if rule not in RULE_MODE:
        raise ValueError(f"unknown pair rule {rule!r}; known: {', '.join(RULE_MODE)}")
    return math.sqrt(value) if rule == "geometric_mean" else float(value)


def combine(mode_a: str, a: float, mode_b: str, b: float) -> float:
    """PhysX's combination of two material values: the combine mode of higher priority wins."""
    mode = mode_a if COMBINE_PRIORITY[mode_a] >= COMBINE_PRIORITY[mode_b] else mode_b
    if mode == "average":
        return 0.5 * (a + b)
    if mode == "min":
        return min(a, b)
    if mode == "multiply":
        return a * b
    return max(a, b)


@dataclass(frozen=True)
class PhysMat:
    """A PhysX material as authored: the three values and the two combine modes."""
    static_friction: float
    dynamic_friction: float
    restitution: float
    friction_mode: str
    restitution_mode: str

    def with_partner(self, other: "PhysMat") -> tuple[float, float, float]:
        return (combine(self.friction_mode, self.static_friction, other.friction_mode, other.static_friction),
                combine(self.friction_mode, self.dynamic_friction, other.friction_mode, other.dynamic_friction),
                combine(self.restitution_mode, self.restitution, other.restitution_mode, other.restitution))


def key_material(library, key: str) -> PhysMat:
    m = library[key]
    fr, rr = library.friction_rule, library.restitution_rule
    return PhysMat(encode(fr, m.static_friction), encode(fr, m.dynamic_friction), encode(rr, m.restitution),
                   RULE_MODE[fr], RULE_MODE[rr])


def _solve_side(targets: tuple[float, ...], partner: tuple[float, ...], partner_mode: str) -> tuple[str, tuple[float, ...]] | None:
    """Mode and values v with combine(mode, v, partner_mode, s) == target for every component, or None."""
    for mode in ("max", "min", "multiply"):
        if COMBINE_PRIORITY[mode] < COMBINE_PRIORITY[partner_mode]:
            continue  # the partner's mode would win
        if mode == "max" and all(t >= s - 1e-12 for t, s in zip(targets, partner)):
            return mode, targets
        if mode == "min" and all(t <= s + 1e-12 for t, s in zip(targets, partner)):
            return mode, targets
        if mode == "multiply" and all(s > 0 for s in partner):
            return mode, tuple(t / s for t, s in zip(targets, partner))
    return None


def dedicated_material(pair, partner: PhysMat) -> PhysMat | None:
    """Material for a dedicated collider whose contact with `partner` gives the pair coefficients exactly."""
    f = _solve_side((pair.static_friction, pair.dynamic_friction), (partner.static_friction, partner.dynamic_friction),
                    partner.friction_mode)
    r = _solve_side((pair.restitution,), (partner.restitution,), partner.restitution_mode)
    if f is None or r is None:
        return None
    return PhysMat(f[1][0], f[1][1], r[1][0], f[0], r[0])


@dataclass(frozen=True)
class PairPlan:
    """How every contact pair gets its coefficients (see the module docstring)."""
    entities: tuple[str, ...]  # objects in config order, then 'ground' and the supports
    key_materials: dict[str, PhysMat]
    dedicated: dict[tuple[str, str], PhysMat]  # (object id, partner entity) -> material of the extra collider
    inexact: tuple[tuple[str, str], ...]  # pairs no combine mode can express

    @property
    def strategy(self) -> str:
        return "encoded per-key materials" + (" + dedicated pair colliders" if self.dedicated else "")


def _close(a, b, tol: float = 1e-9) -> bool:
    return all(abs(x - y) <= tol * max(1.0, abs(y)) for x, y in zip(a, b))


def pair_plan(config) -> PairPlan:
    lib = config.materials
    entity_material = {o.id: o.material for o in config.objects}
    entity_material["ground"] = config.ground_material
    for s in (*config.ramps, *config.tracks, *config.platforms):
        entity_material[s.id] = s.material
    keys = sorted(set(entity_material.values()))
    km = {k: key_material(lib, k) for k in keys}
    objects = [o.id for o in config.objects]
    supports = ["ground"] + [s.id for s in (*config.ramps, *config.tracks, *config.platforms)]
    dedicated, inexact = {}, []
    for i, oid in enumerate(objects):
        for partner in supports + objects[i + 1:]:
            a, b = entity_material[oid], entity_material[partner]
            want = lib.pair(a, b)
            target = (want.static_friction, want.dynamic_friction, want.restitution)
            if _close(km[a].with_partner(km[b]), target):
                continue
            mat = dedicated_material(want, km[b])
            if mat is None:
                inexact.append((oid, partner))
            else:
                dedicated[(oid, partner)] = mat
    return PairPlan(tuple(objects + supports), km, dedicated, tuple(inexact))


def camera_apertures(camera, focal_length: float = FOCAL_LENGTH) -> tuple[float, float, float]:
    """(focal length, horizontal aperture, vertical aperture) of a pinhole with the camera's fov and square pixels."""
    vertical = 2.0 * focal_length * math.tan(math.radians(camera.fov_deg) / 2.0)
    return focal_length, vertical * camera.width / camera.height, vertical


def camera_to_world_usd(camera) -> np.ndarray:
    """4×4 camera-to-world matrix (column-vector convention) of the USD camera: x right, y up, looking down −z."""
    right, down, forward = camera.rotation  # rows of the OpenCV world→camera rotation
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2] = right, -down, -forward
    m[:3, 3] = camera.position
    return m


def light_direction(config) -> np.ndarray:
    """Sun direction (unit, pointing from the light into the scene), the one the MuJoCo scene uses."""
    cam = config.camera
    fwd = cam.look_at - cam.position
    fwd_h = np.array([fwd[0], fwd[1], 0.0])
    fwd_h = fwd_h / np.linalg.norm(fwd_h) if np.linalg.norm(fwd_h) > 1e-9 else np.array([1.0, 0.0, 0.0])
    right_h = np.cross(fwd_h, [0.0, 0.0, 1.0])
    d = 0.45 * fwd_h + 0.35 * right_h - np.array([0.0, 0.0, 1.0])
    return d / np.linalg.norm(d)


def _quat_from_axes(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    from scipy.spatial.transform import Rotation

    q = Rotation.from_matrix(np.stack([x, y, z], axis=1)).as_quat()  # x, y, z, w
    q = np.array([q[3], q[0], q[1], q[2]])
    return q if q[0] >= 0 else -q


def _prism_faces(n_section: int) -> tuple[list[int], list[int]]:
    """Face vertex counts and indices of a prism whose vertex 2i/2i+1 is section point i at −/+ lateral."""
    counts, idx = [n_section, n_section], [2 * i for i in range(n_section)] + [2 * i + 1 for i in reversed(range(n_section))]
    for i in range(n_section):
        j = (i + 1) % n_section
        counts.append(4)
        idx += [2 * i, 2 * j, 2 * j + 1, 2 * i + 1]
    return counts, idx


def track_boxes(config, track) -> list[tuple[str, np.ndarray, np.ndarray, np.ndarray]]:
    """(name, centre, quaternion wxyz, full extents) of a track's running-surface segments and rails,
    the same boxes as the MuJoCo scene."""
    a0, a1 = track.arc
    half_width, rail_h = _track_rails(config, track)
    t = TRACK_THICKNESS
    out = []
    n = max(1, int(math.ceil(math.degrees(a1 - a0) / TRACK_STEP_DEG - 1e-9)))
    dphi = (a1 - a0) / n
    half_len = (track.radius + t) * math.tan(dphi / 2.0) + 1e-4
    for k in range(n):
        phi = a0 + (k + 0.5) * dphi
        radial = track.radial(phi)
        q = _quat_from_axes(track.tangent(phi), track.lateral, -radial)
        out.append((f"seg{k:04d}", track.center + (track.radius + t / 2.0) * radial, q,
                    np.array([2 * half_len, 2 * half_width, t])))
    n = max(1, int(math.ceil(math.degrees(a1 - a0) / RAIL_STEP_DEG - 1e-9)))
    dphi = (a1 - a0) / n
    half_len = (track.radius + t) * math.tan(dphi / 2.0) + 1e-4
    for k in range(n):
        phi = a0 + (k + 0.5) * dphi
        radial = track.radial(phi)
        q = _quat_from_axes(track.tangent(phi), track.lateral, -radial)
        for side, s in (("a", 1.0), ("b", -1.0)):
            pos = (track.center + (track.radius + (t - rail_h) / 2.0) * radial
                   + s * (half_width + RAIL_WIDTH / 2.0) * track.lateral)
            out.append((f"rail{k:04d}{side}", pos, q, np.array([2 * half_len, RAIL_WIDTH, rail_h + t])))
    return out


# ---------------------------------------------------------------------------------------------
# Stage
# ---------------------------------------------------------------------------------------------
@dataclass
class UsdScene:
    stage: Any  # pxr.Usd.Stage
    object_paths: dict[str, str]  # object id -> rigid body prim path
    geom_paths: dict[str, str]  # object id -> visible geometry prim path (what segmentation reports)
    instance_of_path: dict[str, int]  # visible object geometry prim path -> instance id
    entity_of_collider: dict[str, str]  # collider prim path -> entity
    support_paths: dict[str, str]  # support id / 'ground' -> root prim path
    steps_per_second: int
    plan: PairPlan
    info: dict = field(default_factory=dict)

    @property
    def inexact_pairs(self) -> tuple[tuple[str, str], ...]:
        return self.plan.inexact

    def entity_of_path(self, path: str) -> str | None:
        """Entity of any prim path under an entity's root (colliders, geometry, bodies)."""
        p = str(path)
        for root, ent in self._roots():
            if p == root or p.startswith(root + "/"):
                return ent
        return None

    def _roots(self):
        return [(v, k) for k, v in self.object_paths.items()] + [(v, k) for k, v in self.support_paths.items()]


class _Writer:
    def __init__(self, config, stage):
        self.cfg, self.stage = config, stage
        (self.Gf, self.Sdf, self.Usd, self.UsdGeom, self.UsdLux, self.UsdPhysics, self.UsdShade,
         self.Vt) = _pxr()
        self.looks: dict[str, Any] = {}
        self.phys: dict[str, Any] = {}
        self.entity_of_collider: dict[str, str] = {}
        self.colliders_of: dict[str, list[str]] = {}

    # ---- small helpers -------------------------------------------------------------------------
    def raw(self, prim, name: str, type_name, value) -> None:
        prim.CreateAttribute(name, type_name, custom=False).Set(value)

    def xform(self, prim, position=None, quat=None, scale=None) -> None:
        x = self.UsdGeom.Xformable(prim)
        x.ClearXformOpOrder()
        if position is not None:
            x.AddTranslateOp(self.UsdGeom.XformOp.PrecisionDouble).Set(self.Gf.Vec3d(*map(float, position)))
        if quat is not None:
            q = np.asarray(quat, float) / np.linalg.norm(quat)
            x.AddOrientOp(self.UsdGeom.XformOp.PrecisionDouble).Set(self.Gf.Quatd(float(q[0]), self.Gf.Vec3d(*map(float, q[1:]))))
        if scale is not None:
            x.AddScaleOp(self.UsdGeom.XformOp.PrecisionDouble).Set(self.Gf.Vec3d(*map(float, scale)))

    def tag(self, prim, entity: str) -> None:
        prim.CreateAttribute(ENTITY_ATTR, self.Sdf.ValueTypeNames.String, custom=True).Set(entity)

    def collider(self, prim, entity: str, material_prim) -> None:
        self.UsdPhysics.CollisionAPI.Apply(prim)
        prim.AddAppliedSchema(PHYSX_COLLISION_API)
        self.raw(prim, "physxCollision:restOffset", self.Sdf.ValueTypeNames.Float, REST_OFFSET)
        self.UsdShade.MaterialBindingAPI.Apply(prim).Bind(self.UsdShade.Material(material_prim),
                                                          self.UsdShade.Tokens.weakerThanDescendants, "physics")
        self.tag(prim, entity)
        self.entity_of_collider[str(prim.GetPath())] = entity
        self.colliders_of.setdefault(entity, []).append(str(prim.GetPath()))

    def look(self, prim, key: str) -> None:
        self.UsdShade.MaterialBindingAPI.Apply(prim).Bind(self.looks[key])

    # ---- materials -----------------------------------------------------------------------------
    def materials(self, plan: PairPlan) -> None:
        S = self.Sdf.ValueTypeNames
        self.UsdGeom.Scope.Define(self.stage, LOOKS)
        self.UsdGeom.Scope.Define(self.stage, PHYSICS_MATERIALS)
        lib = self.cfg.materials
        for key in sorted(plan.key_materials):
            look = lib[key].look
            mat = self.UsdShade.Material.Define(self.stage, f"{LOOKS}/{key}")
            sh = self.UsdShade.Shader.Define(self.stage, f"{LOOKS}/{key}/Shader")
            sh.CreateIdAttr("UsdPreviewSurface")
            sh.CreateInput("diffuseColor", S.Color3f).Set(self.Gf.Vec3f(*map(float, look.base_color)))
            sh.CreateInput("roughness", S.Float).Set(float(min(max(look.roughness, 0.0), 1.0)))
            sh.CreateInput("metallic", S.Float).Set(float(min(max(look.metallic, 0.0), 1.0)))
            mat.CreateSurfaceOutput().ConnectToSource(sh.ConnectableAPI(), "surface")
            self.looks[key] = mat
            m = lib[key]
            prim = self.phys_material(f"{PHYSICS_MATERIALS}/{key}", plan.key_materials[key])
            for name, value in (("staticFriction", m.static_friction), ("dynamicFriction", m.dynamic_friction),
                                ("restitution", m.restitution), ("density", m.density)):
                prim.CreateAttribute(f"orchard:{name}", S.Double, custom=True).Set(float(value))
            prim.CreateAttribute("orchard:materialKey", S.String, custom=True).Set(key)
            self.phys[key] = prim
        for (oid, partner), pm in sorted(plan.dedicated.items()):
            prim = self.phys_material(f"{PHYSICS_MATERIALS}/pair_{oid}__{partner}", pm)
            prim.CreateAttribute("orchard:pair", S.StringArray, custom=True).Set(self.Vt.StringArray([oid, partner]))
            self.phys[(oid, partner)] = prim

    def phys_material(self, path: str, pm: PhysMat):
        mat = self.UsdShade.Material.Define(self.stage, path)
        prim = mat.GetPrim()
        api = self.UsdPhysics.MaterialAPI.Apply(prim)
        api.CreateStaticFrictionAttr(float(pm.static_friction))
        api.CreateDynamicFrictionAttr(float(pm.dynamic_friction))
        api.CreateRestitutionAttr(float(pm.restitution))
        prim.AddAppliedSchema(PHYSX_MATERIAL_API)
        self.raw(prim, FRICTION_COMBINE, self.Sdf.ValueTypeNames.Token, pm.friction_mode)
        self.raw(prim, RESTITUTION_COMBINE, self.Sdf.ValueTypeNames.Token, pm.restitution_mode)
        return prim

    # ---- scene -----------------------------------------------------------------------------------
    def physics_scene(self, rate: int) -> None:
        S = self.Sdf.ValueTypeNames
        scene = self.UsdPhysics.Scene.Define(self.stage, SCENE)
        g = self.cfg.gravity
        scene.CreateGravityDirectionAttr(self.Gf.Vec3f(*map(float, g / np.linalg.norm(g))))
        scene.CreateGravityMagnitudeAttr(float(self.cfg.g))
        prim = scene.GetPrim()
        prim.AddAppliedSchema(PHYSX_SCENE_API)
        for name, t, v in (("physxScene:timeStepsPerSecond", S.UInt, int(rate)),
                           ("physxScene:solverType", S.Token, "TGS"),
                           ("physxScene:broadphaseType", S.Token, "MBP"),
                           ("physxScene:enableGPUDynamics", S.Bool, False),
                           ("physxScene:enableCCD", S.Bool, True),
                           ("physxScene:enableEnhancedDeterminism", S.Bool, True),
                           ("physxScene:enableStabilization", S.Bool, False),
                           ("physxScene:bounceThreshold", S.Float, float(BOUNCE_THRESHOLD)),
                           ("physxScene:frictionType", S.Token, "patch"),
                           ("physxScene:invertCollisionGroupFilter", S.Bool, False)):
            self.raw(prim, name, t, v)

    def camera(self) -> None:
        cam = self.cfg.camera
        c = self.UsdGeom.Camera.Define(self.stage, CAMERA)
        f, ha, va = camera_apertures(cam)
        c.CreateProjectionAttr(self.UsdGeom.Tokens.perspective)
        c.CreateFocalLengthAttr(float(f))
        c.CreateHorizontalApertureAttr(float(ha))
        c.CreateVerticalApertureAttr(float(va))
        c.CreateHorizontalApertureOffsetAttr(0.0)
        c.CreateVerticalApertureOffsetAttr(0.0)
        c.CreateClippingRangeAttr(self.Gf.Vec2f(float(ZNEAR), float(ZFAR)))
        m = camera_to_world_usd(cam)
        x = self.UsdGeom.Xformable(c.GetPrim())
        x.ClearXformOpOrder()
        x.AddTransformOp(self.UsdGeom.XformOp.PrecisionDouble).Set(self.Gf.Matrix4d(*m.T.ravel().tolist()))
        S = self.Sdf.ValueTypeNames
        p = c.GetPrim()
        p.CreateAttribute("orchard:resolution", S.Int2, custom=True).Set(self.Gf.Vec2i(cam.width, cam.height))
        p.CreateAttribute("orchard:intrinsic", S.Matrix3d, custom=True).Set(self.Gf.Matrix3d(*cam.intrinsic.ravel().tolist()))

    def lights(self) -> None:
        self.UsdGeom.Scope.Define(self.stage, f"{WORLD}/Lights")
        sun = self.UsdLux.DistantLight.Define(self.stage, f"{WORLD}/Lights/Sun")
        sun.CreateIntensityAttr(3000.0)
        sun.CreateAngleAttr(0.53)
        d = light_direction(self.cfg)  # the light shines along its local −z
        z = -d
        x = np.cross([0.0, 0.0, 1.0], z)
        x = x / np.linalg.norm(x) if np.linalg.norm(x) > 1e-9 else np.array([1.0, 0.0, 0.0])
        y = np.cross(z, x)
        self.xform(sun.GetPrim(), quat=_quat_from_axes(x, y, z))
        dome = self.UsdLux.DomeLight.Define(self.stage, f"{WORLD}/Lights/Sky")
        dome.CreateIntensityAttr(400.0)
        dome.CreateColorAttr(self.Gf.Vec3f(0.86, 0.88, 0.90))

    # ---- supports --------------------------------------------------------------------------------
    def supports(self) -> dict[str, str]:
        S = self.Sdf.ValueTypeNames
        self.UsdGeom.Scope.Define(self.stage, SUPPORTS)
        roots = {}
        cfg = self.cfg
        # ground: invisible analytic plane collider + visible quad
        root = self.UsdGeom.Xform.Define(self.stage, f"{SUPPORTS}/ground").GetPrim()
        self.tag(root, "ground")
        roots["ground"] = str(root.GetPath())
        plane = self.UsdGeom.Plane.Define(self.stage, f"{SUPPORTS}/ground/collider")
        plane.CreateAxisAttr("Z")
        plane.CreateWidthAttr(2 * GROUND_HALF_SIZE)
        plane.CreateLengthAttr(2 * GROUND_HALF_SIZE)
        plane.CreatePurposeAttr(self.UsdGeom.Tokens.guide)
        plane.CreateVisibilityAttr(self.UsdGeom.Tokens.invisible)
        self.collider(plane.GetPrim(), "ground", self.phys[cfg.ground_material])
        quad = self.UsdGeom.Mesh.Define(self.stage, f"{SUPPORTS}/ground/visual")
        h = GROUND_HALF_SIZE
        quad.CreatePointsAttr([self.Gf.Vec3f(-h, -h, 0), self.Gf.Vec3f(h, -h, 0), self.Gf.Vec3f(h, h, 0),
                               self.Gf.Vec3f(-h, h, 0)])
        quad.CreateFaceVertexCountsAttr([4])
        quad.CreateFaceVertexIndicesAttr([0, 1, 2, 3])
        quad.CreateNormalsAttr([self.Gf.Vec3f(0, 0, 1)] * 4)
        quad.SetNormalsInterpolation(self.UsdGeom.Tokens.vertex)
        self.tag(quad.GetPrim(), "ground")
        self.look(quad.GetPrim(), cfg.ground_material)

        for ramp in cfg.ramps:
            root = self.UsdGeom.Xform.Define(self.stage, f"{SUPPORTS}/{ramp.id}").GetPrim()
            self.tag(root, ramp.id)
            roots[ramp.id] = str(root.GetPath())
            verts = _ramp_vertices(ramp)
            mesh = self.UsdGeom.Mesh.Define(self.stage, f"{SUPPORTS}/{ramp.id}/body")
            counts, idx = _prism_faces(len(verts) // 2)
            mesh.CreatePointsAttr([self.Gf.Vec3f(*map(float, v)) for v in verts])
            mesh.CreateFaceVertexCountsAttr(counts)
            mesh.CreateFaceVertexIndicesAttr(idx)
            mesh.CreateSubdivisionSchemeAttr(self.UsdGeom.Tokens.none)
            mesh.CreateDoubleSidedAttr(True)
            self.collider(mesh.GetPrim(), ramp.id, self.phys[ramp.material])
            self.UsdPhysics.MeshCollisionAPI.Apply(mesh.GetPrim()).CreateApproximationAttr(self.UsdPhysics.Tokens.convexHull)
            self.look(mesh.GetPrim(), ramp.material)

        for track in cfg.tracks:
            root = self.UsdGeom.Xform.Define(self.stage, f"{SUPPORTS}/{track.id}").GetPrim()
            self.tag(root, track.id)
            roots[track.id] = str(root.GetPath())
            for name, pos, q, ext in track_boxes(cfg, track):
                box = self.UsdGeom.Cube.Define(self.stage, f"{SUPPORTS}/{track.id}/{name}")
                box.CreateSizeAttr(1.0)
                self.xform(box.GetPrim(), pos, q, ext)
                self.collider(box.GetPrim(), track.id, self.phys[track.material])
                self.look(box.GetPrim(), track.material)

        for plat in cfg.platforms:
            root = self.UsdGeom.Xform.Define(self.stage, f"{SUPPORTS}/{plat.id}").GetPrim()
            self.tag(root, plat.id)
            roots[plat.id] = str(root.GetPath())
            box = self.UsdGeom.Cube.Define(self.stage, f"{SUPPORTS}/{plat.id}/box")
            box.CreateSizeAttr(1.0)
            self.xform(box.GetPrim(), plat.center, None, plat.size)
            self.collider(box.GetPrim(), plat.id, self.phys[plat.material])
            self.look(box.GetPrim(), plat.material)
        for r in roots.values():
            self.stage.GetPrimAtPath(r).CreateAttribute("orchard:support", S.Bool, custom=True).Set(True)
        return roots

    # ---- objects ---------------------------------------------------------------------------------
    def geometry(self, path: str, o):
        s = o.primitive.size
        if o.shape == "sphere":
            g = self.UsdGeom.Sphere.Define(self.stage, path)
            g.CreateRadiusAttr(float(s["radius"]))
        elif o.shape == "cube":
            g = self.UsdGeom.Cube.Define(self.stage, path)
            g.CreateSizeAttr(float(s["edge"]))
        elif o.shape == "cylinder":
            g = self.UsdGeom.Cylinder.Define(self.stage, path)
            g.CreateRadiusAttr(float(s["radius"]))
            g.CreateHeightAttr(float(s["height"]))
            g.CreateAxisAttr("Z")
        else:
            g = self.UsdGeom.Cone.Define(self.stage, path)
            g.CreateRadiusAttr(float(s["radius"]))
            g.CreateHeightAttr(float(s["height"]))
            g.CreateAxisAttr("Z")
            # USD's cone spans [-h/2, h/2]; the body origin is the COM, h/4 above the base
            self.xform(g.GetPrim(), (0.0, 0.0, s["height"] / 4.0))
        return g

    def objects(self, plan: PairPlan) -> tuple[dict[str, str], dict[str, str]]:
        S = self.Sdf.ValueTypeNames
        self.UsdGeom.Scope.Define(self.stage, OBJECTS)
        bodies, geoms = {}, {}
        for o in self.cfg.objects:
            path = f"{OBJECTS}/{o.id}"
            body = self.UsdGeom.Xform.Define(self.stage, path).GetPrim()
            self.xform(body, o.position, o.quaternion, (1.0, 1.0, 1.0))
            self.tag(body, o.id)
            body.CreateAttribute(INSTANCE_ATTR, S.Int, custom=True).Set(int(o.instance_id))
            rb = self.UsdPhysics.RigidBodyAPI.Apply(body)
            rb.CreateRigidBodyEnabledAttr(True)
            rb.CreateKinematicEnabledAttr(False)
            rb.CreateStartsAsleepAttr(False)
            rb.CreateVelocityAttr(self.Gf.Vec3f(*map(float, o.linear_velocity)))
            rb.CreateAngularVelocityAttr(self.Gf.Vec3f(*map(float, np.degrees(np.asarray(o.angular_velocity, float)))))
            mass = self.UsdPhysics.MassAPI.Apply(body)
            mass.CreateMassAttr(float(o.mass))
            mass.CreateDiagonalInertiaAttr(self.Gf.Vec3f(*map(float, o.inertia)))
            mass.CreateCenterOfMassAttr(self.Gf.Vec3f(0.0, 0.0, 0.0))
            mass.CreatePrincipalAxesAttr(self.Gf.Quatf(1.0, 0.0, 0.0, 0.0))
            body.AddAppliedSchema(PHYSX_RIGID_BODY_API)
            for name, t, v in (("physxRigidBody:sleepThreshold", S.Float, 0.0),
                               ("physxRigidBody:stabilizationThreshold", S.Float, 0.0),
                               ("physxRigidBody:linearDamping", S.Float, 0.0),
                               ("physxRigidBody:angularDamping", S.Float, 0.0),
                               ("physxRigidBody:enableCCD", S.Bool, True),
                               ("physxRigidBody:enableGyroscopicForces", S.Bool, True),
                               ("physxRigidBody:solverPositionIterationCount", S.Int, SOLVER_POSITION_ITERATIONS),
                               ("physxRigidBody:solverVelocityIterationCount", S.Int, SOLVER_VELOCITY_ITERATIONS)):
                self.raw(body, name, t, v)
            body.AddAppliedSchema(PHYSX_CONTACT_REPORT_API)
            self.raw(body, "physxContactReport:threshold", S.Float, CONTACT_REPORT_THRESHOLD)
            geom = self.geometry(f"{path}/geom", o)
            self.collider(geom.GetPrim(), o.id, self.phys[o.material])
            self.look(geom.GetPrim(), o.material)
            for (oid, partner), _ in sorted(plan.dedicated.items()):
                if oid != o.id:
                    continue
                extra = self.geometry(f"{path}/geom_for_{partner}", o)
                extra.CreatePurposeAttr(self.UsdGeom.Tokens.guide)
                extra.CreateVisibilityAttr(self.UsdGeom.Tokens.invisible)
                self.collider(extra.GetPrim(), o.id, self.phys[(oid, partner)])
                extra.GetPrim().CreateAttribute("orchard:pairPartner", S.String, custom=True).Set(partner)
            bodies[o.id] = path
            geoms[o.id] = f"{path}/geom"
        return bodies, geoms

    def collision_groups(self, plan: PairPlan, bodies: dict[str, str], roots: dict[str, str]) -> None:
        """Route each dedicated pair's contacts to its dedicated collider (default, non-inverted filtering)."""
        if not plan.dedicated:
            return
        self.UsdGeom.Scope.Define(self.stage, GROUPS)
        groups = {}
        for ent in plan.entities:
            grp = self.UsdPhysics.CollisionGroup.Define(self.stage, f"{GROUPS}/entity_{ent}")
            inc = grp.GetCollidersCollectionAPI().CreateIncludesRel()
            if ent in bodies:
                inc.AddTarget(f"{bodies[ent]}/geom")
            else:
                inc.AddTarget(roots[ent])
            groups[("entity", ent)] = grp
        for (oid, partner) in sorted(plan.dedicated):
            grp = self.UsdPhysics.CollisionGroup.Define(self.stage, f"{GROUPS}/pair_{oid}__{partner}")
            grp.GetCollidersCollectionAPI().CreateIncludesRel().AddTarget(f"{bodies[oid]}/geom_for_{partner}")
            groups[("pair", oid, partner)] = grp
        filters: set[tuple] = set()
        for (oid, partner) in plan.dedicated:
            filters.add((("entity", oid), ("entity", partner)))  # the default collider leaves this partner alone
            for key in groups:
                if key != ("entity", partner) and key != ("pair", oid, partner):
                    filters.add((("pair", oid, partner), key))  # the dedicated collider meets this partner only
        for a, b in sorted(filters):
            groups[a].CreateFilteredGroupsRel().AddTarget(groups[b].GetPath())
            groups[b].CreateFilteredGroupsRel().AddTarget(groups[a].GetPath())


def build_stage(config, path: str | Path | None = None) -> UsdScene:
    """Author the stage of a resolved case (in memory, or as a new layer at `path` — not yet saved)."""
    Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, UsdShade, Vt = _pxr()
    stage = Usd.Stage.CreateNew(str(path)) if path is not None else Usd.Stage.CreateInMemory()
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    t = config.timing
    stage.SetTimeCodesPerSecond(float(t.fps))
    stage.SetStartTimeCode(0.0)
    stage.SetEndTimeCode(float(t.n_frames - 1))
    world = UsdGeom.Xform.Define(stage, WORLD)
    stage.SetDefaultPrim(world.GetPrim())

    plan = pair_plan(config)
    rate = steps_per_second(t.fps)
    w = _Writer(config, stage)
    w.physics_scene(rate)
    w.materials(plan)
    roots = w.supports()
    bodies, geoms = w.objects(plan)
    w.collision_groups(plan, bodies, roots)
    w.camera()
    w.lights()
    for prim in stage.Traverse():  # explicit extents: renderers and bounds need not compute them
        if prim.IsA(UsdGeom.Boundable) and not prim.IsA(UsdGeom.Xform):
            ext = UsdGeom.Boundable.ComputeExtentFromPlugins(UsdGeom.Boundable(prim), Usd.TimeCode.Default())
            if ext is not None:
                UsdGeom.Boundable(prim).CreateExtentAttr(ext)

    from .. import __version__

    info = {"case_id": config.case_id, "config_sha256": config.config_sha256,
            "materials_sha256": config.materials_sha256, "tool_version": __version__,
            "steps_per_second": rate, "pair_strategy": plan.strategy,
            "friction_rule": config.materials.friction_rule, "restitution_rule": config.materials.restitution_rule,
            "inexact_pairs": [f"{a}|{b}" for a, b in plan.inexact], "bounce_threshold": BOUNCE_THRESHOLD,
            "scene_center": [float(x) for x in scene_bounds(config)[0]]}
    layer = stage.GetRootLayer()
    layer.customLayerData = {"orchard": _layer_data(info, Vt)}
    layer.documentation = f"Orchard case {config.case_id} for NVIDIA Isaac Sim (orchard_build.engines.usd_stage)"
    instance_of_path = {geoms[o.id]: o.instance_id for o in config.objects}
    return UsdScene(stage, bodies, geoms, instance_of_path, dict(w.entity_of_collider), roots, rate, plan, info)


def _layer_data(info: dict, Vt) -> dict:
    """customLayerData needs typed arrays, not Python lists."""
    out = {}
    for k, v in info.items():
        if isinstance(v, (list, tuple)):
            v = Vt.DoubleArray([float(x) for x in v]) if v and all(isinstance(x, (int, float)) for x in v) \
                else Vt.StringArray([str(x) for x in v])
        out[k] = v
    return out


def write_stage(config, out: str | Path) -> UsdScene:
    """Write the case's stage to `out` (.usda text or .usd/.usdc binary) and return it."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if out.exists():
        out.unlink()
    scene = build_stage(config, out)
    scene.stage.GetRootLayer().Save()
    return scene


# ---------------------------------------------------------------------------------------------
# Reading a stage back: PhysX's pair rules as a model
# ---------------------------------------------------------------------------------------------
def _bound_physics_material(prim) -> PhysMat | None:
    from pxr import UsdShade

    mat, _ = UsdShade.MaterialBindingAPI(prim).ComputeBoundMaterial("physics")
    if not mat:
        return None
    m = mat.GetPrim()

    def get(name, default):
        a = m.GetAttribute(name)
        return a.Get() if a and a.HasAuthoredValue() else default

    return PhysMat(float(get("physics:staticFriction", 0.0)), float(get("physics:dynamicFriction", 0.0)),
                   float(get("physics:restitution", 0.0)), str(get(FRICTION_COMBINE, "average")),
                   str(get(RESTITUTION_COMBINE, "average")))


def effective_pair_coefficients(stage) -> dict[tuple[str, str], set[tuple[float, float, float]]]:
    """Per entity pair (sorted ids), every (μs, μd, e) PhysX would use for a contact between their colliders,
    under PhysX's documented rules: combine mode of higher priority wins; colliders of one body never touch,
    nor do two static colliders; collision groups filter pairs (inverted when the scene says so)."""
    from pxr import Usd, UsdPhysics

    colliders = []  # (path, entity, dynamic body or None, material)
    for prim in stage.Traverse():
        if not prim.HasAPI(UsdPhysics.CollisionAPI):
            continue
        ent_attr = prim.GetAttribute(ENTITY_ATTR)
        ent = ent_attr.Get() if ent_attr else None
        body = prim
        while body and body.GetPath() != body.GetPath().absoluteRootPath and not body.HasAPI(UsdPhysics.RigidBodyAPI):
            body = body.GetParent()
        body_path = str(body.GetPath()) if body and body.HasAPI(UsdPhysics.RigidBodyAPI) else None
        colliders.append((str(prim.GetPath()), ent, body_path, _bound_physics_material(prim)))

    groups = [UsdPhysics.CollisionGroup(p) for p in stage.Traverse() if p.IsA(UsdPhysics.CollisionGroup)]
    membership = {str(g.GetPath()): g.GetCollidersCollectionAPI().ComputeMembershipQuery() for g in groups}
    filtered = {str(g.GetPath()): {str(t) for t in g.GetFilteredGroupsRel().GetTargets()} for g in groups}
    inverted = False
    for p in stage.Traverse():
        if p.IsA(UsdPhysics.Scene):
            a = p.GetAttribute("physxScene:invertCollisionGroupFilter")
            inverted = bool(a.Get()) if a and a.HasAuthoredValue() else False

    from pxr import Sdf

    def groups_of(path: str) -> set[str]:
        return {g for g, q in membership.items() if q.IsPathIncluded(Sdf.Path(path))}

    col_groups = {c[0]: groups_of(c[0]) for c in colliders}

    def collide(a: str, b: str) -> bool:
        ga, gb = col_groups[a], col_groups[b]
        if not ga or not gb:
            return True
        pair_filtered = any(y in filtered[x] or x in filtered[y] for x in ga for y in gb)
        return pair_filtered if inverted else not pair_filtered

    out: dict[tuple[str, str], set[tuple[float, float, float]]] = {}
    for i, (pa, ea, ba, ma) in enumerate(colliders):
        for pb, eb, bb, mb in colliders[i + 1:]:
            if ea == eb or (ba is None and bb is None) or (ba is not None and ba == bb):
                continue
            if not collide(pa, pb) or ma is None or mb is None:
                continue
            key = (ea, eb) if ea <= eb else (eb, ea)
            out.setdefault(key, set()).add(tuple(round(x, 12) for x in ma.with_partner(mb)))
    return out
