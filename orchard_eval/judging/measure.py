"""Pixel measurements used by the programmatic judge. All functions are deterministic numpy/OpenCV
code on RGB uint8 images of one size; scores are in [0, 1]."""
from __future__ import annotations

import math
from dataclasses import dataclass

import cv2
import numpy as np
from scipy import ndimage

from ..segment.classical import to_lab

WHITE_LAB = np.array([100.0, 0.0, 0.0], np.float32)


def clip01(x: float) -> float:
    return float(min(1.0, max(0.0, x)))


def ramp(x: float, good: float, bad: float) -> float:
    """1 at or below `good`, 0 at or beyond `bad`, linear between (works for good > bad too)."""
    if good == bad:
        return 1.0 if x <= good else 0.0
    return clip01((bad - x) / (bad - good)) if bad > good else clip01((x - bad) / (good - bad))


def log_ratio_score(a: float, b: float, zero_at: float = 2.0, within: float = 1.0) -> float:
    """1 while neither is more than `within` times the other (what the measurement itself can move),
    0 when one is `zero_at` times the other, linear in the log of the ratio between."""
    if a <= 0 or b <= 0:
        return 0.0
    lz = math.log(zero_at)
    lw = math.log(min(max(within, 1.0), zero_at))
    d = abs(math.log(a / b))
    if lz <= lw:        # an allowance as wide as the range: full marks within it, none beyond
        return 1.0 if d <= lw else 0.0
    return clip01(1.0 - max(0.0, d - lw) / (lz - lw))


def de_white(img: np.ndarray) -> np.ndarray:
    lab = to_lab(img)
    return np.linalg.norm(lab - WHITE_LAB, axis=2)


def ink(img: np.ndarray, thr: float = 25.0) -> np.ndarray:
    """Pixels clearly not white (ΔE to white above `thr`)."""
    return de_white(img) > thr


def dilate(mask: np.ndarray, r: int) -> np.ndarray:
    if r <= 0:
        return mask.astype(bool)
    k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
    return cv2.dilate(mask.astype(np.uint8), k) > 0


def box_mask(shape, boxes, pad: float = 0.0) -> np.ndarray:
    m = np.zeros(shape[:2], bool)
    H, W = shape[:2]
    for b in boxes:
        x0, y0, x1, y1 = b
        x0, y0 = int(max(0, math.floor(x0 - pad))), int(max(0, math.floor(y0 - pad)))
        x1, y1 = int(min(W, math.ceil(x1 + pad))), int(min(H, math.ceil(y1 + pad)))
        if x1 > x0 and y1 > y0:
            m[y0:y1, x0:x1] = True
    return m


def white_background(img: np.ndarray, exclude: np.ndarray | None = None, block: int = 16) -> float:
    """Share of background blocks whose median colour is white: blocks mostly outside `exclude`
    (expected content); a block scores 1 at median ΔE ≤ 4 from white and 0 at ≥ 12. Sparse marks do
    not move a block's median, so this measures the page, not the content."""
    d = de_white(img)
    H, W = d.shape
    ny, nx = max(0, (H - block) // block + 1), max(0, (W - block) // block + 1)
    if ny == 0 or nx == 0:
        return 1.0
    ex = np.zeros_like(d, bool) if exclude is None else np.asarray(exclude, bool)

    def blocks(a: np.ndarray) -> np.ndarray:   # (ny, nx, block²), each block's pixels in row-major order
        return a[:ny * block, :nx * block].reshape(ny, block, nx, block).swapaxes(1, 2).reshape(ny, nx, -1)

    D, E = blocks(d), blocks(ex)
    share = E.mean(axis=2)
    # blocks with nothing excluded at once, the others one by one (their medians over fewer pixels)
    med = np.median(D, axis=2)
    scores = []
    for y, x in zip(*np.nonzero(share <= 0.3)):
        v = med[y, x] if share[y, x] == 0 else np.median(D[y, x][~E[y, x]])
        scores.append(ramp(float(v), 4.0, 12.0))
    return float(np.mean(scores)) if scores else 1.0


def remnant_removal(answer: np.ndarray, background: np.ndarray, annotated: np.ndarray, mask: np.ndarray,
                    min_contrast: float = 20.0) -> float | None:
    """How cleanly annotations were removed: at the annotation's pixels (`mask`, where the annotated
    image differs from the expected background by ≥ `min_contrast` ΔE) the answer's colour is
    projected onto the background→annotation direction in Lab (0 = background, 1 = annotation). The
    mean projection r gives 1 − (r − 0.03)/0.4, clipped: a half-faded ghost already scores 0.
    None when there is no annotation pixel to look at."""
    mask = mask.astype(bool)
    if not mask.any():
        return None
    la, lb, ln = lab_at(answer, mask), lab_at(background, mask), lab_at(annotated, mask)
    d = ln - lb
    n2 = np.sum(d * d, axis=1)
    sel = n2 >= min_contrast ** 2
    if not sel.any():
        return None
    t = np.sum((la - lb)[sel] * d[sel], axis=1) / n2[sel]
    r = float(np.mean(np.clip(t, 0.0, 1.0)))
    return ramp(r, 0.03, 0.43)


def remnant_by_parts(answer: np.ndarray, background: np.ndarray, annotated: np.ndarray,
                     parts: list[np.ndarray]) -> float | None:
    """`remnant_removal` over several annotations (each label, each arrow), as ½ their mean + ½ the
    worst: "are the annotations removed" is not true while one of them is fully left on, however
    many others were removed. None when no part has a pixel to look at."""
    vals = [v for v in (remnant_removal(answer, background, annotated, m) for m in parts) if v is not None]
    if not vals:
        return None
    return 0.5 * float(np.mean(vals)) + 0.5 * min(vals)


def gradient_energy(img: np.ndarray, mask: np.ndarray | None = None) -> float:
    g = cv2.cvtColor(np.ascontiguousarray(img), cv2.COLOR_RGB2GRAY).astype(np.float32)
    gx = cv2.Sobel(g, cv2.CV_32F, 1, 0, ksize=3)
    gy = cv2.Sobel(g, cv2.CV_32F, 0, 1, ksize=3)
    m = np.hypot(gx, gy)
    if mask is not None:
        m = m[mask]
    return float(m.mean()) if m.size else 0.0


def laplacian_var(img: np.ndarray) -> float:
    g = cv2.cvtColor(np.ascontiguousarray(img), cv2.COLOR_RGB2GRAY).astype(np.float32)
    return float(cv2.Laplacian(g, cv2.CV_32F, ksize=3).var())


def lab_at(img: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """(N, 3) Lab of the image's pixels under `mask`, in row-major order: `to_lab(img)[mask]`, the
    same values bit for bit (the conversion is per pixel), without converting the rest of the frame."""
    px = np.asarray(img)[..., :3][mask]
    return to_lab(px[None])[0] if len(px) else np.zeros((0, 3), np.float32)


def median_lab(img: np.ndarray, mask: np.ndarray) -> np.ndarray | None:
    if not mask.any():
        return None
    return np.median(lab_at(img, mask), axis=0)


COLOUR_TOLERANCE = 5.0   # ΔE76 of two Lab colours: below it a colour is the same one seen through lossy coding


def colour_score(a: np.ndarray | None, b: np.ndarray | None, zero_at: float = 35.0) -> float:
    """1 up to COLOUR_TOLERANCE (JPEG / H.264 chroma subsampling moves a flat colour by 2–5), falling
    linearly to 0 at `zero_at`."""
    if a is None or b is None:
        return 0.0
    return ramp(float(np.linalg.norm(a - b)), COLOUR_TOLERANCE, zero_at)


@dataclass
class ArrowShape:
    tail: np.ndarray        # (x, y)
    head: np.ndarray
    length: float
    width: float
    coverage: float         # share of the axis covered by ink (1 = solid line)
    lab: np.ndarray
    n: int

    @property
    def direction(self) -> np.ndarray:
        d = self.head - self.tail
        return d / (np.linalg.norm(d) + 1e-9)


def arrow_shape(mask: np.ndarray, img: np.ndarray) -> ArrowShape | None:
    """Principal axis of a drawn arrow: tail and tip (the tip is the wider end: the head), length,
    shaft width, solid coverage, median colour."""
    ys, xs = np.nonzero(mask)
    if xs.size < 6:
        return None
    P = np.stack([xs + 0.5, ys + 0.5], axis=1)
    c = P.mean(axis=0)
    cov = np.cov((P - c).T)
    w, v = np.linalg.eigh(cov)
    d = v[:, np.argmax(w)]
    p = (P - c) @ d
    q = (P - c) @ np.array([-d[1], d[0]])
    lo, hi = float(p.min()), float(p.max())
    L = hi - lo
    if L < 3:
        return None
    bins = np.floor(p - lo).astype(int)
    nb = int(bins.max()) + 1
    counts = np.bincount(bins, minlength=nb)
    coverage = float((counts > 0).mean())
    # width profile: spread of q per bin
    qmin = np.full(nb, np.inf)
    qmax = np.full(nb, -np.inf)
    np.minimum.at(qmin, bins, q)
    np.maximum.at(qmax, bins, q)
    width = np.where(counts > 0, qmax - qmin + 1.0, 0.0)
    k = max(1, int(0.3 * nb))
    mid = width[k:nb - k] if nb > 2 * k else width
    typical = float(np.median(width[width > 0]))
    shaft = float(np.median(mid[mid > 0])) if np.any(mid > 0) else typical
    # the head is the half whose width exceeds the shaft's more: a short arrow's head is half its
    # length (end windows would miss its base), and where arrows meet at their tails (a frame of axes)
    # a blurred or coded junction widens that end by far less than a head does
    excess = np.maximum(width - typical, 0.0)
    half = nb // 2
    lo_x, hi_x = float(excess[:half].sum()), float(excess[nb - half:].sum())
    head_at_hi = hi_x > lo_x if lo_x != hi_x else width[-k:].mean() >= width[:k].mean()
    a, b = c + lo * d, c + hi * d
    tail, head = (a, b) if head_at_hi else (b, a)
    return ArrowShape(tail, head, L, shaft, coverage, np.median(lab_at(img, mask.astype(bool)), axis=0), int(xs.size))


def largest_component(mask: np.ndarray, min_area: int = 6) -> np.ndarray:
    n, lab, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 1:
        return np.zeros_like(mask, bool)
    i = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    if stats[i, cv2.CC_STAT_AREA] < min_area:
        return np.zeros_like(mask, bool)
    return lab == i


def grown_through(seed: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """The components of `allowed` (8-connected) that touch `seed`."""
    n, lab = cv2.connectedComponents(allowed.astype(np.uint8), connectivity=8)
    keep = np.unique(lab[seed & allowed])
    keep = keep[keep > 0]
    return np.isin(lab, keep) if keep.size else seed.copy()


def angle_between(u: np.ndarray, v: np.ndarray) -> float:
    c = float(np.clip(np.dot(u, v) / (np.linalg.norm(u) * np.linalg.norm(v) + 1e-12), -1, 1))
    return math.degrees(math.acos(c))


def aligned_iou(a: np.ndarray, b: np.ndarray) -> float:
    """IoU of two masks after moving `a`'s centroid onto `b`'s (shape and size, not position)."""
    if not a.any() or not b.any():
        return 0.0
    ya, xa = np.nonzero(a)
    yb, xb = np.nonzero(b)
    dy, dx = int(round(yb.mean() - ya.mean())), int(round(xb.mean() - xa.mean()))
    s = ndimage.shift(a.astype(np.uint8), (dy, dx), order=0, mode="constant") > 0
    u = np.count_nonzero(s | b)
    return float(np.count_nonzero(s & b) / u) if u else 0.0


def shifted(mask: np.ndarray, dy: int, dx: int) -> np.ndarray:
    return ndimage.shift(mask.astype(np.uint8), (dy, dx), order=0, mode="constant") > 0
