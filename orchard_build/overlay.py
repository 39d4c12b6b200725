"""The infographic annotation layer of the first frame, and the drawn parts of reference answers.

Quantities sit next to what they describe (seed paper §3.2.1, App. A.1): g as a global label, each
object's properties beside it, θ at the ramp's foot, μ at the contact surface, v0 as an arrow from the
object's centre, and coordinate axes. Labels are placed by a search over candidate positions that keeps
them inside the frame, off every object mask and off each other; when no such position exists the case
fails with OverlayError rather than shipping an unreadable frame.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from .config import CaseConfig
from .errors import OrchardError

FONT_DIR = Path(__file__).resolve().parent / "assets" / "fonts"
TEXT_COLOR = (20, 20, 20)
LABEL_FILL = (255, 255, 255)
LABEL_BORDER = (90, 90, 90)
V0_COLOR = (25, 90, 215)
ANSWER_ORANGE = (255, 140, 0)
AXIS_COLORS = {"x": (210, 40, 40), "y": (30, 150, 60), "z": (40, 70, 210)}
ANGLE_COLOR = (160, 30, 160)


class OverlayError(OrchardError):
    """No legible placement exists for the annotations of a case."""


@lru_cache(maxsize=16)
def font(px: int, bold: bool = False) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(FONT_DIR / ("DejaVuSans-Bold.ttf" if bold else "DejaVuSans.ttf")), px)


def font_size(height: int) -> int:
    """Label text height for a frame: 16 px at 360 p, scaled with the frame."""
    return max(12, round(height / 22.5))


@dataclass(frozen=True)
class Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def padded(self, p: float) -> "Box":
        return Box(self.x0 - p, self.y0 - p, self.x1 + p, self.y1 + p)

    def overlaps(self, o: "Box") -> bool:
        return self.x0 < o.x1 and o.x0 < self.x1 and self.y0 < o.y1 and o.y0 < self.y1

    def inside(self, w: int, h: int, margin: float = 2.0) -> bool:
        return self.x0 >= margin and self.y0 >= margin and self.x1 <= w - margin and self.y1 <= h - margin

    def pixel_slice(self, w: int, h: int) -> tuple[slice, slice]:
        return (slice(max(0, int(math.floor(self.y0))), min(h, int(math.ceil(self.y1)))),
                slice(max(0, int(math.floor(self.x0))), min(w, int(math.ceil(self.x1)))))

    def as_list(self) -> list[float]:
        return [self.x0, self.y0, self.x1, self.y1]


@dataclass
class Label:
    kind: str  # global | object | angle | friction | axis | speed
    lines: tuple[str, ...]
    anchor: tuple[float, float]
    box: Box
    object_id: str | None = None
    color: tuple[int, int, int] = TEXT_COLOR
    boxed: bool = True

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@dataclass
class Arrow:
    kind: str  # v0 | velocity | axis
    start: tuple[float, float]
    end: tuple[float, float]
    color: tuple[int, int, int]
    width: int
    object_id: str | None = None


@dataclass
class AngleArc:
    center: tuple[float, float]
    radius: float
    start_deg: float  # PIL angles: degrees clockwise from +x in image coordinates
    end_deg: float
    width: int = 3
    color: tuple[int, int, int] = ANGLE_COLOR


@dataclass
class Layer:
    width: int
    height: int
    font_px: int
    labels: list[Label] = field(default_factory=list)
    arrows: list[Arrow] = field(default_factory=list)
    arcs: list[AngleArc] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "width": self.width, "height": self.height, "font": "DejaVuSans", "font_px": self.font_px,
            "labels": [{"kind": l.kind, "text": l.text, "lines": list(l.lines), "object_id": l.object_id,
                        "anchor": list(l.anchor), "box": l.box.as_list(), "color": list(l.color)} for l in self.labels],
            "arrows": [{"kind": a.kind, "object_id": a.object_id, "start": list(a.start), "end": list(a.end),
                        "color": list(a.color), "width": a.width} for a in self.arrows],
            "arcs": [{"center": list(a.center), "radius": a.radius, "start_deg": a.start_deg, "end_deg": a.end_deg,
                      "width": a.width, "color": list(a.color)} for a in self.arcs],
        }


# ---------------------------------------------------------------------------------------------
# Placement
# ---------------------------------------------------------------------------------------------
class Placer:
    """Finds free rectangles for labels: inside the frame, off blocked pixels and off placed labels."""

    def __init__(self, width: int, height: int, blocked: np.ndarray, font_px: int):
        self.w, self.h, self.font_px = width, height, font_px
        self.blocked = blocked.copy()
        self.boxes: list[Box] = []

    def text_size(self, lines: tuple[str, ...], px: int | None = None, bold: bool = False) -> tuple[float, float]:
        f = font(px or self.font_px, bold)
        widths = [f.getbbox(line)[2] for line in lines]
        line_h = (px or self.font_px) * 1.25
        pad = 0.35 * (px or self.font_px)
        return max(widths) + 2 * pad, line_h * len(lines) + 2 * pad - 0.25 * (px or self.font_px)

    def free(self, box: Box, clearance: float = 3.0) -> bool:
        if not box.inside(self.w, self.h):
            return False
        if any(box.padded(clearance).overlaps(b) for b in self.boxes):
            return False
        ys, xs = box.padded(clearance).pixel_slice(self.w, self.h)
        return not self.blocked[ys, xs].any()

    def place(self, size: tuple[float, float], anchor: tuple[float, float], prefer: tuple[float, float] | None = None,
              radii: tuple[float, ...] | None = None, what: str = "label") -> Box:
        w, h = size
        ax, ay = anchor
        scale = self.font_px / 16.0
        radii = radii or tuple(scale * r for r in (10, 20, 32, 48, 70, 95, 125, 160, 200))
        directions = [(math.cos(a), math.sin(a)) for a in np.radians(np.arange(0, 360, 22.5))]
        if prefer is not None:  # try the preferred side first: smallest angle to `prefer`
            directions.sort(key=lambda d: -(d[0] * prefer[0] + d[1] * prefer[1]))
        for r in radii:
            for dx, dy in directions:
                # centre the box so that its nearest edge lies r pixels from the anchor along (dx, dy)
                cx = ax + dx * (r + w / 2.0)
                cy = ay + dy * (r + h / 2.0)
                box = Box(cx - w / 2.0, cy - h / 2.0, cx + w / 2.0, cy + h / 2.0)
                if self.free(box):
                    self.boxes.append(box)
                    return box
        raise OverlayError(f"no legible placement for the {what} near pixel ({ax:.0f}, {ay:.0f}) in a "
                           f"{self.w}×{self.h} frame: the frame is too crowded")

    def block_segment(self, p0: tuple[float, float], p1: tuple[float, float], width: float) -> None:
        img = Image.new("L", (self.w, self.h), 0)
        ImageDraw.Draw(img).line([p0, p1], fill=255, width=max(1, int(round(width))))
        self.blocked |= np.asarray(img) > 0


def format_value(x: float, decimals: int = 2) -> str:
    s = f"{x:.{decimals}f}"
    return "0" if float(s) == 0 else s


def clip_arrow(start: np.ndarray, direction: np.ndarray, length: float, w: int, h: int, margin: float = 4) -> np.ndarray:
    """Shorten an arrow so it stays inside the frame."""
    end = start + direction * length
    for _ in range(20):
        if margin <= end[0] <= w - margin and margin <= end[1] <= h - margin:
            break
        length *= 0.85
        end = start + direction * length
    return end


# ---------------------------------------------------------------------------------------------
# The first-frame annotation layer
# ---------------------------------------------------------------------------------------------
def object_quantities(cfg: CaseConfig) -> dict[str, list[str]]:
    """Lines of each object's label, from its `annotate` list."""
    out: dict[str, list[str]] = {}
    for o in cfg.objects:
        lines = []
        for q in o.annotate:
            if q == "mass":
                lines.append(f"m = {format_value(o.mass)} kg")
            elif q == "restitution":
                lines.append(f"e = {format_value(restitution_for(cfg, o.id))}")
            elif q in ("v0", "speed"):
                lines.append(f"v0 = {format_value(float(np.linalg.norm(o.linear_velocity)))} m/s")
            elif q == "friction":
                lines.append(f"μ = {format_value(friction_for(cfg, o.id))}")
        out[o.id] = lines
    return out


def restitution_for(cfg: CaseConfig, object_id: str) -> float:
    """e shown beside an object: against the other body in multi-object cases, else against its support."""
    o = cfg.obj(object_id)
    others = [x for x in cfg.objects if x.id != object_id]
    partner = others[0].material if others else cfg.support_material(o.support)
    return cfg.materials.pair(o.material, partner).restitution


def friction_for(cfg: CaseConfig, object_id: str, static: bool | None = None) -> float:
    """μ of an object's contact: static when it starts at rest and stays so, kinetic otherwise."""
    o = cfg.obj(object_id)
    pair = cfg.materials.pair(o.material, cfg.support_material(o.support))
    if static is None:
        static = float(np.linalg.norm(o.linear_velocity)) == 0.0
    return pair.static_friction if static else pair.dynamic_friction


def build_first_frame_layer(cfg: CaseConfig, instance_mask: np.ndarray, friction_static: dict[str, bool] | None = None
                            ) -> Layer:
    """Lay out every annotation of the case on its first frame (instance_mask: H×W, 0 = background)."""
    cam = cfg.camera
    W, H = cam.width, cam.height
    px = font_size(H)
    layer = Layer(W, H, px)
    blocked = instance_mask > 0
    placer = Placer(W, H, blocked, px)
    scale = px / 16.0

    # v0 arrows first: they start at object centres and labels must avoid them
    for o in cfg.objects:
        speed = float(np.linalg.norm(o.linear_velocity))
        if speed < 1e-9 or not any(q in ("v0", "speed") for q in o.annotate):
            continue
        uv, _ = cam.project(o.position)
        d = cam.project_direction(o.position, o.linear_velocity)
        if not np.any(d):
            continue
        end = clip_arrow(uv, d, 0.11 * W, W, H)
        layer.arrows.append(Arrow("v0", tuple(uv), tuple(end), V0_COLOR, max(2, round(3 * scale)), o.id))
        placer.block_segment(tuple(uv + d * 0.04 * W), tuple(end), 3 * scale + 4)

    # global label: a corner of the frame, top-left first
    env = (f"g = {format_value(cfg.g)} m/s²",)
    size = placer.text_size(env)
    box = None
    for anchor, inward in (((6.0, 6.0), (1.0, 1.0)), ((W - 6.0, 6.0), (-1.0, 1.0)),
                           ((6.0, H - 6.0), (1.0, -1.0)), ((W - 6.0, H - 6.0), (-1.0, -1.0))):
        try:
            box = placer.place(size, anchor, prefer=inward, radii=(0.0, 8.0, 30.0, 60.0, 90.0), what="global g label")
            break
        except OverlayError:
            continue
    if box is None:
        raise OverlayError(f"no corner of the {W}×{H} frame is free for the global g label")
    layer.labels.append(Label("global", env, anchor, box))

    # coordinate axes glyph in another corner
    _axes(cfg, layer, placer, scale)

    # ramp angle and friction
    for ramp in cfg.ramps:
        _ramp_annotations(cfg, ramp, layer, placer, scale, friction_static)

    # ground / platform friction for supported moving objects
    seen_supports = set()
    for o in cfg.objects:
        if o.placement != "surface" or o.support in seen_supports:
            continue
        moving = float(np.linalg.norm(o.linear_velocity)) > 0
        if not moving and "friction" not in o.annotate:
            continue
        seen_supports.add(o.support)
        mu = friction_for(cfg, o.id, static=None if friction_static is None else friction_static.get(o.id))
        contact = o.position - np.array([0, 0, o.primitive.support_distance(o.rest_pose)])
        uv, _ = cam.project(contact)
        lines = (f"μ = {format_value(mu)}",)
        box = placer.place(placer.text_size(lines), tuple(uv), prefer=(0.0, 1.0), what=f"μ label of {o.support}")
        layer.labels.append(Label("friction", lines, tuple(uv), box, None))

    # object property labels, nearest first to the object
    quantities = object_quantities(cfg)
    for o in cfg.objects:
        lines = tuple(line for line in quantities[o.id] if not line.startswith("μ"))
        if not lines:
            continue
        uv, _ = cam.project(o.position)
        size = placer.text_size(lines)
        box = placer.place(size, tuple(uv), prefer=(0.6, -0.8), what=f"label of object {o.id!r}")
        layer.labels.append(Label("object", lines, tuple(uv), box, o.id))
    return layer


def _ramp_annotations(cfg: CaseConfig, ramp, layer: Layer, placer: Placer, scale: float,
                      friction_static: dict[str, bool] | None) -> None:
    cam = cfg.camera
    foot_uv, _ = cam.project(ramp.foot)
    # the angle sits between the horizontal through the foot (toward the ramp) and the slope going up
    back = cam.project_direction(ramp.foot, -ramp.downhill)
    up = cam.project_direction(ramp.foot, -ramp.slope_down)
    if np.any(back) and np.any(up):
        a0 = math.degrees(math.atan2(back[1], back[0]))
        a1 = math.degrees(math.atan2(up[1], up[0]))
        start, end = (a1, a0) if ((a0 - a1) % 360) < 180 else (a0, a1)
        radius = 46 * scale
        layer.arcs.append(AngleArc(tuple(foot_uv), radius, start, end, width=max(2, round(3 * scale))))
        bis = back + up
        bis = bis / (np.linalg.norm(bis) or 1.0)
        placer.block_segment(tuple(foot_uv), tuple(foot_uv + back * radius * 1.1), 2)
        lines = (f"θ = {math.degrees(ramp.angle):.0f}°",)
        box = placer.place(placer.text_size(lines), tuple(foot_uv + bis * radius), prefer=tuple(bis),
                           what=f"θ label of ramp {ramp.id!r}")
        layer.labels.append(Label("angle", lines, tuple(foot_uv), box))
    on_ramp = [o for o in cfg.objects if o.support == ramp.id]
    if on_ramp:
        o = on_ramp[0]
        static = None if friction_static is None else friction_static.get(o.id)
        mu = friction_for(cfg, o.id, static)
        anchor3d = ramp.surface_point(min(ramp.length * 0.75, ramp.length - 0.05))
        uv, _ = cam.project(anchor3d)
        lines = (f"μ = {format_value(mu)}",)
        normal_img = cam.project_direction(anchor3d, -ramp.normal)
        box = placer.place(placer.text_size(lines), tuple(uv), prefer=tuple(normal_img) if np.any(normal_img) else (0, 1),
                           what=f"μ label of ramp {ramp.id!r}")
        layer.labels.append(Label("friction", lines, tuple(uv), box))


def _axes(cfg: CaseConfig, layer: Layer, placer: Placer, scale: float) -> None:
    cam = cfg.camera
    W, H = cam.width, cam.height
    dirs = {name: cam.project_direction(cam.look_at, vec) * np.linalg.norm(
        cam.project(cam.look_at + 0.1 * vec)[0] - cam.project(cam.look_at)[0])
        for name, vec in (("x", np.array([1.0, 0, 0])), ("y", np.array([0, 1.0, 0])), ("z", np.array([0, 0, 1.0])))}
    longest = max(np.linalg.norm(v) for v in dirs.values())
    length = 38 * scale
    shown = {k: v / longest * length for k, v in dirs.items() if np.linalg.norm(v) >= 0.3 * longest}
    pad = 16 * scale
    tips = np.array([[0.0, 0.0]] + [v + v / (np.linalg.norm(v) or 1) * pad for v in shown.values()])
    m = 8 * scale
    # corners in order of preference; the glyph goes to the first where it and its labels fit
    corners = [np.array([m - tips[:, 0].min(), H - m - tips[:, 1].max()]),       # bottom-left
               np.array([W - m - tips[:, 0].max(), H - m - tips[:, 1].max()]),   # bottom-right
               np.array([W - m - tips[:, 0].max(), m - tips[:, 1].min()]),       # top-right
               np.array([m - tips[:, 0].min(), m + 40 * scale - tips[:, 1].min()])]  # top-left, below g
    last: OverlayError | None = None
    for origin in corners:
        glyph = Box(origin[0] + tips[:, 0].min(), origin[1] + tips[:, 1].min(),
                    origin[0] + tips[:, 0].max(), origin[1] + tips[:, 1].max())
        if not placer.free(glyph, clearance=1.0):
            continue
        saved_blocked, saved_boxes = placer.blocked.copy(), list(placer.boxes)
        arrows, labels = [], []
        try:
            for name, v in shown.items():
                end = origin + v
                arrows.append(Arrow("axis", tuple(origin), tuple(end), AXIS_COLORS[name], max(2, round(2 * scale))))
                placer.block_segment(tuple(origin), tuple(end), 2 * scale + 4)
            for name, v in shown.items():
                end = origin + v
                d = v / (np.linalg.norm(v) or 1)
                box = placer.place(placer.text_size((name,)), tuple(end), prefer=tuple(d), radii=(2, 6, 10, 16),
                                   what=f"axis label {name}")
                labels.append(Label("axis", (name,), tuple(end), box, color=AXIS_COLORS[name], boxed=False))
        except OverlayError as exc:
            placer.blocked, placer.boxes, last = saved_blocked, saved_boxes, exc
            continue
        layer.arrows.extend(arrows)
        layer.labels.extend(labels)
        return
    raise last or OverlayError("no corner of the frame is free for the coordinate axes")


# ---------------------------------------------------------------------------------------------
# Drawing
# ---------------------------------------------------------------------------------------------
def draw_layer(layer: Layer, base: np.ndarray | None = None) -> np.ndarray:
    """Draw the layer on an RGB image (or on pure white when base is None); returns uint8 H×W×3."""
    if base is None:
        img = Image.new("RGB", (layer.width, layer.height), (255, 255, 255))
    else:
        img = Image.fromarray(np.ascontiguousarray(base[..., :3]).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img)
    for arc in layer.arcs:
        cx, cy, r = arc.center[0], arc.center[1], arc.radius
        d.arc([cx - r, cy - r, cx + r, cy + r], arc.start_deg, arc.end_deg, fill=arc.color, width=arc.width)
    for a in layer.arrows:
        draw_arrow(d, a.start, a.end, a.color, a.width)
    for lab in layer.labels:
        draw_label(d, lab, layer.font_px)
    return np.asarray(img)


def draw_arrow(d: ImageDraw.ImageDraw, start, end, color, width: int) -> None:
    s, e = np.asarray(start, float), np.asarray(end, float)
    v = e - s
    n = np.linalg.norm(v)
    if n < 1e-6:
        return
    u = v / n
    head = min(n * 0.45, 4.0 * width + 6)
    base = e - u * head
    perp = np.array([-u[1], u[0]])
    d.line([tuple(s), tuple(base)], fill=color, width=width)
    d.polygon([tuple(e), tuple(base + perp * head * 0.5), tuple(base - perp * head * 0.5)], fill=color)


def draw_label(d: ImageDraw.ImageDraw, lab: Label, px: int, bold: bool = False) -> None:
    b = lab.box
    if lab.boxed:
        d.rounded_rectangle([b.x0, b.y0, b.x1, b.y1], radius=max(2, px // 4), fill=LABEL_FILL, outline=LABEL_BORDER)
    f = font(px, bold)
    pad = 0.35 * px
    y = b.y0 + pad
    for line in lab.lines:
        d.text((b.x0 + pad, y), line, fill=lab.color, font=f)
        y += px * 1.25
