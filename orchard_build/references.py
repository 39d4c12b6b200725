"""Reference answers of the five subtracks (seed paper App. C–E), generated from renders and metadata.

Perception-Text: the annotation layer alone on pure white. Perception-Graphic: the annotated objects
alone on pure white (rendered by the renderer). Formulation-Text: three centred lines on white.
Formulation-Graphic: the scene at t* without annotations, with a borderless orange arrow and a
`v = X.XX` label per moving object and `v = 0` (no arrow) per object at rest.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from .overlay import ANSWER_ORANGE, Arrow, Label, Layer, Placer, clip_arrow, draw_arrow, draw_label, font, font_size


def formulation_text_image(width: int, height: int, lines: tuple[str, str, str]) -> tuple[np.ndarray, dict[str, Any]]:
    """Three centred lines (letter, symbolic formula, substituted formula) on white, as large as fits."""
    img = Image.new("RGB", (width, height), (255, 255, 255))
    d = ImageDraw.Draw(img)
    px = max(12, round(height / 9))
    while px > 10:
        widths = [font(px, i == 0).getbbox(line)[2] for i, line in enumerate(lines)]
        if max(widths) <= 0.92 * width:
            break
        px -= 1
    line_h = px * 1.6
    top = (height - line_h * 3) / 2 + (line_h - px) / 2
    boxes = []
    for i, line in enumerate(lines):
        f = font(px, i == 0)
        w = f.getbbox(line)[2]
        x, y = (width - w) / 2, top + i * line_h
        d.text((x, y), line, fill=(0, 0, 0), font=f)
        boxes.append([x, y, x + w, y + px * 1.2])
    return np.asarray(img), {"lines": list(lines), "font_px": px, "boxes": boxes}


def formulation_graphic_layer(width: int, height: int, velocity: dict[str, Any], instance_mask: np.ndarray) -> Layer:
    """Orange velocity arrows and speed labels for the state at t* (velocity: the velocity.json document)."""
    px = round(font_size(height) * 1.25)  # the answer label is bold and a little larger than input labels
    layer = Layer(width, height, px)
    placer = Placer(width, height, instance_mask > 0, px)
    scale = px / 16.0
    for o in velocity["objects"]:
        if o["moving"] and o["arrow_direction_image"] is not None:
            start = np.asarray(o["center_image"], float)
            d = np.asarray(o["arrow_direction_image"], float)
            end = clip_arrow(start, d, 0.11 * width, width, height)
            layer.arrows.append(Arrow("velocity", tuple(start), tuple(end), ANSWER_ORANGE, max(3, round(4 * scale)), o["id"]))
            placer.block_segment(tuple(start + d * 0.05 * width), tuple(end), 4 * scale + 4)
    for o in velocity["objects"]:
        lines = (o["label"],)
        anchor = tuple(o["center_image"])
        if o["moving"] and o["arrow_direction_image"] is not None:
            tip = next(a.end for a in layer.arrows if a.object_id == o["id"])
            anchor, prefer = tip, tuple(o["arrow_direction_image"])
        else:
            prefer = (0.0, -1.0)
        size = placer.text_size(lines, bold=True)
        box = placer.place(size, anchor, prefer=prefer, what=f"speed label of {o['id']!r}")
        layer.labels.append(Label("speed", lines, anchor, box, o["id"], color=ANSWER_ORANGE, boxed=False))
    return layer


def draw_answer_layer(layer: Layer, base: np.ndarray) -> np.ndarray:
    img = Image.fromarray(np.ascontiguousarray(base[..., :3]).astype(np.uint8), "RGB")
    d = ImageDraw.Draw(img)
    for a in layer.arrows:
        draw_arrow(d, a.start, a.end, a.color, a.width)
    for lab in layer.labels:
        draw_label(d, lab, layer.font_px, bold=True)
    return np.asarray(img)
