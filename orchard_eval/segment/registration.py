"""Where an answer frame's camera differs from the case's: a robust affine registration of the frame
to the clean plate.

Generated videos shake, zoom and reframe; a frame a few pixels off puts every mask a few pixels off
although the physics is right. The scene's static background is what tells the camera: the plate's
textured pixels (a floor's checker, a ramp's edge, the horizon) are tracked into the frame by a
coarse-to-fine Gauss–Newton (Lucas–Kanade) fit of an affine warp together with a gain and offset of
the grey level (exposure and tone changes must not read as motion). Moving objects, drawn labels and
anything else the plate does not show are outliers: Geman–McClure weights on the residuals, from a
scale measured on the residuals themselves. The fit runs on a few thousand plate pixels picked once
per case (`Landmarks`), so a frame costs about a millisecond when it is already aligned.

The local fit finds a camera a few coarse pixels from where it starts. Where it finds none from any
start (an off-centre crop of a periodic floor, a zoom with a large body over the middle), a global
search over zooms and shifts gives it new starts; only for the first frame of an answer, whose
camera its later frames start from.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

import cv2
import numpy as np

GRID_PX = 10             # one landmark per cell of this size (the strongest gradient in it)
MIN_GRADIENT = 6.0       # grey levels per pixel below which a plate pixel tells no motion
LEVELS = (8, 4, 2, 1)    # pyramid scales of the coarse-to-fine fit
COARSE_LEVELS = (8, 4)   # ... where the warp is a zoom, a rotation and a shift (a periodic floor's
                         # aliases and an object over the plate pull a free affine into shear there)
ITERATIONS = 12
ALIGNED_PX = 0.25        # a warp that moves no frame corner farther is no camera change
MIN_INLIERS = 0.5        # share of landmarks the warp must explain, else the camera is left alone
INLIER_LEVELS = 12.0     # grey-level residual of a landmark the warp explains
EXPLAINS = 0.75          # a warp must bring the landmarks' median residual below this share of the known camera's
MIN_LANDMARKS = 40
SETTLED_LEVELS = 4.0     # median landmark residual (grey levels) of a frame its start explains
SETTLED_PX = 0.3         # ... where one more step would move no corner farther (the fit's own noise)
MIN_IMPROVED = 0.5       # share of landmarks a warp must fit clearly better than the known camera
SCALE_RANGE = (0.8, 1.8)
ANISOTROPY = 0.04        # a camera zooms both axes alike: the scale ratio may differ this much from the answer's resize
MAX_SHIFT = 0.12         # largest displacement (share of the frame width) searched for
SEARCH_ZOOMS = (0.9, 0.95, 1.0, 1.05, 1.1, 1.15, 1.2, 1.3)   # the global search's zooms (`_searched_starts`)
SEARCH_STARTS = 3        # ... and how many of its best candidates become starts
IDENTITY = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])


@dataclass
class Landmarks:
    """Plate pixels that pin down the camera, with the plate's grey level and gradient there, at each
    pyramid level."""
    xy: dict[int, np.ndarray]          # level → (N, 2) pixel centres in that level's pixels
    value: dict[int, np.ndarray]
    grad: dict[int, np.ndarray]        # (N, 2)
    size: tuple[int, int]              # (width, height) of the full-resolution frame
    plate_levels: tuple[float, float] = (0.0, 255.0)   # 10th and 90th percentile of the plate's grey
    plate_median: float = 128.0


def grey(rgb: np.ndarray) -> np.ndarray:
    return cv2.cvtColor(np.ascontiguousarray(rgb, dtype=np.uint8), cv2.COLOR_RGB2GRAY).astype(np.float32)


def _pyramid(g: np.ndarray, s: int) -> np.ndarray:
    if s == 1:
        return g
    h, w = g.shape
    return cv2.resize(g, (w // s, h // s), interpolation=cv2.INTER_AREA)


def landmarks(plate: np.ndarray, exclude: np.ndarray | None = None) -> Landmarks | None:
    """The strongest-gradient plate pixel per GRID_PX cell (per level), outside `exclude`; None when
    the plate has too little texture to register against."""
    g0 = grey(plate)
    h, w = g0.shape
    xy, val, grad = {}, {}, {}
    for s, g in _blurred(g0, LEVELS).items():
        gx = cv2.Sobel(g, cv2.CV_32F, 1, 0, ksize=3) / 8.0
        gy = cv2.Sobel(g, cv2.CV_32F, 0, 1, ksize=3) / 8.0
        mag = np.hypot(gx, gy)
        if exclude is not None:
            ex = cv2.resize(exclude.astype(np.uint8), (g.shape[1], g.shape[0]), interpolation=cv2.INTER_NEAREST)
            mag[ex > 0] = 0
        mag[:2], mag[-2:], mag[:, :2], mag[:, -2:] = 0, 0, 0, 0
        cell = max(2, GRID_PX // s) if s > 1 else GRID_PX
        hh, ww = (g.shape[0] // cell) * cell, (g.shape[1] // cell) * cell
        blocks = mag[:hh, :ww].reshape(hh // cell, cell, ww // cell, cell).transpose(0, 2, 1, 3).reshape(
            hh // cell, ww // cell, cell * cell)
        best = blocks.argmax(axis=2)
        strength = np.take_along_axis(blocks, best[..., None], axis=2)[..., 0]
        by, bx = np.nonzero(strength >= MIN_GRADIENT)
        k = best[by, bx]
        ys, xs = by * cell + k // cell, bx * cell + k % cell
        if ys.size < MIN_LANDMARKS:
            return None
        xy[s] = np.stack([xs + 0.5, ys + 0.5], axis=1).astype(np.float32)
        val[s] = g[ys, xs]
        grad[s] = np.stack([gx[ys, xs], gy[ys, xs]], axis=1)
    lo, hi = np.percentile(g0[::4, ::4], (10, 90))
    return Landmarks(xy, val, grad, (w, h), (float(lo), float(hi)), float(np.median(g0[::4, ::4])))


@dataclass
class Registration:
    affine: np.ndarray        # 2×3: case pixel → answer pixel (full resolution, pixel centres at +0.5)
    gain: float               # grey gain and offset of the frame against the plate (`exposure`)
    offset: float
    inliers: float            # share of landmarks the warp explains
    moved_px: float           # largest displacement of a frame corner
    residual: float = 0.0     # median grey-level residual at the landmarks

    @property
    def aligned(self) -> bool:
        return self.moved_px < ALIGNED_PX


def opencv_affine(affine: np.ndarray) -> np.ndarray:
    """`affine` (pixel centres at +0.5, the case's convention) in OpenCV's convention (centres at
    integers), for warpAffine."""
    A = np.asarray(affine, np.float64).reshape(2, 3)
    t = A[:, :2] @ np.array([0.5, 0.5]) + A[:, 2] - 0.5
    return np.hstack([A[:, :2], t[:, None]])


def _sample(g: np.ndarray, xy: np.ndarray) -> np.ndarray:
    m = (xy - 0.5).astype(np.float32).reshape(1, -1, 2)
    return cv2.remap(g, m[..., 0], m[..., 1], cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE).ravel()


def register(frame: np.ndarray, marks: Landmarks, starts: list[np.ndarray] | None = None,
             anisotropy: float = 1.0, search: bool = True, keep: np.ndarray | None = None) -> Registration | None:
    """The best of `_register` from each start (identity when none): the accepted warp with the
    smallest residual at the landmarks. A frame the first start already explains (one Gauss–Newton
    step moves nothing, the residual is at the noise) returns at once: most frames are aligned.
    `anisotropy`: the ratio of horizontal to vertical scale the answer's resize to the case's size
    implies (`resize_anisotropy`); a warp whose ratio differs from it is no camera change.
    `search`: where no start leads to a camera, try the plate's exposure and then search globally
    (`_searched_starts`; some 40 ms a frame): for a frame that starts its answer, not for each of
    its later frames (they start from its camera). `keep`: the camera the answer is known to have
    (its frame 0's; identity when None), kept unless a warp explains the frame clearly better."""
    starts = starts or [None]
    g0 = grey(frame)
    pyr = _blurred(g0, (1,))
    quick = _settled(pyr[1], marks, starts[0])
    if quick is not None:
        return quick
    pyr.update(_blurred(g0, LEVELS[:-1]))        # the fit's pyramid, once for every start
    best, best_r = None, np.inf
    levels = exposure(g0, marks)
    for start in starts:
        reg = _register(pyr, marks, start, anisotropy, levels, keep)
        if reg is None and search and not 0.8 <= levels[0] <= 1.25:
            # the level distributions mislead where the framing changes what the frame shows (a
            # zoom onto a bright ramp, a bare floor with one object): the frame's own exposure
            # is then most likely the plate's
            reg = _register(pyr, marks, start, anisotropy, (1.0, 0.0), keep)
        if reg is not None and reg.residual < best_r:
            best, best_r = reg, reg.residual
    if best is None and search:
        # no start leads to a camera the plate confirms: a reframing too far for the local fit
        # (a periodic floor has aliases one square apart), searched for globally
        for start in _searched_starts(pyr[LEVELS[0]], marks, anisotropy):
            for lv in (levels, (1.0, 0.0)):
                reg = _register(pyr, marks, start, anisotropy, lv, keep)
                if reg is not None and reg.residual < best_r:
                    best, best_r = reg, reg.residual
    return best


def _blurred(g0: np.ndarray, scales) -> dict[int, np.ndarray]:
    """The frame's grey levels at each pyramid scale, smoothed as the landmarks were."""
    return {s: cv2.GaussianBlur(_pyramid(g0, s), (0, 0), 0.8) for s in scales}


def _searched_starts(g: np.ndarray, marks: Landmarks, anisotropy: float) -> list[np.ndarray]:
    """The SEARCH_STARTS zooms-and-shifts (SEARCH_ZOOMS, shifts within MAX_SHIFT of the frame width,
    one coarsest-level pixel apart) that explain the most landmarks at the coarsest level (within
    INLIER_LEVELS, the grey offset taken as the median difference: an object over part of the plate
    does not bias it), one per neighbourhood. `g`: the frame at the coarsest scale (`_blurred`)."""
    s = LEVELS[0]
    w, h = marks.size
    c = np.array([w / 2.0, h / 2.0])
    xy = marks.xy[s].astype(np.float64) * s - c
    P = marks.value[s].astype(np.float64)
    kx, ky = np.sqrt(anisotropy), 1.0 / np.sqrt(anisotropy)
    reach = MAX_SHIFT * w
    tx, ty = np.meshgrid(np.arange(-reach, reach + 1e-6, s), np.arange(-reach, reach + 1e-6, s), indexing="ij")
    tx, ty = tx.ravel(), ty.ravel()
    best = []
    for z in SEARCH_ZOOMS:
        qx = (z * kx * xy[:, 0])[None, :] + c[0] + tx[:, None]
        qy = (z * ky * xy[:, 1])[None, :] + c[1] + ty[:, None]
        F = cv2.remap(g, ((qx - 0.5) / s).astype(np.float32), ((qy - 0.5) / s).astype(np.float32),
                      cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=np.nan).astype(np.float64)
        D = F - P[None, :]
        inside = np.isfinite(D)
        n = inside.sum(axis=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)     # a candidate that shows no landmark
            off = np.nanmedian(D, axis=1)
        share = (np.abs(np.where(inside, D, np.inf) - off[:, None]) < INLIER_LEVELS).sum(axis=1) / len(P)
        share[n < max(MIN_LANDMARKS, 0.5 * len(P))] = -1.0
        for i in np.argsort(-share)[:SEARCH_STARTS]:
            best.append((float(share[i]), z, float(tx[i]), float(ty[i])))
    best.sort(key=lambda b: -b[0])
    starts: list[tuple[float, float, float]] = []
    for share, z, x0, y0 in best:
        if share < 0:
            break
        if all(abs(z - z1) > 0.03 or np.hypot(x0 - x1, y0 - y1) > 2 * s for z1, x1, y1 in starts):
            starts.append((z, x0, y0))
        if len(starts) == SEARCH_STARTS:
            break
    out = []
    for z, x0, y0 in starts:
        M = np.diag([z * kx, z * ky])
        out.append(np.hstack([M, (c + np.array([x0, y0]) - M @ c)[:, None]]))
    return out


def _register(pyr: dict[int, np.ndarray], marks: Landmarks, start: np.ndarray | None,
              anisotropy: float, levels: tuple[float, float], keep: np.ndarray | None = None) -> Registration | None:
    """The affine (plus grey gain and offset) that maps the plate onto `frame`; None where the
    landmarks do not agree on one (a changed background, a frame of noise). `keep` (identity when
    None: no camera change) where the warp does not explain the frame clearly better than it: the
    camera the answer is known to have (its frame 0's). `pyr`: the frame at every scale of LEVELS
    (`_blurred`); `levels`: the grey gain and offset the fit starts from and whose gain it must stay
    near.

    Coordinates are centred and scaled to the frame, and the Gauss–Newton steps carry a weak pull
    towards the identity, so a direction the plate's texture does not constrain (a bare floor below
    a horizon tells the vertical, never the horizontal) stays where it was instead of drifting."""
    w, h = marks.size
    c = np.array([w / 2.0, h / 2.0])
    half = w / 2.0
    # warp in normalised coordinates: q = M·p + t with p = (x − c) / half
    M = np.eye(2)
    t = np.zeros(2)
    if start is not None:
        A0 = np.asarray(start, float)
        M = A0[:, :2].copy()
        t = (A0[:, :2] @ c + A0[:, 2] - c) / half
    kx, ky = np.sqrt(anisotropy), 1.0 / np.sqrt(anisotropy)
    a0, b0 = levels
    a, b = a0, b0
    for s in LEVELS:
        g = pyr[s]
        xy = marks.xy[s].astype(np.float64) * s          # full-resolution pixel centres
        P, G = marks.value[s].astype(np.float64), marks.grad[s].astype(np.float64) / s
        pn = (xy - c) / half
        x, y = pn[:, 0], pn[:, 1]
        for _ in range(ITERATIONS):
            q = (pn @ M.T + t) * half + c
            F = _sample(g, q / s).astype(np.float64)
            r = F - (a * P + b)
            scale = 1.4826 * np.median(np.abs(r - np.median(r))) + 1.0
            k = 2.0 * scale
            wts = (k * k / (k * k + r * r)) ** 2            # Geman–McClure
            # a landmark the answer does not show (outside its view) says nothing
            wts *= (q[:, 0] >= 0) & (q[:, 0] <= w) & (q[:, 1] >= 0) & (q[:, 1] <= h)
            # d r / d params through the frame gradient (≈ a · plate gradient, per full-res pixel)
            gx, gy = a * G[:, 0] * half, a * G[:, 1] * half
            J = np.stack([gx * x, gx * y, gx, gy * x, gy * y, gy, -P, -np.ones_like(P)], axis=1)
            if s in COARSE_LEVELS:
                # zoom, rotation and shift only: d M = dz · K + dθ · K·[[0, −1], [1, 0]]
                J = np.stack([J[:, 0] * kx + J[:, 4] * ky, -J[:, 1] * kx + J[:, 3] * ky, J[:, 2], J[:, 5],
                              J[:, 6], J[:, 7]], axis=1)
            n = J.shape[1] - 2
            H = (J * wts[:, None]).T @ J
            reg = np.full(n + 2, 1e-3 * np.trace(H[:n, :n]) / n + 1e-9)
            reg[n:] = 1e-6 * np.trace(H[n:, n:]) + 1e-9
            step = -np.linalg.solve(H + np.diag(reg), (J * wts[:, None]).T @ r)
            if s in COARSE_LEVELS:
                dz, dth = step[0], step[1]
                dM = np.array([[dz * kx, -dth * kx], [dth * ky, dz * ky]])
                dt = step[2:4]
            else:
                dM, dt = step[[0, 1, 3, 4]].reshape(2, 2), step[[2, 5]]
            M = M + dM
            t = t + dt
            a, b = a + step[n], b + step[n + 1]
            if max(np.max(np.abs(dM)), np.max(np.abs(dt))) * half < 0.01:
                break
        # the gain must stay near the one the level distributions give: with the landmarks on one
        # edge (all about one level) gain and offset could match the edge to any flat region
        if not _plausible(M, t, anisotropy) or not 0.8 <= a / a0 <= 1.25:
            return None
    A = np.hstack([M, (t * half + c - M @ c)[:, None]])
    # the warp must explain the frame better than no warp at all; judged at the coarsest level,
    # where a softer answer (a codec, a resampling) leaves the edges' levels as they are
    s = LEVELS[0]
    g = pyr[s]
    xy = marks.xy[s].astype(np.float64) * s
    q = xy @ A[:, :2].T + A[:, 2]
    inside = (q[:, 0] >= 0) & (q[:, 0] <= w) & (q[:, 1] >= 0) & (q[:, 1] <= h)   # what the answer shows
    if inside.sum() < MIN_LANDMARKS:
        return None
    # both cameras with the warp's gain and offset: with the landmarks on one soft edge (a horizon)
    # an offset of their own would take up the edge's shift, and with highlights clipped a gain of
    # their own would misfit everywhere; either way no warp would look worse than it is
    K = IDENTITY if keep is None else np.asarray(keep, float)
    P = marks.value[s][inside]
    r_warp = np.abs(_sample(g, q[inside] / s) - (a * P + b))
    r_keep = np.abs(_sample(g, (xy[inside] @ K[:, :2].T + K[:, 2]) / s) - (a * P + b))
    # ... and for most landmarks either camera explains (a landmark under a body neither does): a
    # frame that is aligned already, with an object or a label over a few of a bare plate's
    # landmarks, is explained no better by a warp where it matched before
    told = (r_warp < INLIER_LEVELS) | (r_keep < INLIER_LEVELS)
    better = float(np.mean((r_warp + 1.0 < r_keep)[told])) if told.any() else 0.0
    inliers = float(np.mean(r_warp < INLIER_LEVELS))
    if _corner_shift(A, K, (w, h)) >= ALIGNED_PX and not (np.median(r_warp) <= EXPLAINS * np.median(r_keep) - 0.5
                                                          and better >= MIN_IMPROVED):
        return Registration(K.copy(), 1.0, 0.0, float(np.mean(r_keep < INLIER_LEVELS)),
                            _corner_shift(K, IDENTITY, (w, h)), float(np.median(r_keep)))
    if inliers < MIN_INLIERS:
        return None
    return Registration(A, float(a), float(b), inliers, _corner_shift(A, IDENTITY, (w, h)), float(np.median(r_warp)))


def _corner_shift(A: np.ndarray, B: np.ndarray, size: tuple[int, int]) -> float:
    """How far (pixels) warp `A` puts some frame corner from where `B` puts it."""
    w, h = size
    corners = np.array([[0, 0], [w, 0], [0, h], [w, h]], float)
    return float(np.max(np.hypot(*(corners @ (A[:, :2] - B[:, :2]).T + (A[:, 2] - B[:, 2])).T)))


def resize_anisotropy(answer_size: tuple[int, int] | None, size: tuple[int, int]) -> float:
    """Horizontal over vertical scale from the case's pixels to an answer's once the answer (made at
    `answer_size`) is resized to the case's `size`: 1 at the case's aspect ratio."""
    if not answer_size:
        return 1.0
    (wa, ha), (w, h) = answer_size, size
    return (w / h) / (wa / ha)


def aspect_start(answer_size: tuple[int, int] | None, size: tuple[int, int]) -> np.ndarray | None:
    """Where to start registering an answer made at another aspect ratio and resized to the case's
    `size`: the hypothesis that it shows the centre of the scene at its own aspect (a narrower
    answer the full height, a wider one the full width). None when the aspect is the case's."""
    if not answer_size:
        return None
    (wa, ha), (w, h) = answer_size, size
    ratio = (wa / ha) / (w / h)
    if abs(ratio - 1.0) < 0.02:
        return None
    sx, sy = (1.0 / ratio, 1.0) if ratio < 1.0 else (1.0, ratio)
    cx, cy = w / 2.0, h / 2.0
    return np.array([[sx, 0.0, cx - sx * cx], [0.0, sy, cy - sy * cy]])


def _settled(g: np.ndarray, marks: Landmarks, start: np.ndarray | None) -> Registration | None:
    """`start` (identity when None) when it already explains the frame (`g`: at full resolution,
    `_blurred`): median landmark residual within SETTLED_LEVELS and a Gauss–Newton step that moves
    no corner by SETTLED_PX; else None."""
    w, h = marks.size
    A = IDENTITY if start is None else np.asarray(start, float)
    xy = marks.xy[1].astype(np.float64)
    q = xy @ A[:, :2].T + A[:, 2]
    F = _sample(g, q).astype(np.float64)
    P = marks.value[1].astype(np.float64)
    X = np.stack([P, np.ones_like(P)], axis=1)
    (a, b), *_ = np.linalg.lstsq(X, F, rcond=None)
    r = F - (a * P + b)
    if float(np.median(np.abs(r))) > SETTLED_LEVELS:
        return None
    k = 2.0 * (1.4826 * float(np.median(np.abs(r - np.median(r)))) + 1.0)
    wts = (k * k / (k * k + r * r)) ** 2            # Geman–McClure, as in the fit
    G = marks.grad[1].astype(np.float64) * a
    J = np.stack([G[:, 0] * xy[:, 0], G[:, 0] * xy[:, 1], G[:, 0], G[:, 1] * xy[:, 0], G[:, 1] * xy[:, 1], G[:, 1]], axis=1)
    H = (J * wts[:, None]).T @ J
    step = -np.linalg.solve(H + (1e-6 * np.trace(H) + 1e-9) * np.eye(6), (J * wts[:, None]).T @ r).reshape(2, 3)
    corners = np.array([[0, 0, 1], [w, 0, 1], [0, h, 1], [w, h, 1]], float)
    if float(np.max(np.abs(corners @ step.T))) > SETTLED_PX:
        return None
    moved = float(np.max(np.hypot(*(corners[:, :2] @ A[:, :2].T + A[:, 2] - corners[:, :2]).T)))
    return Registration(A, float(a), float(b), float(np.mean(np.abs(r) < INLIER_LEVELS)), moved,
                        float(np.median(np.abs(r))))


def exposure(frame_grey: np.ndarray, marks: Landmarks) -> tuple[float, float]:
    """Grey gain and offset from the plate to the frame, from their level distributions (10th and
    90th percentiles; no pixel correspondence needed, so a moved camera does not bias it):
    where the fit starts, and what its gain must stay near."""
    lo, hi = np.percentile(frame_grey[::4, ::4], (10, 90))
    plo, phi = marks.plate_levels
    a = float(np.clip((hi - lo) / max(phi - plo, 1.0), 0.5, 2.0)) if phi - plo >= 8 else 1.0
    return a, float(np.median(frame_grey[::4, ::4]) - a * marks.plate_median)


def _plausible(M: np.ndarray, t: np.ndarray, anisotropy: float = 1.0) -> bool:
    """A camera change a generated frame could show: no mirror, a scale per axis within
    SCALE_RANGE whose ratio is the one the answer's resize implies (`anisotropy`: a zoom scales both
    axes alike; only another aspect ratio, resized to the case's, scales one more than the other),
    little rotation or shear, a shift within MAX_SHIFT of the frame. Where the plate constrains one
    axis only (a bare floor below a horizon), the objects alone could otherwise pull the other axis
    after themselves when they moved."""
    sx, sy = float(np.hypot(*M[:, 0])), float(np.hypot(*M[:, 1]))
    skew = abs(float(M[0, 1])) / sy + abs(float(M[1, 0])) / sx
    return (np.linalg.det(M) > 0 and SCALE_RANGE[0] <= min(sx, sy) and max(sx, sy) <= SCALE_RANGE[1]
            and abs(sx / sy / anisotropy - 1.0) <= ANISOTROPY
            and skew < 0.1 and float(np.max(np.abs(t))) < 2 * MAX_SHIFT)
