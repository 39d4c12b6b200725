"""The answer families of the fidelity benchmark, and how one answer of a family is made.

A family is a declarative `Spec`: where the content comes from (the case's GT, or a counterfactual
re-render), what happens to time (re-timed videos; an F-G answer at the wrong time), to the camera
(shake, zoom, crop, another aspect ratio), to the look (photometry, flicker, blur, noise, codec,
other resolutions) and which layers are drawn over it (the input's annotation overlay left on, the
F-G answer's orange arrows and labels). Each answer comes with its `Truth`.

Kinds: `physics` (the answer is physically wrong in a known way), `appearance` (right physics,
another look), `camera` (right physics, another camera: a registered answer may score above the
image-space ideal) and `combined` (both).
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass, field

import numpy as np

from orchard_build.overlay import clip_arrow   # the benchmark draws answers as the build draws references

from ..cases import EvalCase
from ..metrics import mask_centroid, project_points
from . import transforms as X
from .truth import FrameTruth, Truth, apply_affine, field_of_view, warp_instances

DEDUCTION, PG, FG = "deduction", "perception_graphic", "formulation_graphic"
KINDS = ("physics", "appearance", "camera", "combined")
HIDING_OPACITY = 0.1
LAYER_RING_PX = 2        # segment.overlay.RING_PX: an input-layer element hides its strokes and this ring
ANSWER_FRINGE_PX = 1     # segment.overlay.FRINGE_PX: an answer stroke hides its anti-aliased fringe


@dataclass(frozen=True)
class Spec:
    source: str | None = None                 # counterfactual variant (`counterfactual.EDITS`); None: the GT
    timing: tuple | None = None               # ("speed", f) | ("freeze", a) | ("reverse",) | ("drop", k) | ("hold", k) | ("offset", s)
    time_shift: float = 0.0                   # F-G: the scene at t* + shift·T instead of t*
    shift: float = 0.0                        # P-G: the first object moved by this share of the width
    camera: tuple | None = None               # ("shake", px, deg) | ("zoom", f) | ("crop", share, ox, oy) | ("aspect", w, h)
    gain: tuple[float, float, float] = (1.0, 1.0, 1.0)
    offset: float = 0.0
    gamma: float = 1.0
    flicker: float = 0.0                      # per-frame gain drawn uniformly in 1 ± flicker
    overlay: str | None = None                # "input" (the input's labels on every frame) | "input_fade"
    recolour: bool = False                    # P-G: the objects recoloured on white
    blur: float = 0.0
    noise: float = 0.0
    size: tuple[int, int] | None = None       # written at this size (the evaluator resizes it back)
    codec: tuple | None = None                # ("h264", crf) | ("jpeg", q) | ("webp", q); default H.264 crf 18 / PNG
    vanish: float | None = None               # from this share of T on, the first object's upper half shows the plate

    @property
    def sources(self) -> tuple[str, ...]:
        return () if self.source is None else (self.source,)


@dataclass(frozen=True)
class Family:
    name: str
    kind: str
    subtrack: str
    spec: Spec
    about: str

    @property
    def protocol(self) -> str:
        return "video" if self.subtrack == DEDUCTION else "image"


def _f(name, kind, subtrack, about, **spec) -> Family:
    return Family(name, kind, subtrack, Spec(**spec), about)


def _image_appearance(prefix: str, subtrack: str) -> list[Family]:
    """The appearance changes both image subtracks are measured under."""
    return [_f(f"{prefix}/{name}", "appearance", subtrack, about, **kw) for name, about, kw in (
        ("jpeg90", "JPEG quality 90", {"codec": ("jpeg", 90)}),
        ("jpeg75", "JPEG quality 75", {"codec": ("jpeg", 75)}),
        ("jpeg50", "JPEG quality 50", {"codec": ("jpeg", 50)}),
        ("webp75", "WebP quality 75", {"codec": ("webp", 75)}),
        ("blur", "Gaussian blur σ 1.2 px", {"blur": 1.2}),
        ("noise", "Gaussian noise σ 6 levels", {"noise": 6.0}),
        ("gamma", "tone curve γ 0.7", {"gamma": 0.7}),
        ("white_balance", "white balance R × 1.15, B × 0.85", {"gain": (1.15, 1.0, 0.85)}),
        ("size_1280x720", "written at 1280×720", {"size": (1280, 720)}),
        ("size_480x270", "written at 480×270", {"size": (480, 270)}))]


def catalogue() -> list[Family]:
    """Every family, with the parameters it uses (one answer per case each)."""
    D, P, F = DEDUCTION, PG, FG
    fams = [
        # --- Deduction, physics errors --------------------------------------------------------
        _f("ded/retime_0.7x", "physics", D, "GT played at 0.7× speed", timing=("speed", 0.7)),
        _f("ded/retime_1.4x", "physics", D, "GT played at 1.4× speed, held at the end", timing=("speed", 1.4)),
        _f("ded/frozen_half", "physics", D, "GT frozen from T/2 on", timing=("freeze", 0.5)),
        _f("ded/reversed", "physics", D, "GT played backwards", timing=("reverse",)),
        _f("ded/dropped_frames", "physics", D, "every third frame dropped (the rest span T)", timing=("drop", 3)),
        _f("ded/stutter", "physics", D, "every second frame repeats the one before", timing=("hold", 2)),
        _f("ded/time_offset", "physics", D, "GT 0.15 s ahead, held at the end", timing=("offset", 0.15)),
        _f("ded/cf_gravity", "physics", D, "re-rendered with 0.6 g", source="gravity"),
        _f("ded/cf_velocity", "physics", D, "re-rendered with 0.7 × every initial velocity", source="velocity"),
        _f("ded/cf_restitution", "physics", D, "re-rendered with other restitution (0.3 / 0.9)", source="restitution"),
        _f("ded/cf_friction", "physics", D, "re-rendered with 0.4 × friction (0.3 where frictionless)", source="friction"),
        _f("ded/cf_mass", "physics", D, "re-rendered with the first object 2.5 × as dense", source="mass"),
        _f("ded/cf_start", "physics", D, "re-rendered with the first object's start displaced", source="start"),
        _f("ded/cf_size", "physics", D, "re-rendered with the first object 1.1 × as large", source="size"),
        _f("ded/cf_shrink", "physics", D, "re-rendered with the first object 0.9 × as large", source="shrink"),
        _f("ded/half_vanished", "physics", D, "the first object's upper half gone (the plate shown) from T/2 on",
           vanish=0.5),
        # --- Deduction, appearance with true physics ------------------------------------------
        _f("ded/h264_crf28", "appearance", D, "re-encoded H.264 crf 28", codec=("h264", 28)),
        _f("ded/h264_crf34", "appearance", D, "re-encoded H.264 crf 34", codec=("h264", 34)),
        _f("ded/h264_crf40", "appearance", D, "re-encoded H.264 crf 40 (heavily lossy)", codec=("h264", 40)),
        _f("ded/blur", "appearance", D, "Gaussian blur σ 1.2 px", blur=1.2),
        _f("ded/noise", "appearance", D, "Gaussian noise σ 6 levels", noise=6.0),
        _f("ded/gain", "appearance", D, "exposure × 1.25", gain=(1.25, 1.25, 1.25)),
        _f("ded/offset", "appearance", D, "brightness + 20 levels", offset=20.0),
        _f("ded/gamma", "appearance", D, "tone curve γ 0.7", gamma=0.7),
        _f("ded/white_balance", "appearance", D, "white balance R × 1.15, B × 0.85", gain=(1.15, 1.0, 0.85)),
        _f("ded/flicker", "appearance", D, "per-frame exposure 1 ± 12 %", flicker=0.12),
        _f("ded/overlay", "appearance", D, "the input's annotation overlay left on every frame", overlay="input"),
        _f("ded/overlay_fade", "appearance", D, "the overlay fading out between 0.5 T and 0.8 T", overlay="input_fade"),
        _f("ded/size_1280x720", "appearance", D, "written at 1280×720", size=(1280, 720)),
        _f("ded/size_480x270", "appearance", D, "written at 480×270", size=(480, 270)),
        _f("ded/cf_background", "appearance", D, "re-rendered with another ground material", source="background"),
        _f("ded/cf_recolour", "appearance", D, "re-rendered with recoloured objects", source="recolour"),
        # --- Deduction, another camera ----------------------------------------------------------
        _f("ded/shake", "camera", D, "camera shake: ±1.5 px and ±0.3° per frame", camera=("shake", 1.5, 0.3)),
        _f("ded/zoom", "camera", D, "framed 6 % tighter (centred)", camera=("zoom", 1.06)),
        _f("ded/crop_shift", "camera", D, "a 92 % window off-centre", camera=("crop", 0.92, 0.2, 0.8)),
        _f("ded/aspect_4x3", "camera", D, "a 4:3 centre crop written at 480×360", camera=("aspect", 4, 3),
           size=(480, 360)),
        # --- Deduction, both --------------------------------------------------------------------
        _f("ded/retime_0.7x+crf34", "combined", D, "0.7× speed, H.264 crf 34", timing=("speed", 0.7),
           codec=("h264", 34)),
        _f("ded/cf_start+overlay", "combined", D, "displaced start, overlay left on", source="start", overlay="input"),
        _f("ded/frozen_half+shake", "combined", D, "frozen from T/2, camera shake", timing=("freeze", 0.5),
           camera=("shake", 1.5, 0.3)),
        _f("ded/cf_gravity+flicker", "combined", D, "0.6 g, flicker, crf 28", source="gravity", flicker=0.12,
           codec=("h264", 28)),
        _f("ded/reversed+background", "combined", D, "played backwards, another ground", source="background",
           timing=("reverse",)),
        # --- Perception-Graphic ---------------------------------------------------------------------
        _f("pg/reference", "appearance", P, "the reference itself (PNG)"),
        _f("pg/shift_small", "physics", P, "the first object moved by 3 % of the width", shift=0.03),
        _f("pg/shift_large", "physics", P, "the first object moved by 12 % of the width", shift=0.12),
        *_image_appearance("pg", P),
        _f("pg/labels_on", "appearance", P, "the input's labels left on", overlay="input"),
        _f("pg/recolour", "appearance", P, "objects recoloured", recolour=True),
        _f("pg/shift_large+jpeg75", "combined", P, "moved 12 %, JPEG 75", shift=0.12, codec=("jpeg", 75)),
        _f("pg/shift_small+labels_on", "combined", P, "moved 3 %, labels left on", shift=0.03, overlay="input"),
        # --- Formulation-Graphic --------------------------------------------------------------------
        _f("fg/reference", "appearance", F, "the scene at t* with the answer drawn (PNG)"),
        _f("fg/time_early", "physics", F, "the scene at t* − 0.25 T", time_shift=-0.25),
        _f("fg/time_late", "physics", F, "the scene at t* + 0.25 T", time_shift=0.25),
        _f("fg/cf_start", "physics", F, "the first object started elsewhere", source="start"),
        _f("fg/cf_gravity", "physics", F, "re-rendered with 0.6 g", source="gravity"),
        _f("fg/cf_size", "physics", F, "the first object 1.1 × as large", source="size"),
        _f("fg/cf_shrink", "physics", F, "the first object 0.9 × as large", source="shrink"),
        *_image_appearance("fg", F),
        _f("fg/labels_on", "appearance", F, "the input's labels left on", overlay="input"),
        _f("fg/cf_background", "appearance", F, "another ground material", source="background"),
        _f("fg/cf_recolour", "appearance", F, "recoloured objects", source="recolour"),
        _f("fg/zoom", "camera", F, "framed 6 % tighter", camera=("zoom", 1.06)),
        _f("fg/crop_shift", "camera", F, "a 92 % window off-centre", camera=("crop", 0.92, 0.2, 0.8)),
        _f("fg/time_early+jpeg75", "combined", F, "t* − 0.25 T, JPEG 75", time_shift=-0.25, codec=("jpeg", 75)),
        _f("fg/cf_start+labels_on", "combined", F, "started elsewhere, labels left on", source="start",
           overlay="input"),
    ]
    names = [f.name for f in fams]
    assert len(names) == len(set(names))
    return fams


# ---------------------------------------------------------------------------------------------
# Sources: what a frame of the answer is made from
# ---------------------------------------------------------------------------------------------
class Source:
    """A rendered case whose frames, instance maps and states make answers: the case's own GT, or a
    counterfactual re-render of it (its instance ids mapped to the case's by object id)."""

    def __init__(self, case: EvalCase, target: EvalCase):
        self.case = case
        ids = {o.id: o.instance_id for o in target.objects}
        self.id_map = {o.instance_id: ids[o.id] for o in case.objects if o.id in ids}
        self._frames: dict[int, np.ndarray] = {}
        self.n_frames = case.n_gt_frames()

    def frame(self, i: int) -> np.ndarray:
        if not self._frames:
            self._frames = self.case.gt_frames(range(self.n_frames))
        return self._frames[min(max(i, 0), self.n_frames - 1)]

    def instances(self, i: int) -> np.ndarray:
        inst = self.case.gt_instances(min(max(i, 0), self.n_frames - 1))
        if inst is None:
            raise ValueError(f"{self.case.case_id}: no instance map for frame {i}")
        lut = np.zeros(max(int(inst.max()), max(self.id_map, default=0)) + 1, np.uint8)
        for a, b in self.id_map.items():
            lut[a] = b
        return lut[inst]

    def state(self, t: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        tracks = self.case.object_tracks()
        return tracks.at(t) if tracks is not None else ({}, {})


def frame_plan(n_frames: int, fps: float, timing: tuple | None) -> list[int]:
    """Source frame index of every answer frame (answer frame 0 = condition frame)."""
    n = n_frames - 1
    js = range(n_frames)
    if timing is None:
        return list(js)
    kind = timing[0]
    if kind == "speed":
        return [min(round(timing[1] * j), n) for j in js]
    if kind == "freeze":
        return [min(j, round(timing[1] * n)) for j in js]
    if kind == "reverse":
        return [n - j for j in js]
    if kind == "drop":
        return [j for j in js if j == 0 or j % timing[1] != 0]
    if kind == "hold":
        return [(j // timing[1]) * timing[1] for j in js]
    if kind == "offset":
        return [min(max(j + round(timing[1] * fps), 0), n) for j in js]
    raise ValueError(f"unknown timing {timing!r}")


def camera_affine(camera: tuple | None, size: tuple[int, int], rng: np.random.Generator) -> np.ndarray | None:
    """The camera change of one frame: 2×3, GT pixel → answer pixel (canonical frame)."""
    if camera is None:
        return None
    w, h = size
    kind = camera[0]
    if kind == "shake":
        dx, dy = rng.uniform(-camera[1], camera[1], 2)
        return X.shake_affine(dx, dy, rng.uniform(-camera[2], camera[2]), size)
    if kind == "zoom":
        cw, ch = w / camera[1], h / camera[1]
        return X.crop_affine(((w - cw) / 2, (h - ch) / 2, cw, ch), size)
    if kind == "crop":
        s, ox, oy = camera[1:]
        cw, ch = w * s, h * s
        return X.crop_affine((ox * (w - cw), oy * (h - ch), cw, ch), size)
    if kind == "aspect":
        a = camera[1] / camera[2]
        cw, ch = (min(w, h * a), min(h, w / a))
        return X.crop_affine(((w - cw) / 2, (h - ch) / 2, cw, ch), size)
    raise ValueError(f"unknown camera change {camera!r}")


def _rng(*keys) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32("/".join(map(str, keys)).encode()))


@dataclass
class Answer:
    """One answer ready to write: the frames (at their written size), how to write them, its truth."""
    frames: list[np.ndarray]
    truth: Truth
    fps: float = 24.0
    codec: tuple | None = None
    notes: list[str] = field(default_factory=list)


def _input_layer(case: EvalCase) -> tuple[np.ndarray, np.ndarray] | None:
    annotated, clean = case.image("annotated_first_frame"), case.image("condition_frame")
    if annotated is None or clean is None or annotated.shape != clean.shape:
        return None
    return X.input_overlay(annotated, clean)


def _overlay_strength(kind: str | None, t: float, T: float) -> float:
    if kind is None:
        return 0.0
    if kind == "input":
        return 1.0
    if kind == "input_fade":
        return float(np.clip((0.8 * T - t) / (0.3 * T), 0.0, 1.0))
    raise ValueError(f"unknown overlay {kind!r}")


def _arrows_at(src: Source, case: EvalCase, t: float, affine: np.ndarray | None, size: tuple[int, int],
               objects: np.ndarray | None = None):
    """The F-G answer for the state at t drawn the way the prompt asks: an arrow from each moving
    object's image centre along its image velocity, `v = X.XX` beside the tip; `v = 0` beside a body
    at rest. Labels go where they cover none of `objects` (the frame's instance map) and no other
    label, as the reference answers place theirs, where such a place is near."""
    pos, vel = src.state(t)
    w, h = size
    px = max(12, round(20 * h / 360))
    arrows, labels = [], []
    taken = np.zeros((h, w), bool) if objects is None else _grown(objects > 0, 3)
    for o in case.objects:
        if o.id not in pos:
            continue
        P, V = pos[o.id], vel[o.id]
        uv = project_points(P[None], case.intrinsic, case.extrinsic)[0]
        speed = float(np.linalg.norm(V))
        text = "v = 0" if speed < 0.01 else f"v = {speed:.2f}"
        start = apply_affine(tuple(uv), affine) if affine is not None else tuple(uv)
        if speed >= 0.01:
            ahead = project_points((P + 0.02 * V / speed)[None], case.intrinsic, case.extrinsic)[0]
            d = np.asarray(apply_affine(tuple(ahead), affine) if affine is not None else ahead) - np.asarray(start)
            d = d / max(float(np.linalg.norm(d)), 1e-9)
            end = clip_arrow(np.asarray(start), d, 0.11 * w, w, h)
            arrows.append((start, tuple(end)))
            anchor = end + d * 6
        else:
            anchor = np.asarray(start) + np.array([0.06 * w, 0.0])
        tw, th = X.label_box(text, px)
        spots = [(anchor[0] + dx, anchor[1] - th / 2 + dy) for r in (0, 12, 24, 40)
                 for dx, dy in ((r, 0), (-tw - r, 0), (0, -th - r), (0, r + th), (r, -th - r), (-tw - r, r + th))]
        place = None
        for x, y in spots:
            x, y = float(np.clip(x, 2, w - tw - 2)), float(np.clip(y, 2, h - th - 4))
            box = (slice(int(y), int(y + th) + 1), slice(int(x), int(x + tw) + 1))
            if not taken[box].any():
                place = (x, y)
                break
        x, y = place or (float(np.clip(spots[0][0], 2, w - tw - 2)), float(np.clip(spots[0][1], 2, h - th - 4)))
        taken[int(y):int(y + th) + 1, int(x):int(x + tw) + 1] = True
        labels.append(((x, y), text))
    return arrows, labels


def make_answer(fam: Family, case: EvalCase, sources: dict[str, Source]) -> Answer | None:
    """The answer of family `fam` for `case`; None where the family does not apply to the case (a
    counterfactual the build refused, no second object, a wrong time that is the right one)."""
    spec = fam.spec
    src = sources.get(spec.source or "gt")
    if src is None:
        return None
    size = case.frame_size
    rng = _rng(fam.name, case.case_id)
    layer = _input_layer(case) if spec.overlay else None
    if spec.overlay and layer is None:
        return None
    fps, T = float(case.gt_fps), float(case.physics_duration)

    if fam.subtrack == PG:
        return _pg_answer(fam, case, rng, layer)

    if fam.subtrack == FG:
        t = float(np.clip(case.target_time + spec.time_shift * T, 0.0, T))
        i = case.gt_index(t)
        if spec.time_shift and i == case.gt_index(case.target_time):
            return None
        plan, times = [i], [i / fps]
    else:
        plan = frame_plan(src.n_frames, fps, spec.timing)
        times = [j * T / max(len(plan) - 1, 1) for j in range(len(plan))]   # answer-frame times
    frames, truths, regs = [], [], []
    plate = None
    for k, (i, t_ans) in enumerate(zip(plan, times)):
        img = src.frame(i)
        g = spec.gain
        if spec.flicker:
            f = 1.0 + rng.uniform(-spec.flicker, spec.flicker)
            g = tuple(x * f for x in g)
        if g != (1.0, 1.0, 1.0) or spec.offset or spec.gamma != 1.0:
            img = X.photometric(img, g, spec.offset, spec.gamma)
        A = camera_affine(spec.camera, size, rng)
        if A is not None:
            img = X.warp(img, A, size)
        inst = src.instances(i)
        if spec.vanish is not None and t_ans >= spec.vanish * T:
            if plate is None:
                plate = case.clean_plate()      # read once per answer
            img, inst = _half_vanished(img, inst, case.objects[0].instance_id, plate)
        true_inst = inst if A is None else warp_instances(inst, A, size)
        hidden = np.zeros((size[1], size[0]), bool)
        strength = _overlay_strength(spec.overlay, t_ans, T)
        if strength > 0:
            rgb, alpha = layer
            img = X.composite(img, rgb, alpha * strength)
            # drawn at a tenth of its opacity or more, a layer hides what lies under it, and the
            # ring of LAYER_RING_PX around its strokes (the rule `orchard-eval` applies to what it finds)
            hidden |= _grown(alpha * strength >= HIDING_OPACITY, LAYER_RING_PX)
        if fam.subtrack == FG:
            arrows, labels = _arrows_at(src, case, i / fps, A, size, true_inst)
            rgb, alpha = X.answer_overlay(size, arrows, labels)
            img = X.composite(img, rgb, alpha)
            # a stroke hides the pixels it covers at least half, and their anti-aliased fringe
            hidden |= _grown(alpha >= 0.5, ANSWER_FRINGE_PX)
        if spec.blur:
            img = X.blur(img, spec.blur)
        if spec.noise:
            img = X.noise(img, spec.noise, rng)
        centres = _centres(src, case, i / fps, true_inst, A)
        if spec.vanish is not None and t_ans >= spec.vanish * T:
            # what is left of a body that partly vanished is no longer that rigid body: its centre is
            # the centroid of the matter the answer still shows (its drawn pixels), so the jump of
            # that centre when the half vanishes is the motion the answer shows
            first = case.objects[0]
            if centres.get(first.id) is not None:
                centres[first.id] = mask_centroid(true_inst == first.instance_id)
        truths.append(FrameTruth(true_inst, hidden if hidden.any() else None, centres))
        if A is not None:
            inv = np.linalg.inv(np.vstack([A, [0, 0, 1]]))[:2]
            unseen = ~field_of_view(inv, size, size)     # GT pixels the answer does not show
            back = warp_instances(hidden.astype(np.uint8), inv, size) > 0 if hidden.any() else np.zeros_like(hidden)
            regs.append(FrameTruth(inst, unseen | back, _centres(src, case, i / fps, inst, None)))
        frames.append(_write_size(img, spec, fam))
    truth = Truth(truths, regs or None)
    return Answer(frames, truth, fps, spec.codec)


def _half_vanished(img: np.ndarray, inst: np.ndarray, instance_id: int, plate: np.ndarray | None
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The frame with the object's pixels above its centre row, and its blended rim there, showing
    the clean plate instead (a body that partly vanishes); its instance map to match."""
    obj = inst == instance_id
    if plate is None or plate.shape != img.shape or not obj.any():
        return img, inst
    rows = np.arange(inst.shape[0])[:, None] < np.nonzero(obj)[0].mean()
    gone = _grown(obj & rows, 1) & rows & ((inst == 0) | obj)
    img, inst = img.copy(), inst.copy()
    img[gone], inst[gone] = plate[gone], 0
    return img, inst


def _grown(mask: np.ndarray, px: int) -> np.ndarray:
    import cv2

    k = 2 * px + 1
    return cv2.dilate(mask.astype(np.uint8), np.ones((k, k), np.uint8)) > 0


def _write_size(img: np.ndarray, spec: Spec, fam: Family) -> np.ndarray:
    out = X.resize(img, spec.size) if spec.size else img
    if spec.codec and spec.codec[0] in ("jpeg", "webp"):
        out = X.image_codec(out, spec.codec[0], spec.codec[1])
    return out


def _centres(src: Source, case: EvalCase, t: float, inst: np.ndarray, affine: np.ndarray | None
             ) -> dict[str, tuple[float, float] | None]:
    """True image centre per object at source time t (None where the frame does not show it)."""
    pos, _ = src.state(t)
    out: dict[str, tuple[float, float] | None] = {}
    for o in case.objects:
        if o.id not in pos or not (inst == o.instance_id).any():
            out[o.id] = None
            continue
        uv = tuple(float(x) for x in project_points(pos[o.id][None], case.intrinsic, case.extrinsic)[0])
        out[o.id] = apply_affine(uv, affine) if affine is not None else uv
    return out


def _pg_answer(fam: Family, case: EvalCase, rng: np.random.Generator, layer) -> Answer | None:
    spec = fam.spec
    img = case.image("perception_graphic")
    inst = case.label_map("perception_graphic")
    if img is None or inst is None:
        return None
    if spec.shift:
        first = case.objects[0].instance_id
        img, inst = X.shift_on_white(img, inst, first, int(round(spec.shift * case.frame_size[0])),
                                     int(round(0.5 * spec.shift * case.frame_size[1])))
    if spec.recolour:
        img = X.recolour_on_white(img, np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0]], float))
    if spec.gain != (1.0, 1.0, 1.0) or spec.offset or spec.gamma != 1.0:
        img = X.photometric(img, spec.gain, spec.offset, spec.gamma)
    hidden = None
    if layer is not None:
        rgb, alpha = layer
        img = X.composite(img, rgb, alpha)
        hidden = _grown(alpha > 0, LAYER_RING_PX)
    if spec.blur:
        img = X.blur(img, spec.blur)
    if spec.noise:
        img = X.noise(img, spec.noise, rng)
    truth = Truth([FrameTruth(inst, hidden, {})])
    return Answer([_write_size(img, spec, fam)], truth, codec=spec.codec)
