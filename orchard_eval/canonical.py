"""Output canonicalisation and time alignment (App. D.1–D.4).

* P-T, P-G, F-T, F-G: the answer artifact is the PNG itself (image protocol) or the last decodable
  frame of the MP4 (video protocol).
* Deduction, video protocol: frame 0 is the condition frame; the remaining N frames are taken to span
  the requested physical duration T whatever the container fps says, so physics frame k (1 ≤ k ≤ N)
  sits at physical time k·T/N. For each evaluation timestamp t the nearest frame is chosen.
* Deduction, image protocol: the keyframe generated for each timestamp.
* Every frame is resized directly to the GT resolution (bilinear RGB, nearest masks; no crop or pad).

Two forms of the frame choice are implemented (both with Python's `round`, i.e. halves to even):

- `physical_index(t, N, T)` — the paper's rule (eq. 3) written for the physics frames:
  `clip(round(t·N/T), 0, N)` as an index into the whole video (0 = condition frame).
- `published_index(i, gt_fps, N, T)` — the published evaluator's rule: for the 0-based GT *physics*
  frame i it takes prediction physics frame `clip(round(i/gt_fps · N/T), 0, N−1)`, i.e. video index
  that + 1. It pairs GT frame i+1 (time (i+1)/gt_fps) with the prediction at time i/gt_fps.

When the prediction has the GT's own frame rate (N = T·gt_fps) both forms pick the same frame for every
GT grid frame; otherwise they differ by the published form's one-GT-frame shift. We follow the
paper (`rule="paper"`) by default and evaluate at the case's timestamp set T_c; `rule="published"`
reproduces the published pairing.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from .cases import EvalCase
from .media import MediaError, last_decodable_frame, read_image, read_video_frames, iter_video, resize_rgb
from .predictions import match_keyframes


# ---------------------------------------------------------------------------------------------
# Index rules
# ---------------------------------------------------------------------------------------------
def physical_index(t: float, n_physics: int, duration: float) -> int:
    """Video index (0 = condition frame) of the prediction frame nearest to physical time t when the
    N = `n_physics` frames after the condition frame span [0, T]: clip(round(t·N/T), 0, N)."""
    if n_physics <= 0:
        return 0
    return int(min(max(round(t * n_physics / duration), 0), n_physics))


def published_index(i: int, gt_fps: float, n_physics: int, duration: float) -> int:
    """The published evaluator's choice for 0-based GT physics frame i, as a video index:
    1 + clip(round(i/gt_fps · N/T), 0, N−1)."""
    if n_physics <= 0:
        return 0
    p = round(i / gt_fps * (n_physics / duration))
    return int(min(max(p, 0), n_physics - 1)) + 1


def gt_index(t: float, gt_fps: float, n_gt: int) -> int:
    """GT frame nearest to physical time t (eq. 1): clip(round(t·f), 0, N_GT − 1)."""
    return int(min(max(round(t * gt_fps), 0), max(n_gt - 1, 0)))


def dense_times(case: EvalCase) -> list[float]:
    """The time of every GT physics frame in (0, T]: k / gt_fps for k = 1 … round(T·gt_fps)."""
    n = int(round(case.physics_duration * case.gt_fps))
    return [k / case.gt_fps for k in range(1, n + 1)]


# ---------------------------------------------------------------------------------------------
# Packets
# ---------------------------------------------------------------------------------------------
@dataclass
class AnswerArtifact:
    """The canonical answer of P-T/P-G/F-T/F-G: one RGB image at GT resolution (or an error)."""
    image: np.ndarray | None
    source_size: tuple[int, int] | None = None
    n_frames: int | None = None
    error: str | None = None
    error_kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.image is not None


@dataclass
class DeductionPacket:
    """Prediction frames aligned to physical timestamps, at GT resolution."""
    protocol: str
    times: tuple[float, ...]
    pred_indices: list[int | None]                 # video index per timestamp (None: image protocol / missing)
    frames: list[np.ndarray | None]                # per timestamp; None where no frame exists
    condition_frame: np.ndarray | None = None      # the prediction's frame 0 (video protocol)
    n_video_frames: int | None = None              # decodable frames including frame 0
    source_size: tuple[int, int] | None = None
    error: str | None = None
    error_kind: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.error is None and any(f is not None for f in self.frames)

    @property
    def missing(self) -> list[int]:
        return [i for i, f in enumerate(self.frames) if f is None]


def canonical_answer(path: str | Path, protocol: str, size: tuple[int, int]) -> AnswerArtifact:
    """Answer artifact of a non-Deduction rollout, resized to `size = (width, height)`. Never raises."""
    path = Path(path)
    try:
        if protocol == "video":
            img, n = last_decodable_frame(path)
        else:
            img, n = read_image(path), None
    except MediaError as exc:
        return AnswerArtifact(None, error=str(exc), error_kind=exc.kind)
    except Exception as exc:  # noqa: BLE001
        return AnswerArtifact(None, error=f"{type(exc).__name__}: {exc}", error_kind="undecodable")
    src = (int(img.shape[1]), int(img.shape[0]))
    return AnswerArtifact(resize_rgb(img, size), source_size=src, n_frames=n)


def _count_frames(path: Path) -> int:
    n = 0
    for i, _ in iter_video(path, keep=()):
        n = i + 1
    return n


def canonical_deduction(case: EvalCase, path: str | Path, protocol: str, times: Sequence[float] | None = None,
                        rule: str = "paper") -> DeductionPacket:
    """Prediction frames at the physical `times` (default: the case's timestamp set T_c), resized to
    the GT resolution. `rule="published"` pairs frames as the published evaluator does (video protocol
    only; then `times` must be GT frame times). Never raises: failures land in `error`."""
    path = Path(path)
    times = tuple(float(t) for t in (case.timestamps if times is None else times))
    size = case.frame_size
    if protocol == "image":
        kfs, notes = match_keyframes(path, times) if path.is_dir() else ([], [])
        if not path.is_dir():
            return DeductionPacket(protocol, times, [None] * len(times), [None] * len(times),
                                   error=f"{path}: keyframe directory is missing", error_kind="missing")
        frames: list[np.ndarray | None] = []
        packet_notes = [f"{k}: {p.name}: {d}" for k, d, p in notes]
        src = None
        for kf in kfs:
            if kf.path is None:
                frames.append(None)
                packet_notes.append(f"missing keyframe for t = {kf.t:.3f}s")
                continue
            try:
                img = read_image(kf.path)
            except MediaError as exc:
                frames.append(None)
                packet_notes.append(str(exc))
                continue
            src = src or (int(img.shape[1]), int(img.shape[0]))
            frames.append(resize_rgb(img, size))
        pkt = DeductionPacket(protocol, times, [None] * len(times), frames, source_size=src, notes=packet_notes)
        if not pkt.ok:
            pkt.error, pkt.error_kind = f"{path}: no decodable keyframe", "undecodable"
        return pkt

    try:
        n_total = _count_frames(path)
        n_phys = n_total - 1
        if n_phys <= 0:
            return DeductionPacket(protocol, times, [None] * len(times), [None] * len(times), n_video_frames=n_total,
                                   error=f"{path}: only the condition frame, no physics frames",
                                   error_kind="no_frames")
        if rule == "paper":
            idx = [physical_index(t, n_phys, case.physics_duration) for t in times]
        elif rule == "published":
            idx = [published_index(int(round(t * case.gt_fps)) - 1, case.gt_fps, n_phys, case.physics_duration)
                   for t in times]
        else:
            raise ValueError(f"unknown alignment rule {rule!r}")
        got, n_again = read_video_frames(path, set(idx) | {0})
    except MediaError as exc:
        return DeductionPacket(protocol, times, [None] * len(times), [None] * len(times), error=str(exc),
                               error_kind=exc.kind)
    except Exception as exc:  # noqa: BLE001
        return DeductionPacket(protocol, times, [None] * len(times), [None] * len(times),
                               error=f"{type(exc).__name__}: {exc}", error_kind="undecodable")
    cond = got.get(0)
    src = None if cond is None else (int(cond.shape[1]), int(cond.shape[0]))
    # two timestamps that fall on one video frame share one resized array (segmented once, too)
    resized = {i: resize_rgb(got[i], size) for i in set(idx) if got.get(i) is not None}
    frames = [resized.get(i) for i in idx]
    return DeductionPacket(protocol, times, list(idx), frames,
                           condition_frame=None if cond is None else resize_rgb(cond, size),
                           n_video_frames=n_total, source_size=src)


@dataclass
class GTPacket:
    times: tuple[float, ...]
    indices: list[int]
    frames: list[np.ndarray]
    instances: list[np.ndarray | None]


def gt_deduction(case: EvalCase, times: Sequence[float] | None = None, rgb: bool = True) -> GTPacket:
    """GT frames and instance maps at the physical `times` (default T_c), nearest frame per eq. (1)."""
    times = tuple(float(t) for t in (case.timestamps if times is None else times))
    n = case.n_gt_frames()
    idx = [gt_index(t, case.gt_fps, n) for t in times]
    frames = case.gt_frames(idx) if rgb else {}
    return GTPacket(times, idx, [frames[i] for i in idx] if rgb else [],
                    [case.gt_instances(i) for i in idx])
