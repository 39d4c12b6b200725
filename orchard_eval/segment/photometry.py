"""How an answer's colours relate to the clean plate's: a tone curve per channel, fitted on the
static background and inverted, so that the answer is read in the plate's photometry.

Generated frames come brighter or darker, warmer or cooler, with another tone curve, and a video's
exposure flickers from frame to frame. Each is, to a good approximation, one monotone curve per
channel applied to the whole frame: out = 255·a·(in/255)^γ + b. The curve is fitted where the answer
shows the background (a robust fit over pixels sampled on a grid, objects and drawn layers being a
small share that Geman–McClure weights leave out) and the answer is mapped back through it: the
plate difference, the object colour models and the rim shading learned on our render then read the
answer as they read a render of ours. The same three numbers describe an object's colours under a
global change, so objects come back to their own colours too.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import cv2
import numpy as np

MODELS = ("gain", "offset", "power", "affine", "full")   # per channel: a; b; a, γ; a, b; a, γ, b
GAMMAS = np.exp(np.linspace(np.log(0.45), np.log(2.2), 17))
SAMPLE_STEP = 6
NOISE_LEVELS = 4.0          # a residual this small across the levels (RGB distance) is noise: no curve is fitted
IDENTITY_LEVELS = 3.0       # a curve within this of the identity everywhere is left alone (codec rounding)
MIN_EXPLAINED = 0.85        # share of the samples the curve must explain (a global change reaches every surface) ...
EXPLAINED_LEVELS = 14.0     # ... to within this (RGB distance: codec noise, not another texture)
CLIP_LOW, CLIP_HIGH = 4, 250  # answer levels at which a channel may be clipped (a codec rings around 255)
MIN_CHANNEL_SAMPLES = 100
LEVEL_BAND_MIN = 30


@dataclass
class ToneCurve:
    a: np.ndarray        # (3,)
    gamma: np.ndarray    # (3,)
    b: np.ndarray        # (3,)
    explained: float     # share of the sampled pixels within noise of the fitted curve
    span: tuple[np.ndarray, np.ndarray] = (np.zeros(3), np.full(3, 255.0))   # plate levels the fit saw

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Plate levels → answer levels."""
        x = np.clip(np.asarray(x, np.float32) / 255.0, 0.0, 1.0)
        return 255.0 * self.a * x ** self.gamma + self.b

    # A curve is fitted once per answer (its frame 0) and applied to every frame of it: its tables,
    # and the plate's levels pushed through it, are made once (a curve's fields never change).
    @cached_property
    def _inverse_table(self) -> np.ndarray:
        y = np.arange(256, dtype=np.float64)[:, None]
        x = ((y - self.b) / (255.0 * self.a)).clip(0.0, 1.0) ** (1.0 / self.gamma)
        return np.clip(np.rint(255.0 * x), 0, 255).astype(np.uint8)

    def inverse_lut(self) -> np.ndarray:
        """(256, 3) uint8: answer level → plate level, per channel (clipped to the curve's range)."""
        return self._inverse_table

    def plate_ahead(self, plate: np.ndarray) -> np.ndarray:
        """`forward(plate)`: the answer levels the curve takes `plate` to (for the last plate asked,
        kept; a uint8 plate read from a table of the curve's 256 levels: the same values)."""
        kept = self.__dict__.get("_ahead")
        if kept is not None and kept[0] is plate:
            return kept[1]
        if plate.dtype == np.uint8:
            table = self.forward(np.repeat(np.arange(256, dtype=np.uint8)[:, None], 3, axis=1))
            ahead = np.stack([table[plate[..., c], c] for c in range(3)], axis=-1)
        else:
            ahead = self.forward(plate)
        self.__dict__["_ahead"] = (plate, ahead)
        return ahead

    @property
    def identity(self) -> bool:
        """Within IDENTITY_LEVELS of no change over the levels the fit saw (outside them a curve
        fitted to noise says nothing)."""
        lo, hi = self.span
        levels = lo[None, :] + (hi - lo)[None, :] * np.linspace(0, 1, 12)[:, None]
        return float(np.max(np.abs(self.forward(levels) - levels))) < IDENTITY_LEVELS


def fit_tone_curve(answer: np.ndarray, plate: np.ndarray, valid: np.ndarray | None = None) -> ToneCurve | None:
    """The per-channel curve that maps `plate` onto `answer` where both show the background
    (`valid`: pixels that may be used). Of MODELS (a gain — exposure and white balance; an offset —
    brightness; gain and tone exponent — a tone curve that keeps black black; gain and offset; all
    three) the simplest one that the richer ones do not clearly beat: a background spans a narrow
    range of levels, where free parameters trade off against each other and extrapolate badly to
    the objects' colours and the shadows below that range. None when no curve explains
    most of the background (another background, a frame of noise)."""
    sl = (slice(SAMPLE_STEP // 2, None, SAMPLE_STEP), slice(SAMPLE_STEP // 2, None, SAMPLE_STEP))
    A = answer[sl].reshape(-1, 3).astype(np.float64)
    P = plate[sl].reshape(-1, 3).astype(np.float64)
    if valid is not None:
        keep = valid[sl].ravel()
        A, P = A[keep], P[keep]
    if A.shape[0] < 200:
        return None
    span = (np.percentile(P, 1, axis=0), np.percentile(P, 99, axis=0))
    # an answer already in the plate's levels (a render of ours, a codec's rounding) needs no fit
    same = np.linalg.norm(A - P, axis=1)
    if _across_levels(same, P) <= NOISE_LEVELS:
        return ToneCurve(np.ones(3), np.ones(3), np.zeros(3), float(np.mean(same < EXPLAINED_LEVELS)), span)

    def clearly_better(f, than) -> bool:
        # by a margin well above what a codec's noise lets a free parameter gain
        return f[-1] < min(0.75 * than[-1], than[-1] - 1.0)

    # of the one-parameter models the gain, unless the offset is clearly better: over a narrow range
    # of levels the two fit alike, and a gain keeps what matters most below that range — a cast
    # shadow is the plate times an attenuation
    gain, offset = _robust_fit(A, P, "gain"), _robust_fit(A, P, "offset")
    best = offset if clearly_better(offset, gain) else gain
    for model in ("power", "affine", "full"):
        if best[-1] <= 1.0:        # no richer model can beat it clearly
            break
        f = _robust_fit(A, P, model)
        if clearly_better(f, best):
            best = f
    a, g, b, explained, _scale = best
    if explained < MIN_EXPLAINED:
        return None
    return ToneCurve(a, g, b, explained, span)


def _robust_fit(A: np.ndarray, P: np.ndarray, model: str) -> tuple:
    """Per-channel fit of one of MODELS with Geman–McClure weights from the joint
    residual; returns (a, γ, b, share explained, residual scale). An answer level at the ends of
    the range says only that the curve reaches past it: clipped samples carry no weight in their
    channel, and a channel clipped almost everywhere takes the other channels' curve (an exposure
    change moves the channels together)."""
    a, g, b = np.ones(3), np.ones(3), np.zeros(3)
    w = np.ones(A.shape[0])
    unclipped = (A > CLIP_LOW) & (A < CLIP_HIGH)
    fitted = unclipped.sum(axis=0) >= MIN_CHANNEL_SAMPLES
    if not fitted.any():
        return a, g, b, 0.0, np.inf
    gammas = (1.0,) if model == "affine" else GAMMAS
    # each channel's plate levels raised to each γ once, not once per round
    curves = {c: [(gam, 255.0 * (P[:, c] / 255.0) ** gam) for gam in gammas] for c in np.flatnonzero(fitted)} \
        if model in ("power", "affine", "full") else {}
    for _round in range(4):
        for c in np.flatnonzero(fitted):
            wc = w * unclipped[:, c]
            if model == "offset":
                b[c] = float(np.sum(wc * (A[:, c] - P[:, c])) / max(wc.sum(), 1e-9))
            elif model == "gain":
                a[c] = float(np.sum(wc * A[:, c] * P[:, c]) / max(np.sum(wc * P[:, c] ** 2), 1e-9))
            else:
                a[c], g[c], b[c] = _fit_channel(curves[c], A[:, c], wc, offset=model != "power")
        for c in np.flatnonzero(~fitted):
            a[c], g[c], b[c] = a[fitted].mean(), g[fitted].mean(), b[fitted].mean()
        pred = np.clip(255.0 * a * (P / 255.0) ** g + b, 0.0, 255.0)
        diff = A - pred
        # a clipped level the curve also takes past the end is explained
        diff[((A >= CLIP_HIGH) & (pred >= CLIP_HIGH)) | ((A <= CLIP_LOW) & (pred <= CLIP_LOW))] = 0.0
        r = np.linalg.norm(diff, axis=1)
        s = 1.4826 * float(np.median(np.abs(r - np.median(r)))) + float(np.median(r)) + 1.0
        w = (s * s / (s * s + r * r)) ** 2
    return a.copy(), g.copy(), b.copy(), float(np.mean(r < EXPLAINED_LEVELS)), _across_levels(r, P)


def _across_levels(r: np.ndarray, P: np.ndarray) -> float:
    """The residual a model is judged by: the median residual in each band of plate levels (8 bands
    of grey, those with LEVEL_BAND_MIN samples), averaged over the bands — a curve must hold over
    the levels the frame shows (shadows and objects below a light background), not only at the
    background's level, which most samples have."""
    band = np.clip((P.mean(axis=1) / 32.0).astype(int), 0, 7)
    meds = [float(np.median(r[band == k])) for k in range(8) if np.sum(band == k) >= LEVEL_BAND_MIN]
    return float(np.mean(meds)) if meds else float(np.median(r))


def _fit_channel(curves: list[tuple[float, np.ndarray]], y: np.ndarray, w: np.ndarray, offset: bool = True
                 ) -> tuple[float, float, float]:
    """Weighted least squares of y = a·f + b over the given (γ, f = 255·x^γ) (a, b linear given γ;
    b = 0 without `offset`)."""
    best = (np.inf, 1.0, 1.0, 0.0)
    sw = w.sum()
    my = (w * y).sum() / sw if offset else 0.0
    for gam, f in curves:
        if offset:
            mf = (w * f).sum() / sw
            vf = (w * (f - mf) ** 2).sum()
            if vf < 1e-9:
                continue
            a = (w * (f - mf) * (y - my)).sum() / vf
            b = my - a * mf
        else:
            a, b = (w * f * y).sum() / max((w * f * f).sum(), 1e-9), 0.0
        err = (w * (y - a * f - b) ** 2).sum()
        if err < best[0] and a > 0.05:
            best = (err, a, gam, b)
    return best[1], best[2], best[3]


def apply_inverse(answer: np.ndarray, curve: ToneCurve, plate: np.ndarray | None = None) -> np.ndarray:
    """The answer in the plate's photometry. Where the answer clipped a channel that the curve
    takes the plate's level past the end too, the answer shows no difference from the plate there
    and takes the plate's level (clipping lost what it was)."""
    lut = curve.inverse_lut()
    out = np.empty_like(answer)
    for c in range(3):
        out[..., c] = lut[answer[..., c], c]
    if plate is not None:
        ahead = curve.plate_ahead(plate)
        lost = ((answer >= CLIP_HIGH) & (ahead >= CLIP_HIGH)) | ((answer <= CLIP_LOW) & (ahead <= CLIP_LOW))
        out[lost] = plate[lost]
    return out


def channel_difference(a: np.ndarray, b: np.ndarray, total: bool = False) -> np.ndarray:
    """Per pixel, the largest absolute difference over the colour channels of two (H, W, 3) images
    — or with `total` their sum — (integers for 8-bit inputs): the levels by which a frame departs
    from a plate or a reference."""
    if a.dtype == np.uint8 and b.dtype == np.uint8:
        # absdiff and channel-wise ufuncs: the same integers as |a − b| in int16, 20× faster
        c = cv2.split(cv2.absdiff(np.ascontiguousarray(a), np.ascontiguousarray(b)))
        if total:
            return c[0].astype(np.uint16) + c[1] + c[2]
        return cv2.max(cv2.max(c[0], c[1]), c[2])
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return d.sum(axis=2) if total else d.max(axis=2)
