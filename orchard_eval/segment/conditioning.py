"""An answer frame read as a render of ours would be: in the case's camera, in the clean plate's
photometry, with what the frame does not show marked unobservable.

Every model's frames differ from our render in ways that are not physics: another exposure, tint or
tone curve, a shaking or reframed camera, the input's labels left on, the F-G answer's own arrows.
Rather than a rule per difference, the frame is brought into the case's frame of reference once and
the segmentation then reads it as it reads our render:

1. the camera (`registration`): the plate's textured pixels are tracked into the frame; a frame that
   moved is resampled into the case's camera, and the pixels it does not show become unobservable —
   masks are then compared with the GT in the case's camera (a reframed answer with the right
   physics is not charged for the framing);
2. the photometry (`photometry`): one tone curve per channel, fitted on the background, inverted;
3. drawn layers (`overlay`): the F-G answer's orange strokes, and the elements of the input's
   annotation layer the frame still shows, are unobservable.

Each step leaves a frame alone when it finds nothing to correct, so a render of ours is read as it
is. Objects on white (P-G) have no plate: their white is brought back to white.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import cv2
import numpy as np

from .appearance import scale_about
from .body_size import frame0_scales
from .overlay import answer_overlay_mask
from .photometry import ToneCurve, apply_inverse, channel_difference, fit_tone_curve
from .registration import Landmarks, Registration, aspect_start, grey, landmarks, opencv_affine, register, \
    resize_anisotropy

WHITE_SHIFT_LEVELS = 2.0
BLUR_STEPS = (0.6, 1.0, 1.5, 2.2)   # Gaussian σ (pixels) an answer's softness is matched with
BLUR_EXPLAINS = 0.8
BACKGROUND_LEVELS = 24       # RGB levels (largest channel) a background pixel may differ by and still be the case's
RIM_INTERIOR_AGREES = 0.9   # share of an object's interior frame 0 must show as the condition frame does
IN_PLACE_SCALES = (1.05, 1.1, 1.15, 1.2, 0.95, 0.9, 0.85)   # ... or as it does scaled this much about the object's centre
GROUND_LEVELS = 2 * BACKGROUND_LEVELS   # how far the ground behind a body may be from `ground_from_plate`'s estimate
BACKGROUND_CHANGED = 0.2     # share of frame 0's background beyond that: the answer shows another background


@dataclass
class View:
    image: np.ndarray                      # the frame in the case's camera and the plate's photometry
    unobservable: np.ndarray | None        # pixels the frame does not show (None: it shows every pixel)
    registration: Registration | None = None
    curve: ToneCurve | None = None
    notes: list[str] = field(default_factory=list)
    plate: np.ndarray | None = None        # the background to compare with (the plate, blurred like the answer)
    blur: float = 0.0
    reference: "AnswerReference | None" = None   # `plate` is this answer's own background
    own_background: bool = False           # `plate` was estimated from this frame alone
    softness: float = 0.0                  # Gaussian σ (px) by which the answer smears object rims
    # per body, how much larger the answer draws it (`AnswerReference.scales`); None for a single
    # image, where no frame 0 tells (the shape prior then reads the size from the body's look)
    scales: dict[str, float] | None = field(default_factory=dict)

    @property
    def registered(self) -> bool:
        return self.registration is not None and not self.registration.aligned


def _cached(ctx, key, compute):
    if key not in ctx.cache:
        ctx.cache[key] = compute()
    return ctx.cache[key]


def _to_case_camera(image: np.ndarray, ctx, marks: Landmarks | None, notes: list[str],
                    start: Registration | None = None, search: bool = True
                    ) -> tuple[np.ndarray, np.ndarray | None, Registration | None]:
    """The frame resampled into the case's camera where it moved (`registration`); the pixels it
    does not show come back as the plate's and are returned as hidden. `start`: the camera of the
    answer's frame 0 (`AnswerReference.registration`): where the fit starts, the camera kept unless
    a warp explains the frame clearly better, and the camera taken where the plate has nothing to
    register against. `search`: look for the camera globally where no start finds it (an answer's
    first frame, a single image; a video's later frames start from its frame 0's camera instead)."""
    size = (image.shape[1], image.shape[0])
    if marks is None:
        reg = start
    else:
        crop = aspect_start(ctx.answer_size, size)
        starts = [None if start is None else start.affine, None] + ([crop] if crop is not None else [])
        # the camera kept unless a warp explains the frame clearly better: frame 0's, else for an
        # answer of another aspect ratio the centred crop (a bare plate with a horizon cannot tell
        # a stretch along it from none)
        keep = start.affine if start is not None else crop
        reg = register(image, marks, starts, resize_anisotropy(ctx.answer_size, size), search, keep)
        if reg is None:
            reg = start
    if reg is None or reg.aligned:
        return image, None, reg
    out, seen = _warped(image, reg, ctx.background)
    notes.append(f"camera registered to the case's (moved up to {reg.moved_px:.1f} px)")
    return out, ~seen, reg


def _warped(image: np.ndarray, reg: Registration, plate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The frame in the case's camera, and the case pixels it shows (the others take the plate's)."""
    h, w = image.shape[:2]
    A = opencv_affine(reg.affine)
    # each case pixel x takes the answer's pixel at A·x
    out = cv2.warpAffine(image, A, (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                         borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    seen = cv2.warpAffine(np.ones((h, w), np.float32), A, (w, h), flags=cv2.INTER_LINEAR | cv2.WARP_INVERSE_MAP,
                          borderMode=cv2.BORDER_CONSTANT, borderValue=0.0) >= 0.999
    out[~seen] = plate[~seen]
    return out, seen


def _drawn_layers(image: np.ndarray, ctx, background: np.ndarray, notes: list[str]) -> np.ndarray | None:
    """Pixels under what the answer draws over the scene: the F-G answer's strokes and the elements
    of the input's annotation layer it still shows."""
    hidden = None
    if ctx.exclude_rgb:
        hidden = answer_overlay_mask(image, ctx.exclude_rgb, background=background)
    layer = ctx.input_layer
    if layer is not None:
        shown = layer.visible(image, background)
        if shown.any():
            hidden = _union(hidden, shown)
            notes.append(f"{int(shown.sum())} px of the input's annotation layer left on (unobservable)")
    return hidden


@dataclass
class AnswerReference:
    """What the answer's own condition frame (frame 0 of a Deduction video, which shows the input
    scene) says about how this model renders it: the tone curve from its levels to the case's,
    fitted on the whole frame — objects and shadows span a far wider range of levels than the
    background alone —, and the background its later frames are compared with: the answer's own
    where frame 0 shows the background (it carries the answer's codec, blur and texture), and where
    frame 0 shows the objects, their shadows or drawn labels, the clean plate if the answer's
    background is the case's, else what the answer's later frames show there (their median)."""
    curve: ToneCurve | None
    plate: np.ndarray
    background_changed: bool
    image: np.ndarray          # frame 0 in the case's camera and photometry
    notes: list[str]
    plate_lab: np.ndarray | None = None     # `plate` in Lab, once per answer
    registration: Registration | None = None  # the camera of frame 0
    softness: float = 0.0      # how far the answer smears the objects' rims (`rim_softness`)
    scales: dict[str, float] = field(default_factory=dict)   # bodies drawn at another size than the case's (`body_size.frame0_scales`)


def t0_objects(ctx) -> np.ndarray:
    """Where the condition frame shows the objects and their shadows (grown by 4 px)."""
    def make():
        plate, cond = ctx.background, ctx.reference_image
        region = channel_difference(cond, plate) > 10
        for m in ctx.reference_masks.values():
            if m is not None and m.shape == region.shape:
                region |= m
        return cv2.dilate(region.astype(np.uint8), np.ones((9, 9), np.uint8)) > 0
    return _cached(ctx, "t0_objects", make)


def t0_region(ctx) -> np.ndarray:
    """`t0_objects` and the input's annotation layer (grown by 2 px): what the plate shows there
    is not what an answer's frame 0 shows."""
    def make():
        region = t0_objects(ctx).copy()
        if ctx.input_layer is not None:
            region |= cv2.dilate(ctx.input_layer.drawn.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
        return region
    return _cached(ctx, "t0_region", make)


def answer_reference(ctx, marks: Landmarks | None) -> AnswerReference | None:
    """The answer's `AnswerReference`, built once per answer from `ctx.answer_condition`; None where
    there is none (an image answer) or it is not a frame of the case's scene."""
    if "reference" in ctx.answer_cache:
        return ctx.answer_cache["reference"]
    ref = None
    f0 = ctx.answer_condition
    cond, plate = ctx.reference_image, ctx.background
    if f0 is not None and cond is not None and f0.shape == plate.shape == cond.shape:
        notes: list[str] = []
        # frame 0 shows the input scene, objects included: registered against the condition
        # frame, whose objects pin the camera down where the plate alone is bare
        cond_marks = _cached(ctx, "condition_landmarks", lambda: landmarks(cond))
        out, hidden, reg0 = _to_case_camera(f0, ctx, cond_marks if cond_marks is not None else marks, notes)
        ctx.answer_cache["frame0_registration"] = reg0
        hidden = _union(hidden, _drawn_layers(out, ctx, cond, []))
        curve = fit_tone_curve(out, cond, None if hidden is None else ~hidden)
        if curve is not None and not curve.identity:
            out = apply_inverse(out, curve, cond)
            notes.append("the answer's tone curve, fitted on its frame 0, mapped back to the case's")
        elif curve is not None:
            curve = None
        in_place, n_objects = objects_in_place(out, ctx, hidden)
        fill = t0_region(ctx) if hidden is None else t0_region(ctx) | hidden
        d = channel_difference(out, plate)
        changed = bool(np.mean(d[~fill] > BACKGROUND_LEVELS) > BACKGROUND_CHANGED)
        own = out.copy()
        if not changed:
            # frame 0 stands for the background only where it shows the case's: an object the
            # answer put elsewhere at t = 0 (a wrong start, a reversed video) must not become
            # background
            fill = fill | (d > BACKGROUND_LEVELS)
            own[fill] = plate[fill]
        else:
            if n_objects and len(in_place) == n_objects:
                own = _behind_input_objects(ctx, marks, curve, out, hidden)
            else:
                own = _seen_later(ctx, marks, curve, fill, out)
            notes.append("the answer's background is not the case's: its own is used")
        soft = rim_softness(out, ctx, hidden)
        if soft:
            notes.append(f"the answer's rims are softer than the case's (σ {soft:g} px on frame 0)")
        scales = frame0_scales(out, own, ctx, hidden, in_place, soft)
        for oid, k in sorted(scales.items()):
            notes.append(f"{oid} drawn {k:.2f} × as large as the case's (frame 0)")
        ref = AnswerReference(curve, own, changed, out, notes, registration=reg0, softness=soft, scales=scales)
    ctx.answer_cache["reference"] = ref
    return ref


def objects_in_place(frame0: np.ndarray, ctx, hidden: np.ndarray | None) -> tuple[set[str], int]:
    """The objects the answer's frame 0 (in the case's camera and photometry) shows where the
    condition frame shows them — each one's interior agrees within BACKGROUND_LEVELS on
    RIM_INTERIOR_AGREES of its pixels (not hidden), as the condition frame shows it or scaled by one
    of IN_PLACE_SCALES about its centre (drawn larger or smaller) —, and how many objects the condition frame shows."""
    cond = ctx.reference_image
    parts = _cached(ctx, "condition_outlines", lambda: _outlines(ctx.reference_masks, cond.shape[:2]))
    diff = channel_difference(frame0, cond)
    shown = set()
    for oid, (_, interior) in parts.items():
        if _interior_agrees(diff, interior, hidden) or any(
                _interior_agrees(*_scaled_condition(frame0, cond, interior, k), hidden) for k in IN_PLACE_SCALES):
            shown.add(oid)
    return shown, len(parts)


def _interior_agrees(diff: np.ndarray, interior: np.ndarray, hidden: np.ndarray | None) -> bool:
    inside = interior if hidden is None else interior & ~hidden
    return bool(inside.sum() >= 10 and np.mean(diff[inside] <= BACKGROUND_LEVELS) >= RIM_INTERIOR_AGREES)


def _scaled_condition(frame0: np.ndarray, cond: np.ndarray, interior: np.ndarray, k: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """Frame 0's difference from the condition frame scaled `k` times about an object's interior
    centroid, and that interior scaled alike (a body frame 0 draws larger is still in place: its
    texture and shading spread outward, which the unscaled comparison reads as another body)."""
    ys, xs = np.nonzero(interior)
    centre = (float(xs.mean()) + 0.5, float(ys.mean()) + 0.5)
    A = scale_about(k, centre, centre)
    size = (cond.shape[1], cond.shape[0])
    scaled = cv2.warpAffine(cond, A, size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
    inside = cv2.warpAffine(interior.astype(np.uint8), A, size, flags=cv2.INTER_NEAREST) > 0
    return channel_difference(frame0, scaled), inside


def rim_softness(frame0: np.ndarray, ctx, hidden: np.ndarray | None) -> float:
    """How far the answer smears an object's colour across its outline (a codec's chroma
    subsampling and motion blocks, a soft render): the Gaussian σ of BLUR_STEPS whose blurred
    condition frame best matches the answer's frame 0 (in the case's camera and photometry) on the
    pixels within a pixel of the outlines of the objects frame 0 shows where the condition frame
    does (their interiors agree), 0 unless it explains them clearly better than the condition frame
    itself."""
    cond = ctx.reference_image
    parts = _cached(ctx, "condition_outlines", lambda: _outlines(ctx.reference_masks, cond.shape[:2]))
    diff = channel_difference(frame0, cond)
    rim = np.zeros(cond.shape[:2], bool)
    for outline, interior in parts.values():
        if np.mean(diff[interior] <= BACKGROUND_LEVELS) >= RIM_INTERIOR_AGREES:
            rim |= outline
    if hidden is not None:
        rim &= ~hidden
    if rim.sum() < 20:
        return 0.0
    a = frame0[rim].astype(np.float64)

    def residual(sigma: float) -> float:
        ref = cond if sigma == 0 else _cached(ctx, f"condition_blur_{sigma:g}", lambda: cv2.GaussianBlur(
            cond, (0, 0), sigma, borderType=cv2.BORDER_REPLICATE))
        return float(np.median(np.abs(a - ref[rim]).max(axis=1)))
    return _best_blur(residual, 0.5)


def _best_blur(residual, margin: float) -> float:
    """The σ of BLUR_STEPS with the smallest `residual(σ)`, 0 unless it is below BLUR_EXPLAINS of
    no blur's residual minus `margin` (levels)."""
    best, best_r, r0 = 0.0, None, None
    for sigma in (0.0,) + BLUR_STEPS:
        r = residual(sigma)
        if r0 is None:
            r0 = best_r = r
        elif r < best_r:
            best, best_r = sigma, r
    return best if best and best_r < BLUR_EXPLAINS * r0 - margin else 0.0


def _outlines(masks: dict, shape: tuple[int, int]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per object: the pixels within a pixel of its outline, and its interior (2 px in)."""
    out = {}
    k = np.ones((3, 3), np.uint8)
    for oid, m in masks.items():
        if m is not None and m.shape == shape and m.any():
            u = m.astype(np.uint8)
            interior = cv2.erode(u, np.ones((5, 5), np.uint8)) > 0
            if interior.sum() >= 10:
                out[oid] = ((cv2.dilate(u, k) > 0) & ~(cv2.erode(u, k) > 0), interior)
    return out


def _t0_bodies(ctx, within: np.ndarray) -> np.ndarray:
    """The condition frame's bodies grown by 3 px, inside `within`."""
    bodies = np.zeros(within.shape, bool)
    for m in ctx.reference_masks.values():
        if m is not None and m.shape == bodies.shape:
            bodies |= m
    return (cv2.dilate(bodies.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0) & within


def _seen_later(ctx, marks: Landmarks | None, curve: ToneCurve | None, fill: np.ndarray, frame0: np.ndarray
                ) -> np.ndarray:
    """The answer's own background when it is not the case's: per pixel the median over its frames
    (frame 0 included, each in the case's camera and photometry), which leaves out what moves;
    where frame 0 showed the objects, their shadows or drawn labels (`fill`), the median over the
    frames that no longer show frame 0 there (the objects left), and where every frame still shows
    frame 0 there, the bodies inpainted from around (a body that never moves). Where the frames
    disagree (something moves there), the median of those nearest the ground expected there
    (`_nearest_ground`): a body that rests on one spot through most of the answer (a reversed
    answer's landing, played first) is no background."""
    S, V = _later_frames(ctx, marks, curve, frame0)
    out = np.median(S, axis=0).astype(np.uint8)
    # what no frame shows: the objects at t = 0 inpainted from around; a shadow or a label there
    # keeps the median (a shadow is darker ground, not a body)
    bodies = _t0_bodies(ctx, fill)
    inpainted = cv2.inpaint(out, bodies.astype(np.uint8), 3, cv2.INPAINT_TELEA)
    out[bodies] = inpainted[bodies]
    if len(S) < 3:
        return out
    med = _valid_median(S, V)
    use = fill & (V.sum(axis=0) >= max(2, (len(S) - 1) // 3))
    out[use] = np.clip(med[use], 0, 255).astype(np.uint8)
    moving = (np.abs(S.astype(np.int16) - out[None].astype(np.int16)).max(axis=3) > BACKGROUND_LEVELS).any(axis=0)
    if moving.any():
        _nearest_ground(out, S, np.ones(S.shape[:3], bool), ground_from_plate(out, ctx, moving), moving)
    return out


def _nearest_ground(out: np.ndarray, S: np.ndarray, V: np.ndarray, around: np.ndarray, hole: np.ndarray) -> None:
    """Fill `out`'s `hole` in place: per pixel, of the stacked frames `S` that `V` marks, the median
    of those closest to the ground expected there (`around`: the plate in the answer's colours,
    `ground_from_plate`) within BACKGROUND_LEVELS of the closest, where the closest is within
    GROUND_LEVELS of it: the ground a body uncovers is seen at one value, another body that arrives
    there or its shadow at another. A pixel no frame shows near the expected ground keeps its value
    (the bodies there only change places). One frame will do: an answer may be sampled at a few
    times only."""
    S, V = S[:, hole], V[:, hole]                      # (frames, hole pixels, 3) and (frames, hole pixels)
    D = np.abs(S.astype(np.int16) - around[hole].astype(np.int16)[None]).max(axis=2)
    D[~V] = np.iinfo(np.int16).max
    dmin = D.min(axis=0, keepdims=True)
    member = V & (D <= dmin + BACKGROUND_LEVELS) & (dmin <= GROUND_LEVELS)
    med = _valid_median(S, member)
    use = member.any(axis=0)
    values = out[hole]
    values[use] = np.clip(med[use], 0, 255).astype(np.uint8)
    out[hole] = values


def _later_frames(ctx, marks: Landmarks | None, curve: ToneCurve | None, frame0: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Frame 0 and the answer's frames in the case's camera and photometry, stacked, and per frame
    the pixels where it no longer shows frame 0 (and shows the scene: not outside a moved view)."""
    stack, valid = [frame0], [np.zeros(frame0.shape[:2], bool)]
    start = ctx.answer_cache.get("frame0_registration")
    for f in ctx.answer_frames:
        v, hid, _ = _to_case_camera(f, ctx, marks, [], start, search=False)
        if curve is not None:
            v = apply_inverse(v, curve)
        stack.append(v)
        left = channel_difference(v, frame0) > BACKGROUND_LEVELS
        valid.append(left if hid is None else left & ~hid)
    return np.stack(stack), np.stack(valid)


def _valid_median(S: np.ndarray, V: np.ndarray) -> np.ndarray:
    """Per pixel the median of the stacked frames `S` over the frames `V` marks (NaN where none)."""
    F = S.astype(np.float32)
    F[~V] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # pixels no frame shows: all-NaN
        return np.nanmedian(F, axis=0)


PLATE_CLUSTERS = 12     # colour classes of the plate that `ground_from_plate` maps one by one


def plate_classes(ctx) -> np.ndarray:
    """Per pixel of the clean plate its colour class (k-means in Lab, PLATE_CLUSTERS classes, fixed
    seed), once per case: the plate's regions — sky, floor squares, a ramp's faces, fixture shadows."""
    def make():
        from scipy.cluster.vq import kmeans2, vq

        lab = cv2.cvtColor(ctx.background, cv2.COLOR_RGB2Lab).reshape(-1, 3).astype(np.float64)
        sample = np.unique(lab[::7], axis=0)
        n = min(PLATE_CLUSTERS, len(sample))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")     # a class k-means leaves empty is simply not used
            centres, _ = kmeans2(sample, n, minit="++", seed=0)
        return vq(lab, centres)[0].reshape(ctx.background.shape[:2]).astype(np.int32)
    return _cached(ctx, "plate_classes", make)


def ground_from_plate(image: np.ndarray, ctx, hole: np.ndarray) -> np.ndarray:
    """`image` with its `hole` filled by what the clean plate shows there, in the image's own
    colours: each hole pixel takes the mean colour of the image's pixels outside the hole that are
    of the same plate colour class (`plate_classes`) within a window wider than the hole. The fill
    follows the plate's edges — a ramp's rim, the horizon, a fixture's shadow — whatever material
    the answer gave each region; a class with no such pixel nearby falls back to the image
    inpainted from around."""
    if not hole.any() or hole.all():
        # nothing to fill, or nothing outside the hole to fill it from (a frame of noise moves
        # everywhere): the image as it is
        return image.copy()
    dist = cv2.distanceTransform(hole.astype(np.uint8), cv2.DIST_L2, 3)
    r = min(int(2 * float(dist.max())) + 8, max(image.shape[:2]))
    k = (2 * r + 1, 2 * r + 1)
    classes = plate_classes(ctx)
    out = cv2.inpaint(image, hole.astype(np.uint8), 5, cv2.INPAINT_TELEA)
    known = ~hole
    ys, xs = np.nonzero(hole)
    for c in np.unique(classes[hole]):
        m = (known & (classes == c)).astype(np.float32)
        den = cv2.boxFilter(m, cv2.CV_32F, k, normalize=False, borderType=cv2.BORDER_CONSTANT)
        sel = classes[ys, xs] == c
        y, x = ys[sel], xs[sel]
        ok = den[y, x] > 0.5
        if not ok.any():
            continue
        for ch in range(3):
            num = cv2.boxFilter(image[..., ch].astype(np.float32) * m, cv2.CV_32F, k, normalize=False,
                                borderType=cv2.BORDER_CONSTANT)
            out[y[ok], x[ok], ch] = np.clip(np.rint(num[y[ok], x[ok]] / den[y[ok], x[ok]]), 0, 255).astype(np.uint8)
    return out


def _behind_input_objects(ctx, marks: Landmarks | None, curve: ToneCurve | None, frame0: np.ndarray,
                          hidden: np.ndarray | None) -> np.ndarray:
    """The answer's own background when it is not the case's but its frame 0 shows the input scene
    (`objects_in_place`): frame 0 itself, except in the hole where it shows the objects, their
    shadows or drawn layers. There, per pixel, of the later frames that show something else than
    frame 0 (the bodies left), the median of those closest to the ground expected there — the
    plate in the answer's colours (`ground_from_plate`) — within BACKGROUND_LEVELS of the closest:
    the ground a body uncovers is seen at one value, another body that arrives there or its shadow
    at another. Where no frame uncovers a pixel: under the bodies frame 0 inpainted
    from around (a body that never moves hides nothing a segmentation needs; the inpainting only
    has to be smooth at its rim), elsewhere (a shadow, a label) frame 0."""
    hole = t0_objects(ctx) if hidden is None else t0_objects(ctx) | hidden
    out = frame0.copy()
    if not hole.any():
        return out
    around = ground_from_plate(frame0, ctx, hole)
    # what no frame uncovers keeps frame 0 (a shadow or a label there is darker ground, not a
    # body), except under the bodies themselves
    bodies = _t0_bodies(ctx, hole)
    out[bodies] = cv2.inpaint(frame0, bodies.astype(np.uint8), 3, cv2.INPAINT_TELEA)[bodies]
    S, V = _later_frames(ctx, marks, curve, frame0)
    _nearest_ground(out, S, V, around, hole)
    return out


def scene_view(image: np.ndarray, ctx, likely_object=None) -> View:
    """`image` (an in-scene answer frame at the case's resolution) brought into the case's camera and
    the plate's photometry (see the module docstring)."""
    notes: list[str] = []
    marks: Landmarks | None = _cached(ctx, "landmarks", lambda: landmarks(ctx.background))
    ref = answer_reference(ctx, marks) if ctx.answer_condition is not None else None
    background = ctx.background if ref is None else ref.plate
    out, hidden, reg = _to_case_camera(image, ctx, marks, notes, None if ref is None else ref.registration,
                                       search=ref is None)
    # drawn layers before the tone curve: a label left on is many pixels the plate does not explain,
    # and the answer's strokes are in the colour the model drew them
    hidden = _union(hidden, _drawn_layers(out, ctx, background, notes))
    curve = None
    if ref is not None and ref.curve is not None:
        out = apply_inverse(out, ref.curve, ctx.background)
        curve = ref.curve
        notes.append("tone curve of the answer's frame 0 mapped back to the case's")
    # what is left (another exposure in this frame: flicker; no frame 0 to learn from)
    rest = fit_tone_curve(out, background, None if hidden is None else ~hidden)
    if rest is not None and not rest.identity:
        out = apply_inverse(out, rest, background)
        curve = curve or rest
        notes.append("tone curve of the answer mapped back to the plate's")
        if ctx.exclude_rgb:
            hidden = _union(hidden, answer_overlay_mask(out, ctx.exclude_rgb, background=background))
    if ctx.input_layer is not None and _explains(out, background, hidden):
        # (only against a background that is the answer's: faint differences from another
        # background follow any pattern)
        faint = ctx.input_layer.faint(out, background, hidden)
        if faint.any():
            hidden = _union(hidden, faint)
            notes.append(f"{int(faint.sum())} px of the input's annotation layer fading (unobservable)")
    sigma = 0.0
    own = False
    if ref is None:
        sigma = matched_blur(out, ctx, marks)
        if sigma:
            background = blurred_plate(ctx, sigma)
            notes.append(f"answer softer than the plate: compared with the plate blurred by σ {sigma:g} px")
        if not _explains(out, background, _union(hidden, expected_region(ctx, out.shape[:2]))):
            background, own = single_frame_background(out, ctx, hidden, likely_object), True
            notes.append("the answer's background is not the case's: estimated from the answer itself")
    if hidden is not None and not hidden.any():
        hidden = None
    softness = ref.softness if ref is not None else sigma
    return View(out, hidden, reg, curve, notes, plate=background, blur=sigma, reference=ref, own_background=own,
                softness=softness, scales=None if ref is None else ref.scales)


def _explains(image: np.ndarray, background: np.ndarray, hidden: np.ndarray | None) -> bool:
    """Whether `background` is the frame's own: all but BACKGROUND_CHANGED of the pixels that are
    not hidden (nor where the objects are expected) within BACKGROUND_LEVELS of it."""
    sub = (slice(None, None, 3), slice(None, None, 3))      # a share: every third pixel each way will do
    differs = channel_difference(image[sub], background[sub]) > BACKGROUND_LEVELS
    judged = differs if hidden is None else differs[~hidden[sub]]
    if judged.size < 500:          # the objects fill the frame: nothing to judge the background by
        return True
    return float(np.mean(judged)) <= BACKGROUND_CHANGED


def expected_region(ctx, shape: tuple[int, int]) -> np.ndarray:
    """Where the case expects its objects in this frame: a disc of twice each object's radius on
    the condition frame around where it is expected at the frame's time."""
    region = np.zeros(shape, np.uint8)
    if ctx.expected_at is not None and ctx.time is not None:
        for oid, (u, v) in ctx.expected_at(ctx.time).items():
            m = ctx.reference_masks.get(oid)
            r = 2.0 * np.sqrt(float(m.sum()) / np.pi) if m is not None and m.any() else 0.05 * shape[0]
            cv2.circle(region, (int(round(u)), int(round(v))), int(round(r)), 1, -1)
    return region > 0


def single_frame_background(image: np.ndarray, ctx, hidden: np.ndarray | None, likely_object=None) -> np.ndarray:
    """The background of an answer frame whose background is not the case's, estimated from the frame
    alone: where the objects may be — around where the case expects each at this time (twice its
    radius on the condition frame) and wherever the frame shows an object's colours
    (`likely_object`) — and under drawn layers, the frame inpainted from around. An object drawn
    elsewhere in a colour not its own is taken for background."""
    region = expected_region(ctx, image.shape[:2]).astype(np.uint8)
    if likely_object is not None:
        region |= likely_object(image).astype(np.uint8)
    if hidden is not None:
        region |= hidden.astype(np.uint8)
    region = cv2.dilate(region, np.ones((7, 7), np.uint8)) > 0
    if not region.any():
        return image
    return ground_from_plate(image, ctx, region)


def blurred_plate(ctx, sigma: float) -> np.ndarray:
    return _cached(ctx, f"plate_blur_{sigma:g}", lambda: cv2.GaussianBlur(ctx.background, (0, 0), sigma,
                                                                        borderType=cv2.BORDER_REPLICATE))


def matched_blur(image: np.ndarray, ctx, marks: Landmarks | None) -> float:
    """How much softer the answer's edges are than the plate's (codecs and resampling blur, models
    render soft): the Gaussian σ of BLUR_STEPS whose blurred plate best matches the answer at the
    plate's landmarks (its sharpest pixels), 0 unless it explains them clearly better than the
    plate itself."""
    if marks is None:
        return 0.0
    xy = marks.xy[1]
    ix, iy = (xy[:, 0] - 0.5).astype(int), (xy[:, 1] - 0.5).astype(int)
    g = grey(image)[iy, ix].astype(np.float64)

    def residual(sigma: float) -> float:
        p = _cached(ctx, f"landmark_grey_{sigma:g}", lambda: grey(
            ctx.background if sigma == 0 else blurred_plate(ctx, sigma))[iy, ix].astype(np.float64))
        return float(np.median(np.abs(g - p - np.median(g - p))))
    return _best_blur(residual, 0.3)


def _union(a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
    if a is None:
        return b
    return a if b is None else a | b


def white_level(image: np.ndarray) -> np.ndarray | None:
    """Per channel, the level of an objects-on-white answer's background (its median: the objects
    cover a small share); None when the frame is not mostly light."""
    level = np.median(image[::2, ::2].reshape(-1, 3), axis=0).astype(np.float32)
    return level if level.min() >= 150 else None


def white_view(image: np.ndarray, ctx) -> View:
    """Objects on white: the background's level per channel brought back to white (an answer whose
    white is tinted or greyed), and the input's layer left on marked unobservable."""
    notes: list[str] = []
    out = image
    level = white_level(image)
    if level is not None and np.max(np.abs(level - 255.0)) > WHITE_SHIFT_LEVELS:
        out = np.clip(image.astype(np.float32) * (255.0 / level), 0, 255).astype(np.uint8)
        notes.append("white balance of the answer brought back to white")
    hidden = None
    layer = ctx.input_layer
    if layer is not None:
        shown = layer.visible(out, np.full_like(out, 255))
        if shown.any():
            hidden = shown
            notes.append(f"{int(shown.sum())} px of the input's annotation layer left on (unobservable)")
    return View(out, hidden, None, None, notes)
