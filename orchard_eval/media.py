"""Image and video input for the evaluator: size checks before decoding, in-order PyAV decoding that
keeps every frame decoded before a corruption, and the resize rules of App. D.4.

Everything here reads untrusted model outputs, so every failure is turned into a `MediaError` with a
short `kind` that validation reports and scoring logs ("missing", "empty", "oversized",
"undecodable", "no_frames", "mislabelled").
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
from PIL import Image

MAX_SIDE = 8192
MAX_PIXELS = 50_000_000

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


class MediaError(Exception):
    """A file that cannot serve as an answer artifact. `kind` is a stable short tag."""

    def __init__(self, kind: str, path: str | Path, detail: str = ""):
        self.kind, self.path, self.detail = kind, str(path), detail
        super().__init__(f"{path}: {kind}" + (f": {detail}" if detail else ""))


def sniff_format(path: str | Path) -> str:
    """The container a file really holds, from its first bytes: png, jpeg, webp, gif, mp4 (ISO BMFF),
    webm (Matroska), avi, or unknown."""
    with open(path, "rb") as fh:
        head = fh.read(16)
    if head.startswith(PNG_MAGIC):
        return "png"
    if head.startswith(b"\xff\xd8\xff"):
        return "jpeg"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "webp"
    if head[:4] == b"RIFF" and head[8:12] == b"AVI ":
        return "avi"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "gif"
    if head[4:8] in (b"ftyp", b"moov", b"mdat", b"free", b"wide"):
        return "mp4"
    if head.startswith(b"\x1a\x45\xdf\xa3"):
        return "webm"
    return "unknown"


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise MediaError("missing", path)
    if path.stat().st_size == 0:
        raise MediaError("empty", path, "zero bytes")


def check_dimensions(width: int, height: int, path: str | Path = "") -> None:
    if width <= 0 or height <= 0:
        raise MediaError("undecodable", path, f"invalid size {width}×{height}")
    if width > MAX_SIDE or height > MAX_SIDE or width * height > MAX_PIXELS:
        raise MediaError("oversized", path, f"{width}×{height} exceeds {MAX_SIDE} px a side or "
                                            f"{MAX_PIXELS // 1_000_000} MP")


@dataclass(frozen=True)
class ImageInfo:
    width: int
    height: int
    format: str  # what Pillow identified
    mode: str


def probe_image(path: str | Path) -> ImageInfo:
    """Header-only look at an image (Pillow opens lazily): refuses empty, unreadable and oversized files
    without decoding pixel data."""
    path = Path(path)
    _check_file(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                info = ImageInfo(int(img.width), int(img.height), str(img.format or "unknown"), str(img.mode))
    except Image.DecompressionBombError as exc:
        raise MediaError("oversized", path, str(exc)) from exc
    except Exception as exc:  # noqa: BLE001 - any parse failure is an undecodable artifact
        raise MediaError("undecodable", path, f"{type(exc).__name__}: {exc}") from exc
    check_dimensions(info.width, info.height, path)
    return info


def _to_rgb(img: Image.Image) -> np.ndarray:
    if img.mode in ("RGBA", "LA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return np.asarray(Image.alpha_composite(white, rgba).convert("RGB"))
    if img.mode in ("I;16", "I;16B", "I;16L", "I"):
        a = np.asarray(img).astype(np.float64)
        top = a.max() if a.size and a.max() > 255 else 255.0
        g = np.clip(a * (255.0 / top), 0, 255).astype(np.uint8)
        return np.repeat(g[..., None], 3, axis=2)
    return np.asarray(img.convert("RGB"))


def read_image(path: str | Path) -> np.ndarray:
    """RGB uint8 H×W×3. Transparent pixels are composited on white (answers are on white)."""
    path = Path(path)
    probe_image(path)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                img.load()
                return np.ascontiguousarray(_to_rgb(img))
    except MediaError:
        raise
    except Exception as exc:  # noqa: BLE001 - truncated data, bad CRC, ...
        raise MediaError("undecodable", path, f"{type(exc).__name__}: {exc}") from exc


def read_label_image(path: str | Path) -> np.ndarray:
    """A single-channel label/instance PNG as an integer array (no colour conversion)."""
    path = Path(path)
    probe_image(path)
    try:
        with Image.open(path) as img:
            img.load()
            a = np.asarray(img)
    except Exception as exc:  # noqa: BLE001
        raise MediaError("undecodable", path, f"{type(exc).__name__}: {exc}") from exc
    if a.ndim == 3:
        a = a[..., 0]
    return np.ascontiguousarray(a)


# ---------------------------------------------------------------------------------------------
# Video
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class VideoInfo:
    width: int
    height: int
    n_frames: int          # frames actually decodable, in order
    container_fps: float | None
    truncated: bool        # decoding stopped on an error before the end of the stream


def _open_video(path: Path):
    import av

    _check_file(path)
    try:
        container = av.open(str(path))
    except Exception as exc:  # noqa: BLE001
        raise MediaError("undecodable", path, f"{type(exc).__name__}: {exc}") from exc
    if not container.streams.video:
        container.close()
        raise MediaError("undecodable", path, "no video stream")
    stream = container.streams.video[0]
    w, h = int(stream.codec_context.width or 0), int(stream.codec_context.height or 0)
    if w and h:
        try:
            check_dimensions(w, h, path)
        except MediaError:
            container.close()
            raise
    return container, stream


def iter_video(path: str | Path, keep: Iterable[int] | None = None) -> Iterator[tuple[int, np.ndarray | None]]:
    """Decode a video in order, yielding `(index, rgb)` for every decodable frame; `rgb` is None for
    frames not in `keep` (when given), so callers can count frames without converting them. Stops
    quietly at the first decoding error after at least one frame (a truncated file keeps its prefix);
    raises `MediaError` when nothing at all can be decoded."""
    path = Path(path)
    keep_set = None if keep is None else set(int(k) for k in keep)
    container, stream = _open_video(path)
    index = 0
    try:
        it = container.decode(stream)
        while True:
            try:
                frame = next(it)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 - corrupt packet: keep what we have
                if index == 0:
                    raise MediaError("undecodable", path, f"{type(exc).__name__}: {exc}") from exc
                break
            if index == 0:
                check_dimensions(frame.width, frame.height, path)
            if keep_set is None or index in keep_set:
                yield index, frame.to_ndarray(format="rgb24")
            else:
                yield index, None
            index += 1
    finally:
        container.close()


def probe_video(path: str | Path) -> VideoInfo:
    """Count decodable frames (decodes, but converts nothing)."""
    path = Path(path)
    container, stream = _open_video(path)
    fps = float(stream.average_rate) if stream.average_rate else None
    w, h = int(stream.codec_context.width or 0), int(stream.codec_context.height or 0)
    container.close()
    n, truncated = 0, False
    try:
        for _ in iter_video(path, keep=()):
            n += 1
    except MediaError:
        raise
    expected = None
    try:
        import av

        with av.open(str(path)) as c2:
            st = c2.streams.video[0]
            expected = int(st.frames) if st.frames else None
    except Exception:  # noqa: BLE001
        expected = None
    if expected is not None and n < expected:
        truncated = True
    if n == 0:
        raise MediaError("no_frames", path, "the video holds no decodable frame")
    return VideoInfo(w, h, n, fps, truncated)


def read_video_frames(path: str | Path, indices: Iterable[int] | None = None) -> tuple[dict[int, np.ndarray], int]:
    """Decode in order and return `({index: rgb}, number of decodable frames)`; all frames when
    `indices` is None."""
    want = None if indices is None else sorted(set(int(i) for i in indices))
    frames: dict[int, np.ndarray] = {}
    n = 0
    for i, rgb in iter_video(path, keep=want):
        n = i + 1
        if rgb is not None:
            frames[i] = rgb
    if n == 0:
        raise MediaError("no_frames", path, "the video holds no decodable frame")
    return frames, n


def last_decodable_frame(path: str | Path) -> tuple[np.ndarray, int]:
    """The last frame that decodes (App. D.1) and the number of decodable frames."""
    last = None
    n = 0
    for i, rgb in iter_video(path):
        last, n = rgb, i + 1
    if last is None:
        raise MediaError("no_frames", path, "the video holds no decodable frame")
    return last, n


def write_video(path: str | Path, frames: Iterable[np.ndarray], fps: float = 24, crf: int = 12) -> int:
    """Encode RGB frames as H.264 yuv420p (used by tests and tools; odd sizes are padded by one pixel)."""
    import av
    from fractions import Fraction

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with av.open(str(path), mode="w", format="mp4") as container:
        stream = None
        for rgb in frames:
            rgb = np.asarray(rgb, dtype=np.uint8)
            h, w = rgb.shape[:2]
            if h % 2 or w % 2:
                rgb = np.pad(rgb, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge")
            if stream is None:
                stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
                stream.width, stream.height, stream.pix_fmt = rgb.shape[1], rgb.shape[0], "yuv420p"
                stream.options = {"crf": str(crf), "preset": "veryfast", "threads": "1"}
            for packet in stream.encode(av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")):
                container.mux(packet)
            count += 1
        if stream is not None:
            for packet in stream.encode():
                container.mux(packet)
    return count


# ---------------------------------------------------------------------------------------------
# Resolution normalisation (App. D.4): direct resize, no crop, pad or aspect preservation
# ---------------------------------------------------------------------------------------------
def resize_rgb(img: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Bilinear resize of an RGB image to `size = (width, height)`."""
    import cv2

    w, h = size
    if img.shape[1] == w and img.shape[0] == h:
        return img
    return cv2.resize(np.ascontiguousarray(img), (int(w), int(h)), interpolation=cv2.INTER_LINEAR)


def resize_mask(mask: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize of a label/binary mask of any dtype to `size = (width, height)`: the
    output pixel (x, y) takes the source pixel whose area contains the output pixel's centre."""
    w, h = int(size[0]), int(size[1])
    sh, sw = mask.shape[:2]
    if sh == h and sw == w:
        return mask
    ys = np.minimum(((np.arange(h) + 0.5) * sh / h).astype(np.int64), sh - 1)
    xs = np.minimum(((np.arange(w) + 0.5) * sw / w).astype(np.int64), sw - 1)
    return mask[ys[:, None], xs[None, :]]
