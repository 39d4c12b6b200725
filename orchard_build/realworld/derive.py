"""Everything of a real-world case that follows from its clip, masks and measurement.json.

`derive_case(case_dir)` (re)writes case.json, timestamps.json, velocity.json, events.json,
formula_info.json, physics_duration.txt, the infographic first frame (+ annotations.json) and the
reference answers from three inputs kept in the case: `source.json` (clip, native fps, motion window,
source metadata, task, law steps, events), `measurement.json` (every measured quantity) and the masks
under `gt/masks/`. Ingest calls it once; `annotate pull` calls it again after annotators corrected the
masks and measurements.

World frame of a real clip: the motion plane is fronto-parallel to the camera. Pixel (u, v) on that
plane is world (x, 0, z) = ((u − o_u)·s, 0, (o_v − v)·s) with s metres per pixel and o the image of the
world origin (default: bottom centre of the frame); the camera sits at distance D in front of the plane
(nominal pinhole: f = D/s, principal point at the frame centre). s comes from measurement.json
(`scale`, a visible calibration cue) or from the first object's caliper size over its frame-0 mask.
Velocities at t* come from frame-by-frame velocimetry of the mask centroids at the native fps
(quadratic fit over ±2 frames), unless source.json states the target state explicitly.
"""
from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

from .. import __version__
from ..artifacts import REST_SPEED, frame_of, speed_label, timestamp_grid
from ..errors import OrchardError
from ..formulas import build_formula_info
from ..io import canonical, read_json, write_json, write_text_atomic
from ..overlay import (V0_COLOR, Arrow, Label, Layer, OverlayError, Placer, clip_arrow, format_value, draw_layer,
                       font_size)
from ..primitives import Primitive
from ..provenance import provenance
from ..references import draw_answer_layer, formulation_graphic_layer, formulation_text_image
from ..tasks import task_info
from ..video import read_png, write_png
from . import measurements as M

DEFAULT_DISTANCE = 2.0
DEFAULT_VARIANT = {"free_fall": "drop", "projectile_motion": "launch", "inclined_plane": "slide",
                   "circular_motion": "roll", "perfectly_elastic_collision": "head_on",
                   "perfectly_inelastic_collision": "head_on", "inelastic_collision": "head_on",
                   "at_rest": "surface", "uniform_linear_motion": "slide"}


class RealWorldError(OrchardError):
    pass


# ---------------------------------------------------------------------------------------------
# Geometry
# ---------------------------------------------------------------------------------------------
class PlaneCamera:
    """Nominal fronto-parallel pinhole camera of a real clip (see the module docstring)."""

    def __init__(self, width: int, height: int, scale: float, distance: float = DEFAULT_DISTANCE,
                 origin_px: tuple[float, float] | None = None):
        self.w, self.h, self.s, self.d = width, height, float(scale), float(distance)
        self.ox, self.oy = origin_px if origin_px is not None else (width / 2.0, float(height))

    def world(self, uv: np.ndarray) -> list[float]:
        return [(float(uv[0]) - self.ox) * self.s, 0.0, (self.oy - float(uv[1])) * self.s]

    def velocity(self, duv: np.ndarray) -> list[float]:
        return [float(duv[0]) * self.s, 0.0, -float(duv[1]) * self.s]

    def matrices(self) -> dict[str, Any]:
        f = self.d / self.s
        cx, cy = self.w / 2.0, self.h / 2.0
        tx, ty = (self.ox - cx) * self.s, (self.oy - cy) * self.s
        return {"intrinsic": [[f, 0.0, cx], [0.0, f, cy], [0.0, 0.0, 1.0]],
                "extrinsic": [[1.0, 0.0, 0.0, tx], [0.0, 0.0, -1.0, ty], [0.0, 1.0, 0.0, self.d]],
                "width": self.w, "height": self.h, "model": "fronto-parallel plane (nominal)",
                "metres_per_pixel": self.s, "distance": self.d, "origin_px": [self.ox, self.oy]}


def centroid_track(masks: list[np.ndarray], iid: int) -> np.ndarray:
    out = np.full((len(masks), 2), np.nan)
    for k, m in enumerate(masks):
        ys, xs = np.nonzero(m == iid)
        if len(xs):
            out[k] = (xs.mean() + 0.5, ys.mean() + 0.5)
    return out


def velocimetry(track: np.ndarray, k: int, fps: float, half: int = 2) -> np.ndarray | None:
    """Pixel velocity (px/s) at frame k: derivative of a quadratic fit to the centroids of k±half."""
    lo, hi = max(0, k - half), min(len(track) - 1, k + half)
    idx = np.arange(lo, hi + 1)
    ok = ~np.isnan(track[idx, 0])
    idx = idx[ok]
    if len(idx) < 2:
        return None
    t = (idx - k) / fps
    deg = 2 if len(idx) >= 4 else 1
    vel = []
    for d in range(2):
        coef = np.polyfit(t, track[idx, d], deg)
        vel.append(coef[-2])  # derivative at t = 0
    return np.array(vel)


def equivalent_extent(mask: np.ndarray, shape: str) -> float:
    area = float(np.count_nonzero(mask))
    return 2.0 * math.sqrt(area / math.pi) if shape in ("sphere", "cylinder", "cone") else math.sqrt(area)


# ---------------------------------------------------------------------------------------------
def load_masks(case_dir: Path, n: int) -> list[np.ndarray] | None:
    d = case_dir / "gt" / "masks"
    if not d.is_dir():
        return None
    out = []
    for k in range(n):
        p = d / f"{k:04d}.png"
        if not p.is_file():
            return None
        out.append(np.asarray(read_png(p)).astype(np.uint8))
    return out


def load_frame(case_dir: Path, k: int) -> np.ndarray:
    return np.asarray(read_png(case_dir / "gt" / "rgb" / f"{k:04d}.png"))[..., :3]


def _object_size(quantities: list[dict], obj: dict) -> dict[str, float]:
    keys = {"sphere": ("radius",), "cube": ("edge",), "cylinder": ("radius", "height"), "cone": ("radius", "height")}
    size = {}
    for k in keys[obj["shape"]]:
        v = M.value_of(quantities, "size", obj["id"], k)
        if v is None:
            raise RealWorldError(f"measurement.json: no caliper size {k!r} for object {obj['id']!r}")
        size[k] = v
    return size


def scale_of(src: dict, meas: dict, masks: list[np.ndarray] | None) -> tuple[float, str]:
    q = meas.get("scale")
    if q:
        return float(q["value"]), q.get("procedure", "calibration cue")
    if masks is None:
        raise RealWorldError("no scale: give `scale_m_per_px` (a visible calibration cue) or object masks")
    for o in src["objects"]:
        m = masks[0] == o["instance_id"]
        if np.count_nonzero(m) >= 20:
            size = _object_size(meas["quantities"], o)
            metres = 2 * size["radius"] if "radius" in size else size["edge"]
            return metres / equivalent_extent(m, o["shape"]), (
                f"caliper size of {o['id']!r} over its frame-0 mask extent")
    raise RealWorldError("no scale: no object mask on frame 0 to calibrate against")


# ---------------------------------------------------------------------------------------------
# Documents
# ---------------------------------------------------------------------------------------------
def timestamps_doc(T: float, fps: float, tstar: float, events: list[dict], grid_points: int = 4) -> dict:
    return timestamp_grid(T, fps, tstar, [(ev["t"], ev["label"]) for ev in events], grid_points)


def law_steps(src: dict, meas: dict, T: float) -> list[dict]:
    steps = src.get("law_steps")
    ids = [o["id"] for o in src["objects"]]
    if not steps:
        if src["task"] == "composition":
            raise RealWorldError("a composition needs `law_steps` in its source description")
        steps = [{"law": src["task"], "variant": DEFAULT_VARIANT[src["task"]], "objects": ids,
                  "t_start": 0.0, "t_end": T}]
    q = meas["quantities"]
    out = []
    for s in steps:
        params = dict(s.get("parameters") or {})
        first = (s.get("objects") or ids)[0]
        params.setdefault("g", M.value_of(q, "g"))
        for name, key in (("height", "h0"), ("v0", "v0"), ("restitution", "e"), ("friction", "mu")):
            v = M.value_of(q, name, first)
            if v is None:
                v = M.value_of(q, name)
            if v is not None:
                params.setdefault(key, v)
        ang = M.value_of(q, "angle")
        if ang is not None:
            params.setdefault("theta", math.radians(ang))
        out.append({"law": s["law"], "variant": s.get("variant") or DEFAULT_VARIANT.get(s["law"], ""),
                    "objects": list(s.get("objects") or ids), "t_start": float(s.get("t_start", 0.0)),
                    "t_end": float(s.get("t_end", T)), "parameters": params})
    return out


def events_doc(src: dict, steps: list[dict], T: float, fps: float) -> dict:
    stages = [{"index": i, "law": s["law"], "t_start": s["t_start"], "t_end": s["t_end"], "objects": s["objects"],
               "parameters": s["parameters"]} for i, s in enumerate(steps)]
    events = []
    for e in sorted(src.get("events") or [], key=lambda e: e["t"]):
        stage = max([i for i, s in enumerate(steps) if s["t_start"] <= e["t"] + 1e-9] or [0])
        events.append({"t": float(e["t"]), "frame": frame_of(canonical(float(e["t"])), fps), "label": e["label"],
                       "objects": list(e.get("objects") or [src["objects"][0]["id"]]), "stage": stage,
                       "detail": {"source": "annotated"}})
    return {"physics_duration": T, "events": events, "stages": stages,
            "law_steps": [{k: s[k] for k in ("law", "variant", "objects", "t_start", "t_end", "parameters")}
                          for s in steps]}


class _Pair:
    def __init__(self, e: float | None, mu: float | None):
        self.restitution = 0.0 if e is None else e
        self.static_friction = self.dynamic_friction = 0.0 if mu is None else mu


def formula_config(src: dict, meas: dict, objects: list[dict], cam: PlaneCamera, track0: dict[str, np.ndarray],
                   case_id: str) -> SimpleNamespace:
    """The measured case in the shape the formula bank reads (duck-typed CaseConfig)."""
    q = meas["quantities"]
    info = task_info(src["task"])
    objs = []
    for o in objects:
        prim = Primitive(o["shape"], dict(o["size"]))
        pos = np.array(cam.world(track0[o["id"]])) if o["id"] in track0 else np.zeros(3)
        h = M.value_of(q, "height", o["id"])
        if h is not None:
            pos[2] = h
        v = np.zeros(3)
        v0 = M.value_of(q, "v0", o["id"])
        direction = o.get("v0_direction")
        if v0:
            d = np.asarray(direction if direction else [1.0, 0.0, 0.0], float)
            v = d / (np.linalg.norm(d) or 1.0) * v0
        objs.append(SimpleNamespace(
            id=o["id"], mass=o["mass"], annotate=list(o.get("annotate", [])), material=o["material"],
            primitive=prim, rest_pose=o.get("rest_pose", "any" if o["shape"] == "sphere" else "upright"),
            linear_velocity=v, angular_velocity=np.zeros(3), position=pos,
            placement=o.get("placement", "free"), placement_params={}, support=None))
    by_id = {o.id: o for o in objs}
    e = M.value_of(q, "restitution")
    mu = M.value_of(q, "friction")
    for o in objects:
        e = e if e is not None else M.value_of(q, "restitution", o["id"])
        mu = mu if mu is not None else M.value_of(q, "friction", o["id"])
    ramps = []
    ang = M.value_of(q, "angle")
    if ang is not None:
        a = math.radians(ang)
        ramps.append(SimpleNamespace(id="ramp", angle=a, material="surface",
                                     slope_down=np.array([math.cos(a), 0.0, -math.sin(a)])))
        for o in objs:
            o.support = "ramp"
    cfg = SimpleNamespace(task=info, seed=int(src.get("seed", 0)), case_id=case_id, objects=objs,
                          ramps=ramps, tracks=[], platforms=[], g=M.value_of(q, "g", default=M.EARTH_G),
                          ground_material="surface", materials=SimpleNamespace(pair=lambda a, b: _Pair(e, mu)))
    cfg.obj = lambda i: by_id[i]
    cfg.ramp = lambda i: ramps[0]
    return cfg


# ---------------------------------------------------------------------------------------------
# Infographic on the real frame
# ---------------------------------------------------------------------------------------------
def object_lines(obj: dict, q: list[dict]) -> list[str]:
    lines = []
    for what in obj.get("annotate", []):
        if what == "mass":
            lines.append(f"m = {format_value(obj['mass'])} kg")
        elif what == "restitution":
            e = M.value_of(q, "restitution", obj["id"]) if M.find(q, "restitution", obj["id"]) else M.value_of(q, "restitution")
            if e is not None:
                lines.append(f"e = {format_value(e)}")
        elif what in ("v0", "speed"):
            v0 = M.value_of(q, "v0", obj["id"])
            if v0 is not None:
                lines.append(f"v0 = {format_value(abs(v0))} m/s")
    return lines


def first_frame_layer(src: dict, meas: dict, objects: list[dict], mask0: np.ndarray, width: int, height: int,
                      track0: dict[str, np.ndarray]) -> Layer:
    """g as a global label, each object's quantities beside it (off every mask), v0 arrows, μ and θ."""
    q = meas["quantities"]
    px = font_size(height)
    layer = Layer(width, height, px)
    placer = Placer(width, height, mask0 > 0, px)
    scale = px / 16.0
    for o in objects:
        v0 = M.value_of(q, "v0", o["id"])
        d = o.get("v0_direction_image")
        if not v0 or d is None or o["id"] not in track0 or not any(w in o.get("annotate", []) for w in ("v0", "speed")):
            continue
        d = np.asarray(d, float)
        d = d / (np.linalg.norm(d) or 1.0)
        uv = track0[o["id"]]
        end = clip_arrow(uv, d, 0.11 * width, width, height)
        layer.arrows.append(Arrow("v0", tuple(uv), tuple(end), V0_COLOR, max(2, round(3 * scale)), o["id"]))
        placer.block_segment(tuple(uv + d * 0.04 * width), tuple(end), 3 * scale + 4)
    g = M.value_of(q, "g", default=M.EARTH_G)
    env = (f"g = {format_value(g)} m/s²",)
    # a global label: the top-left corner first, then the other corners (real frames are not framed for it)
    box, anchor = None, (6.0, 6.0)
    for anchor, prefer in (((6.0, 6.0), (1.0, 1.0)), ((width - 6.0, 6.0), (-1.0, 1.0)),
                           ((6.0, height - 6.0), (1.0, -1.0)), ((width - 6.0, height - 6.0), (-1.0, -1.0))):
        try:
            box = placer.place(placer.text_size(env), anchor, prefer=prefer, radii=(0.0, 8.0, 30.0, 60.0),
                               what="global g label")
            break
        except OverlayError:
            continue
    if box is None:
        box = placer.place(placer.text_size(env), (width / 2.0, height / 2.0), what="global g label")
    layer.labels.append(Label("global", env, anchor, box))
    ang = M.value_of(q, "angle")
    anchors = src.get("label_anchors", {})
    if ang is not None:
        anchor = tuple(anchors.get("angle", (width * 0.8, height * 0.85)))
        lines = (f"θ = {ang:.0f}°",)
        box = placer.place(placer.text_size(lines), anchor, prefer=(0.0, -1.0), what="θ label")
        layer.labels.append(Label("angle", lines, anchor, box))
    mu = M.value_of(q, "friction")
    if mu is not None:
        first = objects[0]
        c = track0.get(first["id"], np.array([width / 2, height / 2]))
        anchor = tuple(anchors.get("friction", (float(c[0]), float(min(height - 2, c[1] + 0.5 * equivalent_extent(
            mask0 == first["instance_id"], first["shape"]))))))
        lines = (f"μ = {format_value(mu)}",)
        box = placer.place(placer.text_size(lines), anchor, prefer=(0.0, 1.0), what="μ label")
        layer.labels.append(Label("friction", lines, anchor, box))
    for o in objects:
        lines = tuple(object_lines(o, q))
        if not lines or o["id"] not in track0:
            continue
        uv = tuple(track0[o["id"]])
        box = placer.place(placer.text_size(lines), uv, prefer=(0.6, -0.8), what=f"label of object {o['id']!r}")
        layer.labels.append(Label("object", lines, uv, box, o["id"]))
    return layer


# ---------------------------------------------------------------------------------------------
def derive_case(case_dir: str | Path) -> dict[str, Any]:
    """Rewrite every derived artifact of a real-world case; returns the new case.json document."""
    case_dir = Path(case_dir)
    src = read_json(case_dir / "source.json")
    meas = read_json(case_dir / "measurement.json")
    q = meas["quantities"]
    fps = float(src["fps"])
    n = int(src["motion_window"]["n_frames"])
    T = (n - 1) / fps
    tstar = float(src["target_time"])
    if not 0 < tstar <= T + 1e-9:
        raise RealWorldError(f"target_time {tstar} s lies outside (0, T = {T:g} s]")
    tstar = min(tstar, T)
    W, H = int(src["clip"]["width"]) // 2 * 2, int(src["clip"]["height"]) // 2 * 2
    masks = load_masks(case_dir, n)
    scale, scale_how = scale_of(src, meas, masks)
    cam = PlaneCamera(W, H, scale, float(src.get("camera_distance", DEFAULT_DISTANCE)),
                      tuple(src["origin_px"]) if src.get("origin_px") else None)

    objects = []
    for o in src["objects"]:
        size = _object_size(q, o)
        prim = Primitive(o["shape"], size)
        mass = M.value_of(q, "mass", o["id"])
        if mass is None:
            raise RealWorldError(f"measurement.json: no balance mass for object {o['id']!r}")
        objects.append({**o, "size": size, "mass": mass, "volume": prim.volume, "density": mass / prim.volume,
                        "inertia": prim.inertia_diagonal(mass)})

    tracks = {o["id"]: centroid_track(masks, o["instance_id"]) for o in objects} if masks else {}
    track0 = {i: t[0] for i, t in tracks.items() if not np.isnan(t[0, 0])}

    # velocity.json: the state at t*
    kstar = max(1, frame_of(canonical(tstar), fps))
    explicit = {s["id"]: s for s in src.get("target_state", [])}
    vel_objects = []
    for o in objects:
        if o["id"] in explicit:
            s = explicit[o["id"]]
            uv = np.asarray(s["center_image"], float)
            vw = np.asarray(s["velocity_world"], float)
            duv = np.array([vw[0], -vw[2]])
            how = "stated in the source description"
        else:
            if not tracks or np.isnan(tracks[o["id"]][kstar, 0]):
                raise RealWorldError(f"object {o['id']!r}: no mask at the target frame {kstar} and no stated target state")
            uv = tracks[o["id"]][kstar]
            duv = velocimetry(tracks[o["id"]], kstar, fps)
            if duv is None:
                raise RealWorldError(f"object {o['id']!r}: too few masks around frame {kstar} for velocimetry")
            vw = np.array(cam.velocity(duv))
            how = f"mask-centroid velocimetry at {fps:g} fps"
        speed = canonical(float(np.linalg.norm(vw)))  # label printed from the stored value
        moving = speed >= REST_SPEED
        arrow = None
        if moving and np.linalg.norm(duv) > 1e-9:
            arrow = list(duv / np.linalg.norm(duv))
        vel_objects.append({"id": o["id"], "instance_id": o["instance_id"], "center_world": cam.world(uv),
                            "center_image": [float(uv[0]), float(uv[1])], "depth": cam.d,
                            "in_frame": bool(0 <= uv[0] < W and 0 <= uv[1] < H),
                            "velocity_world": [float(x) for x in vw], "speed": speed, "label": speed_label(speed),
                            "moving": moving, "arrow_direction_image": arrow, "mode": how})
    velocity = {"target_time": tstar, "frame": kstar, "source": "measured", "speed_decimals": 2, "objects": vel_objects}

    steps = law_steps(src, meas, T)
    events = events_doc(src, steps, T, fps)
    info = task_info(src["task"])
    cid = src["case_id"]
    fcfg = formula_config(src, meas, objects, cam, track0, cid)
    formula = build_formula_info(fcfg, [SimpleNamespace(**s) for s in steps])

    write_text_atomic(case_dir / "physics_duration.txt", f"{T:g}\n")
    write_json(case_dir / "timestamps.json", timestamps_doc(T, fps, tstar, events["events"]))
    write_json(case_dir / "velocity.json", velocity)
    write_json(case_dir / "events.json", events)
    write_json(case_dir / "formula_info.json", formula)
    artifacts = {"first_frame": "first_frame.png", "video": "gt/video.mp4", "frames": "gt/rgb",
                 "physics_duration": "physics_duration.txt", "timestamps": "timestamps.json",
                 "velocity": "velocity.json", "events": "events.json", "formula_info": "formula_info.json",
                 "measurement": "measurement.json", "source": "source.json"}
    for extra in ("review", "mask_review"):
        rel = {"review": "review.json", "mask_review": "gt/mask_review.json"}[extra]
        if (case_dir / rel).is_file():
            artifacts[extra] = rel

    if masks is not None:
        artifacts["masks"] = "gt/masks"
        frame0 = load_frame(case_dir, 0)
        try:
            layer = first_frame_layer(src, meas, objects, masks[0], W, H, track0)
        except OverlayError as exc:
            raise RealWorldError(f"{cid}: {exc}") from exc
        write_png(case_dir / "annotated_first_frame.png", draw_layer(layer, frame0))
        write_json(case_dir / "annotations.json", layer.to_dict())
        refs = case_dir / "references"
        write_png(refs / "perception_text.png", draw_layer(layer, None))
        on_white = np.where((masks[0] > 0)[..., None], frame0, 255).astype(np.uint8)
        write_png(refs / "perception_graphic.png", on_white)
        write_png(refs / "perception_graphic_mask.png", masks[0])
        ft, ft_meta = formulation_text_image(W, H, (formula["correct_letter"], formula["correct_formula"],
                                                    formula["substituted"]["display"]))
        write_png(refs / "formulation_text.png", ft)
        fg = formulation_graphic_layer(W, H, velocity, masks[kstar])
        write_png(refs / "formulation_graphic.png", draw_answer_layer(fg, load_frame(case_dir, kstar)))
        write_png(refs / "formulation_graphic_mask.png", masks[kstar])
        write_json(refs / "references.json", {"formulation_text": ft_meta, "formulation_graphic": fg.to_dict(),
                                              "target_time": tstar, "target_frame": kstar})
        artifacts.update({
            "annotated_first_frame": "annotated_first_frame.png", "annotations": "annotations.json",
            "ref_perception_text": "references/perception_text.png",
            "ref_perception_graphic": "references/perception_graphic.png",
            "ref_perception_graphic_mask": "references/perception_graphic_mask.png",
            "ref_formulation_text": "references/formulation_text.png",
            "ref_formulation_graphic": "references/formulation_graphic.png",
            "ref_formulation_graphic_mask": "references/formulation_graphic_mask.png",
            "references": "references/references.json"})

    g = M.value_of(q, "g", default=M.EARTH_G)
    mats = cam.matrices()
    notes = [f"{src['source']} clip {src['clip']['file']} at its native {fps:g} fps",
             f"frames {src['motion_window']['start_frame']}–{src['motion_window']['end_frame']} of the clip",
             f"scale {scale:.6g} m/px ({scale_how})", "camera: nominal fronto-parallel plane model"]
    if src.get("internet"):
        inet = src["internet"]
        notes.append(f"source {inet['url']} ({inet['channel']}, licence {inet['licence']})")
    review = read_json(case_dir / "review.json") if (case_dir / "review.json").is_file() else None
    notes.append("review: " + (review["status"] if review else "not reviewed"))
    doc = {
        "schema_version": 1, "case_id": cid, "source": src["source"], "pillar": info.pillar, "task": info.name,
        "task_pascal": info.pascal, "law_level": info.law_level, "description": src.get("description", ""),
        "seed": int(src.get("seed", 0)), "gt_fps": fps, "n_frames": n, "frame_size": {"width": W, "height": H},
        "physics_duration": T, "target_time": tstar,
        "environment": {"g": g, "gravity": [0.0, 0.0, -g], "body": src.get("body"), "ground_material": "surface"},
        "objects": [{"id": o["id"], "instance_id": o["instance_id"], "shape": o["shape"], "size": o["size"],
                     "material": o["material"], "density": o["density"], "volume": o["volume"], "mass": o["mass"],
                     "inertia_diagonal": [float(x) for x in o["inertia"]],
                     "rest_pose": o.get("rest_pose", "any" if o["shape"] == "sphere" else "upright"),
                     "placement": o.get("placement", "free"), "support": None,
                     **({"restitution": M.value_of(q, "restitution")} if M.value_of(q, "restitution") is not None else {}),
                     "annotate": list(o.get("annotate", []))} for o in objects],
        "supports": {"ramps": [], "tracks": [], "platforms": []},
        "camera": {"intrinsic": mats["intrinsic"], "extrinsic": mats["extrinsic"], "width": W, "height": H,
                   "model": mats["model"], "metres_per_pixel": scale, "distance": cam.d},
        "config": {"file": "source.json", "sha256": src["clip"]["sha256"],
                   "materials_sha256": _sha(src), "resolved_sha256": _sha(meas)},
        "provenance": provenance(),
        "artifacts": dict(sorted(artifacts.items())),
        "notes": "; ".join(notes),
    }
    write_json(case_dir / "case.json", doc)
    return doc


def _sha(doc: Any) -> str:
    import hashlib
    import json

    from ..io import canonical

    return hashlib.sha256(json.dumps(canonical(doc), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


TOOL_VERSION = __version__
