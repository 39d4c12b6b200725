"""Case configs: YAML → schema validation → semantic checks → a resolved, immutable CaseConfig.

Everything downstream (mechanics, engines, writers) reads the resolved form only. Resolution turns
placements into world poses, derives every mass from density × analytic volume, and rejects
anything inconsistent with a message naming the file, the field and the reason.
"""
from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from scipy.spatial.transform import Rotation

from .camera import Camera
from .errors import ConfigError
from .materials import MaterialLibrary, load_materials
from .primitives import REST_POSES, SIZE_KEYS, Primitive
from .schemas import validate_instance
from .tasks import TaskInfo, case_id, task_info

Z = np.array([0.0, 0.0, 1.0])
FORBIDDEN_KEYS = ("mass", "masses", "weight")


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def _frame_quat(x_axis: np.ndarray, z_axis: np.ndarray) -> np.ndarray:
    """Quaternion (w, x, y, z) of the body frame whose local x and z axes map to the given world axes."""
    z = _unit(z_axis)
    x = _unit(x_axis - z * np.dot(x_axis, z))
    y = np.cross(z, x)
    q = Rotation.from_matrix(np.stack([x, y, z], axis=1)).as_quat()  # x, y, z, w
    q = np.array([q[3], q[0], q[1], q[2]])
    return q if q[0] >= 0 else -q


RAIL_HEIGHT_PER_RADIUS = 0.6   # a track's rails, unless its config says, rise this many rolling radii …
RAIL_HEIGHT_MIN = 0.005        # m, … and at least this high


def default_rail_height(radii) -> float:
    """The rails of a track that `rail_height` leaves unset, from the rolling radii of the bodies on
    it (0.02 m with none)."""
    return max(RAIL_HEIGHT_PER_RADIUS * max(radii), RAIL_HEIGHT_MIN) if len(radii) else 0.02


def _horizontal(yaw_deg: float) -> np.ndarray:
    a = math.radians(yaw_deg)
    return np.array([math.cos(a), math.sin(a), 0.0])


# ---------------------------------------------------------------------------------------------
# Resolved scene description
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ramp:
    id: str
    material: str
    angle: float  # rad
    length: float
    width: float
    foot: np.ndarray  # middle of the lower edge of the sliding surface
    downhill: np.ndarray  # unit horizontal direction of descent

    @property
    def slope_down(self) -> np.ndarray:
        """Unit vector along the surface, pointing down the slope."""
        return math.cos(self.angle) * self.downhill - math.sin(self.angle) * Z

    @property
    def normal(self) -> np.ndarray:
        return math.sin(self.angle) * self.downhill + math.cos(self.angle) * Z

    @property
    def lateral(self) -> np.ndarray:
        return np.cross(Z, self.downhill)

    @property
    def top(self) -> np.ndarray:
        return self.foot - self.length * self.slope_down

    def surface_point(self, distance_from_top: float, lateral: float = 0.0) -> np.ndarray:
        return self.top + distance_from_top * self.slope_down + lateral * self.lateral


@dataclass(frozen=True)
class Track:
    id: str
    material: str
    radius: float
    center: np.ndarray
    direction: np.ndarray  # unit horizontal: the circle lies in span(direction, z)
    arc: tuple[float, float]  # rad, from the lowest point toward `direction`
    width: float
    rail_height: float | None = None   # None: `default_rail_height` of the bodies on the track

    @property
    def lateral(self) -> np.ndarray:
        return np.cross(Z, self.direction)

    def radial(self, phi: float) -> np.ndarray:
        """Unit vector from the centre to the running surface at angle phi."""
        return math.sin(phi) * self.direction - math.cos(phi) * Z

    def tangent(self, phi: float) -> np.ndarray:
        """Unit tangent toward increasing phi."""
        return math.cos(phi) * self.direction + math.sin(phi) * Z

    def surface_point(self, phi: float) -> np.ndarray:
        return self.center + self.radius * self.radial(phi)


@dataclass(frozen=True)
class Platform:
    id: str
    material: str
    center: np.ndarray
    size: np.ndarray

    @property
    def top_z(self) -> float:
        return float(self.center[2] + self.size[2] / 2.0)

    def contains_xy(self, xy: np.ndarray, margin: float = 0.0) -> bool:
        d = np.abs(np.asarray(xy[:2]) - self.center[:2])
        return bool(np.all(d <= self.size[:2] / 2.0 - margin))


@dataclass(frozen=True)
class ObjectSpec:
    id: str
    instance_id: int  # 1-based; 0 is background in every mask
    primitive: Primitive
    material: str
    density: float
    mass: float
    inertia: np.ndarray  # principal moments about the COM, body frame
    placement: str  # free | surface | ramp | track
    support: str | None  # ground / platform id / ramp id / track id
    rest_pose: str
    position: np.ndarray  # centre of mass, world
    quaternion: np.ndarray  # (w, x, y, z), body → world
    linear_velocity: np.ndarray
    angular_velocity: np.ndarray
    annotate: tuple[str, ...]
    placement_params: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> str:
        return self.primitive.shape


@dataclass(frozen=True)
class Timing:
    fps: int
    duration: float
    target_time: float
    grid_points: int

    @property
    def n_frames(self) -> int:
        """Frames including frame 0, the condition frame."""
        return int(round(self.duration * self.fps)) + 1

    @property
    def frame_times(self) -> np.ndarray:
        return np.arange(self.n_frames) / self.fps


@dataclass(frozen=True)
class CaseConfig:
    task: TaskInfo
    case_number: int
    case_id: str
    seed: int
    description: str
    g: float
    world_name: str | None
    ground_material: str
    ramps: tuple[Ramp, ...]
    tracks: tuple[Track, ...]
    platforms: tuple[Platform, ...]
    objects: tuple[ObjectSpec, ...]
    camera: Camera
    timing: Timing
    render: dict[str, Any]
    materials: MaterialLibrary
    source_path: str
    raw: dict[str, Any]
    config_sha256: str
    materials_sha256: str

    @property
    def gravity(self) -> np.ndarray:
        return np.array([0.0, 0.0, -self.g])

    def obj(self, object_id: str) -> ObjectSpec:
        for o in self.objects:
            if o.id == object_id:
                return o
        raise KeyError(object_id)

    def ramp(self, ramp_id: str) -> Ramp:
        return next(r for r in self.ramps if r.id == ramp_id)

    def track(self, track_id: str) -> Track:
        return next(t for t in self.tracks if t.id == track_id)

    def platform(self, platform_id: str) -> Platform:
        return next(p for p in self.platforms if p.id == platform_id)

    def support_material(self, support: str | None) -> str:
        for group in (self.ramps, self.tracks, self.platforms):
            for s in group:
                if s.id == support:
                    return s.material
        return self.ground_material

    def to_resolved_dict(self) -> dict[str, Any]:
        """Plain-JSON form of everything resolution derived (written as config_resolved.json)."""
        def arr(a):
            return [float(x) for x in np.asarray(a).ravel()]

        return {
            "case_id": self.case_id,
            "task": self.task.name,
            "seed": self.seed,
            "g": self.g,
            "gravity": arr(self.gravity),
            "ground_material": self.ground_material,
            "ramps": [{"id": r.id, "material": r.material, "angle_deg": math.degrees(r.angle), "length": r.length,
                       "width": r.width, "foot": arr(r.foot), "top": arr(r.top), "downhill": arr(r.downhill),
                       "normal": arr(r.normal)} for r in self.ramps],
            "tracks": [{"id": t.id, "material": t.material, "radius": t.radius, "center": arr(t.center),
                        "direction": arr(t.direction), "arc_deg": [math.degrees(a) for a in t.arc],
                        "width": t.width, **({} if t.rail_height is None else {"rail_height": t.rail_height})}
                       for t in self.tracks],
            "platforms": [{"id": p.id, "material": p.material, "center": arr(p.center), "size": arr(p.size)}
                          for p in self.platforms],
            "objects": [{"id": o.id, "instance_id": o.instance_id, "shape": o.shape, "size": dict(o.primitive.size),
                         "material": o.material, "density": o.density, "volume": o.primitive.volume,
                         "mass": o.mass, "inertia_diagonal": arr(o.inertia), "placement": o.placement,
                         "support": o.support, "rest_pose": o.rest_pose, "position": arr(o.position),
                         "quaternion_wxyz": arr(o.quaternion), "linear_velocity": arr(o.linear_velocity),
                         "angular_velocity": arr(o.angular_velocity), "annotate": list(o.annotate)}
                        for o in self.objects],
            "camera": self.camera.to_dict(),
            "timing": {"fps": self.timing.fps, "duration": self.timing.duration,
                       "target_time": self.timing.target_time, "grid_points": self.timing.grid_points,
                       "n_frames": self.timing.n_frames},
            "render": self.render,
        }


# ---------------------------------------------------------------------------------------------
# Loading and checking
# ---------------------------------------------------------------------------------------------
def _find_forbidden(node: Any, path: str = "") -> str | None:
    if isinstance(node, dict):
        for k, v in node.items():
            p = f"{path}.{k}" if path else str(k)
            if str(k).lower() in FORBIDDEN_KEYS:
                return p
            hit = _find_forbidden(v, p)
            if hit:
                return hit
    elif isinstance(node, list):
        for i, v in enumerate(node):
            hit = _find_forbidden(v, f"{path}[{i}]")
            if hit:
                return hit
    return None


def _find_non_finite(node: Any, path: str = "") -> str | None:
    if isinstance(node, bool):
        return None
    if isinstance(node, float) and not math.isfinite(node):
        return path
    if isinstance(node, dict):
        for k, v in node.items():
            hit = _find_non_finite(v, f"{path}.{k}" if path else str(k))
            if hit:
                return hit
    if isinstance(node, list):
        for i, v in enumerate(node):
            hit = _find_non_finite(v, f"{path}[{i}]")
            if hit:
                return hit
    return None


def default_materials_path(scenes_dir: str | Path | None = None) -> Path:
    if scenes_dir is not None and (Path(scenes_dir) / "materials.yaml").is_file():
        return Path(scenes_dir) / "materials.yaml"
    from .resources import scenes_dir as default_scenes

    return default_scenes() / "materials.yaml"


def load_config(path: str | Path, materials: MaterialLibrary | None = None) -> CaseConfig:
    """Read, validate and resolve one case config. Raises ConfigError on any problem."""
    path = Path(path)
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ConfigError(path, "", f"cannot read config: {exc.strerror or exc}") from exc
    try:
        raw = yaml.safe_load(text.decode("utf-8"))
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ConfigError(path, "", f"not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(path, "", "a config must be a YAML mapping")
    if materials is None:
        materials = load_materials(default_materials_path(path.parent.parent))
    return resolve_config(raw, path, materials, config_bytes=text)


def resolve_config(raw: dict[str, Any], path: str | Path, materials: MaterialLibrary,
                   config_bytes: bytes | None = None) -> CaseConfig:
    forbidden = _find_forbidden(raw)
    if forbidden:
        raise ConfigError(path, forbidden, "a config must not state a mass: mass is derived as density × analytic volume")
    bad = _find_non_finite(raw)
    if bad:
        raise ConfigError(path, bad, "value is NaN or infinite")
    validate_instance(raw, "case_config.schema.json", path)
    return _Resolver(raw, Path(path), materials, config_bytes).resolve()


class _Resolver:
    def __init__(self, raw: dict[str, Any], path: Path, materials: MaterialLibrary, config_bytes: bytes | None):
        self.raw, self.path, self.materials = raw, path, materials
        self.config_bytes = config_bytes if config_bytes is not None else json.dumps(raw, sort_keys=True).encode()

    def fail(self, field: str, reason: str) -> ConfigError:
        return ConfigError(self.path, field, reason)

    def material(self, key: str, field: str) -> str:
        if key not in self.materials:
            raise self.fail(field, f"unknown material {key!r}; known: {', '.join(sorted(self.materials.materials))}")
        return key

    def resolve(self) -> CaseConfig:
        raw = self.raw
        task = task_info(raw["task"])
        ground = self.material(raw["ground"]["material"], "ground.material")
        supports = raw.get("supports", {})
        ramps = tuple(self._ramp(r, i) for i, r in enumerate(supports.get("ramps", [])))
        tracks = tuple(self._track(t, i) for i, t in enumerate(supports.get("tracks", [])))
        platforms = tuple(self._platform(p, i) for i, p in enumerate(supports.get("platforms", [])))
        ids = [s.id for s in (*ramps, *tracks, *platforms)] + [o["id"] for o in raw["objects"]]
        dup = next((i for i in ids if ids.count(i) > 1), None)
        if dup is not None or "ground" in ids:
            raise self.fail("objects" if dup in [o["id"] for o in raw["objects"]] else "supports",
                            f"duplicate or reserved id {dup or 'ground'!r}")
        self.ramps = {r.id: r for r in ramps}
        self.tracks = {t.id: t for t in tracks}
        self.platforms = {p.id: p for p in platforms}
        objects = tuple(self._object(o, i) for i, o in enumerate(raw["objects"]))
        camera = self._camera(raw["camera"])
        timing = self._timing(raw["timing"])
        env = raw["environment"]
        mat_bytes = Path(self.materials.source).read_bytes() if self.materials.source and Path(self.materials.source).is_file() else b""
        return CaseConfig(
            task=task, case_number=int(raw["case_number"]), case_id=case_id(task.name, int(raw["case_number"])),
            seed=int(raw["seed"]), description=str(raw.get("description", "")), g=float(env["g"]),
            world_name=env.get("body"), ground_material=ground, ramps=ramps, tracks=tracks, platforms=platforms,
            objects=objects, camera=camera, timing=timing, render=dict(raw.get("render", {})),
            materials=self.materials, source_path=str(self.path), raw=raw,
            config_sha256=hashlib.sha256(self.config_bytes).hexdigest(),
            materials_sha256=hashlib.sha256(mat_bytes).hexdigest(),
        )

    # ---- supports ----------------------------------------------------------------------------
    def _ramp(self, r: dict[str, Any], i: int) -> Ramp:
        f = f"supports.ramps[{i}]"
        if not 0.0 < r["angle_deg"] < 90.0:
            raise self.fail(f"{f}.angle_deg", f"ramp angle must lie strictly between 0° and 90°, got {r['angle_deg']}")
        foot = np.array(r["foot"], float)
        if foot[2] < 0:
            raise self.fail(f"{f}.foot", "the ramp foot lies below the ground")
        return Ramp(r["id"], self.material(r["material"], f"{f}.material"), math.radians(r["angle_deg"]),
                    float(r["length"]), float(r["width"]), foot, _horizontal(r.get("downhill_yaw_deg", 0.0)))

    def _track(self, t: dict[str, Any], i: int) -> Track:
        f = f"supports.tracks[{i}]"
        a0, a1 = (math.radians(a) for a in t["arc_deg"])
        if not -math.pi - 1e-9 <= a0 < a1 <= math.pi + 1e-9:
            raise self.fail(f"{f}.arc_deg", "arc must satisfy -180 ≤ start < end ≤ 180")
        track = Track(t["id"], self.material(t["material"], f"{f}.material"), float(t["radius"]),
                      np.array(t["center"], float), _horizontal(t.get("direction_yaw_deg", 0.0)), (a0, a1),
                      float(t["width"]), None if t.get("rail_height") is None else float(t["rail_height"]))
        if track.center[2] - track.radius < -1e-9:
            raise self.fail(f"{f}.center", "the track's lowest point lies below the ground")
        return track

    def _platform(self, p: dict[str, Any], i: int) -> Platform:
        f = f"supports.platforms[{i}]"
        plat = Platform(p["id"], self.material(p["material"], f"{f}.material"), np.array(p["center"], float),
                        np.array(p["size"], float))
        if plat.center[2] - plat.size[2] / 2.0 < -1e-9:
            raise self.fail(f"{f}.center", "the platform reaches below the ground")
        return plat

    # ---- objects -----------------------------------------------------------------------------
    def _object(self, o: dict[str, Any], i: int) -> ObjectSpec:
        f = f"objects[{i}]"
        shape = o["shape"]
        want = set(SIZE_KEYS[shape])
        if set(o["size"]) != want:
            raise self.fail(f"{f}.size", f"a {shape} needs exactly {sorted(want)}, got {sorted(o['size'])}")
        prim = Primitive(shape, {k: float(v) for k, v in o["size"].items()})
        mat = self.materials[self.material(o["material"], f"{f}.material")]
        mass = prim.mass(mat.density)
        kind, params = next(iter(o["placement"].items()))
        pf = f"{f}.placement.{kind}"
        rest = params.get("rest_pose", "any" if shape == "sphere" else ("side" if kind == "track" else "upright"))
        if rest not in REST_POSES[shape]:
            raise self.fail(f"{pf}.rest_pose", f"a {shape} cannot rest {rest!r}; allowed: {', '.join(REST_POSES[shape])}")
        support: str | None = None
        w = np.zeros(3)
        if kind == "free":
            pos = np.array(params["position"], float)
            euler = params.get("orientation_deg", [0.0, 0.0, 0.0])
            q = Rotation.from_euler("xyz", euler, degrees=True).as_quat()
            quat = np.array([q[3], q[0], q[1], q[2]])
            quat = quat if quat[0] >= 0 else -quat
            vel = np.array(params.get("linear_velocity", [0, 0, 0]), float)
            w = np.array(params.get("angular_velocity", [0, 0, 0]), float)
            if pos[2] - prim.bounding_radius < -1e-9 and pos[2] < prim.support_distance(rest) - 1e-9:
                raise self.fail(f"{pf}.position", "the object starts below the ground")
        elif kind == "surface":
            support = params.get("support", "ground")
            xy = np.array(params["xy"], float)
            if support == "ground":
                top = 0.0
            elif support in self.platforms:
                plat = self.platforms[support]
                if not plat.contains_xy(xy):
                    raise self.fail(f"{pf}.xy", f"the point {xy.tolist()} is not on platform {support!r}")
                top = plat.top_z
            else:
                raise self.fail(f"{pf}.support", f"no platform {support!r}; use 'ground' or a platform id")
            pos = np.array([xy[0], xy[1], top + prim.support_distance(rest)])
            v2 = np.array(params.get("velocity", [0.0, 0.0]), float)
            vel = np.array([v2[0], v2[1], 0.0])
            heading = _unit(vel) if np.linalg.norm(vel) > 1e-12 else _horizontal(params.get("yaw_deg", 0.0))
            if rest == "side":  # cylinder axis across the direction of travel
                quat = _frame_quat(heading, np.cross(Z, heading))
            else:
                quat = _frame_quat(_horizontal(params.get("yaw_deg", 0.0)) if np.linalg.norm(vel) < 1e-12 else heading, Z)
            if prim.rolls(rest):
                w = np.cross(Z, vel) / prim.rolling_radius()
        elif kind == "ramp":
            support = params["ramp"]
            if support not in self.ramps:
                raise self.fail(f"{pf}.ramp", f"no ramp {support!r} in supports.ramps")
            ramp = self.ramps[support]
            d = float(params["distance_from_top"])
            if d > ramp.length:
                raise self.fail(f"{pf}.distance_from_top", f"{d} m lies beyond the ramp's length {ramp.length} m")
            lat = float(params.get("lateral", 0.0))
            if abs(lat) > ramp.width / 2.0:
                raise self.fail(f"{pf}.lateral", "the object lies beside the ramp")
            pos = ramp.surface_point(d, lat) + ramp.normal * prim.support_distance(rest)
            vel = float(params.get("speed", 0.0)) * ramp.slope_down
            if rest == "side":
                quat = _frame_quat(ramp.slope_down, ramp.lateral)
            else:
                quat = _frame_quat(ramp.slope_down, ramp.normal)
            if prim.rolls(rest):
                w = np.cross(ramp.normal, vel) / prim.rolling_radius()
        else:  # track
            support = params["track"]
            if support not in self.tracks:
                raise self.fail(f"{pf}.track", f"no track {support!r} in supports.tracks")
            track = self.tracks[support]
            phi = math.radians(params["angle_deg"])
            if not track.arc[0] - 1e-9 <= phi <= track.arc[1] + 1e-9:
                raise self.fail(f"{pf}.angle_deg", "the object is placed outside the track's arc")
            if not prim.rolls(rest):
                raise self.fail(f"{pf}", "only spheres and cylinders on their side run on a circular track")
            a = prim.support_distance(rest)
            if a >= track.radius:
                raise self.fail(f"{f}.size", "the object is larger than the track radius")
            pos = track.center + (track.radius - a) * track.radial(phi)
            vel = float(params.get("speed", 0.0)) * track.tangent(phi)
            inward = -track.radial(phi)
            quat = _frame_quat(track.tangent(phi), track.lateral if rest == "side" else inward)
            w = np.cross(inward, vel) / prim.rolling_radius()
        annotate = tuple(o.get("annotate", ["mass"]))
        return ObjectSpec(
            id=o["id"], instance_id=i + 1, primitive=prim, material=mat.key, density=mat.density, mass=mass,
            inertia=prim.inertia_diagonal(mass), placement=kind, support=support, rest_pose=rest,
            position=pos, quaternion=quat, linear_velocity=vel, angular_velocity=w, annotate=annotate,
            placement_params=dict(params),
        )

    # ---- camera and timing -------------------------------------------------------------------
    def _camera(self, c: dict[str, Any]) -> Camera:
        try:
            return Camera(np.array(c["position"], float), np.array(c["look_at"], float),
                          np.array(c.get("up", [0.0, 0.0, 1.0]), float), float(c["fov_deg"]),
                          int(c["resolution"][0]), int(c["resolution"][1]))
        except ValueError as exc:
            raise self.fail("camera", str(exc)) from exc

    def _timing(self, t: dict[str, Any]) -> Timing:
        timing = Timing(int(t["fps"]), float(t["duration"]), float(t["target_time"]), int(t.get("grid_points", 4)))
        if timing.target_time > timing.duration + 1e-12:
            raise self.fail("timing.target_time", f"t* = {timing.target_time} s lies after T = {timing.duration} s")
        frames = timing.duration * timing.fps
        if abs(frames - round(frames)) > 1e-6:
            lo, hi = math.floor(frames) / timing.fps, math.ceil(frames) / timing.fps
            raise self.fail("timing.duration", f"T = {timing.duration} s is not a whole number of frames at "
                            f"{timing.fps} fps (T·fps = {frames:.4g}); use e.g. {lo:.6g} or {hi:.6g}")
        if timing.n_frames < 2:
            raise self.fail("timing.duration", "the duration gives fewer than one physics frame at this fps")
        return timing
