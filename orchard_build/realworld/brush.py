"""Label Studio brush masks: the run-length bit format of its brush tool, encoded and decoded here.

A brush result stores an RGBA raster of the image (H·W·4 bytes, row-major) packed as a bit stream,
most significant bit first:

    32 bits   number of values N (= H·W·4)
     5 bits   word size − 1 (8-bit words here)
    4×4 bits  the four run-length field widths − 1 (we write 3, 4, 8, 16)
    chunks until N values are produced:
        1 bit   repeat flag
        2 bits  which run-length width follows
        w bits  run length − 1
        repeat: one word, repeated; literal: `run length` words

The mask is the alpha channel (every 4th byte); we write the mask value into all four channels.
Encoding is vectorised with numpy; decoding walks the chunk headers (one per run), so it is fast for
masks made of few runs and slower for noisy ones.
"""
from __future__ import annotations

import numpy as np

RUN_WIDTHS = (3, 4, 8, 16)
WORD = 8


class BrushFormatError(ValueError):
    """A brush RLE that is truncated or inconsistent with its image size."""


def _pack_fields(values: np.ndarray, widths: np.ndarray) -> bytes:
    """Concatenate unsigned integer fields of the given bit widths, MSB first, zero-padded to bytes."""
    values = values.astype(np.uint64)
    widths = widths.astype(np.int64)
    total = int(widths.sum())
    starts = np.concatenate(([0], np.cumsum(widths)[:-1]))
    field = np.repeat(np.arange(len(widths)), widths)
    pos = np.arange(total) - np.repeat(starts, widths)
    shift = (widths[field] - 1 - pos).astype(np.uint64)
    bits = ((values[field] >> shift) & np.uint64(1)).astype(np.uint8)
    return np.packbits(bits).tobytes()


def encode_values(flat: np.ndarray) -> list[int]:
    """RLE of a 1-D uint8 array (run chunks only), as the list of byte values Label Studio stores."""
    flat = np.ascontiguousarray(flat, dtype=np.uint8).ravel()
    n = flat.size
    if n == 0 or n >= 2**32:
        raise BrushFormatError(f"cannot encode {n} values")
    change = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    run_starts = np.concatenate(([0], change))
    run_lengths = np.diff(np.concatenate((run_starts, [n])))
    run_values = flat[run_starts]
    # split runs longer than the widest field (2**16) into pieces
    cap = 1 << RUN_WIDTHS[-1]
    pieces = -(-run_lengths // cap)
    vals = np.repeat(run_values, pieces)
    lengths = np.full(int(pieces.sum()), cap, dtype=np.int64)
    last = np.cumsum(pieces) - 1
    lengths[last] = run_lengths - (pieces - 1) * cap
    cls = np.searchsorted(np.array([1 << w for w in RUN_WIDTHS]), lengths)  # smallest width that holds len−1
    width = np.array(RUN_WIDTHS)[cls]
    m = len(lengths)
    f_vals = np.empty(4 * m, dtype=np.uint64)
    f_w = np.empty(4 * m, dtype=np.int64)
    f_vals[0::4], f_w[0::4] = 1, 1                    # repeat flag
    f_vals[1::4], f_w[1::4] = cls, 2                  # width class
    f_vals[2::4], f_w[2::4] = lengths - 1, width      # run length − 1
    f_vals[3::4], f_w[3::4] = vals, WORD              # the repeated word
    header_vals = np.array([n, WORD - 1, *[w - 1 for w in RUN_WIDTHS]], dtype=np.uint64)
    header_w = np.array([32, 5, 4, 4, 4, 4], dtype=np.int64)
    data = _pack_fields(np.concatenate((header_vals, f_vals)), np.concatenate((header_w, f_w)))
    return list(data)


def decode_values(rle: list[int] | bytes) -> np.ndarray:
    """The uint8 values of a Label Studio RLE (any mix of repeat and literal chunks)."""
    raw = np.frombuffer(bytes(bytearray(rle)), dtype=np.uint8)
    bits = np.unpackbits(raw)
    text = (bits + 48).tobytes().decode("ascii")  # '0'/'1' string: int(text[a:b], 2) reads a field
    nbits = len(text)
    pos = 0

    def read(width: int) -> int:
        nonlocal pos
        if pos + width > nbits:
            raise BrushFormatError("brush RLE is truncated")
        v = int(text[pos:pos + width], 2)
        pos += width
        return v

    n = read(32)
    word = read(5) + 1
    widths = [read(4) + 1 for _ in range(4)]
    if word > 8:
        raise BrushFormatError(f"unsupported brush word size {word}")
    out = np.zeros(n, dtype=np.uint8)
    i = 0
    while i < n:
        repeat = read(1)
        length = 1 + read(widths[read(2)])
        j = min(n, i + length)
        if repeat:
            out[i:j] = read(word)
        else:
            if pos + length * word > nbits:
                raise BrushFormatError("brush RLE is truncated")
            chunk = bits[pos:pos + length * word].reshape(length, word)
            weights = (1 << np.arange(word - 1, -1, -1)).astype(np.uint16)
            out[i:j] = (chunk.astype(np.uint16) @ weights)[: j - i].astype(np.uint8)
            pos += length * word
        i = j
    return out


def mask_to_rle(mask: np.ndarray) -> list[int]:
    """A boolean or 0/255 mask (H×W) as a brush RLE (0 or 255 in every RGBA channel)."""
    m = np.where(np.asarray(mask) > 0, 255, 0).astype(np.uint8)
    return encode_values(np.repeat(m.ravel(), 4))


def rle_to_mask(rle: list[int] | bytes, width: int, height: int) -> np.ndarray:
    """The boolean mask (H×W) of a brush RLE: pixels whose alpha is non-zero."""
    values = decode_values(rle)
    if values.size != width * height * 4:
        raise BrushFormatError(f"brush RLE holds {values.size} values, expected {width}×{height}×4 = "
                               f"{width * height * 4}")
    return values.reshape(height, width, 4)[..., 3] > 0
