"""Clip probing, decoding and H.264 writing at a clip's own (possibly fractional) frame rate."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Iterable

import numpy as np

from ..errors import OrchardError
from .. import video

VFR_TOLERANCE = 0.25  # of a frame interval: larger timestamp irregularities mean a variable-rate clip


class ClipError(OrchardError):
    pass


@dataclass(frozen=True)
class ClipInfo:
    path: str
    sha256: str
    fps: Fraction          # native frame rate, from the stream and checked against the frame timestamps
    n_frames: int
    width: int
    height: int
    codec: str
    container: str

    @property
    def fps_float(self) -> float:
        return float(self.fps)

    def to_dict(self) -> dict:
        return {"file": Path(self.path).name, "sha256": self.sha256, "fps": float(self.fps),
                "fps_rational": f"{self.fps.numerator}/{self.fps.denominator}", "n_frames": self.n_frames,
                "width": self.width, "height": self.height, "codec": self.codec, "container": self.container}


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def probe_and_decode(path: str | Path) -> tuple[ClipInfo, np.ndarray]:
    """Decode every frame (RGB uint8) and measure the native frame rate; variable-rate clips are refused."""
    import av

    path = Path(path)
    if not path.is_file():
        raise ClipError(f"{path}: no such file")
    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                raise ClipError(f"{path}: no video stream")
            stream = container.streams.video[0]
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            frames, pts = [], []
            for frame in container.decode(stream):
                frames.append(frame.to_ndarray(format="rgb24"))
                if frame.pts is not None and frame.time_base is not None:
                    pts.append(float(frame.pts * frame.time_base))
            codec = stream.codec_context.name
            fmt = container.format.name
    except ClipError:
        raise
    except Exception as exc:  # PyAV raises its own error types for unreadable files
        raise ClipError(f"{path}: cannot decode: {exc}") from exc
    if not frames:
        raise ClipError(f"{path}: no decodable frames")
    fps = _native_rate(path, rate, pts)
    arr = np.stack(frames)
    info = ClipInfo(str(path), sha256_file(path), fps, len(frames), arr.shape[2], arr.shape[1], codec, fmt)
    return info, arr


def _native_rate(path: Path, rate, pts: list[float]) -> Fraction:
    if len(pts) >= 3:
        d = np.diff(np.sort(np.asarray(pts)))
        med = float(np.median(d))
        if med <= 0:
            raise ClipError(f"{path}: frame timestamps do not advance")
        if float(np.max(np.abs(d - med))) > VFR_TOLERANCE * med:
            raise ClipError(f"{path}: variable frame rate (frame intervals {d.min() * 1000:.1f}–{d.max() * 1000:.1f} ms); "
                            "re-encode it at a constant rate before ingesting")
        measured = 1.0 / med
        if rate and abs(float(rate) - measured) <= 0.005 * measured:
            return Fraction(rate)
        return Fraction(measured).limit_denominator(1001)
    if rate:
        return Fraction(rate)
    raise ClipError(f"{path}: cannot determine the frame rate")


def write_mp4(path: str | Path, frames: Iterable[np.ndarray], fps: Fraction, crf: int = 10) -> int:
    """H.264 yuv420p at the clip's exact rational rate (odd sizes lose one pixel row/column)."""
    return video.write_mp4(path, frames, fps, crf=crf, crop_to_even=True)