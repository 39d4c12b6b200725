"""The segmenter protocol: any model (classical, or a SAM-family network on a GPU) that turns one
generated RGB frame into one boolean mask per case object can plug in here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Protocol, runtime_checkable

import numpy as np


@dataclass
class SegmentContext:
    """What a segmenter may know about the case: the objects, a reference image with per-object masks
    (colour models), the background (a clean plate, or None for objects-on-white answers) and
    optional expected centroids per object (pixel coordinates, e.g. the previous frame's result), and
    colours of drawn answer annotations (the orange F-G arrows and labels): their strokes
    (`segment.overlay.answer_overlay_mask`) are unobservable pixels, never foreground, as are the
    elements of the input's annotation layer an answer still shows and, for a frame registered to
    the case's camera (`segment.conditioning`), the pixels it does not show."""
    object_ids: list[str]
    reference_image: np.ndarray | None = None
    reference_masks: dict[str, np.ndarray] = field(default_factory=dict)
    background: np.ndarray | None = None          # None: pure white background
    priors: dict[str, tuple[float, float]] | None = None
    exclude_rgb: tuple[tuple[int, int, int], ...] = ()   # colours of drawn answer strokes (unobservable)
    # rigid shape prior (segment.shape_prior): object id -> BodyPrior, the case camera, and the
    # physical time of the frame being segmented (selects the recorded attitudes)
    bodies: dict = field(default_factory=dict)
    camera: object | None = None
    time: float | None = None
    # the static scene's depth at the frame's resolution (`EvalCase.scene_depth`): supports in front
    # of a body hide pixels of its silhouette; None where the case has no depth
    scene_depth: np.ndarray | None = None
    # object id -> its rim shading (segment.shape_prior.LimbModel), learned on the condition frame
    limbs: dict = field(default_factory=dict)
    # (time, GT frame then or None) -> the rim models learned at that time; None: `limbs` at any time
    limbs_at: Callable[[float, np.ndarray | None], dict] | None = field(default=None, repr=False)
    # how the GT frames show each body (`segment.appearance.Looks`): a fitted body is placed where its
    # look explains the frame best; None where the case cannot say
    looks: object | None = field(default=None, repr=False)
    # the GT frame at `time`, where the caller has decoded it (saves decoding it again)
    gt_frame: np.ndarray | None = field(default=None, repr=False)
    # where the objects' cast shadows fall (segment.shadows.CastShadows), fitted on the condition frame
    shadows: object | None = None
    # time -> where each object's GT centre projects then (u, v); used only to tell objects that look
    # alike apart (the metrics pair look-alike objects with GT objects by the same rule), so that each
    # is fitted with its own rigid model and motion plane; None where the case has no tracks
    expected_at: Callable[[float], dict[str, tuple[float, float]]] | None = field(default=None, repr=False)
    # the case's input annotation layer (`segment.overlay.InputLayer`): where an answer still shows
    # it, the pixels under it are unobservable; None where the case has no annotated input
    input_layer: object | None = field(default=None, repr=False)
    # the answer's own condition frame (frame 0 of a Deduction video) and the answer frames being
    # segmented: how this model renders the scene (`segment.conditioning.AnswerReference`)
    answer_condition: np.ndarray | None = field(default=None, repr=False)
    answer_frames: list = field(default_factory=list, repr=False)
    # (width, height) the answer was made at, before it was resized to the case's: an answer at
    # another aspect ratio is registered from the hypothesis that it shows the scene's centre
    answer_size: tuple[int, int] | None = None
    cache: dict = field(default_factory=dict, repr=False)          # per case
    answer_cache: dict = field(default_factory=dict, repr=False)   # per answer

    @property
    def on_white(self) -> bool:
        return self.background is None


@dataclass
class Segmentation:
    masks: dict[str, np.ndarray]            # object id -> bool (H, W)
    foreground: np.ndarray                  # bool (H, W), every pixel judged to belong to some object
    low_confidence: bool = False
    confidence: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # image position (u, v) of an object's centre where the segmenter located the body itself (a
    # fitted rigid silhouette); velocity tracks prefer it to the mask centroid
    centres: dict[str, tuple[float, float]] = field(default_factory=dict)
    # groups of objects that look alike (same colour model): their identities were assigned by
    # position only, so metrics match them without trusting the labels
    alike: list[list[str]] = field(default_factory=list)
    # the answer-overlay pixels (`overlay.answer_overlay_mask`) when the segmenter computed them
    unobservable: np.ndarray | None = None

    def union(self) -> np.ndarray:
        out = np.zeros_like(self.foreground, dtype=bool)
        for m in self.masks.values():
            out |= m
        return out

    def centroids(self) -> dict[str, tuple[float, float] | None]:
        from ..metrics import mask_centroid

        return {k: mask_centroid(m) for k, m in self.masks.items()}

    def positions(self) -> dict[str, tuple[float, float] | None]:
        """Where each object is: its fitted centre when known, else its mask centroid."""
        out = self.centroids()
        for k, c in self.centres.items():
            if out.get(k) is not None:
                out[k] = c
        return out


@runtime_checkable
class Segmenter(Protocol):
    name: str

    def segment(self, image: np.ndarray, context: SegmentContext) -> Segmentation: ...
