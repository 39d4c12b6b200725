"""Seeded suite generator: samples case configs from the declared ranges in `scenes/ranges.yaml`.

Each sample is resolved and solved before it is kept; samples that the analytic model refuses, that
leave the frame or that would show objects too small are redrawn from the same random stream, so a
(task, seed, count) triple always yields the same files. Duration, target time and camera are derived
from the solved motion: the motion of interest (landing, collision, loop) happens inside [0, T] and the
camera frames everything that moves.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from .config import resolve_config
from .errors import ConfigError, OrchardError, PhysicsError
from .framing import frame, keep_in_view
from .io import write_text_atomic
from .materials import MaterialLibrary
from .mechanics import solve
from .tasks import TASK_NAMES, TASKS

STEP = 0.125  # durations and target times on a 1/8 s grid: whole frames at 24 fps, exact in YAML
MAX_ATTEMPTS = 200


class GenerationError(OrchardError):
    pass


class _PlainDumper(yaml.SafeDumper):
    """Writes repeated values in full: a reviewer reads every config on its own, without YAML anchors."""

    def ignore_aliases(self, data) -> bool:
        return True


def _r(x: float, nd: int = 3) -> float:
    return float(round(float(x), nd))


def _snap(t: float, lo: float = STEP) -> float:
    return max(lo, round(t / STEP) * STEP)


class Sampler:
    """Random draws for one case, from one numpy Generator."""

    def __init__(self, rng: np.random.Generator, ranges: dict[str, Any]):
        self.rng, self.ranges, self.common = rng, ranges, ranges["common"]

    def u(self, lo_hi, nd: int = 3) -> float:
        lo, hi = lo_hi
        return _r(self.rng.uniform(lo, hi), nd)

    def choice(self, options):
        return options[int(self.rng.integers(len(options)))]

    def chance(self, p: float) -> bool:
        return bool(self.rng.random() < p)

    def gravity(self) -> dict[str, Any]:
        names = list(self.common["gravity"])
        weights = np.array([self.common["gravity"][n][1] for n in names], float)
        name = names[int(self.rng.choice(len(names), p=weights / weights.sum()))]
        env = {"g": float(self.common["gravity"][name][0])}
        if name != "Earth":
            env["body"] = name
        return env

    def shape(self, options) -> tuple[str, dict[str, float], str | None]:
        """(shape, size, rest_pose); 'cylinder_side' is a cylinder lying on its side."""
        name = self.choice(options)
        shape, pose = ("cylinder", "side") if name == "cylinder_side" else (name, None)
        size = {k: self.u(v) for k, v in self.common["sizes"][shape].items()}
        return shape, size, pose

    def material(self, colourful: bool = False, unlike: str | None = None) -> str:
        """An object material; `unlike` excludes the material of the support the object touches (the
        same material on both sides leaves no visible edge between object and support)."""
        options = [m for m in self.common["colourful_materials" if colourful else "solid_materials"] if m != unlike]
        return self.choice(options)


def _obj(oid: str, shape: str, size: dict, material: str, placement: dict, annotate: list[str]) -> dict:
    return {"id": oid, "shape": shape, "size": size, "material": material, "placement": placement,
            "annotate": annotate}


def _base(task: str, number: int, seed: int, env: dict, ground: str) -> dict:
    return {"schema_version": 1, "task": task, "case_number": number, "seed": seed, "description": "",
            "environment": env, "ground": {"material": ground}}


def _support_distance(shape: str, size: dict, pose: str | None) -> float:
    if shape == "sphere" or pose == "side":
        return size["radius"]
    return {"cube": size.get("edge", 0) / 2, "cylinder": size.get("height", 0) / 2,
            "cone": size.get("height", 0) / 4}[shape]


# ---------------------------------------------------------------------------------------------
# Task samplers: return (raw config without camera/timing, a hint for timing)
# ---------------------------------------------------------------------------------------------
def _free_fall(s: Sampler, r: dict, number: int, seed: int) -> tuple[dict, dict]:
    shape, size, _ = s.shape(r["shapes"])
    raw = _base("free_fall", number, seed, s.gravity(), s.choice(r["ground"]))
    h = s.u(r["height"]) + _support_distance(shape, size, None)
    v0 = 0.0 if s.chance(r["v0_zero_probability"]) else s.u(r["v0"], 2)
    place = {"position": [0.0, 0.0, h]}
    annotate = ["mass"]
    if v0:
        place["linear_velocity"] = [0.0, 0.0, v0]
        annotate.append("v0")
    mat = s.material()
    raw["objects"] = [_obj("body", shape, size, mat, {"free": place}, annotate)]
    raw["description"] = (f"A {mat.replace('_', ' ')} {shape} is " + ("dropped from rest" if not v0 else
                          ("thrown upward" if v0 > 0 else "thrown downward")) + " and lands.")
    return raw, {"after": s.u(r["after_landing"]), "event": "landing"}


def _projectile(s: Sampler, r: dict, number: int, seed: int) -> tuple[dict, dict]:
    shape, size, _ = s.shape(r["shapes"])
    raw = _base("projectile_motion", number, seed, s.gravity(), s.choice(r["ground"]))
    h = s.u(r["height"]) + _support_distance(shape, size, None)
    lo_elev = r["elevation_deg"][0] if shape == "sphere" else max(r["elevation_deg"][0], 20)  # apex in view
    speed, elev = s.u(r["speed"], 2), math.radians(s.u([lo_elev, r["elevation_deg"][1]], 1))
    az = math.radians(s.u(r["out_of_plane_deg"], 1)) * (1 if s.chance(0.5) else -1) if s.chance(r["out_of_plane_probability"]) else 0.0
    v = [speed * math.cos(elev) * math.cos(az), speed * math.cos(elev) * math.sin(az), speed * math.sin(elev)]
    mat = s.material()
    raw["objects"] = [_obj("body", shape, size, mat, {"free": {"position": [-0.8, 0.0, h],
                                                               "linear_velocity": [_r(x) for x in v]}}, ["mass", "v0"])]
    raw["description"] = f"A {mat.replace('_', ' ')} {shape} is launched {'in 3D ' if az else ''}and flies to the ground."
    hint = {"after": s.u(r["after_landing"]), "event": "landing", "fallback": (0.8, 1.5)}
    if shape != "sphere":
        # non-round bodies are shown in flight only (a landing with horizontal speed would tip them):
        # the provisional solve must stop before the touchdown, found from z(t) = support height
        g, vz, dz = raw["environment"]["g"], v[2], h - _support_distance(shape, size, None)
        t_land = (vz + math.sqrt(vz * vz + 2 * g * dz)) / g
        lo = max(0.5, vz / g + 0.15)  # the apex (the motion of interest here) inside [0, T]
        hint.update({"before_event": True, "fallback": (lo, max(lo, t_land - 0.1)),
                     "max_duration": math.floor((t_land - 0.02) * 8) / 8})
    return raw, hint


def _inclined(s: Sampler, r: dict, number: int, seed: int) -> tuple[dict, dict]:
    shape, size, pose = s.shape(r["shapes"])
    raw = _base("inclined_plane", number, seed, s.gravity(), "concrete")
    angle, length = float(round(s.u(r["angle_deg"]))), s.u(r["length"], 2)  # whole degrees: θ is printed so
    ramp_mat = s.choice(r["ramp_materials"])
    raw["supports"] = {"ramps": [{"id": "ramp", "material": ramp_mat, "angle_deg": angle, "length": length,
                                  "width": 0.5, "foot": [_r(length * math.cos(math.radians(angle)) / 2), 0.0, 0.0]}]}
    place = {"ramp": "ramp", "distance_from_top": s.u(r["start_from_top"], 2) + _support_distance(shape, size, pose)}
    if pose:
        place["rest_pose"] = pose
    annotate = ["mass"]
    if not s.chance(r["v0_zero_probability"]):
        place["speed"] = s.u(r["v0"], 2)
        if place["speed"] < 0:
            place["distance_from_top"] = _r(length * 0.55)
        annotate.append("v0")
    mat = s.material(colourful=True, unlike=ramp_mat)
    raw["objects"] = [_obj("body", shape, size, mat, {"ramp": place}, annotate)]
    raw["description"] = f"A {mat.replace('_', ' ')} {shape} on a {angle:g}° {ramp_mat.replace('_', ' ')} ramp."
    return raw, {"duration": s.u(r["duration"]), "stop_before": ("surface_transition", "contact_break")}


def _circular(s: Sampler, r: dict, number: int, seed: int) -> tuple[dict, dict]:
    shape, size, pose = s.shape(r["shapes"])
    env = s.gravity()
    raw = _base("circular_motion", number, seed, env, "concrete")
    R = s.u(r["radius"], 2)
    a = size["radius"]
    k = 0.4 if shape == "sphere" else 0.5
    place: dict[str, Any] = {"track": "track"}
    if pose:
        place["rest_pose"] = pose
    annotate = ["mass"]
    if s.chance(r["loop_probability"]):
        rho = R - a
        v0 = math.sqrt(env["g"] * rho * (1 + 4 / (1 + k)) * s.u(r["loop_margin"]))
        place.update({"angle_deg": 0.0, "speed": _r(v0, 2)})
        arc = [-180, 180]
        annotate.append("v0")
        desc = "rolls around a vertical loop"
    else:
        place["angle_deg"] = -s.u(r["release_deg"], 1)
        arc = [-90, 90]
        desc = "is released on a half-pipe and rolls to and fro"
    track_mat = s.choice(r["track_materials"])
    mat = s.material(colourful=True, unlike=track_mat)
    raw["supports"] = {"tracks": [{"id": "track", "material": track_mat, "radius": R,
                                   "center": [0.0, 0.0, R], "arc_deg": arc, "width": _r(max(0.16, 2.4 * a))}]}
    raw["objects"] = [_obj("body", shape, size, mat, {"track": place}, annotate)]
    raw["description"] = f"A {mat.replace('_', ' ')} {shape} {desc}."
    return raw, {"duration": s.u(r["duration"])}


def _collision(task: str) -> Callable:
    def sample(s: Sampler, r: dict, number: int, seed: int) -> tuple[dict, dict]:
        c = s.ranges["tasks"]["collisions"]
        raw = _base(task, number, seed, s.gravity(), c["ground"])
        ma, mb = s.choice(r["pairs"])
        if s.chance(0.5):
            ma, mb = mb, ma
        shape = s.choice(c["shapes"])
        if shape == "sphere":
            rad = s.u(s.common["sizes"]["sphere"]["radius"])
            size_a = size_b = {"radius": rad}
            half_a = half_b = rad
        elif shape == "cylinder":  # upright, struck on its curved side along the line of centres
            dims = s.common["sizes"]["cylinder"]
            size_a = {"radius": s.u(dims["radius"]), "height": s.u(dims["height"])}
            size_b = {"radius": s.u(dims["radius"]), "height": s.u(dims["height"])}
            half_a, half_b = size_a["radius"], size_b["radius"]
        else:
            size_a, size_b = {"edge": s.u(s.common["sizes"]["cube"]["edge"])}, {"edge": s.u(s.common["sizes"]["cube"]["edge"])}
            half_a, half_b = size_a["edge"] / 2, size_b["edge"] / 2
        gap = s.u(c["gap"], 2)
        va = s.u(c["speed"], 2)
        vb = -s.u(c["b_speed"], 2) if s.chance(c["b_moving_probability"]) else 0.0
        offset = 0.0
        if shape == "sphere" and task != "perfectly_inelastic_collision" and s.chance(c["oblique_probability"]):
            offset = _r(s.u(c["offset_fraction"]) * (half_a + half_b) * (1 if s.chance(0.5) else -1))
        xa = -(gap / 2 + half_a)
        xb = gap / 2 + half_b
        ann_a, ann_b = ["mass", "v0", "restitution"], ["mass", "v0"]
        raw["objects"] = [
            _obj("body_a", shape, size_a, ma, {"surface": {"xy": [_r(xa), 0.0], "velocity": [va, 0.0]}}, ann_a),
            _obj("body_b", shape, size_b, mb, {"surface": {"xy": [_r(xb), offset],
                                                           **({"velocity": [vb, 0.0]} if vb else {})}}, ann_b),
        ]
        kind = {"perfectly_elastic_collision": "elastically", "perfectly_inelastic_collision": "and stick together",
                "inelastic_collision": "inelastically"}[task]
        raw["description"] = (f"Two {shape}s ({ma.replace('_', ' ')}, {mb.replace('_', ' ')}) collide "
                              f"{'obliquely ' if offset else 'head-on '}{kind} on an air table.")
        return raw, {"after": s.u(c["after_contact"]), "event": "contact_init", "target_after_event": True,
                     "table_view": True, "fallback": (1.5, 2.5)}
    return sample


def _at_rest(s: Sampler, r: dict, number: int, seed: int) -> tuple[dict, dict]:
    raw = _base("at_rest", number, seed, s.gravity(), "concrete")
    support = s.choice(r["supports"])
    n = int(s.rng.integers(r["count"][0], r["count"][1] + 1))
    objs = []
    if support == "ramp":
        angle = float(round(s.u(r["ramp_angle_deg"])))  # whole degrees, as printed
        raw["supports"] = {"ramps": [{"id": "ramp", "material": "rubber", "angle_deg": angle, "length": 1.6,
                                      "width": 0.6, "foot": [0.6, 0.0, 0.0]}]}
        for i in range(n):
            shape, size, _ = s.shape(["cube", "cone", "cylinder"])
            objs.append(_obj(f"body_{i}", shape, size, s.material(colourful=True, unlike="rubber"),
                             {"ramp": {"ramp": "ramp", "distance_from_top": _r(0.25 + 0.45 * i)}}, ["mass"]))
    else:
        if support == "platform":
            raw["supports"] = {"platforms": [{"id": "table", "material": "oak", "center": [0.0, 0.0, 0.3],
                                              "size": [1.6, 0.8, 0.6]}]}
        for i in range(n):
            shape, size, pose = s.shape(["sphere", "cube", "cylinder", "cylinder_side", "cone"])
            place = {"xy": [_r(-0.45 + 0.45 * i + s.u([-0.05, 0.05])), _r(s.u([-0.15, 0.15]))],
                     "yaw_deg": s.u([0, 90], 1)}
            if pose:
                place["rest_pose"] = pose
            if support == "platform":
                place["support"] = "table"
            objs.append(_obj(f"body_{i}", shape, size,
                             s.material(colourful=True, unlike="oak" if support == "platform" else None),
                             {"surface": place}, ["mass"]))
    raw["objects"] = objs
    raw["description"] = f"{n} object{'s' if n > 1 else ''} at rest on {'a ramp' if support == 'ramp' else 'a table' if support == 'platform' else 'the ground'}."
    return raw, {"duration": s.u(r["duration"])}


def _uniform(s: Sampler, r: dict, number: int, seed: int) -> tuple[dict, dict]:
    mode = s.choice(r["modes"])
    if mode == "slide":
        shape, size, pose = s.shape(["cube", "cylinder", "cone", "sphere"])
        ground = "air_table"
    else:
        shape, size, pose = s.shape(["sphere", "cylinder_side"])
        ground = s.choice(["concrete", "painted_wood"])
    raw = _base("uniform_linear_motion", number, seed, s.gravity(), ground)
    speed, heading = s.u(r["speed"], 2), math.radians(s.u([-25, 25], 1))
    place = {"xy": [-0.6, 0.0], "velocity": [_r(speed * math.cos(heading)), _r(speed * math.sin(heading))]}
    if pose:
        place["rest_pose"] = pose
    mat = s.material(colourful=True)
    raw["objects"] = [_obj("body", shape, size, mat, {"surface": place}, ["mass", "v0"])]
    raw["description"] = f"A {mat.replace('_', ' ')} {shape} {'glides across an air table' if mode == 'slide' else 'rolls'} at constant velocity."
    return raw, {"duration": s.u(r["duration"]), "table_view": True}


def _composition(s: Sampler, r: dict, number: int, seed: int) -> tuple[dict, dict]:
    chain = r["chains"][number % len(r["chains"])]  # cycle so every chain appears
    raw = _base("composition", number, seed, s.gravity(), "concrete")
    mat = s.material(colourful=True, unlike={"ramp_projectile": "oak", "track_collision": "rubber"}.get(chain))
    if chain == "ramp_projectile":
        angle, length, hfoot = float(round(s.u([20, 35]))), s.u([0.8, 1.2], 2), s.u([0.4, 0.8], 2)
        raw["supports"] = {"ramps": [{"id": "ramp", "material": "oak", "angle_deg": angle, "length": length,
                                      "width": 0.5, "foot": [0.0, 0.0, hfoot]}]}
        rad = s.u([0.05, 0.09])
        raw["objects"] = [_obj("ball", "sphere", {"radius": rad}, mat,
                               {"ramp": {"ramp": "ramp", "distance_from_top": _r(rad + 0.05)}}, ["mass"])]
        raw["description"] = "A ball rolls down a raised ramp, flies off its end and lands."
        hint = {"after": s.u([0.2, 0.4]), "event": "landing"}
    elif chain == "track_collision":
        rad = s.u([0.05, 0.08])
        raw["ground"] = {"material": "air_table"}
        raw["supports"] = {"tracks": [{"id": "track", "material": "rubber", "radius": 0.6, "center": [-1.0, 0.0, 0.6],
                                       "arc_deg": [-90, 0], "width": _r(max(0.16, 2.4 * rad))}]}
        other = s.choice(["rubber", "glass", "brass", "abs_plastic"])
        raw["objects"] = [
            _obj("ball_a", "sphere", {"radius": rad}, mat, {"track": {"track": "track", "angle_deg": -s.u([35, 55], 1)}},
                 ["mass", "restitution"]),
            _obj("ball_b", "sphere", {"radius": rad}, other, {"surface": {"xy": [_r(s.u([-0.4, 0.0])), 0.0]}}, ["mass", "v0"])]
        raw["description"] = "A ball rolls down a quarter-pipe onto an air table and strikes a resting ball."
        hint = {"after": s.u([0.5, 0.9]), "event": "contact_init", "target_after_event": True}
    elif chain == "projectile_bounce":
        rad = s.u([0.05, 0.1])
        raw["ground"] = {"material": s.choice(["painted_wood", "concrete"])}
        v = [s.u([0.6, 1.5], 2), 0.0, s.u([0.5, 2.0], 2)]
        raw["objects"] = [_obj("ball", "sphere", {"radius": rad}, s.choice(["elastic_polymer", "rubber", "glass"]),
                               {"free": {"position": [-1.0, 0.0, s.u([0.6, 1.1])], "linear_velocity": v}},
                               ["mass", "v0", "restitution"])]
        raw["description"] = "A ball is launched, lands and bounces."
        hint = {"after": s.u([0.6, 1.0]), "event": "landing", "target_after_event": True}
    else:  # uniform_collision_edge
        raw["environment"] = {"g": 9.81}  # the struck ball must leave the edge fast (v² ≥ 4·g·r)
        rad = s.u([0.08, 0.1])
        mat = "elastic_polymer"  # equal masses and e = 1: the striker stops dead and stays on the table
        raw["supports"] = {"platforms": [{"id": "table", "material": "air_table", "center": [0.0, 0.0, 0.3],
                                          "size": [1.2, 0.5, 0.6]}]}
        raw["objects"] = [
            _obj("ball_a", "sphere", {"radius": rad}, mat,
                 {"surface": {"support": "table", "xy": [-0.42, 0.0], "velocity": [s.u([3.0, 3.6], 2), 0.0]}},
                 ["mass", "v0", "restitution"]),
            _obj("ball_b", "sphere", {"radius": rad}, mat,
                 {"surface": {"support": "table", "xy": [_r(s.u([0.1, 0.35])), 0.0]}}, ["mass", "v0"])]
        raw["description"] = "A ball glides across a frictionless table and strikes another, which flies off the edge."
        hint = {"after": s.u([0.15, 0.3]), "event": "landing", "target_after_event": True}
    return raw, hint


SAMPLERS: dict[str, Callable] = {
    "free_fall": _free_fall, "projectile_motion": _projectile, "inclined_plane": _inclined,
    "circular_motion": _circular, "perfectly_elastic_collision": _collision("perfectly_elastic_collision"),
    "perfectly_inelastic_collision": _collision("perfectly_inelastic_collision"),
    "inelastic_collision": _collision("inelastic_collision"), "at_rest": _at_rest,
    "uniform_linear_motion": _uniform, "composition": _composition,
}


# ---------------------------------------------------------------------------------------------
def _timing(s: Sampler, raw: dict, hint: dict, traj) -> dict:
    events = [e for e in traj.events if e.t > 1e-9]
    T = hint.get("duration")
    t_event = None
    if "event" in hint:
        hit = [e.t for e in events if e.label == hint["event"]]
        if hit:
            t_event = hit[0]
            T = (t_event - 0.1) if hint.get("before_event") else t_event + hint["after"]
        elif "fallback" in hint:
            T = s.u(hint["fallback"])
        else:
            raise PhysicsError("the motion of interest does not happen")
    for label in hint.get("stop_before", ()):
        for e in events:
            if e.label == label and e.t < T + 0.2:
                T = min(T, e.t - 0.1)
    T = _snap(min(T, 3.0), lo=0.5)
    if T > traj.duration + 1e-9:
        raise PhysicsError("needs a longer solve")
    lo = (t_event + 0.1) if (hint.get("target_after_event") and t_event is not None) else 0.3 * T
    lo = min(max(lo, STEP), T)
    t_star = _snap(s.u([lo, max(lo, 0.9 * T)]))
    t_star = min(max(t_star, STEP), T)
    return {"fps": s.common["fps"], "duration": T, "target_time": t_star}


def _camera(s: Sampler, cfg, traj, table_view: bool) -> dict:
    cam = s.common["camera"]
    az = s.choice(cam["azimuth_deg"]) + s.u([-cam["azimuth_jitter_deg"], cam["azimuth_jitter_deg"]], 1)
    el = s.u(cam["table_elevation_deg"] if table_view else cam["elevation_deg"], 1)
    fov = s.u(cam["fov_deg"], 1)
    pts = keep_in_view(cfg, traj)
    return frame(pts, az, el, fov, tuple(s.common["resolution"]), margin=cam["margin"])


def _object_px(cfg, traj) -> float:
    cam = cfg.camera
    smallest = math.inf
    for t in np.linspace(0, cfg.timing.duration, 24):
        for o in cfg.objects:
            p = traj.state(o.id, float(t)).position
            _, z = cam.project(p)
            px = cam.fy * (o.primitive.bounding_radius * 0.75) / max(float(z), 1e-6)
            smallest = min(smallest, px * 360.0 / cam.height)
    return smallest


def _displacement_px(cfg, traj) -> float:
    cam, t = cfg.camera, cfg.timing.target_time
    return max(float(np.linalg.norm(cam.project(traj.state(o.id, t).position)[0] - cam.project(o.position)[0]))
               for o in cfg.objects) * 360.0 / cam.height


class EngineCheck:
    """Re-records a configuration the engine cannot honour (the paper's "configuration re-recording"):
    the embedded engine simulates the sample, which is kept only if it stays within ENGINE_MARGIN of the
    build's engine–analytic tolerance; frame 0 is rendered and the infographic laid out, so samples on
    which no legible label placement exists are redrawn too. Cases played back analytically (sticking)
    skip the engine comparison."""

    ENGINE_MARGIN = 0.8

    def __init__(self) -> None:
        from .engines import get_backend, get_renderer

        self.backend = get_backend("mujoco")
        self.renderer = get_renderer("mujoco")

    def close(self) -> None:
        self.renderer.close()

    def __call__(self, cfg, traj) -> None:
        from .overlay import OverlayError, build_first_frame_layer
        from .render_case import deviation_report, playback_mode

        times = cfg.timing.frame_times
        if playback_mode(cfg, traj.law_steps())[0] == "engine":
            run = self.backend.simulate(cfg, times)
            analytic = traj.sample(times)
            rep = deviation_report(cfg, {o.id: analytic[o.id]["position"] for o in cfg.objects},
                                   {o.id: run.states[o.id].position for o in cfg.objects}, times)
            for oid, e in rep["objects"].items():
                if e["max_deviation"] > self.ENGINE_MARGIN * e["tolerance"]:
                    raise PhysicsError(f"the engine deviates by {e['max_deviation'] * 1000:.1f} mm ({oid})")
        first = {o.id: (o.position[None], o.quaternion[None]) for o in cfg.objects}
        inst = self.renderer.render(cfg, first, passes=("instance",)).instance[0]
        try:
            build_first_frame_layer(cfg, inst)
        except OverlayError as exc:
            raise PhysicsError(str(exc)) from exc
        # the state at t* must stay visible (QA's support-occlusion rule, with a margin)
        tstar = cfg.timing.target_time
        star = {o.id: (traj.state(o.id, tstar).position[None], traj.state(o.id, tstar).quaternion[None])
                for o in cfg.objects}
        inst_star = self.renderer.render(cfg, star, passes=("instance",)).instance[0]
        cam = cfg.camera
        for o in cfg.objects:
            z0 = float(cam.project(o.position)[1])
            zs = float(cam.project(star[o.id][0][0])[1])
            expected = int((inst == o.instance_id).sum()) * (z0 / zs) ** 2
            if expected > 0 and int((inst_star == o.instance_id).sum()) < 0.55 * expected:
                raise PhysicsError(f"{o.id} would be mostly hidden at t*")


def sample_config(task: str, number: int, rng: np.random.Generator, ranges: dict, materials: MaterialLibrary,
                  seed: int, check: Callable | None = None) -> dict:
    s = Sampler(rng, ranges)
    sampler = SAMPLERS[task]
    r = ranges["tasks"][task]
    last: Exception | None = None
    for _ in range(MAX_ATTEMPTS):
        raw, hint = sampler(s, r, number, seed)
        # a generous provisional timing and camera so the motion can be solved and framed
        provisional = min(3.5, hint.get("max_duration", 3.5))
        if provisional < 0.5:
            continue
        raw["timing"] = {"fps": s.common["fps"], "duration": provisional, "target_time": min(1.0, provisional)}
        raw["camera"] = {"position": [0.0, -4.0, 1.0], "look_at": [0.0, 0.0, 0.4], "fov_deg": 40,
                         "resolution": list(s.common["resolution"])}
        try:
            cfg = resolve_config(raw, f"<generated {task} {number}>", materials)
            traj = solve(cfg)
            raw["timing"] = _timing(s, raw, hint, traj)
            cfg = resolve_config(raw, f"<generated {task} {number}>", materials)
            traj = solve(cfg)
            raw["camera"] = _camera(s, cfg, traj, hint.get("table_view", False))
            cfg = resolve_config(raw, f"<generated {task} {number}>", materials)
            if _object_px(cfg, traj) < s.common["min_object_px"]:
                raise PhysicsError("objects would appear too small")
            if task != "at_rest" and _displacement_px(cfg, traj) < 2 * s.common["min_object_px"]:
                raise PhysicsError("the state at t* would look like the start")
            if check is not None:
                check(cfg, traj)
            return raw
        except (ConfigError, PhysicsError, ValueError) as exc:
            last = exc
            continue
    raise GenerationError(f"{task}: no acceptable sample after {MAX_ATTEMPTS} draws (last: {last})")


def _unshare(value):
    """Deep copy, so no two places of a config share one object (YAML would write an alias)."""
    if isinstance(value, dict):
        return {k: _unshare(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_unshare(v) for v in value]
    return value


def load_ranges(path: Path) -> dict:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(path, "", f"cannot read ranges: {exc}") from exc


def generate(task: str, count: int, seed: int, out: Path, ranges_path: Path, materials: MaterialLibrary,
             start: int = 0, engine_check: bool = True) -> list[Path]:
    """Write `count` configs for `task` as out/<six digits>.yaml (numbers start..start+count-1).
    With `engine_check`, samples the embedded engine cannot honour are redrawn (see EngineCheck)."""
    if task not in TASKS:
        raise ConfigError("--task", "", f"unknown task {task!r}")
    ranges = load_ranges(ranges_path)
    rng = np.random.default_rng([seed, TASK_NAMES.index(task)])
    written = []
    check = EngineCheck() if engine_check else None
    try:
        for i in range(count):
            written.append(_generate_one(task, start + i, seed, rng, ranges, ranges_path, materials, out, check))
    finally:
        if check is not None:
            check.close()
    return written


def _generate_one(task, number, seed, rng, ranges, ranges_path, materials, out, check) -> Path:
    raw = _unshare(sample_config(task, number, rng, ranges, materials, seed=seed * 1000 + number, check=check))
    header = (f"# Generated by orchard-build generate --task {task} --seed {seed} (case {number}); "
              f"ranges: {ranges_path.name}\n")
    text = header + yaml.dump(raw, Dumper=_PlainDumper, sort_keys=False, default_flow_style=None, width=110,
                              allow_unicode=True)
    path = out / f"{number:06d}.yaml"
    write_text_atomic(path, text)
    return path
