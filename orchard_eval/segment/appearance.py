"""Where a body is, read from how it looks: the frame compared, pixel for pixel, with the body as the
case renders it, laid over the answer's own background.

Why: the silhouette fit (`shape_prior.fit_bodies`) reads a per-pixel matting estimate whose every
pixel is bounded in what it can cost. A lossy codec's smear and blocks one to three pixels beyond a
body's outline then weigh as much as the outline itself, and on heavy H.264 they drag the fit by one
to four pixels, while the same frame compared with the GT frame pixel by pixel sits within a third
of a pixel of it. A rendered comparison weighs every pixel by how much it differs: a smear costs
what it differs, a misplaced outline its whole contrast all along.

The body's look is taken from a GT frame where its pose is known (a `Sprite`: its pixels with the
GT background's share taken out of its rim, and the shadow it casts near it), from the GT frame
where it stood nearest the fitted place (`Looks`). `place` scales it by
the ratio of depths, lays it over the answer's background (darkened by that shadow), softens it as
the answer is soft, maps it to the answer's colours by one gain and offset per channel fitted on
the body's interior (a recoloured or relit body), and moves it to where it explains the frame best:
a descent over whole pixels from the fitted place, then parabola steps half and a quarter of a
pixel wide.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import cv2
import numpy as np

SEARCH_PX = 5            # whole-pixel offsets searched each way from the silhouette fit
MARGIN_PX = 2            # pixels around the sprite the comparison reads
COST_SCALE = 40.0        # Geman–McClure scale (weighted YCbCr levels): a pixel that differs by far more is an outlier
REFIT_ROUNDS = 3         # searches again with the colour mapping fitted where the last one ended ...
REFIT_MOVE_PX = 0.5      # ... when it ended this far (pixels, either axis) from its start
SUBPIXEL_STEPS = (0.5, 0.25)  # neighbour spacings (pixels) of the parabola steps after the whole-pixel search
GAIN_RANGE = (0.5, 2.0)  # per-channel gains a colour mapping may take
MIN_INTERIOR_PX = 12     # body pixels the colour mapping needs
MIN_SPRITE_PX = 20
SHADE_FLOOR = 0.15       # the darkest a cast shadow is taken to leave the ground (share of light)
SHADE_NOISE = 0.04       # a darkening this small is noise, not a shadow
NEAR_TIE_PX = 2.0        # GT places this close to the nearest one count as equally near (then: nearest in time)
SIZE_GRID = (1.0, 1.1, 1.2, 1.35, 1.5)   # linear sizes (× the case's) tried upward where the answer's size is not known
SIZE_GRID_DOWN = (0.9, 0.8, 0.7)          # ... and downward where no larger one costs less (a body drawn smaller)
SIZE_FINE = tuple(np.round(np.arange(-0.03, 0.0301, 0.01), 3))   # ... then sizes this far from the best, the place held
SIZE_ROUNDS = 4          # ... at most this many times (the grid's sizes lie up to 0.075 apart)
SIZE_SETTLED = 0.003     # ... until the size moves less than this
EDGE_RESTARTS = 2        # a search that ends on its window's edge goes on from there this often (a video frame's
                         # place, each size of the grid): the silhouette fit it starts from can lie farther off
SIZE_GAIN = 0.9          # another size is taken where it explains the frame at this share of the case size's cost or less


@dataclass
class Sprite:
    """A body as a GT frame shows it, taken off that frame's background: weighted-YCbCr colour
    premultiplied by coverage, the coverage (the silhouette's share of each pixel, 0 where the scene
    or another object hides the body), the body's centre in the window and its depth (metres along
    the optical axis)."""
    premultiplied: np.ndarray    # (h, w, 3) float32
    alpha: np.ndarray            # (h, w) float32
    centre: tuple[float, float]
    depth: float
    interior: np.ndarray         # (h, w) bool: body pixels two pixels inside its outline
    shade: np.ndarray | None = None          # (H, W) float32: the share of light the background keeps
    shade_centre: tuple[float, float] = (0.0, 0.0)   # the body's centre in the shade window


def make_sprite(frame_ycc: np.ndarray, plate_ycc: np.ndarray, coverage: np.ndarray, centre_uv: tuple[float, float],
                depth: float, free: np.ndarray | None = None) -> Sprite | None:
    """The sprite of a body that covers `coverage` (per pixel of the GT frame, in [0, 1]: its
    silhouette's share, 0 where it is hidden) with its centre projecting to `centre_uv`. A rim
    pixel's colour is a blend with the GT frame's background, the plate there: the plate's share is
    taken out, so that the sprite laid over another background blends with that one."""
    if float(coverage.sum()) < MIN_SPRITE_PX:
        return None
    ys, xs = np.nonzero(coverage > 0)
    h, w = coverage.shape
    y0, y1 = max(int(ys.min()) - 1, 0), min(int(ys.max()) + 2, h)
    x0, x1 = max(int(xs.min()) - 1, 0), min(int(xs.max()) + 2, w)
    a = coverage[y0:y1, x0:x1].astype(np.float32)
    pre = (frame_ycc[y0:y1, x0:x1] - (1.0 - a)[..., None] * plate_ycc[y0:y1, x0:x1]) * (a > 0)[..., None]
    interior = cv2.erode((a >= 1.0).astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    sprite = Sprite(pre.astype(np.float32), a, (centre_uv[0] - x0, centre_uv[1] - y0), float(depth), interior)
    # the shadow the body casts near it, as the share of light the plate keeps there (`free`: the
    # pixels that show the static scene; the rest keep all): laid under the body where it is laid,
    # it does not move with the search, so a shadow the answer lacks costs the same at every place
    # while the body's outline against its own shadow is read as it looks
    reach = max(y1 - y0, x1 - x0)
    sy0, sy1, sx0, sx1 = max(y0 - reach, 0), min(y1 + reach, h), max(x0 - reach, 0), min(x1 + reach, w)
    lum_f, lum_p = frame_ycc[sy0:sy1, sx0:sx1, 0], plate_ycc[sy0:sy1, sx0:sx1, 0]
    keep = np.clip(lum_f / np.maximum(lum_p, 1.0), SHADE_FLOOR, 1.0).astype(np.float32)
    keep[keep > 1.0 - SHADE_NOISE] = 1.0
    keep[coverage[sy0:sy1, sx0:sx1] > 0] = 1.0
    if free is not None:
        keep[~free[sy0:sy1, sx0:sx1]] = 1.0
    if np.any(keep < 1.0):
        sprite.shade, sprite.shade_centre = keep, (centre_uv[0] - sx0, centre_uv[1] - sy0)
    return sprite


class Looks:
    """How the GT frames show each body, for the place an answer shows it at: the sprite of the GT
    frame where the body's centre projected nearest to that place (of those within NEAR_TIE_PX of
    the nearest, the one nearest in time). A body seen where the GT had it — re-timed, reversed, on
    another path — is compared with how it looked there (its shading and attitude on that stretch,
    what hid it, its shadow), not with how it looked at the time asked about. Sprites are built one
    GT frame at a time (`build(index)`: every body's) and kept."""

    def __init__(self, track_uv: dict[str, np.ndarray], fps: float, build):
        self.track_uv, self.fps, self.build = track_uv, float(fps), build
        self._frames: dict[int, dict[str, Sprite]] = {}

    def near(self, oid: str, uv: tuple[float, float], t: float | None) -> Sprite | None:
        track = self.track_uv.get(oid)
        if track is None or not len(track):
            return None
        d = np.hypot(track[:, 0] - uv[0], track[:, 1] - uv[1])
        ok = np.isfinite(d)
        if not ok.any():
            return None
        cand = np.nonzero(ok & (d <= np.min(d[ok]) + NEAR_TIE_PX))[0]
        i = int(cand[np.argmin(np.abs(cand / self.fps - (t or 0.0)))])
        if i not in self._frames:
            self._frames[i] = self.build(i)
        return self._frames[i].get(oid)


@dataclass
class Placement:
    uv: tuple[float, float]      # the body's refined image centre
    cost: float                  # robust cost there, per weighted pixel
    cost_at_start: float         # ... and at the silhouette fit's place
    size: float = 1.0            # the linear size found (`place_and_size`), × the one asked for
    explained: float = 0.0       # share of the background-alone cost the body removes, on the search window


def scale_about(scale: float, centre: tuple[float, float], at: tuple[float, float]) -> np.ndarray:
    """The 2×3 map (source pixel index → canvas pixel index) scaling about `centre` and moving it to
    `at`; pixel centres at +0.5 on both sides: x' + 0.5 = s (x + 0.5 − c) + at."""
    return np.array([[scale, 0.0, at[0] - scale * centre[0] + 0.5 * (scale - 1.0)],
                     [0.0, scale, at[1] - scale * centre[1] + 0.5 * (scale - 1.0)]], np.float64)


def _warp(sprite: Sprite, scale: float, at: tuple[float, float], size: tuple[int, int], softness: float,
          interior: bool = False):
    """The sprite scaled about its centre and moved so that its centre lands at `at` in a canvas of
    `size` (width, height): (premultiplied colour, coverage, and with `interior` the body's interior)."""
    A = scale_about(scale, sprite.centre, at)
    kw = dict(flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    pre = cv2.warpAffine(sprite.premultiplied, A, size, **kw)
    alpha = cv2.warpAffine(sprite.alpha, A, size, **kw)
    inner = cv2.warpAffine(sprite.interior.astype(np.float32), A, size, **kw) >= 0.99 if interior else None
    if softness > 0:
        pre = cv2.GaussianBlur(pre, (0, 0), softness)
        alpha = cv2.GaussianBlur(alpha, (0, 0), softness)
    return pre, alpha, inner


def _shade(sprite: Sprite, scale: float, at: tuple[float, float], size: tuple[int, int]) -> np.ndarray:
    """The sprite's shade layer laid with the body's centre at `at` in a canvas of `size`."""
    return cv2.warpAffine(sprite.shade, scale_about(scale, sprite.shade_centre, at), size, flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT,
                          borderValue=1.0)


def _robust_cost(model: np.ndarray, image: np.ndarray, weight: np.ndarray, weight_sum: float | None = None) -> float:
    """Weighted mean Geman–McClure cost of the colour differences (scale COST_SCALE); `weight_sum`:
    `weight.sum()`, when the caller compares many models against the same weights."""
    d = model - image
    r2 = np.einsum("ijk,ijk->ij", d, d) / (COST_SCALE * COST_SCALE)
    total = float(weight.sum()) if weight_sum is None else weight_sum
    return float(np.sum(weight * r2 / (1.0 + r2)) / max(total, 1e-9))


def _colour_map(pre: np.ndarray, alpha: np.ndarray, inner: np.ndarray, image: np.ndarray, weight: np.ndarray
                ) -> np.ndarray:
    """Per channel (gain, offset) taking the sprite's interior colours to the answer's there, in a
    (2, 3) array; the identity where the interior is too small to say."""
    sel = inner & (weight > 0) & (alpha > 0.99)
    out = np.array([[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]])
    if int(sel.sum()) < MIN_INTERIOR_PX:
        return out
    s, a = pre[sel].astype(np.float64), image[sel].astype(np.float64)
    for c in range(3):
        sv, av = s[:, c], a[:, c]
        var = float(np.var(sv))
        # a flat-coloured body says nothing about a gain: ridge towards 1 by a few levels' variance
        g = (float(np.mean((sv - sv.mean()) * (av - av.mean()))) + 4.0) / (var + 4.0)
        g = min(max(g, GAIN_RANGE[0]), GAIN_RANGE[1])
        out[0, c], out[1, c] = g, float(av.mean() - g * sv.mean())
    return out


def _reach(sprite: Sprite, scale: float) -> tuple[int, int]:
    """Half the width and height (whole pixels) of the window a sprite `scale` times its size is
    compared on, around its centre: the sprite and MARGIN_PX of background all round."""
    return (int(math.ceil(scale * sprite.alpha.shape[1] / 2.0)) + MARGIN_PX,
            int(math.ceil(scale * sprite.alpha.shape[0] / 2.0)) + MARGIN_PX)


def _search_window(sprite: Sprite, scale: float, at, shape: tuple[int, int]) -> tuple[int, int, int, int]:
    """(x0, x1, y0, y1): the pixels a sprite `scale` times its size reads while its centre is
    searched within SEARCH_PX of `at`, clipped to a frame of `shape`."""
    half_w, half_h = _reach(sprite, scale)
    cx, cy = int(round(at[0])), int(round(at[1]))
    return (max(cx - half_w - SEARCH_PX, 0), min(cx + half_w + SEARCH_PX + 1, shape[1]),
            max(cy - half_h - SEARCH_PX, 0), min(cy + half_h + SEARCH_PX + 1, shape[0]))


def place(sprite: Sprite, image_ycc: np.ndarray, background_ycc: np.ndarray, weight: np.ndarray,
          start: tuple[float, float], scale: float = 1.0, softness: float = 0.0, recentre: int = 0,
          refits: int = REFIT_ROUNDS) -> Placement | None:
    """The image position near `start` (within SEARCH_PX + ½ each way) where the sprite, laid over
    `background_ycc`, best explains `image_ycc`; `weight` (0 … 1) per pixel: 0 where the frame says
    nothing about this body (another object, a drawn layer, a cast shadow, a support in front). A
    descent that ends on the search's edge starts again from there, at most `recentre` times; one
    that ends more than REFIT_MOVE_PX from its start, with the colour mapping fitted there, at most
    `refits` times."""
    h, w = weight.shape
    half_w, half_h = _reach(sprite, scale)
    x0, x1, y0, y1 = _search_window(sprite, scale, start, (h, w))
    if x1 - x0 < 2 * SEARCH_PX + 3 or y1 - y0 < 2 * SEARCH_PX + 3:
        return None
    S = SEARCH_PX
    # the sprite on a canvas S pixels larger each way, so that each whole-pixel offset is a slice
    cw, ch = x1 - x0 + 2 * S, y1 - y0 + 2 * S
    pre, alpha, inner = _warp(sprite, scale, (start[0] - x0 + S, start[1] - y0 + S), (cw, ch), softness, True)
    img, bg = image_ycc[y0:y1, x0:x1], background_ycc[y0:y1, x0:x1]
    if sprite.shade is not None:
        bg = bg * _shade(sprite, scale, (start[0] - x0, start[1] - y0), (x1 - x0, y1 - y0))[..., None]
    wt = weight[y0:y1, x0:x1].astype(np.float32)
    if float(wt.sum()) < MIN_SPRITE_PX:
        return None
    core = (slice(S, S + y1 - y0), slice(S, S + x1 - x0))
    cmap = _colour_map(pre[core], alpha[core], inner[core], img, wt)
    pre = pre * cmap[0].astype(np.float32) + alpha[..., None] * cmap[1].astype(np.float32)
    uncovered = (1.0 - alpha)[..., None]      # the background's share, per pixel of the canvas
    wt_sum = float(wt.sum())

    def cost(dx: int, dy: int) -> float:
        win = (slice(S - dy, S - dy + y1 - y0), slice(S - dx, S - dx + x1 - x0))
        return _robust_cost(pre[win] + uncovered[win] * bg, img, wt, wt_sum)

    seen: dict[tuple[int, int], float] = {}

    def at(dx: int, dy: int) -> float | None:
        if abs(dx) > S or abs(dy) > S:
            return None
        if (dx, dy) not in seen:
            seen[dx, dy] = cost(dx, dy)
        return seen[dx, dy]

    # descent over whole pixels: to the best of the eight neighbours while one is better (the cost
    # is smooth over a few pixels around a body's place; a full grid would cost several times more)
    best = (0, 0)
    for _step in range(2 * S):
        _, d = min((v, d) for d in [(best[0] + i, best[1] + j) for j in (-1, 0, 1) for i in (-1, 0, 1)]
                   if (v := at(*d)) is not None)
        if d == best:
            break
        best = d
    if recentre > 0 and max(abs(best[0]), abs(best[1])) == S:
        p = place(sprite, image_ycc, background_ycc, weight, (start[0] + best[0], start[1] + best[1]), scale,
                  softness, recentre - 1)
        return None if p is None else replace(p, cost_at_start=seen[0, 0])
    at_start, found = seen[0, 0], seen[best]
    absent = _robust_cost(bg, img, wt)
    explained = 1.0 - found / absent if absent > 0 else 0.0
    uv = np.array([start[0] + best[0], start[1] + best[1]], float)

    # the parabola steps read the window around the body where the descent ended, not the search's
    ux, uy = int(round(uv[0])), int(round(uv[1]))
    sx0, sx1 = max(ux - half_w - 1, x0), min(ux + half_w + 2, x1)
    sy0, sy1 = max(uy - half_h - 1, y0), min(uy + half_h + 2, y1)
    win = (slice(sy0 - y0, sy1 - y0), slice(sx0 - x0, sx1 - x0))
    img_s, bg_s, wt_s = img[win], bg[win], wt[win]
    if float(wt_s.sum()) < MIN_SPRITE_PX:
        img_s, bg_s, wt_s, sx0, sy0, sx1, sy1 = img, bg, wt, x0, y0, x1, y1

    gain, offset, wt_s_sum = cmap[0].astype(np.float32), cmap[1].astype(np.float32), float(wt_s.sum())

    def cost_at(p: np.ndarray) -> float:
        pre_p, alpha_p, _ = _warp(sprite, scale, (p[0] - sx0, p[1] - sy0), (sx1 - sx0, sy1 - sy0), softness)
        model = pre_p * gain + alpha_p[..., None] * offset + (1.0 - alpha_p)[..., None] * bg_s
        return _robust_cost(model, img_s, wt_s, wt_s_sum)

    # sub-pixel: a parabola through the estimate and its neighbours half a pixel, then a quarter,
    # away on each axis (the sprite resampled there); its vertex is the next estimate. Close
    # neighbours keep a well that a smear makes lopsided from pulling the vertex to its shallow side
    for spacing in SUBPIXEL_STEPS:
        c0 = cost_at(uv)
        step = np.zeros(2)
        for axis in (0, 1):
            e = np.zeros(2)
            e[axis] = spacing
            cm, cp = cost_at(uv - e), cost_at(uv + e)
            curv = cm - 2.0 * c0 + cp
            if curv > 1e-12:
                step[axis] = float(np.clip(0.5 * spacing * (cm - cp) / curv, -spacing, spacing))
        uv += step
        found = min(found, c0)
    moved = float(np.max(np.abs(uv - np.asarray(start))))
    if moved > S + 0.5:
        return None
    if refits > 0 and moved > REFIT_MOVE_PX:
        # the colour mapping was fitted on the sprite's interior at the start: a start pixels off
        # maps part of the background into the body's colours and holds the search near the start
        # (on heavy H.264, where the silhouette fit starts several pixels off, up to 3 px short of
        # where the look fits best); fitted again where the search ended, it searches on from there
        p = place(sprite, image_ycc, background_ycc, weight, (float(uv[0]), float(uv[1])), scale, softness, 0,
                  refits - 1)
        if p is not None and max(abs(p.uv[0] - start[0]), abs(p.uv[1] - start[1])) <= S + 0.5:
            return replace(p, cost_at_start=at_start)     # (within this search's window, as promised)
    return Placement((float(uv[0]), float(uv[1])), found, at_start, explained=explained)


def place_and_size(sprite: Sprite, image_ycc: np.ndarray, background_ycc: np.ndarray, weight: np.ndarray,
                   start: tuple[float, float], scale: float = 1.0, softness: float = 0.0) -> Placement | None:
    """`place`, with the body's size not known (a single image: no frame 0 shows it next to the
    condition frame; a video's frame 0, read once): the sprite is placed at the sizes of SIZE_GRID in
    turn, up to the first that costs more than the one before, and where none beyond the case's
    costs less, at those of SIZE_GRID_DOWN alike (a body drawn smaller); from the best, it is placed again
    (from that place) at the sizes SIZE_FINE around it and the size moves to the vertex of a
    quadratic fitted to those costs by least squares, until it settles (SIZE_ROUNDS, SIZE_SETTLED).
    Place and size trade off (a body that grew on a floor is centred higher), so every size is
    compared at its own best place, and a grid size's search that ends on its window's edge goes on
    from there (EDGE_RESTARTS): a body drawn larger can be centred farther from the silhouette fit
    at the case's size than one window reaches. A size other than the case's (by 0.02 or more)
    is kept only where it costs at most SIZE_GAIN of what the case's size costs at its best place."""
    base = place(sprite, image_ycc, background_ycc, weight, start, scale, softness, EDGE_RESTARTS)
    if base is None:
        return None
    # the cost along the grid has one minimum: the sizes past the first that costs more are not
    # tried, and smaller sizes only where no larger one costs less than the case's
    f, best = 1.0, base
    for grid in (SIZE_GRID[1:], SIZE_GRID_DOWN):
        for g in grid:
            p = place(sprite, image_ycc, background_ycc, weight, start, scale * g, softness, EDGE_RESTARTS)
            if p is None:
                continue
            if p.cost >= best.cost:
                break
            f, best = g, p
        if f != 1.0:
            break
    if f == 1.0:
        return base
    # every size's cost read on one window (`place` reads a window that grows with the size, and
    # more background in it would lower a larger size's mean cost)
    view = _View(sprite, image_ycc, background_ycc, weight, best.uv, scale * SIZE_GRID[-1])
    for _ in range(SIZE_ROUNDS):
        xs = [f + d for d in SIZE_FINE if SIZE_GRID_DOWN[-1] <= f + d <= SIZE_GRID[-1]]
        fits = [place(sprite, image_ycc, background_ycc, weight, best.uv, scale * x, softness) for x in xs]
        pts = [(x, p, view.cost(p.uv, scale * x, softness)) for x, p in zip(xs, fits) if p is not None]
        if len(pts) < 4:
            break
        x, c = np.array([q[0] for q in pts]) - f, np.array([q[2] for q in pts])
        a, b, _c = np.polyfit(x, c, 2)
        f_new = f + (float(np.clip(-b / (2 * a), x.min(), x.max())) if a > 0 else float(x[np.argmin(c)]))
        best = min(pts, key=lambda q: abs(q[0] - f_new))[1]
        f, moved = f_new, abs(f_new - f)
        if moved < SIZE_SETTLED:
            break
    if best.cost > SIZE_GAIN * base.cost or abs(f - 1.0) < 0.02:
        return base
    return Placement(best.uv, best.cost, base.cost_at_start, round(f, 4), best.explained)


class _View:
    """A window of a frame around `at`, as large as a sprite `scale` times its size placed within
    SEARCH_PX of it reads: the cost of the sprite at any place and size, on the same pixels."""

    def __init__(self, sprite: Sprite, image_ycc, background_ycc, weight, at, scale: float):
        self.x0, x1, self.y0, y1 = _search_window(sprite, scale, at, weight.shape)
        self.sprite, self.at, self.size = sprite, at, (x1 - self.x0, y1 - self.y0)
        win = (slice(self.y0, y1), slice(self.x0, x1))
        self.img, self.bg, self.wt = image_ycc[win], background_ycc[win], weight[win].astype(np.float32)

    def cost(self, uv, scale: float, softness: float) -> float:
        if float(self.wt.sum()) < MIN_SPRITE_PX:
            return math.inf
        bg = self.bg
        if self.sprite.shade is not None:
            bg = bg * _shade(self.sprite, scale, (self.at[0] - self.x0, self.at[1] - self.y0), self.size)[..., None]
        pre, alpha, inner = _warp(self.sprite, scale, (uv[0] - self.x0, uv[1] - self.y0), self.size, softness, True)
        cmap = _colour_map(pre, alpha, inner, self.img, self.wt)
        model = pre * cmap[0].astype(np.float32) + alpha[..., None] * cmap[1].astype(np.float32) \
            + (1.0 - alpha)[..., None] * bg
        return _robust_cost(model, self.img, self.wt)
