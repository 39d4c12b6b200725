"""MP4 (H.264, yuv420p) writing and decoding with PyAV; PNG writing with Pillow. Writes are atomic."""
from __future__ import annotations

import io
import os
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Iterable

import numpy as np
from PIL import Image

from .io import FILE_MODE, write_bytes_atomic

NEAR_LOSSLESS_CRF = 10


def png_bytes(array: np.ndarray) -> bytes:
    """Lossless PNG without timestamps or other varying chunks."""
    a = np.ascontiguousarray(array)
    if a.ndim == 2:
        mode = "I;16" if a.dtype == np.uint16 else "L"
        img = Image.fromarray(a.astype(np.uint16 if mode == "I;16" else np.uint8), mode)
    else:
        img = Image.fromarray(a.astype(np.uint8), "RGB" if a.shape[2] == 3 else "RGBA")
    buf = io.BytesIO()
    img.save(buf, format="PNG", optimize=False, compress_level=6)
    return buf.getvalue()


def write_png(path: str | Path, array: np.ndarray) -> None:
    write_bytes_atomic(path, png_bytes(array))


def read_png(path: str | Path) -> np.ndarray:
    with Image.open(path) as img:
        return np.asarray(img)


def write_mp4(path: str | Path, frames: Iterable[np.ndarray], fps: int | Fraction, crf: int = NEAR_LOSSLESS_CRF,
              crop_to_even: bool = False) -> int:
    """Encode RGB uint8 frames (H×W×3) as H.264 yuv420p at an exact (possibly rational) rate. yuv420p
    needs even sizes: odd ones are an error, or lose their last row/column with `crop_to_even`.
    Returns the frame count."""
    import av

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".mp4")
    os.close(fd)
    count = 0
    try:
        with av.open(tmp, mode="w", format="mp4") as container:
            stream = None
            for frame in frames:
                h, w = frame.shape[:2]
                if crop_to_even:
                    h, w = h // 2 * 2, w // 2 * 2
                    frame = frame[:h, :w]
                if stream is None:
                    if h % 2 or w % 2:
                        raise ValueError(f"yuv420p needs even frame sizes, got {w}×{h}")
                    stream = container.add_stream("libx264", rate=Fraction(fps))
                    stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
                    # one thread: x264's output then depends only on the input frames
                    stream.options = {"crf": str(crf), "preset": "medium", "threads": "1"}
                    stream.codec_context.thread_count = 1
                vf = av.VideoFrame.from_ndarray(np.ascontiguousarray(frame[..., :3]).astype(np.uint8), format="rgb24")
                for packet in stream.encode(vf):
                    container.mux(packet)
                count += 1
            if stream is None:
                raise ValueError("no frames to encode")
            for packet in stream.encode():
                container.mux(packet)
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return count


def decode_mp4(path: str | Path) -> tuple[np.ndarray, float]:
    """All frames of a video as RGB uint8 (N, H, W, 3) and its average frame rate."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format="rgb24") for f in container.decode(stream)]
        rate = float(stream.average_rate) if stream.average_rate else 0.0
    if not frames:
        raise ValueError(f"{path}: no decodable frames")
    return np.stack(frames), rate
