"""Detection of the answer overlay the Formulation-Graphic prompt requires: an orange velocity arrow
from each moving object's centre and a bold orange `v = X.XX` label (colour `ANSWER_ORANGE`).

Pixels under that overlay are unobservable: the prompt asks for the arrow to start at the object's
centre, so it necessarily hides part of the object. `answer_overlay_mask` finds them in an answer
image, the same way for every model:

* seeds: pixels within `SEED_TOLERANCE` (RGB distance) of the answer colour; drawn annotations are
  flat colour, shaded objects (even orange ones) rarely hit it that closely;
* strokes only: a connected group of seeds counts when it is shaped like an arrow or text, i.e. its
  largest inscribed disc has a radius of at most `max(4, MAX_STROKE_RADIUS · height)` pixels (arrow
  heads included); a large filled orange area is not an annotation;
* a codec's smear: pixels beside a stroke, and thin lines on their own, that read as the answer colour
  blended with what lies beside them (the frame `BESIDE_PX` out, filled in under them): over the
  plate that is the plate; over a body it is the body, so a band of an orange body's shading, thin
  as a text stroke, is not taken for one;
* the anti-aliased fringe: the accepted strokes are grown by `FRINGE_PX` pixels, `BLOCKY_FRINGE_PX`
  in a strongly block-coded image (`blockiness`), whose codec smears the colour further;
* a cap: when the accepted overlay covers more than `MAX_FRACTION` of the image, nothing is treated
  as overlay (an answer cannot hide its objects by painting over them).
"""
from __future__ import annotations

import cv2
import numpy as np

from .photometry import channel_difference

ANSWER_ORANGE = (255, 140, 0)
SEED_TOLERANCE = 28.0
MAX_STROKE_RADIUS = 0.03
FRINGE_PX = 1
BLOCKY_FRINGE_PX = 4     # ... in an image with strong block artefacts (JPEG at q ≈ 50 bleeds a stroke's colour up to 4 px)
BLOCKY = 1.5             # `blockiness` above which an image counts as strongly block-coded
MAX_FRACTION = 0.04
MIN_SEED_AREA = 3
BLEND_CONTRAST = 60.0      # RGB distance between the answer colour and the background for a blend to tell
BLEND_STROKE_RADIUS = 2.5  # largest inscribed radius (px) of a line found by its blend alone (a text stroke)
BLEND_OFF_LINE = 0.3       # distance from the blend line (share of that contrast) a blended pixel may have
BESIDE_PX = 4              # what lies beside a stroke is read this far out (beyond a codec's smear)


def answer_overlay_mask(rgb: np.ndarray, colours: tuple[tuple[int, int, int], ...] = (ANSWER_ORANGE,),
                        tolerance: float = SEED_TOLERANCE, background: np.ndarray | None = None) -> np.ndarray:
    """Boolean (H, W) mask of the answer's drawn arrows and labels (see the module docstring).
    `background`: what lies under the strokes where known (the clean plate); a pixel is then also a
    seed where it reads as at least half the answer colour blended with it — a thin stroke that a
    codec has smeared into its surroundings (JPEG halves the chroma resolution) keeps that blend."""
    rgb = np.asarray(rgb)
    h, w = rgb.shape[:2]
    out = np.zeros((h, w), bool)
    if not colours:
        return out
    img = rgb[..., :3].astype(np.int32)
    exact = np.zeros((h, w), bool)
    for c in colours:
        exact |= np.sum((img - np.asarray(c, np.int32)) ** 2, axis=2) <= tolerance * tolerance
    frame = img.astype(np.float32)
    blended = np.zeros((h, w), bool)
    if background is not None and background.shape == rgb.shape:
        blended = _blended_any(frame, background.astype(np.float32), colours)
    rmax = max(4.0, MAX_STROKE_RADIUS * h)
    strokes = _strokes(exact, rmax)
    if blended.any():
        # what a codec smeared (JPEG keeps the chroma at half resolution): pixels beside a stroke
        # found by colour that read as its blend with the background, and thin lines of such blends
        # on their own (text no pixel of which kept the colour). Thin only — a body of a like
        # colour (an orange ball's lit face) reads as such a blend with the plate all over
        near = cv2.dilate(strokes.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
        alone = _strokes(blended & ~near, BLEND_STROKE_RADIUS)
        # a stroke differs from what lies beside it, a body's shading does not: the band where an
        # orange ball's shading passes through the blend is thin, yet the ball beside it (the frame
        # a few pixels out, filled in under the candidates) explains it as well as it explains itself
        beside = _beside(rgb, strokes | alone)
        ys, xs = np.nonzero(blended)        # the test is per pixel: read where it can still say yes
        blended[ys, xs] = _blended_any(frame[ys, xs][:, None], beside[ys, xs][:, None], colours)[:, 0]
        grown = strokes | (blended & near)
        # a stroke with its fringe is still a stroke; what grew thick was a body of the colour, with
        # the codec's odd pixel of the exact colour in it
        strokes = _strokes(grown, rmax) | _strokes(blended & alone, BLEND_STROKE_RADIUS)
    if not strokes.any():
        return out
    k = 2 * (BLOCKY_FRINGE_PX if blockiness(rgb) > BLOCKY else FRINGE_PX) + 1
    out = cv2.dilate(strokes.astype(np.uint8), np.ones((k, k), np.uint8)) > 0
    if out.mean() > MAX_FRACTION:
        return np.zeros((h, w), bool)
    return out


def blockiness(rgb: np.ndarray) -> float:
    """How strongly an image shows an 8 × 8 block code (JPEG, and the intra blocks of video codecs):
    the mean brightness step across the 8-pixel grid's lines over the mean step elsewhere, across
    columns and rows (≈ 1 for a render or a resampled image; measured on F-G answers: PNG ≤ 1.16,
    JPEG quality 90 median 1.19, 75 median 1.42, 50 median 1.68)."""
    g = cv2.cvtColor(np.ascontiguousarray(rgb[..., :3], dtype=np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)
    ratios = []
    for d in (np.abs(np.diff(g, axis=1)).mean(axis=0), np.abs(np.diff(g, axis=0)).mean(axis=1)):
        on = (np.arange(d.size) % 8) == 7
        if on.any() and (~on).any():
            ratios.append(float(d[on].mean()) / max(1e-6, float(d[~on].mean())))
    return float(np.mean(ratios)) if ratios else 1.0


def _strokes(seeds: np.ndarray, rmax: float, min_area: int = MIN_SEED_AREA) -> np.ndarray:
    """The connected groups of seeds shaped like strokes: largest inscribed radius at most `rmax`,
    at least `min_area` pixels."""
    if not seeds.any():
        return seeds
    n, labels, stats, _ = cv2.connectedComponentsWithStats(seeds.astype(np.uint8), connectivity=8)
    dist = cv2.distanceTransform(np.pad(seeds, 1).astype(np.uint8), cv2.DIST_L2, 5)[1:-1, 1:-1]
    inscribed = np.zeros(n, np.float32)
    np.maximum.at(inscribed, labels.ravel(), dist.ravel())
    keep = (inscribed <= rmax) & (stats[:, cv2.CC_STAT_AREA] >= min_area)
    keep[0] = False
    return keep[labels]


def _beside(rgb: np.ndarray, strokes: np.ndarray) -> np.ndarray:
    """What lies beside `strokes`: the frame BESIDE_PX pixels out, filled in under them (inpainting),
    as float RGB."""
    hole = cv2.dilate(strokes.astype(np.uint8), np.ones((2 * BESIDE_PX + 1,) * 2, np.uint8))
    frame = np.ascontiguousarray(rgb[..., :3], dtype=np.uint8)
    return cv2.inpaint(frame, hole, BESIDE_PX, cv2.INPAINT_TELEA).astype(np.float32) if hole.any() \
        else frame.astype(np.float32)


def _blended_any(img: np.ndarray, background: np.ndarray, colours) -> np.ndarray:
    out = np.zeros(img.shape[:2], bool)
    for c in colours:
        out |= _blended_with(img, background, np.asarray(c, np.float32))
    return out


def _blended_with(img: np.ndarray, background: np.ndarray, colour: np.ndarray) -> np.ndarray:
    """Pixels that read as colour·α + background·(1 − α) with α ≥ ½, close to that blend line, where
    the colour stands out from the background (BLEND_CONTRAST)."""
    d = colour[None, None, :] - background
    den = np.sum(d * d, axis=2)
    v = img - background
    alpha = np.sum(v * d, axis=2) / np.maximum(den, 1.0)
    off = np.sqrt(np.maximum(np.sum(v * v, axis=2) - alpha * alpha * den, 0.0))
    return (den >= BLEND_CONTRAST ** 2) & (alpha >= 0.5) & (alpha <= 1.3) & (off <= BLEND_OFF_LINE * np.sqrt(den))


# ---------------------------------------------------------------------------------------------
# The input's annotation layer, left on by the answer
# ---------------------------------------------------------------------------------------------
LAYER_NCC = 0.6            # correlation with the drawn element above which it is still drawn
LAYER_MARGIN = 0.15        # ... and by which it must beat the correlation with the background
LAYER_FAINT = 0.1          # blend share above which a fading element still changes the frame
LAYER_FAINT_NCC = 0.5     # ... and the correlation with its pattern it must reach
LAYER_FAINT_CONTRAST = 20.0  # grey levels (rms) an element must differ from what it is drawn over by
RING_PX = 2                # pixels around an element that its pattern includes (its contrast with the scene)
LAYER_MIN_PIXELS = 6


class InputLayer:
    """The annotation layer of the case's input image (labels, v0 arrows, axes): where and in which
    colours the annotated first frame differs from the clean one, split into its elements (connected
    groups of drawn pixels). Models that are asked to continue the annotated image often keep part
    of it; where they do, the pixels under it are unobservable, like the F-G answer's arrows."""

    def __init__(self, annotated: np.ndarray, clean: np.ndarray, objects: np.ndarray | None = None):
        """`objects`: where the input shows the objects; an element's pixels over them (a v0 arrow
        starts at an object's centre) are left out of its tests, since an answer still showing the
        object there follows the element's pattern without the element."""
        self.grey = cv2.cvtColor(np.ascontiguousarray(annotated, np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)
        self.clean_grey = cv2.cvtColor(np.ascontiguousarray(clean, np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)
        drawn = channel_difference(annotated, clean) > 0
        self.drawn = drawn
        over = (np.zeros(drawn.shape, bool) if objects is None else
                cv2.dilate(objects.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0)
        n, labels = cv2.connectedComponents(drawn.astype(np.uint8), connectivity=8)
        h, w = drawn.shape
        # per element: (box, its region less the pixels over objects, its drawn pixels less those, its whole region)
        self.elements: list[tuple[tuple[slice, slice], np.ndarray, np.ndarray, np.ndarray]] = []
        for i in range(1, n):
            ys, xs = np.nonzero(labels == i)
            if ys.size < LAYER_MIN_PIXELS:
                continue
            box = (slice(max(ys.min() - RING_PX, 0), min(ys.max() + RING_PX + 1, h)),
                   slice(max(xs.min() - RING_PX, 0), min(xs.max() + RING_PX + 1, w)))
            own = (labels[box] == i).astype(np.uint8)
            region = cv2.dilate(own, np.ones((2 * RING_PX + 1,) * 2, np.uint8)) > 0
            free = ~over[box]
            if (region & free).sum() >= LAYER_MIN_PIXELS:
                self.elements.append((box, region & free, (own > 0) & free, region))

    def faint(self, image: np.ndarray, background: np.ndarray, already: np.ndarray | None = None) -> np.ndarray:
        """Pixels of the elements the answer shows faintly (a label fading out), for a frame already
        in the background's photometry: over an element's drawn pixels, the answer's difference from
        the background follows the element's own difference from the clean input (what it was drawn
        over) with a share of at least LAYER_FAINT (least squares, both zero-mean: a residual
        exposure offset is no element, and an object passing under the element does not follow its
        pattern)."""
        out = np.zeros(image.shape[:2], bool)
        g = cv2.cvtColor(np.ascontiguousarray(image, np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)
        b = cv2.cvtColor(np.ascontiguousarray(background, np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)
        for box, region, drawn, whole in self.elements:
            if already is not None and already[box][whole].all():
                continue
            if drawn.sum() < LAYER_MIN_PIXELS:
                continue
            dd = self.grey[box][drawn] - self.clean_grey[box][drawn]
            da = g[box][drawn] - b[box][drawn]
            dd, da = dd - dd.mean(), da - da.mean()
            den = float((dd * dd).sum())
            if den < (LAYER_FAINT_CONTRAST ** 2) * dd.size:
                continue
            # the element's pattern, faint (share) but clearly it (correlation): not codec noise
            if float((da * dd).sum()) / den >= LAYER_FAINT and _ncc(da, dd) >= LAYER_FAINT_NCC:
                out[box] |= whole
        return out

    def visible(self, image: np.ndarray, background: np.ndarray) -> np.ndarray:
        """Pixels of the elements the answer still shows (grown by `FRINGE_PX`). An element counts
        when, over its pixels and a ring of RING_PX around them, the answer's grey levels follow the
        drawn element's pattern (normalised cross-correlation ≥ LAYER_NCC) better than the
        background's: a pattern test, so an exposure or tone change of the answer does not make a
        missing white label look present, and a label fading out or partly hidden still counts."""
        out = np.zeros(image.shape[:2], bool)
        g = cv2.cvtColor(np.ascontiguousarray(image, np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)
        b = cv2.cvtColor(np.ascontiguousarray(background, np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)
        for box, region, _drawn, whole in self.elements:
            a, d, bb = g[box][region], self.grey[box][region], b[box][region]
            with_drawn = _ncc(a, d)
            if with_drawn >= LAYER_NCC and with_drawn >= _ncc(a, bb) + LAYER_MARGIN:
                out[box] |= whole
        return out


def _ncc(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    den = float(np.sqrt((a * a).sum() * (b * b).sum()))
    return float((a * b).sum()) / den if den > 1e-6 * a.size else 0.0
