"""Pixel transforms that make an answer look unlike our render while its physics stays known:
codecs, blur and noise, photometric changes, camera warps, and drawn layers (the input's annotation
overlay left on, the F-G answer's orange arrows and labels). Pure functions on RGB uint8 arrays;
the geometric ones come with what they do to the truth (`truth.warp_instances`)."""
from __future__ import annotations

import io
import math

import cv2
import numpy as np
from PIL import Image, ImageDraw, ImageFont

from ..segment.overlay import ANSWER_ORANGE
from ..segment.photometry import channel_difference
from ..segment.registration import opencv_affine


def _u8(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def image_codec(img: np.ndarray, codec: str, quality: int) -> np.ndarray:
    """`img` after a round trip through JPEG (4:2:0, as most encoders default) or WebP."""
    buf = io.BytesIO()
    fmt = {"jpeg": "JPEG", "webp": "WEBP"}[codec]
    Image.fromarray(img).save(buf, format=fmt, quality=int(quality))
    return np.asarray(Image.open(io.BytesIO(buf.getvalue())).convert("RGB"))


def blur(img: np.ndarray, sigma: float) -> np.ndarray:
    return cv2.GaussianBlur(img, (0, 0), sigmaX=float(sigma), borderType=cv2.BORDER_REPLICATE)


def noise(img: np.ndarray, sigma: float, rng: np.random.Generator) -> np.ndarray:
    return _u8(img.astype(np.float32) + rng.normal(0.0, sigma, img.shape).astype(np.float32))


def photometric(img: np.ndarray, gain=(1.0, 1.0, 1.0), offset: float = 0.0, gamma: float = 1.0) -> np.ndarray:
    """out = 255·(gain·in/255)^gamma + offset per channel: exposure, white balance, tone curve."""
    x = np.clip(img.astype(np.float32) / 255.0 * np.asarray(gain, np.float32), 0.0, 1.0)
    if gamma != 1.0:
        x = x ** np.float32(gamma)
    return _u8(x * 255.0 + offset)


def warp(img: np.ndarray, affine: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """`img` seen through `affine` (2×3, source pixel → target pixel) at `size` = (width, height);
    where the target looks outside the source the border is replicated (what a real reframing
    would show there is unknown; the registered truth marks those pixels unobservable)."""
    return cv2.warpAffine(img, opencv_affine(affine), size, flags=cv2.INTER_LINEAR,
                          borderMode=cv2.BORDER_REPLICATE)


def resize(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    if (img.shape[1], img.shape[0]) == tuple(size):
        return img
    shrink = size[0] < img.shape[1]
    return cv2.resize(img, size, interpolation=cv2.INTER_AREA if shrink else cv2.INTER_LINEAR)


def crop_affine(window: tuple[float, float, float, float], size: tuple[int, int]) -> np.ndarray:
    """The affine that maps the window (x0, y0, w, h) of a frame onto a whole frame of `size`."""
    x0, y0, w, h = window
    sx, sy = size[0] / w, size[1] / h
    return np.array([[sx, 0.0, -sx * x0], [0.0, sy, -sy * y0]])


def shake_affine(dx: float, dy: float, angle_deg: float, size: tuple[int, int]) -> np.ndarray:
    """A small camera rotation about the frame centre plus a shift, in pixels."""
    c, s = math.cos(math.radians(angle_deg)), math.sin(math.radians(angle_deg))
    cx, cy = size[0] / 2, size[1] / 2
    R = np.array([[c, -s], [s, c]])
    t = np.array([cx, cy]) - R @ np.array([cx, cy]) + np.array([dx, dy])
    return np.hstack([R, t[:, None]])


def composite(img: np.ndarray, layer: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """`layer` over `img` with per-pixel coverage `alpha` in [0, 1]."""
    a = alpha.astype(np.float32)[..., None]
    return _u8(img.astype(np.float32) * (1.0 - a) + layer.astype(np.float32) * a)


def input_overlay(annotated: np.ndarray, clean: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The input's annotation layer (labels, v0 arrows, axes): the annotated first frame where it
    differs from the clean one. Returns (layer RGB, coverage 0/1)."""
    drawn = channel_difference(annotated, clean) > 0
    return annotated, drawn.astype(np.float32)


def _font(px: int) -> ImageFont.ImageFont:
    try:
        return ImageFont.truetype("DejaVuSans-Bold.ttf", px)
    except OSError:
        return ImageFont.load_default(size=px)


def answer_overlay(size: tuple[int, int], arrows: list[tuple[tuple[float, float], tuple[float, float]]],
                   labels: list[tuple[tuple[float, float], str]], color=ANSWER_ORANGE
                   ) -> tuple[np.ndarray, np.ndarray]:
    """The F-G answer the prompt asks for, drawn the way a model might: orange arrows (start, end)
    with a filled head and bold orange labels (top-left, text). Returns (layer RGB, coverage)."""
    w, h = size
    scale = h / 360.0
    cover = Image.new("L", (w, h), 0)
    d = ImageDraw.Draw(cover)
    width = max(3, round(4 * scale))
    for s, e in arrows:
        s, e = np.asarray(s, float), np.asarray(e, float)
        v = e - s
        n = float(np.linalg.norm(v))
        if n < 1e-6:
            continue
        u = v / n
        head = min(0.45 * n, 4.0 * width + 6)
        base = e - u * head
        perp = np.array([-u[1], u[0]])
        d.line([tuple(s), tuple(base)], fill=255, width=width)
        d.polygon([tuple(e), tuple(base + perp * head * 0.5), tuple(base - perp * head * 0.5)], fill=255)
    f = _font(max(12, round(20 * scale)))
    for (x, y), text in labels:
        d.text((x, y), text, fill=255, font=f)
    alpha = np.asarray(cover, np.float32) / 255.0
    layer = np.empty((h, w, 3), np.uint8)
    layer[:] = color
    return layer, alpha


def label_box(text: str, px: int) -> tuple[int, int]:
    f = _font(px)
    x0, y0, x1, y1 = f.getbbox(text)
    return int(x1 - x0), int(y1 - y0)


def recolour_on_white(img: np.ndarray, mix: np.ndarray) -> np.ndarray:
    """Objects on white recoloured by a linear map of their difference from white: a rim blended
    with white stays the same blend of the new colour with white, so the masks do not change."""
    d = img.astype(np.float32) - 255.0
    return _u8(255.0 + d @ np.asarray(mix, np.float32).T)


def shift_on_white(img: np.ndarray, instances: np.ndarray, iid: int, dx: int, dy: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Objects on white with object `iid` moved by whole pixels (its blended rim comes along: on
    white a rim pixel is the same blend wherever it lies). Returns (image, instance map)."""
    h, w = instances.shape
    own = instances == iid
    region = cv2.dilate(own.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    region &= ~((instances > 0) & ~own)
    out = img.copy()
    out[region] = 255
    inst = instances.copy()
    inst[own] = 0
    ys, xs = np.nonzero(region)
    ty, tx = ys + dy, xs + dx
    ok = (ty >= 0) & (ty < h) & (tx >= 0) & (tx < w)
    out[ty[ok], tx[ok]] = np.minimum(out[ty[ok], tx[ok]], img[ys[ok], xs[ok]])
    oy, ox = np.nonzero(own)
    oty, otx = oy + dy, ox + dx
    ok = (oty >= 0) & (oty < h) & (otx >= 0) & (otx < w)
    inst[oty[ok], otx[ok]] = iid
    return out, inst
