"""Offline, deterministic judge (`get_judge("programmatic")`): every rubric criterion that the pixels
and the case's reference layers allow is *measured*; a criterion it cannot judge honestly is −1 (not
applicable), which the fusion leaves out of its group. The coverage table (criterion → method) is in
docs/judges.md; the thresholds below are the calibration (oracle answers score 1, see the tests).

What it needs: the case. `request.facts["case"]` (an `EvalCase`) or `facts["case_dir"]`, else the
judge's `cases` option (a dataset root) and `request.case_id`. Orchard cases give the full reference
layer (annotations.json: every label's text and box, every arrow's end points, colour and width;
references/references.json: the F-G answer layer; formula_info.json); Apple-PI-GT cases have no layer,
so label text comes from OCR of the reference image and arrow criteria are −1.

Deduction answers: `request.answer` is the frames; their physical times come from
`facts["time_point"]` (keyframe rubric), else `facts["times"]`, else `facts["timestamps"]` when the
counts agree, else frames are spread evenly over (0, T].
"""
from __future__ import annotations

import dataclasses
import json
import re
import math
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import cv2
import numpy as np

from ..judges import NOT_APPLICABLE, JudgeRequest, JudgeResult, register_judge
from ..media import resize_rgb
from ..segment import get_segmenter
from ..segment.base import Segmentation
from ..segment.classical import context_for_case, to_lab
from . import mathtext as MT
from . import measure as ME
from . import ocr as OCR

VERSION = "1.5.0"   # 1.5: an arrow's head is the half wider than its shaft, speed labels read from the frame where the isolated layer fails and without their "="; 1.4: F-G arrows across an object of their own colour, head-to-head arrows one each; 1.3: P-T text measured over the same pixels both sides, numbers re-read, arrows grown by hysteresis; 1.2: P-T scaled by the white page, F-G arrows shared / outline local / labels re-read
NA = NOT_APPLICABLE
ORANGE = np.array([255, 140, 0], np.uint8)


# ---------------------------------------------------------------------------------------------
# Case-side context (cached per case)
# ---------------------------------------------------------------------------------------------
def _read_json(case, role: str) -> Any:
    rel = (case.extra or {}).get("artifacts", {}).get(role)
    if rel is None:
        return None
    p = Path(case.path) / rel
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _grown_union(masks, r: int, shape) -> np.ndarray:
    """The union of `masks`, each grown by `r` px."""
    out = np.zeros(shape[:2], bool)
    for m in masks:
        out |= ME.dilate(m, r)
    return out


def _img(case, role: str) -> np.ndarray | None:
    try:
        if case.has(role):
            return case.image(role)
    except Exception:  # noqa: BLE001
        return None
    return None


@dataclass
class RefLine:
    text: str
    box: tuple[float, float, float, float]
    kind: str
    verifiable: bool          # OCR reads it on the reference image
    ref_sim: float = 1.0
    ref_conf: float = 1.0
    props: dict = field(default_factory=dict)
    ref_read: str = ""        # what OCR reads on the reference (its numbers are the quantities to match)


@dataclass
class RefArrow:
    kind: str                 # "axis" or "velocity"
    object_id: str | None
    mask: np.ndarray
    shape: ME.ArrowShape
    seed: "RefArrow | None" = None   # what the search starts from (the layer's arrow); None: this one


READ_CONFIDENT = 0.9  # share of the reference's OCR confidence that still reads as clearly as it
ARROW_WEAK_DE = 65.0  # ΔE from an arrow's colour within which ink joined to it still belongs to it
LAYER_FLAT_DE = 8.0   # ΔE from the layer's orange within which a pixel is the drawn layer's flat colour
ARROW_EDGE_PX = 4     # px beside an arrow within which a pixel far darker than the reference's is its outline
STROKE_NOISE = 1.1   # ratio of ink mass that lossy coding or a resampling alone gives a text line
PROPS_PAD = 2   # px around a text box: a frame drawn at the box's edge falls inside whole on both sides


def _text_props(img: np.ndarray, box, contrast: float | None = None) -> dict:
    """Ink measures of a text box: colour (median Lab) and height of the thresholded ink, and stroke
    weight from the ink *mass* (each pixel's ΔE from the box's background over the ink contrast,
    clipped to 1), which blur and lossy coding move far less than a thresholded count does. `contrast`: the ΔE of full ink
    (the reference's, so that an answer is weighed on the reference's scale); default: this box's own."""
    H, W = img.shape[:2]
    x0, y0 = max(0, int(math.floor(box[0])) - PROPS_PAD), max(0, int(math.floor(box[1])) - PROPS_PAD)
    x1, y1 = min(W, int(math.ceil(box[2])) + PROPS_PAD), min(H, int(math.ceil(box[3])) + PROPS_PAD)
    if x1 - x0 < 2 or y1 - y0 < 2:
        return {"height": 0.0, "lab": None, "density": 0.0, "sharp": 0.0, "contrast": 0.0}
    patch = img[y0:y1, x0:x1]
    lab = to_lab(patch)
    bg = np.median(lab.reshape(-1, 3), axis=0)
    d = np.linalg.norm(lab - bg, axis=2)
    inkm = d > max(30.0, 0.4 * float(d.max()))
    own = float(np.percentile(d[inkm], 90)) if inkm.any() else 0.0
    c = contrast if contrast else own
    mass = np.clip((d - 8.0) / max(c - 8.0, 1.0), 0.0, 1.0)        # ΔE < 8: background noise, no ink
    ys = np.nonzero(inkm.any(axis=1))[0]
    height = float(ys.max() - ys.min() + 1) if ys.size else 0.0
    return {"height": height, "lab": np.median(lab[inkm], axis=0) if inkm.any() else None,
            "density": float(mass.mean()), "sharp": ME.gradient_energy(patch), "contrast": own}


def _other_colours(arrows, arrow) -> list:
    """The reference colours (Lab) of the arrows other than `arrow`, unlike its own."""
    own = arrow.shape.lab
    return [b.shape.lab for b in arrows if b is not arrow and np.linalg.norm(b.shape.lab - own) > 10.0]


def _measured_box(found, ref_box):
    """Where an answer's text line is measured: its detected box together with the reference's box
    moved onto it. A detector's box moves by a few pixels with the image's coding, and a box edge
    that cuts through a label's frame or a glyph changes every ink measure; the reference's extent
    around the same text keeps both sides measured over the same pixels, the detected one takes in
    text larger than the reference's."""
    dx = (found[0] + found[2] - ref_box[0] - ref_box[2]) / 2.0
    dy = (found[1] + found[3] - ref_box[1] - ref_box[3]) / 2.0
    return (min(found[0], ref_box[0] + dx), min(found[1], ref_box[1] + dy),
            max(found[2], ref_box[2] + dx), max(found[3], ref_box[3] + dy))


def _segment_arrow_ref(ref: np.ndarray, a: dict, label_mask: np.ndarray) -> np.ndarray:
    H, W = ref.shape[:2]
    p0, p1 = np.array(a["start"], float), np.array(a["end"], float)
    width = float(a.get("width", 2))
    yy, xx = np.mgrid[0:H, 0:W]
    P = np.stack([xx + 0.5, yy + 0.5], axis=-1)
    d = p1 - p0
    L2 = float(d @ d) or 1.0
    t = np.clip(((P - p0) @ d) / L2, 0, 1)
    dist = np.linalg.norm(P - (p0 + t[..., None] * d), axis=-1)
    near = dist <= 3 * width + 6
    col = np.array(a.get("color", [0, 0, 0]), np.uint8)[None, None, :]
    cde = np.linalg.norm(to_lab(ref) - to_lab(col)[0, 0], axis=2)
    m = near & ME.ink(ref) & (cde < 60) & ~label_mask
    return ME.largest_component(m)


class CaseRefs:
    """Everything the judge derives once from a case's references."""

    def __init__(self, case):
        self.case = case
        self.size = tuple(case.frame_size)
        self.diag = math.hypot(*self.size)
        self.layer = _read_json(case, "annotations")
        refs = _read_json(case, "references") or {}
        self.fg_layer = refs.get("formulation_graphic") if isinstance(refs, dict) else None
        self.ft_layout = refs.get("formulation_text") if isinstance(refs, dict) else None
        self.formula_doc = _read_json(case, "formula_info")
        self._lock = threading.RLock()
        self._cache: dict[str, Any] = {}

    def get(self, key: str, fn):
        with self._lock:
            if key not in self._cache:
                self._cache[key] = fn()
            return self._cache[key]

    # -- P-T reference: lines and arrows -------------------------------------------------------
    def pt(self):
        return self.get("pt", self._pt)

    def _pt(self):
        ref = _img(self.case, "perception_text")
        if ref is None:
            return None
        boxes = OCR.read_text(ref)
        lines: list[RefLine] = []
        labels = (self.layer or {}).get("labels", []) if self.layer else []
        if labels:
            for lab in labels:
                texts = lab.get("lines") or [lab.get("text", "")]
                x0, y0, x1, y1 = lab["box"]
                n = max(1, len(texts))
                for i, t in enumerate(texts):
                    est = (x0, y0 + (y1 - y0) * i / n, x1, y0 + (y1 - y0) * (i + 1) / n)
                    inside = [b for b in boxes if x0 - 4 <= b.center[0] <= x1 + 4 and y0 - 4 <= b.center[1] <= y1 + 4]
                    best = max(inside, key=lambda b: OCR.similarity(t, b.text), default=None)
                    sim = OCR.similarity(t, best.text) if best is not None else 0.0
                    if best is not None and sim >= 0.6 and len(OCR.normalise(t)) >= 2:
                        rl = RefLine(t, best.box, lab.get("kind", ""), True, sim, max(best.score, 1e-3), ref_read=best.text)
                    else:
                        rl = RefLine(t, est, lab.get("kind", ""), False)
                    rl.props = _text_props(ref, rl.box)
                    lines.append(rl)
        else:
            for b in boxes:
                rl = RefLine(b.text, b.box, "text", True, 1.0, max(b.score, 1e-3), ref_read=b.text)
                rl.props = _text_props(ref, b.box)
                lines.append(rl)
        label_mask = ME.box_mask(ref.shape, [l["box"] for l in labels], pad=1) if labels else np.zeros(ref.shape[:2], bool)
        arrows: list[RefArrow] = []
        ref_ink, ref_lab = ME.ink(ref), to_lab(ref)
        seeds: list[RefArrow] = []
        for a in (self.layer or {}).get("arrows", []) if self.layer else []:
            m = _segment_arrow_ref(ref, a, label_mask)
            shp = ME.arrow_shape(m, ref)
            if shp is not None:
                seeds.append(RefArrow("axis" if a.get("kind") == "axis" else "velocity", a.get("object_id"), m, shp))
        for seed in seeds:
            # measure the reference exactly as an answer is measured, so identical pixels score 1
            m2 = ProgrammaticJudge._find_arrow(ref, ref_ink, ref_lab, label_mask, seed, self.diag,
                                               _other_colours(seeds, seed))
            shp2 = ME.arrow_shape(m2, ref) if m2 is not None else None
            arrows.append(seed if shp2 is None else RefArrow(seed.kind, seed.object_id, m2, shp2, seed))
        return {"image": ref, "ocr": boxes, "lines": lines, "arrows": arrows, "ink": ME.ink(ref),
                "has_layer": bool(self.layer), "label_mask": label_mask}

    def annotation_masks(self):
        """Annotation pixels of the input, split into axes / velocity arrows / text (P-T reference)."""
        return self.get("annmasks", self._annotation_masks)

    def _annotation_masks(self):
        pt = self.pt()
        if pt is None:
            return None
        inkm = pt["ink"]
        axes = np.zeros_like(inkm)
        vel = np.zeros_like(inkm)
        for a in pt["arrows"]:
            (axes if a.kind == "axis" else vel)[:] |= ME.dilate(a.mask, 2)
        labels = (self.layer or {}).get("labels", []) if self.layer else []
        axis_lab = ME.box_mask(inkm.shape, [l["box"] for l in labels if l.get("kind") == "axis"], pad=1)
        other_lab = ME.box_mask(inkm.shape, [l["box"] for l in labels if l.get("kind") != "axis"], pad=1)
        if self.layer:
            axes = (axes | axis_lab) & inkm
            vel = vel & inkm & ~axes
            text = inkm & ~axes & ~vel & (other_lab | ~ME.dilate(axes | vel, 3))
        else:
            text, axes, vel = inkm, None, None
        # each annotation on its own (a label box, an arrow), for the per-annotation removal measure
        parts = {"axes": [], "velocity": [], "text": []}
        if self.layer:
            for a in pt["arrows"]:
                parts["axes" if a.kind == "axis" else "velocity"].append(ME.dilate(a.mask, 2))
            for l in labels:
                parts["axes" if l.get("kind") == "axis" else "text"].append(ME.box_mask(inkm.shape, [l["box"]], pad=1))
        return {"axes": axes, "velocity": vel if (vel is not None and vel.any()) else None, "text": text,
                "all": inkm, "parts": parts}

    # -- formulas --------------------------------------------------------------------------------
    def formulas(self):
        return self.get("formulas", self._formulas)

    def _formulas(self):
        f = self.case.formula
        if f is None:
            return None
        doc = self.formula_doc or {}
        displays = [(s["name"], s["display"]) for s in doc.get("symbol_table", []) if "name" in s and "display" in s]
        names = set()
        for c in doc.get("candidates", []):
            names |= set(c.get("symbols", []))
        if not displays:
            for ch in f.choices:
                body = ch.split(".", 1)[1] if len(ch) > 2 and ch[1] == "." else ch
                for t in MT.tokenize(body):
                    if t.kind == "sym":
                        names.add(t.text)
        vocab = MT.Vocab.build(names, displays)
        line2 = MT.parse(f.correct_formula, vocab)
        line3 = MT.parse(f.substituted, vocab) if f.substituted else None
        sub = doc.get("substituted") if isinstance(doc.get("substituted"), dict) else {}
        annotated = set((sub or {}).get("values", {}).keys())
        if not annotated and line3 is not None:
            annotated = line2.symbols - line3.symbols
        consts = line2.numbers()
        return {"vocab": vocab, "line2": line2, "line3": line3, "annotated": annotated, "constants": consts,
                "letter": f.correct_letter.strip().upper()}


SPEED_LABEL = re.compile(r"^\s*[vVνyY]\s*[=:]\s*(-?\d+(?:[.,]\d+)?)\s*(.*)$")
# a label read without its "=" (a faint sign under coding): its format is not shown, its value is
UNSIGNED_LABEL = re.compile(r"^\s*[vVνyY]\s+(-?\d+(?:[.,]\d+)?)\s*(.*)$")


LABEL_START = re.compile(r"[vVνyY]\s*(?:[=:]|\s)\s*-?\d")   # with or without its "=" (UNSIGNED_LABEL)


def _label_rank(text: str) -> int:
    """How completely a reading spells speed labels: 2 per `v = number` it holds, else 1 for a
    number, 0 for neither."""
    n = len(LABEL_START.findall(text.replace("—", "-")))
    return 2 * n if n else (1 if re.search(r"\d", text) else 0)


BARE_NUMBER = re.compile(r"^\s*(-?\d+(?:[.,]\d+)?)\s*$")


def _number(m: re.Match) -> float:
    """The number a label pattern captured first (a decimal comma read as a point)."""
    return float(m.group(1).replace(",", "."))


def _overlaps(a, b) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def read_speed_labels(img: np.ndarray, n_expected: int, places: list | None = None) -> list:
    """OCR readings of an F-G image's speed labels: the whole frame and its orange layer isolated as
    dark on white (graded by closeness to orange, so anti-aliased edges survive; read only around
    its ink, `_read_layer`), at 2× and, while fewer than `n_expected` complete labels are read, at
    1× as well (small text on a light, busy ground often reads at its own scale only); overlapping readings merged (`_merge_readings`).
    While labels are still missing, every incomplete reading (a number without its `v =`, a stray
    `v`) and every expected label place (`places`, boxes) is read again from a crop of the isolated
    layer: a text detector that joins a label to a neighbouring shape or splits it on a busy or
    compressed ground reads the label alone (from the frame itself where the isolated layer does not
    spell it)."""
    lab = to_lab(img)
    orange_lab = to_lab(ORANGE[None, None, :])[0, 0]
    iso = np.clip(255.0 * (np.linalg.norm(lab - orange_lab, axis=2) - 15.0) / 45.0, 0, 255).astype(np.uint8)
    iso = np.repeat(iso[..., None], 3, axis=2)
    boxes = _merge_readings(OCR.lines(OCR.read_text(img, scale=2.0), gap=1.5), _read_layer(iso, 2.0))

    def complete() -> int:
        return sum(1 for b in boxes for piece in _split_labels(b) if SPEED_LABEL.match(piece.text))

    if complete() < n_expected:
        boxes = _merge_readings(boxes, OCR.lines(OCR.read_text(img, scale=1.0), gap=1.5))
        boxes = _merge_readings(boxes, _read_layer(iso, 1.0))
    # each reading at an expected place (or the place itself where nothing was read), and while labels
    # are missing every incomplete reading, read again alone; the crop's clean reading wins a tie
    regions = []
    for place in places or []:
        # a reading that holds only part of the label (its number) is read again with the whole place
        near = [_union(b.box, place) for b in boxes if _overlaps(b.box, place) and _label_rank(b.text)]
        regions += near or [place]
    if complete() < n_expected:
        regions += [b.box for b in boxes if _label_rank(b.text) < 2 and re.search(r"[\dvVνyY]", b.text)]
    for box in regions:
        found = _read_crop(iso, box)
        if not any(_label_rank(b.text) >= 2 for b in found):
            # over a body of about the layer's hue a codec's chroma blurs the isolated layer, while the
            # frame's own luma still spells the label
            found = _merge_readings(found, _read_crop(img, box))
        boxes = _merge_readings(boxes, found, clean_wins=True)
    return boxes


LAYER_MARGIN_PX = 24   # white kept around the isolated layer's ink when only that box is read


def _read_layer(iso: np.ndarray, scale: float) -> list:
    """Readings of the isolated orange layer (dark on white): only the box around its ink, with a
    margin of white, is read — the rest of the layer is blank, and text detection costs by the
    pixel. In the layer's coordinates."""
    ys, xs = np.nonzero(iso[..., 0] < 250)
    if not ys.size:
        return []
    H, W = iso.shape[:2]
    X0, Y0 = max(int(xs.min()) - LAYER_MARGIN_PX, 0), max(int(ys.min()) - LAYER_MARGIN_PX, 0)
    X1, Y1 = min(int(xs.max()) + 1 + LAYER_MARGIN_PX, W), min(int(ys.max()) + 1 + LAYER_MARGIN_PX, H)
    return _read_region(iso, X0, Y0, X1, Y1, scale)


def _read_region(img: np.ndarray, X0: int, Y0: int, X1: int, Y1: int, scale: float) -> list:
    """Text lines of the region [Y0:Y1, X0:X1] read at `scale`, in the image's coordinates."""
    from .ocr import TextBox

    found = OCR.lines(OCR.read_text(np.ascontiguousarray(img[Y0:Y1, X0:X1]), scale=scale), gap=1.5)
    return [TextBox(b.text, b.score, (b.box[0] + X0, b.box[1] + Y0, b.box[2] + X0, b.box[3] + Y0)) for b in found]


def _union(a, b) -> tuple:
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def _read_crop(img: np.ndarray, box) -> list:
    """Readings of the crop around `box` (grown by one text height sideways, half of one up and down),
    in the image's coordinates."""
    x0, y0, x1, y1 = (float(v) for v in box)
    h = max(8.0, y1 - y0)
    H, W = img.shape[:2]
    X0, Y0 = int(max(0, x0 - h)), int(max(0, y0 - 0.5 * h))
    X1, Y1 = int(min(W, x1 + h)), int(min(H, y1 + 0.5 * h))
    if X1 - X0 < 8 or Y1 - Y0 < 8:
        return []
    return _read_region(img, X0, Y0, X1, Y1, 2.0)


def _area(b) -> float:
    return max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])


def _split_labels(box):
    """A reading that holds several `v = number` labels (OCR joins labels side by side into one line)
    as one box per label, each over its share of the reading's width."""
    text = box.text.replace("—", "-")
    starts = [m.start() for m in LABEL_START.finditer(text)]
    if len(starts) < 2:
        return [box]
    from .ocr import TextBox

    x0, y0, x1, y1 = box.box
    n = max(1, len(text))
    bounds = starts + [len(text)]
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        out.append(TextBox(text[a:b].strip(), box.score, (x0 + (x1 - x0) * a / n, y0, x0 + (x1 - x0) * b / n, y1)))
    return out


def _clean_label(text: str) -> bool:
    return all(SPEED_LABEL.match(piece.text) for piece in _split_labels(_Reading(text)))


@dataclasses.dataclass
class _Reading:   # the text alone, for `_split_labels`
    text: str
    score: float = 1.0
    box: tuple = (0.0, 0.0, 1.0, 1.0)


def _merge_readings(full: list, isolated: list, clean_wins: bool = False) -> list:
    """OCR of the whole frame and of the orange layer isolated, as one list: where two readings of the
    two passes overlap, the one that spells the label more completely is kept (the full frame on a
    tie). Orange text on a busy floor often reads as its number alone in the full frame and as the
    whole `v = …` when isolated, and the other way round over an orange-ish object."""
    def overlap(a, b) -> bool:
        return min(a.box[2], b.box[2]) > max(a.box[0], b.box[0]) and min(a.box[3], b.box[3]) > max(a.box[1], b.box[1])

    out = list(full)
    for b in isolated:
        rivals = [o for o in out if overlap(o, b) and (_label_rank(o.text) or _label_rank(b.text))]
        if not rivals:
            out.append(b)
        elif (clean_wins and _label_rank(b.text) >= 2 and _clean_label(b.text)
              and _label_rank(b.text) >= sum(_label_rank(o.text) for o in rivals)):
            out = [o for o in out if not any(o is r for r in rivals)] + [b]
        elif _label_rank(b.text) > sum(_label_rank(o.text) for o in rivals) or (
                _label_rank(b.text) >= 2 and _label_rank(b.text) == sum(_label_rank(o.text) // 2 * 2 for o in rivals)
                and _area(b.box) < 0.5 * sum(_area(o.box) for o in rivals)):   # as many labels, tighter
            out = [o for o in out if not any(o is r for r in rivals)] + [b]
    return out


SIGMAS = (0.0, 0.4, 0.6, 0.8, 1.0, 1.3, 1.6, 2.0, 2.5)


def _blurred(ch: np.ndarray, sigma: float) -> np.ndarray:
    return ch if sigma == 0 else cv2.GaussianBlur(ch, (0, 0), sigma)


def matched_softness(ans: np.ndarray, ref: np.ndarray, region: np.ndarray) -> tuple[float, float]:
    """(luma σ, chroma σ): the Gaussian blurs (px, from SIGMAS) of the reference's luma and chroma that
    bring it closest to the answer on `region` (mean absolute difference). Lossy codecs subsample and
    soften colour much more than brightness, so the two are matched separately; (0, 0) for an answer
    as sharp as the reference."""
    if not region.any():
        return 0.0, 0.0
    A = cv2.cvtColor(np.ascontiguousarray(ans), cv2.COLOR_RGB2YCrCb).astype(np.float32)
    F = cv2.cvtColor(np.ascontiguousarray(ref), cv2.COLOR_RGB2YCrCb).astype(np.float32)
    out = []
    for chans in ((0,), (1, 2)):
        best, err = 0.0, None
        for sg in SIGMAS:
            e = float(np.mean([np.mean(np.abs(_blurred(F[..., c], sg)[region] - A[..., c][region])) for c in chans]))
            if err is None or e < err - 1e-6:
                best, err = sg, e
        out.append(best)
    return out[0], out[1]


def softened(ref: np.ndarray, luma: float, chroma: float) -> np.ndarray:
    """`ref` with its luma and chroma blurred by the given σ (px)."""
    if luma == 0 and chroma == 0:
        return ref
    F = cv2.cvtColor(np.ascontiguousarray(ref), cv2.COLOR_RGB2YCrCb).astype(np.float32)
    for c, sg in ((0, luma), (1, chroma), (2, chroma)):
        F[..., c] = _blurred(F[..., c], sg)
    return cv2.cvtColor(np.clip(F + 0.5, 0, 255).astype(np.uint8), cv2.COLOR_YCrCb2RGB)


def sharpness_score(answer: float, reference: float) -> float:
    """Readability's sharpness term: an answer down to half the reference's gradient energy is crisp
    enough (lossy coding and resampling soften small text that much), 0 at 0.15 of it; a sharper one
    (noise, ringing) loses by log-ratio beyond the ringing a lossy code adds to text (a quarter), 0 at
    2.5 times."""
    if answer <= 0 or reference <= 0:
        return 0.0
    r = answer / reference
    return ME.log_ratio_score(answer, reference, 2.5, within=1.25) if r >= 1 else ME.ramp(r, 0.5, 0.15)


def _blobs(mask: np.ndarray, min_area: float) -> int:
    n, _, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    return int(sum(1 for i in range(1, n) if stats[i, cv2.CC_STAT_AREA] >= min_area))


def _pair_alike(masks: dict, alike: list, gt: dict) -> dict:
    """Objects that look alike carry no identity of their own: within each such group the found
    masks go to the GT objects by Hungarian matching on squared centroid distance (the rule the
    objective metrics use, `objective._resolve_alike`)."""
    if not alike:
        return masks
    from scipy.optimize import linear_sum_assignment

    def centre(m):
        ys, xs = np.nonzero(m)
        return np.array([xs.mean(), ys.mean()])

    out = dict(masks)
    for group in alike:
        keys = [k for k in group if k in masks and masks[k].any() and k in gt and gt[k].any()]
        if len(keys) < 2:
            continue
        got = [centre(masks[k]) for k in keys]
        want = [centre(gt[k]) for k in keys]
        cost = np.array([[float(np.sum((g - w) ** 2)) for w in want] for g in got])
        rows, cols = linear_sum_assignment(cost)
        for r, c in zip(rows, cols):
            out[keys[c]] = masks[keys[r]]
    return out


def _object_radius(mask: np.ndarray | None) -> float:
    """Radius (px) of the disc with an object's reference area; 8 px without a mask."""
    return math.sqrt(max(1.0, float(mask.sum())) / math.pi) if mask is not None else 8.0


def outline_share(L: np.ndarray, shape: np.ndarray, off: np.ndarray) -> float:
    """Share of the ring around `shape` (2 px, within `off`) that is an outline: darker than the shape
    AND than what lies just beyond it at the same place (2–5 px out, a local mean). A borderless arrow
    across a shadow or a dark floor tile is not outlined: there the ground beyond is as dark as the
    ground beside it."""
    ring = ME.dilate(shape, 2) & ~shape & off
    outer = ME.dilate(shape, 5) & ~ME.dilate(shape, 2) & off
    if not ring.any() or not outer.any():
        return 0.0
    L = L.astype(np.float32)
    w = cv2.GaussianBlur(outer.astype(np.float32), (0, 0), 3.0)
    beyond = cv2.GaussianBlur(L * outer, (0, 0), 3.0) / np.maximum(w, 1e-6)
    seen = ring & (w > 0.05)
    if not seen.any():
        return 0.0
    level = np.minimum(0.6 * float(np.median(L[shape])), beyond[seen] - 15.0)
    return float(np.mean(L[seen] < level))


def _orange_along(mask: np.ndarray, a: np.ndarray, b: np.ndarray) -> float:
    """Share of the straight path from a to b (image x, y) that lies on `mask`."""
    n = max(2, int(np.linalg.norm(b - a)))
    pts = a + np.outer(np.linspace(0.0, 1.0, n), b - a)
    x = np.clip(np.round(pts[:, 0] - 0.5).astype(int), 0, mask.shape[1] - 1)
    y = np.clip(np.round(pts[:, 1] - 0.5).astype(int), 0, mask.shape[0] - 1)
    return float(mask[y, x].mean())


def _touching_arrows(arrows: list, shape: tuple[int, int]) -> list[tuple[int, int]]:
    """Pairs of reference arrows whose drawn shafts touch each other (None entries are skipped)."""
    drawn = []
    for a in arrows:
        if a is None:
            drawn.append(None)
            continue
        m = np.zeros(shape, np.uint8)
        cv2.line(m, tuple(int(round(v)) for v in a["start"]), tuple(int(round(v)) for v in a["end"]), 1,
                 int(a.get("width", 4)) + 2)
        drawn.append(m.astype(bool))
    return [(i, j) for i in range(len(drawn)) for j in range(i + 1, len(drawn))
            if drawn[i] is not None and drawn[j] is not None and bool((drawn[i] & drawn[j]).any())]


def locate_object(ans: np.ndarray, ref: np.ndarray, mask: np.ndarray, radius: float,
                  seen: np.ndarray | None = None):
    """Best place of the reference object (pixels of `ref` under `mask`) in the answer within
    `radius` px: ((dx, dy), mean ΔE of the object's pixels there), or None. `seen` marks the answer
    pixels that show the scene (False under the answer's own drawn layer, e.g. an arrow across the
    object): the others take no part in the match or the ΔE."""
    ys, xs = np.nonzero(mask)
    if xs.size < 4:
        return None
    H, W = ref.shape[:2]
    x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
    tpl = np.ascontiguousarray(ref[y0:y1, x0:x1]).astype(np.float32)
    tm = np.ascontiguousarray(mask[y0:y1, x0:x1]).astype(np.float32)
    r = int(radius)
    sx0, sy0 = max(0, x0 - r), max(0, y0 - r)
    sx1, sy1 = min(W, x1 + r), min(H, y1 + r)
    win = np.ascontiguousarray(ans[sy0:sy1, sx0:sx1]).astype(np.float32)
    if win.shape[0] < tpl.shape[0] or win.shape[1] < tpl.shape[1]:
        return None
    if seen is None:
        res = cv2.matchTemplate(win, tpl, cv2.TM_SQDIFF, mask=np.repeat(tm[..., None], 3, axis=2))
        res = np.nan_to_num(res, nan=np.inf, posinf=np.inf)
    else:
        res = _partial_sqdiff(win - 128.0, tpl - 128.0, tm, seen[sy0:sy1, sx0:sx1].astype(np.float32))
    # prefer the smallest move among equally good places (deterministic tie-break)
    _, _, loc, _ = cv2.minMaxLoc(res)
    dx, dy = sx0 + loc[0] - x0, sy0 + loc[1] - y0
    sub = to_lab(ans[y0 + dy:y1 + dy, x0 + dx:x1 + dx])
    ref_lab = to_lab(ref[y0:y1, x0:x1])
    both = mask[y0:y1, x0:x1] if seen is None else mask[y0:y1, x0:x1] & seen[y0 + dy:y1 + dy, x0 + dx:x1 + dx]
    if not both.any():
        return None
    de = float(np.mean(np.linalg.norm(sub - ref_lab, axis=2)[both]))
    return (int(dx), int(dy)), de


def _partial_sqdiff(win: np.ndarray, tpl: np.ndarray, tm: np.ndarray, seen: np.ndarray) -> np.ndarray:
    """Mean squared difference of the template (weights `tm`) at every place of `win`, over the pixels
    the window shows (`seen`), as correlations: Σ s·m·(a − t)² = ⟨s·a², m⟩ − 2⟨s·a, m·t⟩ + ⟨s, m·t²⟩,
    in float64 FFTs (the three terms nearly cancel at a good place). Places that see less than a fifth
    of the template's pixels are ruled out (a small ball under its own arrow still shows more)."""
    from scipy.signal import fftconvolve

    def corr(img: np.ndarray, k: np.ndarray) -> np.ndarray:
        return fftconvolve(img, k[::-1, ::-1], mode="valid")

    win, tpl = win.astype(np.float64), tpl.astype(np.float64)
    m, sv = tm.astype(np.float64), seen.astype(np.float64)
    ssd = corr(sv, (m[..., None] * tpl * tpl).sum(axis=2))
    for c in range(win.shape[2]):
        ssd += corr(sv * win[..., c] ** 2, m) - 2.0 * corr(sv * win[..., c], m * tpl[..., c])
    n = corr(sv, m)
    out = np.maximum(ssd, 0.0) / np.maximum(n, 1.0)
    out[n < max(10.0, 0.2 * float(m.sum()))] = np.inf
    return out.astype(np.float32)


def _ocr_store(cache_dir: str | None) -> Path | None:
    import os

    if cache_dir and str(cache_dir).lower() in ("off", "none", "0", "false"):
        return None
    if cache_dir:
        return Path(cache_dir) / "ocr"
    base = os.environ.get("ORCHARD_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "orchard")
    return Path(base) / "ocr"


# ---------------------------------------------------------------------------------------------
# The judge
# ---------------------------------------------------------------------------------------------
@register_judge("programmatic")
class ProgrammaticJudge:
    name = "programmatic"

    def __init__(self, cases: str | None = None, segmenter: str = "classical", cache_dir: str | None = None,
                 **unknown: Any):
        if unknown:
            raise TypeError(f"unknown options for the programmatic judge: {sorted(unknown)}")
        # OCR readings (the references' above all) persist in `cache_dir`/ocr, by default the user's
        # cache folder, so that a suite's references are read once per machine; "off": memory only
        OCR.use_store(_ocr_store(cache_dir))
        self.cases_root = cases
        self.segmenter_name = segmenter
        self.segmenter = get_segmenter(segmenter)
        self._refs: dict[str, CaseRefs] = {}
        self._cases: dict[str, Any] = {}
        self._lock = threading.Lock()

    def config(self) -> dict[str, Any]:
        try:
            import rapidocr

            rv = getattr(rapidocr, "__version__", None)
        except ImportError:
            rv = None
        return {"version": VERSION, "segmenter": self.segmenter_name, "ocr": {"engine": "rapidocr", "version": rv,
                                                                          "params": OCR.PARAMS}}

    # -- case lookup ------------------------------------------------------------------------------
    def _case(self, request: JudgeRequest):
        facts = request.facts or {}
        if facts.get("case") is not None:
            return facts["case"]
        with self._lock:
            if request.case_id in self._cases:
                return self._cases[request.case_id]
        from ..cases import load_case, load_dataset

        if facts.get("case_dir"):
            case = load_case(facts["case_dir"])
        elif self.cases_root:
            ds = load_dataset(self.cases_root, case_ids=[request.case_id])
            if request.case_id not in ds.cases:
                raise KeyError(f"case {request.case_id!r} not found under {self.cases_root}")
            case = ds.cases[request.case_id]
        else:
            raise ValueError("the programmatic judge needs the case: facts['case'], facts['case_dir'] or the "
                             "judge option `cases` (dataset root)")
        with self._lock:
            self._cases[request.case_id] = case
        return case

    def refs(self, case) -> CaseRefs:
        key = f"{id(case)}:{case.case_id}"
        with self._lock:
            if key not in self._refs:
                self._refs[key] = CaseRefs(case)
            return self._refs[key]

    def score(self, request: JudgeRequest) -> JudgeResult:
        case = self._case(request)
        R = self.refs(case)
        size = R.size
        frames = [resize_rgb(np.asarray(f, dtype=np.uint8)[..., :3], size) for f in request.answer]
        if not frames:
            raise ValueError("no answer image")
        fn = {"perception_text": self._pt, "perception_graphic": self._pg, "formulation_text": self._ft,
              "formulation_graphic": self._fg, "deduction_video": self._ded_video,
              "deduction_keyframe": self._ded_keyframe}[request.rubric.name]
        scores, notes = fn(case, R, frames, request)
        out = {}
        for k in request.rubric.criteria:
            v = scores.get(k, NA)
            out[k] = NA if v is None or v == NA else float(min(1.0, max(0.0, v)))
        return JudgeResult(out, "; ".join(notes)[:2000], judge="programmatic")

    # =========================================================================================
    # Perception-Text
    # =========================================================================================
    def _pt(self, case, R: CaseRefs, frames, request):
        ans = frames[-1]
        notes: list[str] = []
        pt = R.pt()
        if pt is None:
            raise ValueError("the case has no Perception-Text reference image")
        diag = R.diag
        boxes = OCR.read_text(ans)
        lines = pt["lines"]
        ver = [i for i, l in enumerate(lines) if l.verifiable]
        # style, size and colour are compared at the answer's sharpness: the reference is blurred as
        # much as the answer is softer than it (lossy coding, resampling and blur thin and pale the
        # thresholded ink of both alike), so only a different drawing scores lower
        soft = matched_softness(ans, pt["image"], ME.dilate(pt["ink"], 3))
        sigma = max(soft)
        ref_at = softened(pt["image"], *soft)
        if sigma:
            notes.append(f"reference compared at the answer's sharpness (luma σ {soft[0]:g}, chroma σ {soft[1]:g} px)")
        # one-to-one matching of reference lines to answer boxes
        from scipy.optimize import linear_sum_assignment

        match: dict[int, int] = {}
        if ver and boxes:
            C = np.zeros((len(ver), len(boxes)))
            S = np.zeros_like(C)
            for a, i in enumerate(ver):
                for b, bx in enumerate(boxes):
                    S[a, b] = OCR.similarity(lines[i].text, bx.text)
                    d = math.dist(bx.center, ((lines[i].box[0] + lines[i].box[2]) / 2, (lines[i].box[1] + lines[i].box[3]) / 2))
                    C[a, b] = (1 - S[a, b]) + 2.0 * d / diag
            rr, cc = linear_sum_assignment(C)
            for a, b in zip(rr, cc):
                if S[a, b] >= 0.34:
                    match[ver[a]] = b
        content, pos, read, size_s, col, style = [], [], [], [], [], []
        quantities: list[float] = []   # per matched line: share of the reference's numbers read unchanged
        used_boxes = []
        for i, l in enumerate(lines):
            rc = ((l.box[0] + l.box[2]) / 2, (l.box[1] + l.box[3]) / 2)
            if l.verifiable:
                if i not in match:
                    content.append(0.0); pos.append(0.0); read.append(0.0); size_s.append(0.0); col.append(0.0); style.append(0.0)
                    continue
                bx = boxes[match[i]]
                used_boxes.append(bx.box)
                sim = OCR.similarity(l.text, bx.text)
                c = min(1.0, sim / max(l.ref_sim, 1e-6))
                kept = OCR.numbers_kept(l.ref_read or l.text, bx.text)
                conf = bx.score
                if kept < 1.0:
                    # a second reading of the line alone, magnified, before a number is called
                    # wrong: the full-page pass drops or misreads small glyphs of a re-coded image,
                    # while a changed value reads changed at any size
                    again = max(_read_crop(ans, bx.box), key=lambda r: OCR.similarity(l.text, r.text), default=None)
                    if again is not None:
                        c2 = min(1.0, OCR.similarity(l.text, again.text) / max(l.ref_sim, 1e-6))
                        k2 = OCR.numbers_kept(l.text, again.text)
                        if (k2, c2) > (kept, c):
                            c, kept, conf = c2, k2, again.score
                c = 1.0 if c >= 0.999 else c
                quantities.append(kept)
                p = _text_props(ans, _measured_box(bx.box, l.box), l.props.get("contrast"))
                content.append(c)
                pos.append(ME.ramp(math.dist(bx.center, rc), 0.006 * diag, 0.05 * diag))
                # a reading up to READ_CONFIDENT of the reference's confidence reads as well
                read.append(ME.ramp(conf / l.ref_conf, READ_CONFIDENT, 0.3)
                            * sharpness_score(p["sharp"], l.props["sharp"]) * c)
            else:
                hit = self._template(ans, pt["image"], l.box, 0.05 * diag)
                if hit is None:
                    content.append(0.0); pos.append(0.0); read.append(0.0); size_s.append(0.0); col.append(0.0); style.append(0.0)
                    continue
                ncc, box = hit
                used_boxes.append(box)
                c = ME.ramp(ncc, 0.9, 0.4)
                p = _text_props(ans, box, l.props.get("contrast"))
                content.append(c)
                bc = ((box[0] + box[2]) / 2, (box[1] + box[3]) / 2)
                pos.append(ME.ramp(math.dist(bc, rc), 0.006 * diag, 0.05 * diag) if c > 0 else 0.0)
                read.append(c * sharpness_score(p["sharp"], l.props["sharp"]))
            rp = l.props if sigma == 0 else _text_props(ref_at, l.box, l.props.get("contrast"))
            # a line's height is counted in whole rows (one row either way is the coding's), its
            # stroke weight moves by up to STROKE_NOISE with coding and resampling
            size_s.append(ME.log_ratio_score(p["height"], rp["height"], 1.5, within=1.0 + 1.0 / max(rp["height"], 1.0)))
            col.append(ME.colour_score(p["lab"], rp["lab"]))
            style.append(ME.log_ratio_score(p["density"], rp["density"], 1.6, within=STROKE_NOISE))
        # arrows
        arrow_res = {"axis": [], "velocity": []}
        used_arrow = np.zeros(ans.shape[:2], bool)
        ans_ink = ME.ink(ans)
        ans_lab = to_lab(ans)
        # arrows are searched for outside the layer's label boxes (stable, unlike OCR boxes, which can
        # swallow an arrow next to its axis letter)
        labels_px = pt["label_mask"]
        seeds = [a.seed or a for a in pt["arrows"]]
        ref_at_ink, ref_at_lab = (ME.ink(ref_at), to_lab(ref_at)) if sigma and seeds else (None, None)
        for a in pt["arrows"]:
            others = _other_colours(seeds, a.seed or a)
            if sigma:   # the reference's arrow measured at the answer's sharpness, by the same search
                mr = self._find_arrow(ref_at, ref_at_ink, ref_at_lab, labels_px, a.seed or a, diag, others)
                sr = ME.arrow_shape(mr, ref_at) if mr is not None else None
                a = a if sr is None else RefArrow(a.kind, a.object_id, mr, sr, a.seed or a)
            m = self._find_arrow(ans, ans_ink, ans_lab, labels_px, a.seed or a, diag, others)
            shp = ME.arrow_shape(m, ans) if m is not None else None
            if shp is not None:
                used_arrow |= ME.dilate(m, 3)
            arrow_res[a.kind].append((a, shp))

        def arrow_scores(items):
            if not items:
                return {k: NA for k in ("color", "style", "size", "position", "direction")}
            out = {k: [] for k in ("color", "style", "size", "position", "direction")}
            for a, s in items:
                if s is None:
                    for k in out:
                        out[k].append(0.0)
                    continue
                r = a.shape
                out["color"].append(ME.colour_score(s.lab, r.lab))
                out["style"].append(ME.ramp(abs(s.coverage - r.coverage), 0.05, 0.35))
                out["size"].append(0.5 * (ME.log_ratio_score(s.length, r.length, 1.6) + ME.log_ratio_score(s.width, r.width, 2.0)))
                out["position"].append(ME.ramp(float(np.linalg.norm(s.tail - r.tail)), 0.006 * diag, 0.05 * diag))
                out["direction"].append(ME.ramp(ME.angle_between(s.direction, r.direction), 3.0, 30.0))
            return {k: float(np.mean(v)) for k, v in out.items()}

        ax = arrow_scores(arrow_res["axis"])
        ve = arrow_scores(arrow_res["velocity"])
        # angles between the axes
        axes_items = arrow_res["axis"]
        if len(axes_items) >= 2:
            vals = []
            for i in range(len(axes_items)):
                for j in range(i + 1, len(axes_items)):
                    (ra, sa), (rb, sb) = axes_items[i], axes_items[j]
                    if sa is None or sb is None:
                        vals.append(0.0)
                        continue
                    d = abs(ME.angle_between(sa.direction, sb.direction) - ME.angle_between(ra.shape.direction, rb.shape.direction))
                    vals.append(ME.ramp(d, 3.0, 30.0))
            axes_angle = float(np.mean(vals))
        else:
            axes_angle = ax["direction"]
        # extra marks
        expl = ME.dilate(pt["ink"], 6) | ME.box_mask(ans.shape, used_boxes, pad=3) | used_arrow
        extra = ans_ink & ~expl
        ref_area = max(1, int(pt["ink"].sum()))
        # "only the reference's annotations" is credited for the annotations the answer shows: an empty
        # page has no extra marks, and no annotations either
        shown = [c > 0 for c in content] + [s is not None for items in arrow_res.values() for _, s in items]
        no_extra = ME.ramp(float(extra.sum()) / ref_area, 0.02, 0.5) * (float(np.mean(shown)) if shown else 1.0)
        white = ME.white_background(ans, ME.dilate(pt["ink"], 8))
        mean = lambda v: float(np.mean(v)) if v else 0.0  # noqa: E731
        if not lines:
            notes.append("no text lines in the reference")
        notes.append(f"{sum(1 for l in lines if l.verifiable)}/{len(lines)} lines judged by OCR, others by template")
        scores = {
            "text_font_match": NA,
            "text_style_match": mean(style) if lines else NA,
            "text_size_match": mean(size_s) if lines else NA,
            "text_color_match": mean(col) if lines else NA,
            "text_position_match": mean(pos) if lines else NA,
            # "every single annotation EXACTLY": a changed quantity is wrong content however few glyphs
            # it changes, so the worst line's share of unchanged numbers scales the mean similarity
            "text_content_match": mean(content) * min(quantities, default=1.0) if lines else NA,
            "text_readability": mean(read) if lines else NA,
            "axes_color_match": ax["color"], "axes_style_match": ax["style"], "axes_size_match": ax["size"],
            "axes_position_match": ax["position"], "axes_angle_match": axes_angle if axes_items else NA,
            "velocity_color_match": ve["color"], "velocity_style_match": ve["style"],
            "velocity_size_match": ve["size"], "velocity_position_match": ve["position"],
            "no_extra_annotations": no_extra, "white_background": white,
        }
        if not pt["has_layer"]:
            for k in [k for k in scores if k.startswith(("axes_", "velocity_"))]:
                scores[k] = NA
            notes.append("no annotation layer: arrow criteria not applicable")
        # the task is to lift the annotations off the scene: an answer that keeps the scene (the input
        # handed back) has not done it, however exactly its labels match. As a strict judge carries a
        # failed precondition into what depends on it, every criterion is scaled by the share of the
        # page that is white; the page itself is judged by white_background alone
        if white < 1.0:
            for k, v in scores.items():
                if k != "white_background" and v != NA:
                    scores[k] = v * white
            if white < 0.5:
                notes.append(f"the background is not white ({white:.2f} of the page): the scene was not removed")
        return scores, notes

    @staticmethod
    def _template(ans, ref, box, radius):
        H, W = ref.shape[:2]
        x0, y0 = max(0, int(box[0]) - 1), max(0, int(box[1]) - 1)
        x1, y1 = min(W, int(math.ceil(box[2])) + 1), min(H, int(math.ceil(box[3])) + 1)
        tpl = cv2.cvtColor(np.ascontiguousarray(ref[y0:y1, x0:x1]), cv2.COLOR_RGB2GRAY)
        if tpl.size == 0 or tpl.std() < 3:
            return None
        r = int(radius)
        sx0, sy0 = max(0, x0 - r), max(0, y0 - r)
        sx1, sy1 = min(W, x1 + r), min(H, y1 + r)
        win = cv2.cvtColor(np.ascontiguousarray(ans[sy0:sy1, sx0:sx1]), cv2.COLOR_RGB2GRAY)
        if win.shape[0] < tpl.shape[0] or win.shape[1] < tpl.shape[1] or win.std() < 1e-3:
            return None
        res = cv2.matchTemplate(win, tpl, cv2.TM_CCOEFF_NORMED)
        res = np.nan_to_num(res, nan=-1.0)
        _, mx, _, loc = cv2.minMaxLoc(res)
        bx = (sx0 + loc[0] + (box[0] - x0), sy0 + loc[1] + (box[1] - y0))
        return float(mx), (bx[0], bx[1], bx[0] + (box[2] - box[0]), bx[1] + (box[3] - box[1]))

    @staticmethod
    def _find_arrow(ans, ans_ink, ans_lab, ocr_mask, a: RefArrow, diag, others=()):
        ys, xs = np.nonzero(a.mask)
        pad = max(24, int(0.6 * a.shape.length))
        H, W = ans.shape[:2]
        # the search window around the reference arrow; everything is computed on it alone
        y0, y1 = max(0, ys.min() - pad), min(H, ys.max() + pad + 1)
        x0, x1 = max(0, xs.min() - pad), min(W, xs.max() + pad + 1)
        win = np.s_[y0:y1, x0:x1]
        lab, ink, boxes, ref_m = ans_lab[win], ans_ink[win], ocr_mask[win], a.mask[win]
        de = np.linalg.norm(lab - a.shape.lab, axis=2)
        # the arrow's colour as this image draws it: where the reference arrow lies, the ink of about
        # its hue (a codec's chroma subsampling pales a thin stroke; a gain shifts it)
        here = ME.dilate(ref_m, 1) & ink & (de < 55)
        if here.sum() >= 0.2 * a.shape.n:
            de = np.linalg.norm(lab - np.median(lab[here], axis=0), axis=2)
        # in the arrow's colour first (outside the masked boxes, then anywhere), any ink last; the
        # largest piece in the colour is grown through the ink of about its hue connected to it
        # (hysteresis): a codec pales a 1-px shaft far more than the head it leads to
        weak = ink & (de < ARROW_WEAK_DE)
        for other in others:   # ... nearer this arrow's colour than another arrow's
            weak &= de < np.linalg.norm(lab - other, axis=2)
        for cand, grow in ((ink & (de < 40) & ~boxes, weak & ~boxes), (ink & (de < 40), weak), (ink & ~boxes, None)):
            m = ME.largest_component(cand)
            if m.sum() >= 0.2 * a.shape.n:
                out = np.zeros((H, W), bool)
                out[win] = m if grow is None else ME.grown_through(m, grow | m)
                return out
        return None

    # =========================================================================================
    # Perception-Graphic
    # =========================================================================================
    def _pg(self, case, R: CaseRefs, frames, request):
        ans = frames[-1]
        notes: list[str] = []
        ref = _img(case, "perception_graphic")
        gt = case.reference_object_masks("perception_graphic")
        if ref is None or not gt:
            raise ValueError("the case has no Perception-Graphic reference and masks")
        diag = R.diag
        ann = R.annotation_masks()
        pt = R.pt()
        obj_union = np.zeros(ref.shape[:2], bool)
        for m in gt.values():
            obj_union |= m
        scores: dict[str, float] = {}
        if ann is not None:
            keep = ~ME.dilate(obj_union, 3)
            for key, crit in (("axes", "coord_axes"), ("velocity", "velocity_arrows"), ("text", "text_annotations")):
                m = ann.get(key)
                if m is None:
                    scores[crit] = NA
                    continue
                parts = [q & m & keep for q in ann["parts"][key]] or [m & keep]
                v = ME.remnant_by_parts(ans, ref, pt["image"], parts)
                scores[crit] = NA if v is None else v
        else:
            scores.update(coord_axes=NA, velocity_arrows=NA, text_annotations=NA)
            notes.append("no annotation reference: removal criteria not applicable")
        ctx = context_for_case(case, "perception_graphic")
        seg = self.segmenter.segment(ans, ctx)
        seg_union = np.zeros_like(obj_union)
        for m in seg.masks.values():
            seg_union |= m
        comp, vis, posl, found = [], [], [], 0
        for oid, g in gt.items():
            a = seg.masks.get(oid, np.zeros_like(g))
            if not g.any():
                continue
            if a.sum() < 0.15 * g.sum():
                comp.append(0.0); vis.append(0.0); posl.append(0.0)
                continue
            found += 1
            ya, xa = np.nonzero(a)
            yg, xg = np.nonzero(g)
            dy, dx = int(round(yg.mean() - ya.mean())), int(round(xg.mean() - xa.mean()))
            s = ME.shifted(a, dy, dx)
            comp.append(float(np.count_nonzero(s & g) / np.count_nonzero(g)))
            iou = ME.aligned_iou(a, g)
            colr = ME.colour_score(ME.median_lab(ans, a), ME.median_lab(ref, g), 25.0)
            tex = ME.log_ratio_score(ME.gradient_energy(ans, a) + 1.0, ME.gradient_energy(ref, g) + 1.0, 2.0)
            vis.append(float(np.mean([iou, colr, tex])))
            posl.append(ME.ramp(math.hypot(dx, dy), 0.005 * diag, 0.06 * diag))
        n = max(1, sum(1 for g in gt.values() if g.any()))
        raw = ME.ink(ans) & ~ME.dilate(seg_union, 4)
        if pt is not None:
            raw &= ~ME.dilate(pt["ink"], 4)
        from ..segment.classical import clean_mask

        raw = clean_mask(raw, open_edges=False)
        extra = float(raw.sum()) / max(1.0, float(obj_union.sum()))
        # object-sized blobs beyond the reference's: an extra object next to a real one is absorbed
        # by that object's segment, but it is one more blob than the reference has
        sizes = [int(g.sum()) for g in gt.values() if g.any()]
        floor = 0.3 * min(sizes) if sizes else 1
        away = ~ME.dilate(pt["ink"], 4) if pt is not None else np.ones(ref.shape[:2], bool)
        # counted on the reference by the same rule (an input label over an object splits both alike)
        ref_blobs = R.get("pg_blobs", lambda: _blobs(clean_mask(ME.ink(ref) & away, open_edges=False), floor))   # once per case
        surplus = max(0, _blobs(clean_mask(ME.ink(ans) & away, open_edges=False), floor) - ref_blobs)
        extra = max(extra, surplus / n)
        scores["objects_only_from_gt"] = (found / n) * ME.ramp(extra, 0.05, 0.5)
        scores["object_completeness"] = float(np.mean(comp)) if comp else 0.0
        scores["object_visual_match"] = float(np.mean(vis)) if vis else 0.0
        scores["object_position_match"] = float(np.mean(posl)) if posl else 0.0
        scores["white_background"] = ME.white_background(ans, ME.dilate(obj_union | seg_union, 6))
        notes += seg.notes
        return scores, notes

    # =========================================================================================
    # Formulation-Text
    # =========================================================================================
    def _ft(self, case, R: CaseRefs, frames, request):
        ans = frames[-1]
        notes: list[str] = []
        F = R.formulas()
        if F is None:
            raise ValueError("the case has no formula answer key")
        scale = 2.0 if max(ans.shape[:2]) <= 1280 else 1.0
        ls = OCR.logical_lines(OCR.lines(OCR.read_text(ans, scale=scale)))
        ls = [l for l in ls if OCR.normalise(l.text)]
        import re

        letter_idx = next((i for i, l in enumerate(ls)
                           if re.fullmatch(r"[\(\[]?([A-Da-d])[\.\):]?", l.text.replace(" ", ""))), None)
        eq_lines = [l for i, l in enumerate(ls) if i != letter_idx and "=" in l.text]
        scores: dict[str, float] = {}
        if letter_idx is not None:
            got = re.search(r"[A-Da-d]", ls[letter_idx].text).group(0).upper()
            scores["option_correct"] = 1.0 if got == F["letter"] else 0.0
            notes.append(f"option {got} (correct {F['letter']})")
        else:
            scores["option_correct"] = 0.0
            notes.append("no option letter found")
        vocab = F["vocab"]
        exp2, exp3 = F["line2"], F["line3"]
        consts = F["constants"]
        known = exp2.numbers() + (exp3.numbers() if exp3 is not None else [])
        l2 = MT.parse(MT.resolve_dots(eq_lines[0].text, known), vocab) if len(eq_lines) >= 1 else None
        l3 = MT.parse(MT.resolve_dots(eq_lines[1].text, known), vocab) if len(eq_lines) >= 2 else None
        # line 2
        if l2 is None:
            scores.update(formula_variables_correct=0.0, formula_constants_correct=0.0 if consts else NA,
                          formula_operators_correct=0.0)
        elif l2.ok and MT.system_match(l2, exp2) >= 0.999:
            scores.update(formula_variables_correct=1.0, formula_constants_correct=1.0 if consts else NA,
                          formula_operators_correct=1.0)
            notes.append("formula equivalent to the correct one")
        else:
            v, c, o = MT.element_scores(l2, exp2, vocab)
            scores["formula_variables_correct"] = v
            scores["formula_constants_correct"] = c if consts else NA
            scores["formula_operators_correct"] = o
            notes.append("formula differs from the correct one" + (f" ({l2.errors[0]})" if l2.errors else ""))
        # line 3
        annotated = sorted(F["annotated"])
        if exp3 is None:
            for k in ("substitution_all_replaced", "substitution_values_correct", "substitution_unreplaced_correct",
                      "substitution_constants_correct", "substitution_operators_correct"):
                scores[k] = NA
            notes.append("no reference substitution: substitution criteria not applicable")
        elif l3 is None:
            scores.update(substitution_all_replaced=0.0 if annotated else NA, substitution_values_correct=0.0,
                          substitution_unreplaced_correct=0.0 if exp3.symbols else NA,
                          substitution_constants_correct=0.0 if consts else NA, substitution_operators_correct=0.0)
        elif l3.ok and MT.system_match(l3, exp3) >= 0.999:
            # equivalence does not vouch for the values: with equal masses, say, any mass substituted
            # for both gives the same law; the numbers written must be the case's
            vals = MT.multiset_f1(MT.multiset_minus(l3.numbers(), consts), MT.multiset_minus(exp3.numbers(), consts))
            scores.update(substitution_all_replaced=1.0 if annotated else NA, substitution_values_correct=vals,
                          substitution_unreplaced_correct=1.0 if exp3.symbols else NA,
                          substitution_constants_correct=1.0 if consts else NA, substitution_operators_correct=1.0)
            notes.append("substitution equivalent to the reference" + ("" if vals >= 0.999 else ", other values"))
        else:
            in_formula = [s for s in annotated if s in exp2.symbols]
            nums = l3.numbers()
            if in_formula:
                left = [s for s in in_formula if s in l3.symbols]
                scores["substitution_all_replaced"] = (1.0 - len(left) / len(in_formula)) if nums else 0.0
            else:
                scores["substitution_all_replaced"] = NA
            exp_vals = MT.multiset_minus(exp3.numbers(), consts)
            got_vals = MT.multiset_minus(nums, consts)
            scores["substitution_values_correct"] = MT.multiset_f1(got_vals, exp_vals)
            scores["substitution_unreplaced_correct"] = MT.jaccard(l3.symbols, exp3.symbols) if exp3.symbols else NA
            scores["substitution_constants_correct"] = MT.recall(nums, consts) if consts else NA
            scores["substitution_operators_correct"] = MT.sequence_similarity(l3.operators(), exp3.operators())
            notes.append("substitution differs from the reference")
        n_lines = len(ls)
        first_ok = letter_idx == 0
        if n_lines == 3 and first_ok and len(eq_lines) == 2:
            fmt = 1.0
        elif n_lines == 0:
            fmt = 0.0
        else:
            fmt = ME.clip01(1.0 - abs(n_lines - 3) / 3.0) * (1.0 if first_ok else 0.5)
        scores["format_3_lines"] = fmt
        text_boxes = ME.box_mask(ans.shape, [l.box for l in ls], pad=4)
        scores["background_pure_white"] = ME.white_background(ans, text_boxes)
        notes.append(f"{n_lines} text lines")
        return scores, notes

    # =========================================================================================
    # Formulation-Graphic
    # =========================================================================================
    def _fg(self, case, R: CaseRefs, frames, request):
        import re

        ans = frames[-1]
        notes: list[str] = []
        diag = R.diag
        ref = _img(case, "formulation_graphic")
        gt = case.reference_object_masks("formulation_graphic")
        if ref is None or not gt:
            raise ValueError("the case has no Formulation-Graphic reference and masks")
        layer = R.fg_layer or {}
        layer_boxes = [l["box"] for l in layer.get("labels", [])]
        layer_arrows = {a.get("object_id"): a for a in layer.get("arrows", [])}
        layer_labels = {l.get("object_id"): l for l in layer.get("labels", [])}
        obj_union = np.zeros(ref.shape[:2], bool)
        for m in gt.values():
            obj_union |= m
        # the answer's layer: OCR and orange pixels
        ans_lab = to_lab(ans)
        orange_lab = to_lab(ORANGE[None, None, :])[0, 0]
        orange_de = np.linalg.norm(ans_lab - orange_lab, axis=2)
        orange, flat = orange_de < 30, orange_de < LAYER_FLAT_DE
        ref_lab = to_lab(ref)
        ref_orange_de = np.linalg.norm(ref_lab - orange_lab, axis=2)
        ref_orange, ref_flat = ref_orange_de < 30, ref_orange_de < LAYER_FLAT_DE
        # labels: the full frame (upscaled for small text), and the orange layer isolated as dark on white
        boxes = read_speed_labels(ans, len(case.target_state), places=layer_boxes)
        # labels OCR cannot spell out on the reference itself: there a bare number at the label's place
        # is the label (OCR's blind spot must not count against an answer)
        ref_boxes = R.get("fg_readings", lambda: read_speed_labels(ref, len(case.target_state), places=layer_boxes))
        blind = {oid for oid, l in layer_labels.items()
                 if not any(_label_rank(b.text) >= 2 and _overlaps(b.box, l["box"]) for b in ref_boxes)}
        # annotation removal: the input's annotations over the expected scene
        scores: dict[str, float] = {}
        pt = R.pt()
        annotated = _img(case, "annotated_first_frame")
        if pt is not None and annotated is not None:
            fg_layer_mask = ME.dilate(ref_orange, 6) | ME.box_mask(ref.shape, layer_boxes, pad=4)
            mask = pt["ink"] & ~ME.dilate(obj_union, 4) & ~fg_layer_mask & ~ME.dilate(orange, 4)
            first = _img(case, "condition_frame")
            cond_objs = case.reference_object_masks("condition_frame") if first is not None else {}
            for m in cond_objs.values():
                mask &= ~ME.dilate(m, 4)
            v = ME.remnant_removal(ans, ref, annotated, mask)
            scores["annotations_removed"] = NA if v is None else v
        else:
            scores["annotations_removed"] = NA
        # objects: each reference object (its pixels, minus the orange overlay) is searched for in the
        # answer by masked template matching; the best place gives position, the match gives appearance
        posl, app, cents = [], [], {}
        located = np.zeros(ref.shape[:2], bool)
        # where the reference's answer layer is drawn (its arrows' corridors): an object's own colour is
        # read outside it
        drawn_u8 = np.zeros(ref.shape[:2], np.uint8)
        for la in layer_arrows.values():
            cv2.line(drawn_u8, tuple(int(round(v)) for v in la["start"]), tuple(int(round(v)) for v in la["end"]), 1,
                     int(la.get("width", 4)) * 5)
        drawn = drawn_u8.astype(bool)
        on_objects = np.zeros(ref.shape[:2], bool)
        drawn_layer = ME.dilate(orange, 2) | (ME.dilate(orange, ARROW_EDGE_PX)
                                              & (ans_lab[..., 0] < 0.5 * ref_lab[..., 0]))
        for oid, g in gt.items():
            if not g.any():
                continue
            body = g & ~drawn
            orange_body = body.any() and float(np.mean(ref_orange[body])) > 0.25
            # the answer's own orange layer (an arrow across the object, grown 2 px, and a dark outline
            # round it) is no part of the object; an orange-looking object is matched whole, since its
            # pixels are orange too (only the layer's flat colour over it is left out of its template)
            hit = locate_object(ans, ref, g & ~(ref_flat if orange_body else ref_orange), 0.15 * diag,
                                seen=None if orange_body else ~drawn_layer)
            if hit is None:
                posl.append(0.0); app.append(0.0)
                continue
            (dx, dy), de = hit
            a = ME.shifted(g, dy, dx)
            on_objects |= a
            if orange_body:
                # an orange-looking object: its pixels must not pass for arrow pixels, except those of
                # the layer's own flat colour, which a shaded body hardly shows (its arrow across it)
                located |= a & ~flat
            ya, xa = np.nonzero(a)
            cents[oid] = np.array([xa.mean() + 0.5, ya.mean() + 0.5])
            quality = ME.ramp(de, 8.0, 30.0)
            posl.append(ME.ramp(math.hypot(dx, dy), 0.006 * diag, 0.06 * diag) * (1.0 if quality > 0 else 0.0))
            app.append(quality)
        scores["object_position_match"] = float(np.mean(posl)) if posl else 0.0
        scores["object_appearance_match"] = float(np.mean(app)) if app else 0.0
        # velocity arrows
        moving = [s for s in case.target_state if s.moving]
        # arrow pixels: orange outside the orange-looking objects. Every arrow starts at its object's
        # centre, so the orange is cut there: the collinear arrows of two bodies that move together
        # (one's tip at the other's centre) become one component each
        anchors = [cents.get(s.id, np.array(layer_arrows[s.id]["start"]) if s.id in layer_arrows
                             else np.array(s.center_image or (0, 0))) for s in moving]
        width = max([float(a.get("width", 4)) for a in layer_arrows.values()] or [4.0])
        cut = np.zeros(ref.shape[:2], np.uint8)
        for a in anchors:
            cv2.circle(cut, (int(round(a[0])), int(round(a[1]))), int(round(1.5 * width)), 1, -1)
        arrows_px = orange & ~ME.dilate(located, 1) & ~cut.astype(bool)
        orange_near = ME.dilate(orange, 1)
        n, lab, stats, _ = cv2.connectedComponentsWithStats(arrows_px.astype(np.uint8), connectivity=8)
        comps = [lab == i for i in range(1, n) if stats[i, cv2.CC_STAT_AREA] >= 20]
        if not moving:
            scores.update(arrow_is_borderless_orange=NA, arrow_from_center=NA, arrow_direction_match=NA)
        else:
            style, origin, direc = [], [], []
            shapes = [ME.arrow_shape(c, ans) for c in comps]
            cand = [i for i, sh in enumerate(shapes) if sh is not None and sh.length >= 20]
            from scipy.optimize import linear_sum_assignment

            assign: dict[int, int] = {}
            if cand:
                C = np.zeros((len(moving), len(cand)))
                for i, a in enumerate(anchors):
                    for j, ci in enumerate(cand):
                        ys, xs = np.nonzero(comps[ci])
                        near = float(np.min(np.hypot(xs + 0.5 - a[0], ys + 0.5 - a[1])))
                        end = min(np.linalg.norm(shapes[ci].tail - a), np.linalg.norm(shapes[ci].head - a))
                        C[i, j] = near + 0.5 * float(end)
                rr, cc = linear_sum_assignment(C)
                for i, j in zip(rr, cc):
                    if C[i, j] < 0.2 * diag:
                        assign[i] = cand[j]
                # bodies that move together (stuck after a perfectly inelastic collision) have arrows
                # that overlap in the reference itself; one orange shape then answers for both
                for i, j in _touching_arrows([layer_arrows.get(s.id) for s in moving], ref.shape[:2]):
                    for a, b in ((i, j), (j, i)):
                        if a not in assign and b in assign and C[a, cand.index(assign[b])] < 0.2 * diag:
                            assign[a] = assign[b]
                # two arrows drawn over one another (head to head between two bodies) make one shape
                # too: a body left without an arrow takes one that ends at its own centre
                for i, s in enumerate(moving):
                    if i in assign:
                        continue
                    reach = _object_radius(gt.get(s.id)) + 2 * width
                    for j in set(assign.values()):
                        shp = shapes[j]
                        if min(np.linalg.norm(shp.tail - anchors[i]), np.linalg.norm(shp.head - anchors[i])) <= reach:
                            assign[i] = j
                            break
            for si, s in enumerate(moving):
                best = assign.get(si)
                if best is None:
                    style.append(0.0); origin.append(0.0); direc.append(0.0)
                    continue
                c = comps[best]
                shp = shapes[best]
                if shp is None:
                    style.append(0.0); origin.append(0.0); direc.append(0.0)
                    continue
                # an F-G arrow starts at its object's centre: its tail is the end nearer to it (the
                # wider-end rule fails where the collinear arrows of two bodies overlap, two heads in one)
                if np.linalg.norm(shp.head - anchors[si]) < np.linalg.norm(shp.tail - anchors[si]):
                    shp = dataclasses.replace(shp, tail=shp.head, head=shp.tail)
                dark = outline_share(ans_lab[..., 0], c, ~orange & ~ME.dilate(on_objects, 3))
                style.append(ME.colour_score(shp.lab, orange_lab, 35.0) * ME.ramp(dark, 0.25, 0.7))
                centre = anchors[si]
                r = _object_radius(gt.get(s.id))
                # the tail may be hidden under the object: measure the centre's distance from the arrow's
                # axis and how far ahead of the centre the visible tail begins (up to one radius is fine)
                d = shp.direction
                rel = np.asarray(centre, float) - shp.tail
                along = float(rel @ d)                       # < 0: the centre lies behind the tail
                perp = abs(float(rel @ np.array([-d[1], d[0]])))
                gap = max(0.0, -along)
                if gap > r and _orange_along(orange_near, np.asarray(centre, float), shp.tail) >= 0.8:
                    gap = 0.0   # the shaft runs on to the centre: cut by another body's centre, not short
                origin.append(ME.ramp(perp, 0.3 * r + 1.5, r + 6) * ME.ramp(max(0.0, gap - r), 1.0, r + 6)
                              * (1.0 if along < 0.5 * shp.length else 0.0))
                want = np.array(s.arrow_direction_image) if s.arrow_direction_image else None
                direc.append(ME.ramp(ME.angle_between(shp.direction, want), 5.0, 60.0) if want is not None else 0.0)
            scores["arrow_is_borderless_orange"] = float(np.mean(style))
            scores["arrow_from_center"] = float(np.mean(origin))
            scores["arrow_direction_match"] = float(np.mean(direc))
        # speed labels
        labels = []   # (reading, value, the text after it or "bare", shown in the asked "v = …" format)
        for b in [piece for b in boxes for piece in _split_labels(b)]:
            text = b.text.replace("—", "-")
            if m := SPEED_LABEL.match(text) or UNSIGNED_LABEL.match(text):
                labels.append((b, _number(m), m.group(2).strip(), m.re is SPEED_LABEL))
            elif re.search(r"\d", b.text) and re.search(r"[vV]", b.text):
                labels.append((b, None, b.text, False))
            elif blind and (m := BARE_NUMBER.match(b.text)):
                labels.append((b, _number(m), "bare", True))
        present, value, unit = [], [], []
        used: set[int] = set()
        for s in case.target_state:
            anchor = np.array(layer_labels[s.id]["box"][:2]) + 0.5 * (np.array(layer_labels[s.id]["box"][2:]) - np.array(layer_labels[s.id]["box"][:2])) \
                if s.id in layer_labels else np.array(s.center_image or (0, 0))
            best, bd = None, None
            for li, (b, v, rest, _) in enumerate(labels):
                if li in used or (rest == "bare" and s.id not in blind):
                    continue
                d = math.dist(b.center, anchor)
                if bd is None or d < bd:
                    best, bd = li, d
            if best is None:
                present.append(0.0); value.append(0.0)
                continue
            used.add(best)
            b, v, rest, formatted = labels[best]
            present.append(1.0 if formatted else 0.5)
            want = float(s.speed or 0.0) if s.moving else 0.0
            if v is None:
                value.append(0.0)
            else:
                # the label is asked for with two decimals: a value right to that precision is exact
                err = max(0.0, abs(v - want) - 0.005) / max(abs(want), 0.05)
                value.append(ME.ramp(err, 0.01, 0.5))
            unit.append(0.0 if rest != "bare" and re.search(r"[a-zA-Z/]", rest or "") else 1.0)
        scores["velocity_label_present_and_format"] = float(np.mean(present)) if present else NA
        scores["velocity_value_match"] = float(np.mean(value)) if value else NA
        scores["velocity_label_no_unit"] = float(np.mean(unit)) if unit else NA
        notes.append(f"{len(labels)} speed labels, {len(comps)} orange components")
        return scores, notes

    # =========================================================================================
    # Deduction
    # =========================================================================================
    def _times(self, case, frames, facts):
        if facts.get("time_point") is not None:
            return [float(facts["time_point"])] * len(frames)
        if facts.get("times") is not None and len(facts["times"]) == len(frames):
            return [float(t) for t in facts["times"]]
        ts = facts.get("timestamps") or list(case.timestamps)
        if len(ts) == len(frames):
            return [float(t) for t in ts]
        T = case.physics_duration
        return [T * (k + 1) / len(frames) for k in range(len(frames))]

    def _answer_segmentations(self, case, frames, times, request) -> list:
        """The objective metrics' segmentation of these frames: handed over by the evaluator, else
        recomputed the same way (same context and chaining), so that the judge and the metrics see
        one set of masks."""
        from ..objective import answer_segmentations

        context = request.context or {}
        segs = context.get("segmentations")
        if segs is not None and len(segs) == len(frames):
            return list(segs)
        if context.get("sequence") is not None:   # one keyframe of an image-protocol answer
            seq_frames, seq_times, k = context["sequence"]
            # the metrics segmented the whole sequence (priors chain through it): so does the judge
            return [answer_segmentations(case, list(seq_frames), self.segmenter, seq_times, None,
                                         context.get("source_size"))[k]]
        return answer_segmentations(case, frames, self.segmenter, times, context.get("condition_frame"),
                                    context.get("source_size"))

    def _ded_frame(self, case, R: CaseRefs, frame, t, seg):
        """Per-frame measurements against the GT frame at t, with the answer frame's segmentation."""
        from ..canonical import gt_deduction

        gt = gt_deduction(case, [t])
        gframe, inst = gt.frames[0], gt.instances[0]
        gmasks = {o.id: (inst == o.instance_id) if inst is not None else np.zeros(gframe.shape[:2], bool)
                  for o in case.objects}
        shape = gframe.shape[:2]
        if seg is None:
            seg = Segmentation(masks={o.id: np.zeros(shape, bool) for o in case.objects},
                               foreground=np.zeros(shape, bool))
        # a copy: the segmentation may be shared with the metrics and with identical rollouts
        seg = replace(seg, masks=_pair_alike(seg.masks, seg.alike, gmasks))
        diag = R.diag
        out: dict[str, Any] = {"centroids": {}, "gt_centroids": {}, "sizes": {}}
        union = np.zeros(gframe.shape[:2], bool)
        for m in gmasks.values():
            union |= m
        # annotation remnants
        pt = R.pt()
        annotated = R.get("annotated_first_frame", lambda: _img(case, "annotated_first_frame"))
        if pt is not None and annotated is not None:
            # the input's ink away from the objects (those of the condition frame: read once per case)
            away = R.get("ded_ink_away", lambda: pt["ink"] & ~_grown_union(
                case.reference_object_masks("condition_frame").values(), 4, pt["ink"].shape))
            out["removed"] = ME.remnant_removal(frame, gframe, annotated, away & ~ME.dilate(union, 4))
        else:
            out["removed"] = None
        bg = ~ME.dilate(union, 6)
        agree = float(np.mean(np.linalg.norm(ME.lab_at(frame, bg) - ME.lab_at(gframe, bg), axis=1) < 12.0)) if bg.any() else 1.0
        if agree < 0.3:   # not the scene (blank, other camera): segmentation results are meaningless
            seg.masks = {k: np.zeros_like(v) for k, v in seg.masks.items()}
        out["background_agreement"] = agree
        cons, pos, iou = [], [], []
        seg_union = np.zeros_like(union)
        for m in seg.masks.values():
            seg_union |= m
        for o in case.objects:
            g = gmasks[o.id]
            a = seg.masks.get(o.id, np.zeros_like(g))
            if not g.any():
                continue
            ga = float(g.sum())
            yg, xg = np.nonzero(g)
            out["gt_centroids"][o.id] = np.array([xg.mean(), yg.mean()])
            out["sizes"][o.id] = math.sqrt(ga)
            if a.sum() < 0.15 * ga:
                cons.append(0.0); pos.append(0.0); iou.append(0.0)
                continue
            ya, xa = np.nonzero(a)
            c = np.array([xa.mean(), ya.mean()])
            out["centroids"][o.id] = c
            colr = ME.colour_score(ME.median_lab(frame, a), ME.median_lab(gframe, g), 25.0)
            cons.append(ME.log_ratio_score(float(a.sum()), ga, 2.0) * (0.5 + 0.5 * colr))
            pos.append(ME.ramp(float(np.linalg.norm(c - out["gt_centroids"][o.id])), 0.006 * diag, 0.08 * diag))
            inter = np.count_nonzero(a & g)
            iou.append(inter / max(1, np.count_nonzero(a | g)))
        extra = np.count_nonzero(seg.foreground & ~ME.dilate(seg_union, 3)) / max(1.0, float(union.sum()))
        out["consistency"] = (float(np.mean(cons)) if cons else 0.0) * ME.ramp(extra, 0.1, 1.5)
        out["position"] = float(np.mean(pos)) if pos else 0.0
        out["iou"] = float(np.mean(iou)) if iou else 0.0
        out["quality"] = ME.log_ratio_score(ME.laplacian_var(frame) + 1.0, ME.laplacian_var(gframe) + 1.0, 4.0)
        out["low_confidence"] = seg.low_confidence
        return out

    def _ded_keyframe(self, case, R: CaseRefs, frames, request):
        t = float(request.facts.get("time_point", case.timestamps[0]))
        seg = self._answer_segmentations(case, frames[-1:], [t], request)[0]
        m = self._ded_frame(case, R, frames[-1], t, seg)
        return {"gen_annotations_removed": NA if m["removed"] is None else m["removed"],
                "object_consistency": m["consistency"], "visual_quality": m["quality"],
                "object_position_match": m["position"], "physics_accuracy": 0.5 * (m["position"] + ME.ramp(m["iou"], 0.8, 0.2))}, \
            [f"t = {t:.3f}s"]

    def _ded_video(self, case, R: CaseRefs, frames, request):
        times = self._times(case, frames, request.facts or {})
        segs = self._answer_segmentations(case, frames, times, request)
        per = [self._ded_frame(case, R, f, t, s) for f, t, s in zip(frames, times, segs)]
        rem = [p["removed"] for p in per if p["removed"] is not None]
        cons = float(np.mean([p["consistency"] for p in per]))
        # consistency over time: the answer/GT area ratio should not jump between frames
        smooth = []
        for o in case.objects:
            ca = [p["centroids"].get(o.id) for p in per]
            cg = [p["gt_centroids"].get(o.id) for p in per]
            size = np.mean([p["sizes"][o.id] for p in per if o.id in p["sizes"]]) if any(o.id in p["sizes"] for p in per) else None
            if size is None:
                continue
            found = [c is not None for c, g in zip(ca, cg) if g is not None]
            frac = float(np.mean(found)) if found else 0.0
            excess = []
            for k in range(1, len(per) - 1):
                trip = [ca[k - 1], ca[k], ca[k + 1]]
                gtrip = [cg[k - 1], cg[k], cg[k + 1]]
                if any(x is None for x in trip) or any(x is None for x in gtrip):
                    continue
                ja = np.linalg.norm(trip[0] - 2 * trip[1] + trip[2])
                jg = np.linalg.norm(gtrip[0] - 2 * gtrip[1] + gtrip[2])
                excess.append(max(0.0, ja - jg) / max(size, 4.0))
            smooth.append(frac * (ME.ramp(float(np.mean(excess)), 0.05, 1.0) if excess else 1.0))
        phys = float(np.mean([0.5 * (p["position"] + ME.ramp(p["iou"], 0.8, 0.2)) for p in per]))
        return {"gen_annotations_removed": float(np.mean(rem)) if rem else NA,
                "object_consistency": cons,
                "visual_quality": float(np.mean([p["quality"] for p in per])),
                "motion_smoothness": float(np.mean(smooth)) if smooth else 0.0,
                "physics_accuracy": phys}, [f"{len(frames)} frames"]
