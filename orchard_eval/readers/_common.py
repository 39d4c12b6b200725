"""Shared pieces of the readers: a small frame cache and GT frame sources (MP4 or PNG directory)."""
from __future__ import annotations

import re
from collections import OrderedDict
from pathlib import Path
from typing import Iterable

import numpy as np

from ..cases import CaseFormatError
from ..media import MediaError, read_image, read_video_frames, iter_video


class FrameSource:
    """GT RGB frames from an MP4 (decoded in order, PyAV) or a directory of NNNN.png files.
    Decoded frames are kept in a bounded cache."""

    def __init__(self, path: Path, cache_frames: int = 64):
        self.path = Path(path)
        self._n: int | None = None
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cap = cache_frames
        self._pngs: list[Path] | None = None
        if self.path.is_dir():
            files = sorted(p for p in self.path.iterdir() if re.fullmatch(r"\d+\.png", p.name))
            self._pngs = files
            # frame index = number in the file name; require a contiguous 0..N-1 run
            nums = [int(p.stem) for p in files]
            if nums != list(range(len(nums))):
                raise CaseFormatError(f"{self.path}: frame files are not numbered 0..N-1 contiguously")
        elif not self.path.is_file():
            raise CaseFormatError(f"{self.path}: GT frames are missing")

    def __len__(self) -> int:
        if self._n is None:
            if self._pngs is not None:
                self._n = len(self._pngs)
            else:
                try:
                    self._n = sum(1 for _ in iter_video(self.path, keep=()))
                except MediaError as exc:
                    raise CaseFormatError(f"GT video unreadable: {exc}") from exc
        return self._n

    def frames(self, indices: Iterable[int]) -> dict[int, np.ndarray]:
        want = sorted(set(int(i) for i in indices))
        out = {i: self._cache[i] for i in want if i in self._cache}
        missing = [i for i in want if i not in out]
        if missing:
            if self._pngs is not None:
                for i in missing:
                    if 0 <= i < len(self._pngs):
                        out[i] = read_image(self._pngs[i])
            else:
                try:
                    got, n = read_video_frames(self.path, missing)
                except MediaError as exc:
                    raise CaseFormatError(f"GT video unreadable: {exc}") from exc
                self._n = n
                out.update(got)
            for i in missing:
                if i in out:
                    self._cache[i] = out[i]
                    self._cache.move_to_end(i)
            while len(self._cache) > self._cap:
                self._cache.popitem(last=False)
        return out


def first_map(path: Path, key: str = "maps") -> np.ndarray | None:
    """The first 2-D slice of the array `key` in an NPZ stack (N, H, W), read without inflating the
    rest of the stack (a case's depth stack is tens of megabytes; scoring needs frame 0 only).
    None when the file is absent; a clear error when it is not a readable stack."""
    import zipfile

    path = Path(path)
    if not path.is_file():
        return None
    try:
        with zipfile.ZipFile(path) as zf, zf.open(f"{key}.npy") as f:
            version = np.lib.format.read_magic(f)
            read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                           else np.lib.format.read_array_header_2_0)
            shape, fortran, dtype = read_header(f)
            if len(shape) != 3 or fortran or dtype.hasobject or min(shape) < 1:
                raise ValueError(f"expected a C-ordered (N, H, W) stack, got shape {shape}")
            n = shape[1] * shape[2]
            buf = f.read(n * dtype.itemsize)
            if len(buf) != n * dtype.itemsize:
                raise ValueError("the stack is truncated")
            return np.frombuffer(buf, dtype=dtype).reshape(shape[1], shape[2]).copy()
    except KeyError as exc:
        raise CaseFormatError(f"{path}: no array under the key {key!r}") from exc
    except (OSError, ValueError, zipfile.BadZipFile) as exc:
        raise CaseFormatError(f"{path}: unreadable NPZ: {exc}") from exc
