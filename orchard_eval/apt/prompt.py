"""The APT chain question put to a video-language model: which frames it sees, at what times, and
the one shared schema prompt (APT App. C.12: uniformly sampled frames, each preceded by a text marker
with its time in milliseconds; a header with frame count, duration, frame rate and valid range; the
14 types with one-line definitions; a JSON array of {"type", "t_ms"} records; no chain of thought).

Frame k of a GT video lies at k / gt_fps seconds (frame 0 is the condition frame at t = 0), so a
marker's time comes from the frame's own index and the clip's frame rate, never from its position
in the sample.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..judging.openai import sample_indices
from .taxonomy import APT_TYPES, DOMAIN_OF

PROMPT_VERSION = "orchard-apt-chain-v1"
DEFAULT_FRAMES = 16

# one line each: the state change the label names (our wording)
DEFINITIONS: dict[str, str] = {
    "contact_init": "two bodies (or a body and a surface) that were apart start touching",
    "contact_break": "bodies that were touching separate",
    "elastic_rebound": "a body's approach turns into retreat at a contact (it bounces back)",
    "inelastic_capture": "a body's motion is absorbed at a contact: it stays pressed against, or moves with, what it hit",
    "free_fall_onset": "a body loses its support and starts to fall",
    "projectile_apex": "a flying body stops rising and starts descending (top of its arc)",
    "landing": "a falling body comes to rest on a supporting surface",
    "static_breakaway": "a body at rest on a surface starts to slide or roll",
    "sliding_arrest": "a sliding body comes to a stop through friction",
    "surface_transition": "a moving body crosses from one surface onto a different one",
    "rotation_onset": "a body that was not rotating starts to rotate",
    "toppling": "a standing body loses its balance and starts to tip over",
    "rotation_arrest": "a rotating body stops rotating",
    "settling": "a disturbed body or system comes to rest at equilibrium",
}
assert set(DEFINITIONS) == set(APT_TYPES)


@dataclass(frozen=True)
class SampledFrame:
    number: int      # 1-based position in the sample
    index: int       # frame index in the GT video
    t_ms: int        # index / fps, rounded to whole milliseconds

    def marker(self, total: int) -> str:
        return f"[Frame {self.number}/{total}, t={self.t_ms}ms]"


def frame_plan(n_video_frames: int, fps: float, n_frames: int = DEFAULT_FRAMES) -> list[SampledFrame]:
    """`n_frames` evenly spaced frames (first and last included; all frames when the clip is shorter)."""
    if n_video_frames < 1 or fps <= 0 or n_frames < 1:
        raise ValueError(f"cannot sample {n_frames} frames from {n_video_frames} frames at {fps} fps")
    idx = sample_indices(n_video_frames, n_frames)
    return [SampledFrame(number=k + 1, index=i, t_ms=int(round(1000.0 * i / fps))) for k, i in enumerate(idx)]


def header_text(frames: list[SampledFrame], n_video_frames: int, fps: float) -> str:
    duration_ms = int(round(1000.0 * (n_video_frames - 1) / fps))
    return (f"You are shown {len(frames)} frames sampled uniformly from a video of {duration_ms} ms "
            f"({n_video_frames} frames at {fps:g} fps). Each frame is preceded by a marker giving its number "
            f"and its time. Valid timestamps run from 0 to {duration_ms} ms.")


def instructions_text() -> str:
    by_domain: dict[str, list[str]] = {}
    for t in APT_TYPES:
        by_domain.setdefault(DOMAIN_OF[t], []).append(t)
    lines = ["List every atomic physical transition that happens in the video, in time order. An atomic "
             "physical transition is a moment at which one body, or one pair of bodies, changes physical "
             "regime. Use only these 14 types:"]
    for domain, types in by_domain.items():
        for t in types:
            lines.append(f"- {t} ({domain}): {DEFINITIONS[t]}")
    lines.append("Several transitions may share one time (for example a body that lands and bounces). The time "
                 "may lie between the frames shown; estimate it from the motion.")
    lines.append('Answer with a JSON array only, one record per transition: [{"type": "<one of the 14 types>", '
                 '"t_ms": <integer milliseconds from the start of the video>}, ...]. Write [] if nothing happens. '
                 "No explanation.")
    return "\n".join(lines)


def prompt_parts(frames: list[SampledFrame], n_video_frames: int, fps: float) -> list[dict]:
    """The user message as an ordered list of parts: {"text": ...} or {"frame": number} (an image)."""
    parts: list[dict] = [{"text": header_text(frames, n_video_frames, fps)}]
    for f in frames:
        parts.append({"text": f.marker(len(frames))})
        parts.append({"frame": f.number})
    parts.append({"text": instructions_text()})
    return parts


def prompt_as_text(parts: list[dict]) -> str:
    """The prompt for reading or for text-only tools: each image shown as `<image>`."""
    return "\n".join(p["text"] if "text" in p else "<image>" for p in parts) + "\n"
