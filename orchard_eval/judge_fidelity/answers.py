"""Answers of known quality for the judge benchmark: a case's reference answer with exactly one thing
wrong (drawn in the build's own font and style, so only that one thing differs), and the reference
under appearance changes that must cost nothing.

Each `WrongAnswer` names the criteria that should catch it (`catch`: the largest drop among them must
be ≥ 0.5) and may name criteria it legitimately moves as well (`also`); every other criterion must stay
within 0.05 of the oracle's. A case that cannot carry an edit (no label with a number, one object
only, …) simply yields none of that kind.
"""
from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass
from typing import Callable

import cv2
import numpy as np
from PIL import Image, ImageDraw

from ..cases import EvalCase
from ..segment.classical import to_lab
from ..segment.photometry import channel_difference

ORANGE_RGB = (255, 140, 0)


@dataclass
class WrongAnswer:
    name: str
    subtrack: str
    catch: tuple[str, ...]
    image: np.ndarray
    also: tuple[str, ...] = ()


def _json(case: EvalCase, role: str):
    rel = (case.extra or {}).get("artifacts", {}).get(role)
    if rel is None:
        return None
    try:
        return json.loads((case.path / rel).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _other_digit(text: str) -> str | None:
    """`text` with the first digit of its value (after '=') replaced by another."""
    m = re.search(r"=\s*-?(\d)", text)
    if not m:
        return None
    i = m.start(1)
    return text[:i] + str((int(text[i]) + 5) % 10) + text[i + 1:]


def pt_changed_digit(case: EvalCase) -> WrongAnswer | None:
    """P-T: one digit of one label's value changed, the label redrawn in place in the input's font."""
    from orchard_build.overlay import font

    layer = _json(case, "annotations")
    if not layer or not case.has("perception_text"):
        return None
    img = Image.fromarray(case.image("perception_text"))
    d = ImageDraw.Draw(img)
    px = int(layer.get("font_px", 16))
    for lab in layer.get("labels", []):
        lines = list(lab.get("lines") or [lab.get("text", "")])
        for k, line in enumerate(lines):
            new = _other_digit(line)
            if new is None:
                continue
            x0, y0, x1, y1 = lab["box"]
            pad = 0.35 * px
            y = y0 + pad + k * px * 1.25
            f = font(px, False)
            # clear the old line inside the label's border, then draw the new one where it stood
            fill = tuple(int(v) for v in np.asarray(img)[int(y0 + 3), int(x0 + 3)])
            d.rectangle([x0 + 2, y - 1, x1 - 2, min(y1 - 2, y + px * 1.2)], fill=fill)
            d.text((x0 + pad, y), new, fill=tuple(lab.get("color", (20, 20, 20))), font=f)
            return WrongAnswer("pt_changed_digit", "perception_text", ("text_content_match",), np.asarray(img))
    return None


def _ft_image(case: EvalCase, lines: tuple[str, str, str]) -> np.ndarray:
    from orchard_build.references import formulation_text_image

    W, H = case.frame_size
    return formulation_text_image(int(W), int(H), lines)[0]


def _ft_lines(case: EvalCase) -> tuple[str, str, str] | None:
    f = case.formula
    if f is None or not f.substituted:
        return None
    return f.correct_letter, f.correct_formula, f.substituted


def ft_other_letter(case: EvalCase) -> WrongAnswer | None:
    lines = _ft_lines(case)
    if lines is None:
        return None
    other = next(c for c in "ABCD" if c != lines[0].strip().upper())
    return WrongAnswer("ft_other_letter", "formulation_text", ("option_correct",),
                       _ft_image(case, (other, lines[1], lines[2])))


def ft_changed_values(case: EvalCase) -> WrongAnswer | None:
    """F-T: every substituted value replaced by another number of the same form (the formula's own
    constants kept)."""
    lines = _ft_lines(case)
    doc = _json(case, "formula_info") or {}
    values = list(((doc.get("substituted") or {}).get("values") or {}).values())
    if lines is None or not values:
        return None

    def swap(m: re.Match) -> str:
        s = m.group(0)
        v = float(s)
        if not any(abs(v - float(w)) <= 1e-9 + 1e-6 * abs(float(w)) for w in values):
            return s
        dec = len(s.split(".")[1]) if "." in s else 0
        return f"{v * 1.37 + 0.5:.{dec}f}"

    changed = re.sub(r"(?<![\w.])\d+(?:\.\d+)?", swap, lines[2])
    if changed == lines[2]:
        return None
    return WrongAnswer("ft_changed_values", "formulation_text", ("substitution_values_correct",),
                       _ft_image(case, (lines[0], lines[1], changed)))


def ft_distractor_formula(case: EvalCase) -> WrongAnswer | None:
    """F-T: the symbolic line of a distractor (a confusing one where the case has one); the letter and
    the substitution line stay right."""
    lines = _ft_lines(case)
    doc = _json(case, "formula_info") or {}
    cands = [c for c in doc.get("candidates", []) if c.get("kind") != "correct" and c.get("display")]
    if lines is None or not cands:
        return None
    order = {"confusing": 0, "fabricated": 1}
    c = sorted(cands, key=lambda c: (order.get(c.get("kind"), 2), c.get("letter", "")))[0]
    return WrongAnswer("ft_distractor_formula", "formulation_text",
                       ("formula_variables_correct", "formula_constants_correct", "formula_operators_correct"),
                       _ft_image(case, (lines[0], c["display"], lines[2])))


# --- Formulation-Graphic: the answer layer redrawn ------------------------------------------------
def _fg_base(case: EvalCase, ref: np.ndarray, layer: dict) -> np.ndarray:
    """The F-G reference with its orange layer painted out: its pixels taken from the GT frame at t*
    (the same scene, under the layer) where the case's GT video has a frame at t*, else inpainted from
    around (inpainting smears an object the layer crossed, which the judge would rightly see)."""
    lab = to_lab(ref)
    orange = np.linalg.norm(lab - to_lab(np.array([[ORANGE_RGB]], np.uint8))[0, 0], axis=2) < 45
    near = np.zeros(ref.shape[:2], np.uint8)
    for a in layer.get("arrows", []):
        cv2.line(near, tuple(int(round(v)) for v in a["start"]), tuple(int(round(v)) for v in a["end"]), 1,
                 int(a.get("width", 5)) * 5)
    for lb in layer.get("labels", []):
        x0, y0, x1, y1 = (int(round(v)) for v in lb["box"])
        near[max(0, y0 - 2):y1 + 3, max(0, x0 - 2):x1 + 3] = 1
    m = cv2.dilate((orange & (near > 0)).astype(np.uint8), np.ones((5, 5), np.uint8))
    scene = _scene_at_target(case, ref.shape)
    if scene is not None:
        out = ref.copy()
        out[m > 0] = scene[m > 0]
        return out
    return cv2.inpaint(np.ascontiguousarray(ref), m, 5, cv2.INPAINT_TELEA)


def _scene_at_target(case: EvalCase, shape) -> np.ndarray | None:
    """The GT video's frame at the case's target time t*, where it has one exactly and of the
    reference's size."""
    try:
        i = case.gt_index(case.target_time)
        if abs(i / float(case.gt_fps) - float(case.target_time)) > 1e-6:
            return None
        frame = case.gt_frame(i)
    except Exception:   # a case without a readable GT video: fall back to inpainting
        return None
    return frame if frame is not None and frame.shape == tuple(shape) else None


def _fg_draw(case: EvalCase, edit: Callable[[dict], bool]) -> np.ndarray | None:
    from orchard_build.overlay import Arrow, Box, Label, Layer
    from orchard_build.references import draw_answer_layer

    refs = _json(case, "references") or {}
    original = refs.get("formulation_graphic") if isinstance(refs, dict) else None
    if not original or not case.has("formulation_graphic"):
        return None
    layer = json.loads(json.dumps(original))
    if not edit(layer):
        return None
    ref = case.image("formulation_graphic")
    base = _fg_base(case, ref, original)
    L = Layer(int(layer["width"]), int(layer["height"]), int(layer["font_px"]))
    for a in layer.get("arrows", []):
        L.arrows.append(Arrow(a["kind"], tuple(a["start"]), tuple(a["end"]), tuple(a["color"]), int(a["width"]),
                              a.get("object_id")))
    for lb in layer.get("labels", []):
        L.labels.append(Label(lb["kind"], tuple(lb["lines"]), tuple(lb["anchor"]), Box(*lb["box"]),
                              lb.get("object_id"), tuple(lb["color"]), boxed=False))
    return draw_answer_layer(L, base)


def fg_changed_speed(case: EvalCase) -> WrongAnswer | None:
    def edit(layer: dict) -> bool:
        for lb in layer.get("labels", []):
            m = re.search(r"(\d+(?:\.\d+)?)", lb["lines"][0])
            if m:
                v = float(m.group(1))
                dec = len(m.group(1).split(".")[1]) if "." in m.group(1) else 2
                new = f"{v * 1.6 + 0.4:.{dec}f}"
                lb["lines"] = [lb["lines"][0][:m.start(1)] + new + lb["lines"][0][m.end(1):]]
                return True
        return False

    img = _fg_draw(case, edit)
    return None if img is None else WrongAnswer("fg_changed_speed", "formulation_graphic", ("velocity_value_match",), img)


def fg_reversed_arrow(case: EvalCase) -> WrongAnswer | None:
    def edit(layer: dict) -> bool:
        arrows = layer.get("arrows", [])
        if not arrows:
            return False
        for a in arrows:     # every arrow points the other way from its object's centre
            s, e = np.array(a["start"], float), np.array(a["end"], float)
            a["end"] = list(s - (e - s))
        return True

    img = _fg_draw(case, edit)
    return None if img is None else WrongAnswer("fg_reversed_arrow", "formulation_graphic", ("arrow_direction_match",),
                                                img, also=("arrow_from_center",))


def fg_arrow_off_object(case: EvalCase) -> WrongAnswer | None:
    """F-G: each arrow drawn from beside its object instead of from its centre (same direction and
    length), two object sizes to its side."""
    masks = case.reference_object_masks("formulation_graphic")

    def edit(layer: dict) -> bool:
        arrows = layer.get("arrows", [])
        if not arrows:
            return False
        for a in arrows:
            m = masks.get(a.get("object_id"))
            r = np.sqrt(max(1.0, float(m.sum())) / np.pi) if m is not None else 10.0
            s, e = np.array(a["start"], float), np.array(a["end"], float)
            d = (e - s) / max(1e-6, np.linalg.norm(e - s))
            off = np.array([-d[1], d[0]]) * 2.5 * r
            a["start"], a["end"] = list(s + off), list(e + off)
        return True

    img = _fg_draw(case, edit)
    return None if img is None else WrongAnswer("fg_arrow_off_object", "formulation_graphic", ("arrow_from_center",),
                                                img, also=("velocity_label_present_and_format", "velocity_value_match",
                                                           "velocity_label_no_unit"))


def fg_outlined_arrow(case: EvalCase) -> WrongAnswer | None:
    """F-G: the reference with a 2 px dark outline around every arrow (the rubric asks borderless)."""
    refs = _json(case, "references") or {}
    layer = refs.get("formulation_graphic") if isinstance(refs, dict) else None
    if not layer or not layer.get("arrows") or not case.has("formulation_graphic"):
        return None
    img = case.image("formulation_graphic").copy()
    near = np.zeros(img.shape[:2], np.uint8)
    for a in layer["arrows"]:
        cv2.line(near, tuple(int(round(v)) for v in a["start"]), tuple(int(round(v)) for v in a["end"]), 1,
                 int(a.get("width", 5)) * 4)
    lab = to_lab(img)
    drawn = np.linalg.norm(lab - to_lab(np.array([[ORANGE_RGB]], np.uint8))[0, 0], axis=2) < 45
    scene = _scene_at_target(case, img.shape)
    if scene is not None:
        # the arrows are orange the reference adds to the scene at t*: an orange-red support beside
        # them is no part of them, and the outline must hug the arrow itself
        drawn &= channel_difference(img, scene) > 40
    arrow = drawn & (near > 0)
    ring = cv2.dilate(arrow.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool) & ~arrow
    img[ring] = (25, 25, 25)
    return WrongAnswer("fg_outlined_arrow", "formulation_graphic", ("arrow_is_borderless_orange",), img,
                       also=("object_appearance_match", "object_position_match"))


# --- Perception-Graphic ------------------------------------------------------------------------------
def pg_label_left_on(case: EvalCase) -> WrongAnswer | None:
    """P-G: one of the input's labels (not an axis letter) left on the answer."""
    layer = _json(case, "annotations")
    if not layer or not case.has("perception_graphic") or not case.has("perception_text"):
        return None
    pt, pg = case.image("perception_text"), case.image("perception_graphic").copy()
    masks = case.reference_object_masks("perception_graphic")
    objs = np.zeros(pg.shape[:2], bool)
    for m in masks.values():
        objs |= m
    for lab in layer.get("labels", []):
        if lab.get("kind") == "axis":
            continue
        x0, y0, x1, y1 = (int(round(v)) for v in lab["box"])
        box = np.zeros(pg.shape[:2], bool)
        box[max(0, y0):y1 + 1, max(0, x0):x1 + 1] = True
        if (box & objs).any():
            continue
        pg[box] = pt[box]
        return WrongAnswer("pg_label_left_on", "perception_graphic", ("text_annotations",), pg,
                           also=("objects_only_from_gt",))
    return None


def pg_extra_object(case: EvalCase) -> WrongAnswer | None:
    """P-G: a copy of the first object pasted where the answer is empty and the input had no
    annotation (so that only the object criteria have a reason to move)."""
    if not case.has("perception_graphic"):
        return None
    pg = case.image("perception_graphic").copy()
    masks = case.reference_object_masks("perception_graphic")
    objs = np.zeros(pg.shape[:2], bool)
    for m in masks.values():
        objs |= m
    if case.has("perception_text"):
        pt = case.image("perception_text")
        objs |= np.linalg.norm(to_lab(pt) - to_lab(np.full((1, 1, 3), 255, np.uint8))[0, 0], axis=2) > 10
    H, W = objs.shape
    for m in masks.values():
        ys, xs = np.nonzero(m)
        if xs.size < 10:
            continue
        w, h = xs.max() - xs.min() + 1, ys.max() - ys.min() + 1
        for dx, dy in ((W // 3, 0), (-W // 3, 0), (0, H // 3), (0, -H // 3), (W // 4, H // 4), (-W // 4, -H // 4)):
            nx, ny = xs + dx, ys + dy
            if nx.min() < 0 or ny.min() < 0 or nx.max() >= W or ny.max() >= H:
                continue
            spot = np.zeros_like(objs)
            spot[max(0, ny.min() - h // 2):ny.max() + h // 2, max(0, nx.min() - w // 2):nx.max() + w // 2] = True
            if (spot & objs).any():
                continue
            pg[ny, nx] = pg[ys, xs]
            return WrongAnswer("pg_extra_object", "perception_graphic", ("objects_only_from_gt",), pg)
    return None


WRONG = (pt_changed_digit, ft_other_letter, ft_changed_values, ft_distractor_formula, fg_changed_speed,
         fg_reversed_arrow, fg_arrow_off_object, fg_outlined_arrow, pg_label_left_on, pg_extra_object)


def wrong_answers(case: EvalCase) -> list[WrongAnswer]:
    out = []
    for make in WRONG:
        w = make(case)
        if w is not None:
            out.append(w)
    return out


# --- appearance changes that must cost nothing --------------------------------------------------------
def jpeg(img: np.ndarray, quality: int = 75) -> np.ndarray:
    buf = io.BytesIO()
    Image.fromarray(img).save(buf, format="JPEG", quality=quality)
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))


def other_aspect(img: np.ndarray) -> np.ndarray:
    """The answer made at 4:3 (the evaluator resizes it back to the case's frame)."""
    H, W = img.shape[:2]
    return cv2.resize(img, (int(round(H * 4 / 3)) // 2 * 2, H), interpolation=cv2.INTER_AREA)


def slight_blur(img: np.ndarray) -> np.ndarray:
    return cv2.GaussianBlur(img, (0, 0), 0.8)


APPEARANCE: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "jpeg_q75": jpeg, "aspect_4x3": other_aspect, "blur_0.8px": slight_blur}
