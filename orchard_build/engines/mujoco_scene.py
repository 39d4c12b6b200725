"""CaseConfig → MJCF (MuJoCo XML), deterministically.

Layout of the generated model
-----------------------------
* World frame = Orchard's world frame (z up, ground plane z = 0, SI units).
* Each object is a body named ``object:<id>`` with a free joint whose frame is Orchard's body frame
  (origin at the centre of mass, symmetry axis local +z), so MuJoCo's ``qpos`` is directly the
  config's COM position and (w, x, y, z) quaternion. Mass and principal inertia are set explicitly
  from ``ObjectSpec.mass`` / ``ObjectSpec.inertia`` (``inertiafromgeom="false"``): m = ρV exactly.
  A cone is a convex mesh whose vertices are given in the body frame (base at z = -h/4, apex at
  +3h/4); MuJoCo re-centres meshes on their centroid, which is this origin already, and any
  re-orientation it applies is compensated in the geom frame, so the geom sits where the body frame says.
* Supports: the ground plane; a ramp is a convex prism (visual mesh, down to the ground when its foot
  is raised) plus an invisible box slab whose top face is exactly the sliding surface (collisions use
  MuJoCo's exact box primitives); a circular track is a chain of thin boxes whose inner faces are
  tangent to the circle of radius R at each segment's middle angle (TRACK_STEP_DEG, fine enough that the
  joints' micro-impacts stay small, coarse enough that a rolling body touches one segment at a time),
  with two side rails; a platform is a box.
* Geom names: ``ground``, ``ramp:<id>:surface`` (collision), ``ramp:<id>:body`` (visual),
  ``track:<id>:seg<k>`` / ``:rail<k>a`` / ``:rail<k>b``, ``platform:<id>``, ``object:<id>``.
  :func:`entity_of` maps a geom name to its entity (an object id, a support id or ``ground``).
* No two visible geoms share an overlapping coplanar face (track segments and rails only touch):
  MuJoCo draws the lit part of a shadowed scene in a second pass, where coplanar faces z-fight
  into speckles.
* Geom groups: 0 objects, 1 supports and ground, 3 collision-only (not drawn).
* The keyframe ``initial`` holds the config's initial qpos/qvel (free-joint angular velocity is in
  the body frame, so the config's world-frame ω is rotated into it).
* Contacts: every geom has contype = conaffinity = 0; each object–support and object–object pair is an
  explicit ``<pair>`` with ``solref = (-stiffness, -damping(e))`` from the restitution calibration
  (`restitution.py` explains every contact setting). Object–support pairs have the pair's friction
  from ``materials.pair`` (condim 3, ``solreffriction`` from `restitution.solref_friction`, which
  depends on whether the object can roll); pairs with
  a track use the stiffer ``restitution.TRACK_STIFFNESS``. Object–object pairs are frictionless
  (condim 1), as the analytic model's collisions are (impulse along the normal, spins unchanged):
  with friction, spheres placed rolling traded spin for sideways speed at an oblique collision and
  left the analytic paths by 26–42 mm.
* Rendering: a fixed camera ``main`` converted from the OpenCV extrinsic, one directional light with a
  2048 shadow map clipped to the scene, a neutral gradient sky, ``<statistic extent="1">`` so that
  znear/zfar/shadowclip are in metres.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..config import default_rail_height
from . import restitution as _rest

EXTENT = 1.0  # model extent: makes the visual/map distances absolute metres
ZNEAR = 0.02  # m
ZFAR = 200.0  # m
SHADOW_SIZE = 2048
TRACK_STEP_DEG = 0.25  # angular length of one segment of a track's running surface
RAIL_STEP_DEG = 4.0  # and of its side rails
TRACK_THICKNESS = 0.02  # m
RAIL_WIDTH = 0.012  # m
RAMP_SLAB = 0.05  # m, thickness of a ramp's collision slab under its surface
CONE_SECTIONS = 48
SKY = ((0.86, 0.88, 0.90), (0.52, 0.57, 0.63))  # horizon / zenith of the neutral gradient

GROUP_OBJECTS, GROUP_SUPPORTS, GROUP_COLLISION = 0, 1, 3


def _f(x: float) -> str:
    """Shortest round-trip text of a float (deterministic)."""
    x = float(x)
    if x == 0.0:
        return "0"
    return repr(x)


def _v(a) -> str:
    return " ".join(_f(x) for x in np.asarray(a, float).ravel())


def _quat_from_axes(x: np.ndarray, y: np.ndarray, z: np.ndarray) -> np.ndarray:
    """(w, x, y, z) of the rotation whose columns are the given orthonormal axes."""
    m = np.stack([x, y, z], axis=1)
    tr = np.trace(m)
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        q = np.array([0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s])
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = np.array([(m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s])
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = np.array([(m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s])
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = np.array([(m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s])
    q /= np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def _quat_to_mat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def entity_of(geom_name: str) -> str:
    """Entity (object id, support id or 'ground') that a geom of the generated model belongs to."""
    if geom_name == "ground":
        return "ground"
    parts = geom_name.split(":")
    return parts[1] if len(parts) > 1 else geom_name


@dataclass(frozen=True)
class MjcfScene:
    xml: str
    object_geoms: dict[str, str]  # object id -> geom name
    support_geoms: dict[str, tuple[str, ...]]  # support id / 'ground' -> geom names (collision ones included)
    pairs: tuple[tuple[str, str, str, str], ...]  # (geom1, geom2, entity1, entity2)
    procedural_textures: dict[str, tuple[str, tuple[float, float, float]]] = field(default_factory=dict)
    # texture name -> (kind, base colour), filled in after compilation by `apply_procedural_textures`


# ---------------------------------------------------------------------------------------------
# Appearance
# ---------------------------------------------------------------------------------------------
def _material_xml(key: str, look, textures: list[str], procedural: dict) -> str:
    r, g, b = look.base_color
    rough = min(max(look.roughness, 0.0), 1.0)
    metal = min(max(look.metallic, 0.0), 1.0)
    specular = min(1.0, 0.08 + 0.45 * (1.0 - rough) + 0.35 * metal)
    shininess = min(1.0, 0.05 + 0.9 * (1.0 - rough) ** 2)
    attrs = [f'name="mat:{key}"', f'specular="{_f(round(specular, 4))}"', f'shininess="{_f(round(shininess, 4))}"',
             'reflectance="0"', f'roughness="{_f(rough)}"', f'metallic="{_f(metal)}"']
    if look.texture == "checker":
        dark = tuple(round(0.78 * c, 4) for c in (r, g, b))
        textures.append(f'<texture name="tex:{key}" type="2d" builtin="checker" width="256" height="256" '
                        f'rgb1="{_v((r, g, b))}" rgb2="{_v(dark)}"/>')
        attrs += [f'texture="tex:{key}"', 'texrepeat="2 2"', 'texuniform="true"', 'rgba="1 1 1 1"']
    elif look.texture == "wood_grain":
        textures.append(f'<texture name="tex:{key}" type="2d" builtin="flat" width="256" height="256" '
                        f'rgb1="{_v((r, g, b))}"/>')
        procedural[f"tex:{key}"] = ("wood_grain", (r, g, b))
        attrs += [f'texture="tex:{key}"', 'texrepeat="1.5 1.5"', 'texuniform="true"', 'rgba="1 1 1 1"']
    else:
        attrs.append(f'rgba="{_v((r, g, b, 1.0))}"')
    return f"<material {' '.join(attrs)}/>"


def wood_grain(base: tuple[float, float, float], size: int = 256) -> np.ndarray:
    """Deterministic procedural wood grain (size, size, 3) uint8 around the base colour."""
    y, x = np.mgrid[0:size, 0:size].astype(np.float64) / size
    wobble = 0.035 * np.sin(2 * np.pi * (3 * x + 0.5 * y)) + 0.02 * np.sin(2 * np.pi * (7 * x + 0.3))
    rings = 0.5 + 0.5 * np.sin(2 * np.pi * 9.0 * (y + wobble))  # period matches the texture for seamless tiling
    fine = 0.5 + 0.5 * np.sin(2 * np.pi * 64.0 * (y + 0.6 * wobble))
    shade = 0.80 + 0.14 * rings ** 3 + 0.06 * fine
    rgb = np.clip(np.asarray(base)[None, None, :] * shade[..., None], 0.0, 1.0)
    return np.round(rgb * 255.0).astype(np.uint8)


def apply_procedural_textures(model, scene: MjcfScene) -> None:
    """Fill the pixels of procedural textures (declared flat in the XML) in a compiled model."""
    import mujoco

    for name, (kind, base) in scene.procedural_textures.items():
        tid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_TEXTURE, name)
        h, w, n = int(model.tex_height[tid]), int(model.tex_width[tid]), int(model.tex_nchannel[tid])
        if kind == "wood_grain":
            img = wood_grain(base, size=w)[:h]
        else:  # pragma: no cover - only one procedural kind so far
            continue
        if n == 4:
            img = np.concatenate([img, np.full((h, w, 1), 255, np.uint8)], axis=2)
        adr = int(model.tex_adr[tid])
        model.tex_data[adr:adr + h * w * n] = img.reshape(-1)


# ---------------------------------------------------------------------------------------------
# Scene geometry helpers
# ---------------------------------------------------------------------------------------------
def _ramp_vertices(ramp) -> np.ndarray:
    foot, top = ramp.foot, ramp.top
    lat = ramp.lateral * (ramp.width / 2.0)
    section = [foot, top, np.array([top[0], top[1], 0.0])]
    if foot[2] > 1e-6:
        section.append(np.array([foot[0], foot[1], 0.0]))
    return np.array([p + s * lat for p in section for s in (-1.0, 1.0)])


def _track_rails(config, track) -> tuple[float, float]:
    """Half-width of the running surface (to the rails' inner faces) and the rail height."""
    half_extent, radii = 0.0, []
    for o in config.objects:
        if o.support == track.id:
            s = o.primitive.size
            half_extent = max(half_extent, s["radius"] if o.shape == "sphere" else s.get("height", 0.0) / 2.0)
            radii.append(o.primitive.rolling_radius())
    half_width = max(track.width / 2.0, half_extent + 0.003)
    return half_width, track.rail_height if track.rail_height is not None else default_rail_height(radii)


def _cone_vertices(radius: float, height: float, sections: int = CONE_SECTIONS) -> np.ndarray:
    a = 2 * np.pi * np.arange(sections) / sections
    ring = np.stack([radius * np.cos(a), radius * np.sin(a), np.full(sections, -height / 4.0)], axis=1)
    return np.vstack([ring, [[0.0, 0.0, 0.75 * height]]])


def scene_bounds(config) -> tuple[np.ndarray, float]:
    """Centre and radius of a sphere around everything that can cast or receive a visible shadow."""
    pts = [config.camera.look_at]
    for o in config.objects:
        r = o.primitive.bounding_radius
        pts += [o.position - r, o.position + r]
    for ramp in config.ramps:
        pts += list(_ramp_vertices(ramp))
    for t in config.tracks:
        pts += [t.center - t.radius, t.center + t.radius]
    for p in config.platforms:
        pts += [p.center - p.size / 2, p.center + p.size / 2]
    pts = np.array(pts, float)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    lo[2] = min(lo[2], 0.0)
    center = (lo + hi) / 2.0
    return center, float(max(np.linalg.norm(hi - lo) / 2.0, 0.5))


def _visible_ground(camera, max_distance: float) -> list[np.ndarray]:
    """Ground points seen along the image border (at most `max_distance` from the camera's foot)."""
    pts = []
    w, h = camera.width, camera.height
    kinv = np.linalg.inv(camera.intrinsic)
    for u, v in ((0, h), (w / 2, h), (w, h), (0, h / 2), (w, h / 2), (0, 0), (w, 0), (w / 2, 0)):
        d = camera.rotation.T @ (kinv @ np.array([u, v, 1.0]))
        foot = np.array([camera.position[0], camera.position[1], 0.0])
        if d[2] < -1e-9:
            p = camera.position + d * (-camera.position[2] / d[2])
        else:
            p = camera.position + d / max(np.linalg.norm(d[:2]), 1e-9) * max_distance
        off = np.array([p[0] - foot[0], p[1] - foot[1], 0.0])
        if np.linalg.norm(off) > max_distance:
            off *= max_distance / np.linalg.norm(off)
        pts.append(foot + off)
    return pts


def shadow_bounds(config) -> tuple[np.ndarray, float]:
    """Centre and radius of the region that needs a shadow map: the scene plus the nearby visible ground."""
    center, radius = scene_bounds(config)
    reach = float(np.linalg.norm(config.camera.position[:2] - center[:2])) + 1.5 * radius
    pts = [center - radius, center + radius] + _visible_ground(config.camera, reach)
    pts = np.array(pts)
    lo, hi = pts.min(axis=0), pts.max(axis=0)
    return (lo + hi) / 2.0, float(np.linalg.norm(hi - lo) / 2.0)


# ---------------------------------------------------------------------------------------------
# MJCF
# ---------------------------------------------------------------------------------------------
def build_mjcf(config, *, offscreen: tuple[int, int] | None = None, friction: str = "dynamic",
               shadow_size: int = SHADOW_SIZE) -> MjcfScene:
    """MJCF of a resolved case. `friction`: which of the pair's coefficients MuJoCo's single μ takes
    ("dynamic" — sliding matches the kinetic law — or "static")."""
    if friction not in ("dynamic", "static"):
        raise ValueError(f"friction must be 'dynamic' or 'static', got {friction!r}")
    cam = config.camera
    off_w, off_h = offscreen or (cam.width, cam.height)
    off_w, off_h = max(off_w, cam.width), max(off_h, cam.height)

    used = [config.ground_material] + [s.material for s in (*config.ramps, *config.tracks, *config.platforms)] \
        + [o.material for o in config.objects]
    keys = sorted(set(used))
    textures: list[str] = []
    procedural: dict = {}
    materials = [_material_xml(k, config.materials[k].look, textures, procedural) for k in keys]

    meshes: list[str] = []
    world: list[str] = []
    support_geoms: dict[str, list[str]] = {"ground": ["ground"]}

    # Camera: MuJoCo looks along -z with y up; OpenCV rows of R are (right, down, forward).
    right, down, _ = cam.rotation
    world.append(f'<camera name="main" mode="fixed" pos="{_v(cam.position)}" xyaxes="{_v(right)} {_v(-down)}" '
                 f'fovy="{_f(cam.fov_deg)}"/>')

    # Light: from behind the camera's left shoulder, steeply from above; shadow box sized to the scene
    # and to the ground the camera sees in front of it (outside the box the shadow map gives artefacts).
    center, radius = scene_bounds(config)
    shadow_center, shadow_radius = shadow_bounds(config)
    fwd = cam.look_at - cam.position
    fwd_h = np.array([fwd[0], fwd[1], 0.0])
    fwd_h = fwd_h / np.linalg.norm(fwd_h) if np.linalg.norm(fwd_h) > 1e-9 else np.array([1.0, 0.0, 0.0])
    right_h = np.cross(fwd_h, [0.0, 0.0, 1.0])
    ldir = 0.45 * fwd_h + 0.35 * right_h - np.array([0.0, 0.0, 1.0])
    ldir /= np.linalg.norm(ldir)
    lpos = shadow_center - ldir * (2.0 * shadow_radius + 2.0)
    world.append(f'<light name="sun" type="directional" pos="{_v(np.round(lpos, 9))}" dir="{_v(np.round(ldir, 12))}" '
                 'diffuse="0.72 0.72 0.70" specular="0.35 0.35 0.35" ambient="0 0 0" castshadow="true"/>')
    shadowclip = 1.05 * shadow_radius + 0.1

    world.append(f'<geom name="ground" type="plane" size="0 0 0.05" material="mat:{config.ground_material}" '
                 f'group="{GROUP_SUPPORTS}" contype="0" conaffinity="0"/>')

    for ramp in config.ramps:
        mesh = f"ramp:{ramp.id}"
        meshes.append(f'<mesh name="{mesh}" vertex="{_v(_ramp_vertices(ramp))}"/>')
        world.append(f'<geom name="ramp:{ramp.id}:body" type="mesh" mesh="{mesh}" material="mat:{ramp.material}" '
                     f'group="{GROUP_SUPPORTS}" contype="0" conaffinity="0"/>')
        x, z = ramp.slope_down, ramp.normal
        y = np.cross(z, x)
        mid = ramp.top + 0.5 * ramp.length * ramp.slope_down - z * (RAMP_SLAB / 2.0)
        world.append(f'<geom name="ramp:{ramp.id}:surface" type="box" size="{_v((ramp.length / 2, ramp.width / 2, RAMP_SLAB / 2))}" '
                     f'pos="{_v(mid)}" quat="{_v(_quat_from_axes(x, y, z))}" group="{GROUP_COLLISION}" '
                     f'rgba="0 0 0 0" contype="0" conaffinity="0"/>')
        support_geoms[ramp.id] = [f"ramp:{ramp.id}:surface"]

    for track in config.tracks:
        a0, a1 = track.arc
        half_width, rail_h = _track_rails(config, track)
        t = TRACK_THICKNESS
        names = []
        # running surface: fine segments, inner faces tangent to the circle at each segment's middle angle
        n = max(1, int(math.ceil(math.degrees(a1 - a0) / TRACK_STEP_DEG - 1e-9)))
        dphi = (a1 - a0) / n
        half_len = (track.radius + t) * math.tan(dphi / 2.0) + 1e-4
        for k in range(n):
            phi = a0 + (k + 0.5) * dphi
            radial = track.radial(phi)
            q = _v(_quat_from_axes(track.tangent(phi), track.lateral, -radial))
            pos = track.center + (track.radius + t / 2.0) * radial
            names.append(f"track:{track.id}:seg{k}")
            world.append(f'<geom name="{names[-1]}" type="box" size="{_v((half_len, half_width, t / 2))}" '
                         f'pos="{_v(pos)}" quat="{q}" material="mat:{track.material}" group="{GROUP_SUPPORTS}" '
                         'contype="0" conaffinity="0"/>')
        # side rails: coarser segments (they only keep a body from drifting sideways)
        n = max(1, int(math.ceil(math.degrees(a1 - a0) / RAIL_STEP_DEG - 1e-9)))
        dphi = (a1 - a0) / n
        half_len = (track.radius + t) * math.tan(dphi / 2.0) + 1e-4
        for k in range(n):
            phi = a0 + (k + 0.5) * dphi
            radial = track.radial(phi)
            q = _v(_quat_from_axes(track.tangent(phi), track.lateral, -radial))
            for side, s in (("a", 1.0), ("b", -1.0)):
                rpos = (track.center + (track.radius + (t - rail_h) / 2.0) * radial
                        + s * (half_width + RAIL_WIDTH / 2.0) * track.lateral)
                names.append(f"track:{track.id}:rail{k}{side}")
                world.append(f'<geom name="{names[-1]}" type="box" size="{_v((half_len, RAIL_WIDTH / 2, (rail_h + t) / 2))}" '
                             f'pos="{_v(rpos)}" quat="{q}" material="mat:{track.material}" group="{GROUP_SUPPORTS}" '
                             'contype="0" conaffinity="0"/>')
        support_geoms[track.id] = names

    for plat in config.platforms:
        world.append(f'<geom name="platform:{plat.id}" type="box" size="{_v(plat.size / 2)}" pos="{_v(plat.center)}" '
                     f'material="mat:{plat.material}" group="{GROUP_SUPPORTS}" contype="0" conaffinity="0"/>')
        support_geoms[plat.id] = [f"platform:{plat.id}"]

    object_geoms: dict[str, str] = {}
    key_qpos, key_qvel = [], []
    for o in config.objects:
        s = o.primitive.size
        gname = f"object:{o.id}"
        common = f'name="{gname}" material="mat:{o.material}" group="{GROUP_OBJECTS}" contype="0" conaffinity="0"'
        if o.shape == "sphere":
            geom = f'<geom type="sphere" size="{_f(s["radius"])}" {common}/>'
        elif o.shape == "cube":
            geom = f'<geom type="box" size="{_v([s["edge"] / 2] * 3)}" {common}/>'
        elif o.shape == "cylinder":
            geom = f'<geom type="cylinder" size="{_v((s["radius"], s["height"] / 2))}" {common}/>'
        else:
            meshes.append(f'<mesh name="cone:{o.id}" vertex="{_v(_cone_vertices(s["radius"], s["height"]))}"/>')
            geom = f'<geom type="mesh" mesh="cone:{o.id}" {common}/>'
        q = np.asarray(o.quaternion, float)
        q = q / np.linalg.norm(q)
        key_qpos += [*o.position, *q]
        # free joint: linear velocity in the world frame, angular velocity in the body frame
        key_qvel += [*o.linear_velocity, *(_quat_to_mat(q).T @ np.asarray(o.angular_velocity, float))]
        world.append(
            f'<body name="object:{o.id}" pos="{_v(o.position)}" quat="{_v(q)}">'
            f'<freejoint name="object:{o.id}"/>'
            f'<inertial pos="0 0 0" mass="{_f(o.mass)}" diaginertia="{_v(o.inertia)}"/>'
            f"{geom}</body>")
        object_geoms[o.id] = gname

    # Explicit contact pairs.
    pairs = []
    pair_xml = []

    def add_pair(g1: str, g2: str, e1: str, e2: str, mat1: str, mat2: str, *, frictionless: bool = False,
                 stiffness: float = _rest.STIFFNESS, roller: bool = True) -> None:
        pc = config.materials.pair(mat1, mat2)
        mu = pc.dynamic_friction if friction == "dynamic" else pc.static_friction
        solref = _rest.solref_for(pc.restitution, stiffness)
        if frictionless:
            pair_xml.append(f'<pair geom1="{g1}" geom2="{g2}" condim="1" solref="{_v(solref)}" '
                            f'solimp="{_v(_rest.SOLIMP)}"/>')
        else:
            pair_xml.append(f'<pair geom1="{g1}" geom2="{g2}" condim="3" friction="{_v((mu, mu, 0.005, 0.0001, 0.0001))}" '
                            f'solref="{_v(solref)}" solimp="{_v(_rest.SOLIMP)}" '
                            f'solreffriction="{_v(_rest.solref_friction(roller))}"/>')
        pairs.append((g1, g2, e1, e2))

    track_ids = {t.id for t in config.tracks}
    for i, o in enumerate(config.objects):
        og = object_geoms[o.id]
        for sid, gnames in support_geoms.items():
            mat = config.support_material(sid) if sid != "ground" else config.ground_material
            stiffness = _rest.TRACK_STIFFNESS if sid in track_ids else _rest.STIFFNESS
            for g in gnames:
                add_pair(og, g, o.id, sid, o.material, mat, stiffness=stiffness,
                         roller=o.primitive.rolls(o.rest_pose))
        for o2 in config.objects[i + 1:]:
            # Object–object contacts are frictionless, as in the analytic model (impulse along the
            # normal only, spins unchanged): see orchard_build/mechanics/solver.py.
            add_pair(og, object_geoms[o2.id], o.id, o2.id, o.material, o2.material, frictionless=True)

    g = config.gravity
    xml = "\n".join([
        f'<mujoco model="{config.case_id}">',
        '  <compiler angle="radian" inertiafromgeom="false" autolimits="true"/>',
        f'  <option timestep="{_f(_rest.TIMESTEP)}" gravity="{_v(g)}" cone="{_rest.CONE}" '
        f'impratio="{_f(_rest.IMPRATIO)}" integrator="{_rest.INTEGRATOR}" ccd_tolerance="{_f(_rest.CCD_TOLERANCE)}"/>',
        f'  <statistic extent="{_f(EXTENT)}" center="{_v(np.round(center, 9))}"/>',
        "  <visual>",
        f'    <global offwidth="{off_w}" offheight="{off_h}"/>',
        f'    <quality shadowsize="{shadow_size}" offsamples="4" numslices="64" numstacks="48"/>',
        '    <headlight ambient="0.34 0.34 0.34" diffuse="0.22 0.22 0.22" specular="0.05 0.05 0.05"/>',
        f'    <map znear="{_f(ZNEAR / EXTENT)}" zfar="{_f(ZFAR / EXTENT)}" shadowclip="{_f(round(shadowclip / EXTENT, 6))}"/>',
        "  </visual>",
        "  <asset>",
        f'    <texture name="sky" type="skybox" builtin="gradient" rgb1="{_v(SKY[0])}" rgb2="{_v(SKY[1])}" '
        'width="512" height="3072"/>',
        *("    " + t for t in textures),
        *("    " + m for m in materials),
        *("    " + m for m in meshes),
        "  </asset>",
        "  <worldbody>",
        *("    " + w for w in world),
        "  </worldbody>",
        "  <keyframe>",
        f'    <key name="initial" qpos="{_v(key_qpos)}" qvel="{_v(key_qvel)}"/>',
        "  </keyframe>",
        "  <contact>",
        *("    " + p for p in pair_xml),
        "  </contact>",
        "</mujoco>",
        "",
    ])
    return MjcfScene(xml=xml, object_geoms=object_geoms,
                     support_geoms={k: tuple(v) for k, v in support_geoms.items()}, pairs=tuple(pairs),
                     procedural_textures=procedural)


def compile_model(config, **kwargs):
    """(mujoco.MjModel, MjcfScene) of a resolved case, procedural textures filled in."""
    from . import gl

    gl.configure()
    import mujoco

    scene = build_mjcf(config, **kwargs)
    model = mujoco.MjModel.from_xml_string(scene.xml)
    apply_procedural_textures(model, scene)
    return model, scene
