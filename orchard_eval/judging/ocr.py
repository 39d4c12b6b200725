"""Offline OCR for the programmatic judge: RapidOCR 3.x on onnxruntime with its bundled default models
(no download; any non-default model would try the network), configured as measured in
`shared/notes/ocr-segmentation-video.md`: `Global.use_cls=False`, `Det.limit_type=max`,
`Det.limit_side_len=960`.

`read_text(img, scale)` returns the detected text boxes in the image's own pixel coordinates
(upscaling by `scale` first helps small fonts); results are memoised by the image's bytes, so the
reference images of a case are read once per process, and, once `use_store(dir)` names a folder, kept
there across processes and runs (keyed by the image bytes, the scale, the engine version and its
parameters), so the references of a suite are read once per machine. `lines(boxes)` joins boxes that share a text
line. `normalise` and `similarity` compare strings the way OCR output must be compared: spaces
ignored, typical misreads folded (² → 2, µ → μ, ν/V → v for single letters, curly quotes, dashes).
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import unicodedata
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PARAMS = {"Global.use_cls": False, "Det.limit_type": "max", "Det.limit_side_len": 960}
_engine = None
_engine_lock = threading.Lock()
_memo: "OrderedDict[str, list[TextBox]]" = OrderedDict()
_MEMO_SIZE = 256
_store: "Path | None" = None


class OCRUnavailable(RuntimeError):
    """rapidocr / onnxruntime are not installed (pip install 'orchard-bench[ocr]')."""


@dataclass(frozen=True)
class TextBox:
    text: str
    score: float
    box: tuple[float, float, float, float]   # x0, y0, x1, y1

    @property
    def center(self) -> tuple[float, float]:
        return (0.5 * (self.box[0] + self.box[2]), 0.5 * (self.box[1] + self.box[3]))

    @property
    def height(self) -> float:
        return self.box[3] - self.box[1]

    @property
    def width(self) -> float:
        return self.box[2] - self.box[0]


def available() -> bool:
    try:
        import onnxruntime  # noqa: F401
        import rapidocr  # noqa: F401
    except ImportError:
        return False
    return True


def engine():
    global _engine
    with _engine_lock:
        if _engine is None:
            try:
                from rapidocr import RapidOCR
            except ImportError as exc:
                raise OCRUnavailable("the programmatic judge needs rapidocr and onnxruntime "
                                     "(pip install 'orchard-bench[ocr]')") from exc
            # RapidOCR warns on every image without text (a blank answer, an empty crop): an outcome here,
            # not a problem, and in a long judged run it floods the console
            logging.getLogger("RapidOCR").setLevel(logging.ERROR)
            _engine = RapidOCR(params={**PARAMS, **_thread_params()})
            logging.getLogger("RapidOCR").setLevel(logging.ERROR)
        return _engine


def _thread_params() -> dict:
    """onnxruntime's threads: by default one per core; in a pool worker (`--jobs N`: N workers
    share the cores) one, since a pool of multi-threaded sessions oversubscribes the cores and their
    spinning threads take each other's time. ORCHARD_OCR_THREADS overrides."""
    import multiprocessing
    import os

    n = int(os.environ.get("ORCHARD_OCR_THREADS", "0") or 0)
    if n <= 0 and multiprocessing.parent_process() is not None:
        n = 1
    return {"EngineConfig.onnxruntime.intra_op_num_threads": n, "EngineConfig.onnxruntime.inter_op_num_threads": 1} \
        if n > 0 else {}


def use_store(directory: "str | Path | None") -> None:
    """Keep readings in `directory` (created on first write); None: in memory only."""
    global _store
    _store = Path(directory) if directory else None


def _engine_version() -> str:
    try:
        import rapidocr

        return str(getattr(rapidocr, "__version__", "?"))
    except ImportError:
        return "-"


def _stored(path: Path) -> "list[TextBox] | None":
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return [TextBox(str(t), float(sc), tuple(float(v) for v in bx)) for t, sc, bx in doc["boxes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None   # absent, torn or foreign: read the image again


def _store_put(path: Path, boxes: "list[TextBox]") -> None:
    from ..atomic import write_json_atomic

    try:
        write_json_atomic(path, {"boxes": [[b.text, b.score, list(b.box)] for b in boxes]}, indent=None)
    except OSError as exc:   # a read-only or full cache costs speed, never a result
        logging.getLogger(__name__).warning("OCR cache %s not written: %s", path.parent, exc)


def read_text(img: np.ndarray, scale: float = 1.0) -> list[TextBox]:
    """Text boxes of an RGB uint8 image, in the image's coordinates, top-to-bottom then left-to-right."""
    img = np.ascontiguousarray(np.asarray(img, dtype=np.uint8)[..., :3])
    h = hashlib.sha256(img.tobytes() + repr((img.shape, float(scale))).encode()).hexdigest()
    with _engine_lock:
        if h in _memo:
            _memo.move_to_end(h)
            return list(_memo[h])
    stored = None
    if _store is not None:
        key = hashlib.sha256(f"{h}|{_engine_version()}|{json.dumps(PARAMS, sort_keys=True)}".encode()).hexdigest()
        stored = _store / key[:2] / f"{key}.json"
        hit = _stored(stored)
        if hit is not None:
            with _engine_lock:
                _memo[h] = hit
                while len(_memo) > _MEMO_SIZE:
                    _memo.popitem(last=False)
            return list(hit)
    work = img
    if scale != 1.0:
        import cv2

        work = cv2.resize(img, (int(round(img.shape[1] * scale)), int(round(img.shape[0] * scale))),
                          interpolation=cv2.INTER_CUBIC)
    eng = engine()
    with _engine_lock:   # one inference at a time: the engine is not documented as thread-safe
        res = eng(np.ascontiguousarray(work[..., ::-1]))
    out: list[TextBox] = []
    txts = getattr(res, "txts", None) or ()
    boxes = getattr(res, "boxes", None)
    scores = getattr(res, "scores", None) or ()
    for i, t in enumerate(txts):
        poly = np.asarray(boxes[i], dtype=np.float64) / scale
        out.append(TextBox(str(t), float(scores[i]) if i < len(scores) else 0.0,
                           (float(poly[:, 0].min()), float(poly[:, 1].min()), float(poly[:, 0].max()),
                            float(poly[:, 1].max()))))
    out.sort(key=lambda b: (round(b.center[1] / 4), b.center[0]))
    if stored is not None:
        _store_put(stored, out)
    with _engine_lock:
        _memo[h] = out
        while len(_memo) > _MEMO_SIZE:
            _memo.popitem(last=False)
    return list(out)


def lines(boxes: list[TextBox], overlap: float = 0.5, gap: float = 2.5) -> list[TextBox]:
    """Join boxes on one text line (vertical overlap ≥ `overlap` of the smaller height, horizontal gap
    ≤ `gap` heights), left to right, with a space; the score is the minimum."""
    rest = sorted(boxes, key=lambda b: b.box[0])
    groups: list[list[TextBox]] = []
    for b in rest:
        for g in groups:
            last = g[-1]
            top, bot = max(last.box[1], b.box[1]), min(last.box[3], b.box[3])
            ov = (bot - top) / max(1e-6, min(last.height, b.height))
            if ov >= overlap and b.box[0] - last.box[2] <= gap * max(last.height, b.height):
                g.append(b)
                break
        else:
            groups.append([b])
    out = []
    for g in groups:
        out.append(TextBox(" ".join(x.text for x in g), min(x.score for x in g),
                           (min(x.box[0] for x in g), min(x.box[1] for x in g), max(x.box[2] for x in g),
                            max(x.box[3] for x in g))))
    out.sort(key=lambda b: (b.center[1], b.center[0]))
    return out


CONTINUES = (",", ";", "+", "-", "−", "=", "·", "*", "/", "(")


def logical_lines(rows: list[TextBox], max_gap: float = 1.0) -> list[TextBox]:
    """Join visual rows (top to bottom) into logical lines: a row that ends with a separator or an
    operator (`CONTINUES`) is continued by the row below it, when that row starts within `max_gap`
    row heights. This is how a wrapped formula is read back: the wrapped row keeps its ',' or ';'."""
    out: list[TextBox] = []
    for r in sorted(rows, key=lambda b: (b.center[1], b.center[0])):
        if out:
            last = out[-1]
            gap = r.box[1] - last.box[3]
            if last.text.rstrip().endswith(CONTINUES) and gap <= max_gap * max(r.height, 1.0):
                out[-1] = TextBox(f"{last.text.rstrip()} {r.text.strip()}", min(last.score, r.score),
                                  (min(last.box[0], r.box[0]), last.box[1], max(last.box[2], r.box[2]), r.box[3]))
                continue
        out.append(r)
    return out


_FOLD = str.maketrans({"µ": "μ", "²": "2", "³": "3", "−": "-", "–": "-", "—": "-", "‘": "'", "’": "'",
                       "“": '"', "”": '"', "ν": "v", "·": ".", "•": ".", "∙": ".", "⋅": ".", "×": "x",
                       "º": "°", "˚": "°", "θ": "0", "Θ": "0", "O": "0", "o": "0"})


def normalise(s: str) -> str:
    """Comparison form of a label: NFC, folded misreads, spaces dropped, lower case."""
    s = unicodedata.normalize("NFC", s).translate(_FOLD)
    return "".join(ch for ch in s if not ch.isspace()).lower()


def levenshtein(a: str, b: str) -> int:
    if a == b:
        return 0
    if not a or not b:
        return max(len(a), len(b))
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def similarity(a: str, b: str, normalised: bool = False) -> float:
    """1 − edit distance / longer length, on normalised strings (1.0 = same text)."""
    if not normalised:
        a, b = normalise(a), normalise(b)
    if not a and not b:
        return 1.0
    return 1.0 - levenshtein(a, b) / max(len(a), len(b))


_NUMBER = __import__("re").compile(r"(?<![A-Za-z_\d.,])\d+(?:[.,]\d+)?")


def numbers(text: str) -> list[float]:
    """The quantities a reading states, in order: numbers not attached to a letter (a subscript such as
    v0 or m_1 is part of a name) nor superscripts; a decimal comma is accepted."""
    t = unicodedata.normalize("NFC", text).replace("−", "-")
    return [float(m.group(0).replace(",", ".")) for m in _NUMBER.finditer(t)]


def numbers_kept(reference: str, answer: str) -> float:
    """Share of the reference's numbers that the answer states with the same value (as a multiset):
    a changed value is a missing quantity, not a one-glyph edit. 1.0 when the reference has none."""
    want, pool = numbers(reference), numbers(answer)
    if not want:
        return 1.0
    hit = 0
    for w in want:
        for i, v in enumerate(pool):
            if abs(v - w) <= 1e-9 * max(1.0, abs(w)):
                hit += 1
                pool.pop(i)
                break
    return hit / len(want)
