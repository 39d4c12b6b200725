"""Reference "models" that write a complete prediction directory in the published submission layout,
to calibrate the metrics and to test the pipeline end to end:

* `oracle` — the answer key: the P-T/P-G/F-T/F-G reference images (as the last frame of a short video
  that fades from the input image to the answer, or as the PNG itself) and, for Deduction, the GT video
  itself (copied byte for byte when the case has an MP4; otherwise encoded from the GT frames) or,
  image protocol, the GT frames at the evaluation timestamps as keyframes;
* `static` — the input (annotated first frame) held still: the model that does nothing;
* `blank` — pure white everywhere.

Videos are H.264 via PyAV. Answer videos of the oracle are encoded losslessly in 4:4:4 (crf 0,
yuv444p) so that their last frame is the reference image up to colour-conversion rounding; the other
baselines use ordinary 4:2:0.
"""
from __future__ import annotations

import json
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Iterable

import numpy as np
from PIL import Image

from .cases import SUBTRACKS, Dataset, EvalCase, load_dataset
from .canonical import gt_index
from .predictions import keyframe_name

KINDS = ("oracle", "static", "blank")
ANSWER_FRAMES = 12


def encode_video(path: Path, frames: Iterable[np.ndarray], fps: float = 24.0, lossless: bool = False,
                 crf: int = 18) -> int:
    """H.264 MP4 of RGB frames (odd sizes padded by one edge pixel), 4:2:0 at `crf` unless lossless."""
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with av.open(str(path), mode="w", format="mp4") as container:
        stream = None
        for rgb in frames:
            rgb = np.ascontiguousarray(np.asarray(rgb, dtype=np.uint8)[..., :3])
            h, w = rgb.shape[:2]
            if h % 2 or w % 2:
                rgb = np.ascontiguousarray(np.pad(rgb, ((0, h % 2), (0, w % 2), (0, 0)), mode="edge"))
            if stream is None:
                stream = container.add_stream("libx264", rate=Fraction(fps).limit_denominator(1001))
                stream.width, stream.height = rgb.shape[1], rgb.shape[0]
                stream.pix_fmt = "yuv444p" if lossless else "yuv420p"
                stream.options = {"crf": "0" if lossless else str(int(crf)), "preset": "veryfast", "threads": "1"}
            for pkt in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(pkt)
            n += 1
        if stream is not None:
            for pkt in stream.encode():
                container.mux(pkt)
    return n


def _png(path: Path, rgb: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(path)


def _size(case: EvalCase) -> tuple[int, int]:
    return int(case.frame_size[1]), int(case.frame_size[0])


def _input_image(case: EvalCase) -> np.ndarray:
    for role in ("annotated_first_frame", "condition_frame"):
        if case.has(role) or role == "condition_frame":
            img = case.image(role)
            if img is not None:
                return img
    raise ValueError(f"{case.case_id}: no input image")


def _white(case: EvalCase) -> np.ndarray:
    return np.full((*_size(case), 3), 255, np.uint8)


def answer_image(case: EvalCase, subtrack: str, kind: str) -> np.ndarray | None:
    """The P-T/P-G/F-T/F-G answer of a baseline (None: the case has no reference for the oracle)."""
    if kind == "blank":
        return _white(case)
    if kind == "static":
        return _input_image(case)
    if case.has(subtrack):
        return case.image(subtrack)
    return formula_text_image(case) if subtrack == "formulation_text" else None


def _fade(a: np.ndarray, b: np.ndarray, n: int) -> list[np.ndarray]:
    if a.shape != b.shape:
        import cv2

        a = cv2.resize(a, (b.shape[1], b.shape[0]), interpolation=cv2.INTER_LINEAR)
    out = []
    for k in range(n):
        w = k / max(n - 1, 1)
        out.append(np.clip((1 - w) * a.astype(np.float32) + w * b.astype(np.float32) + 0.5, 0, 255).astype(np.uint8))
    out[-1] = b
    return out


def formula_text_image(case: EvalCase) -> np.ndarray | None:
    """A three-line F-T answer drawn from the answer key (letter, formula, substituted formula) for
    layouts that ship no F-T reference image."""
    if case.formula is None:
        return None
    from PIL import ImageDraw, ImageFont

    h, w = _size(case)
    img = Image.new("RGB", (w, h), (255, 255, 255))
    draw = ImageDraw.Draw(img)
    lines = [case.formula.correct_letter, case.formula.correct_formula,
             case.formula.substituted or case.formula.correct_formula]
    size = max(10, h // 14)
    try:
        font = ImageFont.load_default(size=size)
    except TypeError:  # Pillow < 10.1
        font = ImageFont.load_default()
    y = h // 2 - int(1.8 * size)
    for line in lines:
        tw = draw.textlength(line, font=font)
        draw.text((max(2, (w - tw) / 2), y), line, fill=(0, 0, 0), font=font)
        y += int(1.4 * size)
    return np.asarray(img)


def write_baseline(kind: str, cases: str | Path | Dataset, out: str | Path, protocol: str = "video",
                   num_rollouts: int | None = None, subtracks: Iterable[str] = SUBTRACKS,
                   model: str | None = None) -> list[str]:
    """Write the prediction directory; returns notes on what could not be written."""
    if kind not in KINDS:
        raise ValueError(f"unknown baseline {kind!r}; known: {', '.join(KINDS)}")
    if protocol not in ("video", "image"):
        raise ValueError(f"protocol must be video or image, got {protocol!r}")
    ds = cases if isinstance(cases, Dataset) else load_dataset(cases)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    R = int(num_rollouts or ds.num_rollouts)
    notes: list[str] = [f"dataset problem (case skipped): {p}" for p in ds.problems]
    for cid in sorted(ds.cases):
        case = ds.cases[cid]
        base = out / "cases" / cid
        for st in subtracks:
            d = base / st
            d.mkdir(parents=True, exist_ok=True)
            try:
                first = _write_one(kind, case, st, d, protocol)
            except Exception as exc:  # noqa: BLE001 - report and continue with the other cases
                notes.append(f"{cid}/{st}: {type(exc).__name__}: {exc}")
                continue
            if first is None:
                notes.append(f"{cid}/{st}: the case has no reference answer; nothing written")
                continue
            for r in range(1, R):
                dst = d / first.name.replace("rollout_00", f"rollout_{r:02d}")
                if first.is_dir():
                    shutil.copytree(first, dst, dirs_exist_ok=True)
                else:
                    shutil.copyfile(first, dst)
    sub = {"model": model or kind, "protocol": protocol, "num_rollouts": R,
           "prompt_version": ds.prompt_version or "orchard-prompts-v1",
           "notes": f"orchard-eval baseline '{kind}' ({protocol} protocol)"}
    (out / "submission.json").write_text(json.dumps(sub, indent=1), encoding="utf-8")
    return notes


def _write_one(kind: str, case: EvalCase, st: str, d: Path, protocol: str) -> Path | None:
    fps = float(case.gt_fps) or 24.0
    if st != "deduction":
        img = answer_image(case, st, kind)
        if img is None:
            return None
        if protocol == "image":
            p = d / "rollout_00.png"
            _png(p, img)
            return p
        p = d / "rollout_00.mp4"
        start = _input_image(case)
        frames = [img] * ANSWER_FRAMES if kind != "oracle" else _fade(start, img, ANSWER_FRAMES)
        encode_video(p, frames, fps=fps, lossless=kind == "oracle")
        return p
    # deduction
    n_phys = int(round(case.physics_duration * fps))
    if protocol == "image":
        p = d / "rollout_00"
        p.mkdir(parents=True, exist_ok=True)
        if kind == "oracle":
            n_gt = case.n_gt_frames()
            idx = [gt_index(t, case.gt_fps, n_gt) for t in case.timestamps]
            frames = case.gt_frames(idx)
            imgs = [frames[i] for i in idx]
        else:
            still = _white(case) if kind == "blank" else _input_image(case)
            imgs = [still] * len(case.timestamps)
        for i, (t, img) in enumerate(zip(case.timestamps, imgs)):
            _png(p / keyframe_name(i, t), img)
        return p
    p = d / "rollout_00.mp4"
    if kind == "oracle":
        src = case.gt_video_file()
        if src is not None:
            shutil.copyfile(src, p)
            return p
        n_gt = case.n_gt_frames()
        frames = case.gt_frames(range(n_gt))
        encode_video(p, (frames[i] for i in range(n_gt)), fps=fps, lossless=True)
        return p
    still = _white(case) if kind == "blank" else _input_image(case)
    encode_video(p, [still] * (n_phys + 1), fps=fps)
    return p
