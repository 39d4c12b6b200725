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


MIN_ANSWER_PX = 10   # smallest answer text at 360 p, reached only when nothing larger fits
WRAP_BELOW_PX = 18   # at 360 p: a formula that would print smaller than this on one line wraps instead


def _wrap(text: str, px: int, bold: bool, width: float) -> list[str]:
    """Break a formula at its own separators ('; ' between laws, ', ' between equations) to fit `width`;
    each break keeps its separator at the end of the line it closes."""
    f = font(px, bold)
    if f.getbbox(text)[2] <= width:
        return [text]
    pieces: list[str] = []  # each piece carries the separator that follows it
    laws = text.split("; ")
    for i, law in enumerate(laws):
        tail = ";" if i < len(laws) - 1 else ""
        eqs = law.split(", ") if f.getbbox(law)[2] > width else [law]
        for j, eq in enumerate(eqs):
            pieces.append(eq + ("," if j < len(eqs) - 1 else tail))
    lines, current = [], ""
    for piece in pieces:
        joined = f"{current} {piece}" if current else piece
        if current and f.getbbox(joined.rstrip(";,"))[2] > width:
            lines.append(current)
            current = piece
        else:
            current = joined
    lines.append(current)
    return lines


def formulation_text_image(width: int, height: int, lines: tuple[str, str, str]) -> tuple[np.ndarray, dict[str, Any]]:
    """Three centred items (letter, symbolic formula, substituted formula) on white, as large as fits.
    A formula that would print below WRAP_BELOW_PX on one line wraps at its separators instead, at the
    largest size where the wrapped rows fit: a long system of equations then fills the canvas in legible
    rows rather than shrinking to one thin line. Every wrapped row but an item's last ends with its
    separator (',' or ';'), so a reader can join the rows of one item back into its logical line."""
    img = Image.new("RGB", (width, height), (255, 255, 255))
    d = ImageDraw.Draw(img)
    min_px = max(10, round(MIN_ANSWER_PX * height / 360))
    wrap_below = max(min_px, round(WRAP_BELOW_PX * height / 360))
    px = max(12, round(height / 9))

    def fits(items: list[list[str]], size: int) -> bool:
        rows = sum(len(w) for w in items)
        wide = all(font(size, i == 0).getbbox(r)[2] <= 0.94 * width for i, w in enumerate(items) for r in w)
        return wide and rows * size * 1.45 + size * 1.2 <= 0.94 * height

    while True:
        if px > wrap_below:
            wrapped = [[line] for line in lines]
        else:
            wrapped = [[lines[0]]] + [_wrap(line, px, False, 0.94 * width) for line in lines[1:]]
        if fits(wrapped, px) or px <= min_px:
            break
        px -= 1
    rows = sum(len(w) for w in wrapped)
    line_h = px * 1.45
    gap = px * 0.6  # extra space between the three items
    total = rows * line_h + gap * 2
    y = (height - total) / 2
    boxes, item_of_row = [], []  # one box per drawn row; item_of_row says which of the three items it belongs to
    for i, item in enumerate(wrapped):
        f = font(px, i == 0)
        for row in item:
            w = f.getbbox(row)[2]
            x = (width - w) / 2
            d.text((x, y), row, fill=(0, 0, 0), font=f)
            boxes.append([x, y, x + w, y + px * 1.2])
            item_of_row.append(i)
            y += line_h
        y += gap
    return np.asarray(img), {"lines": list(lines), "rows": wrapped, "font_px": px, "boxes": boxes,
                             "item_of_row": item_of_row}


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
