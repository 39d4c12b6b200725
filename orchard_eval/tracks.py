"""World-frame object tracks estimated from a Deduction answer video.

Each object's located image position (`Segmentation.positions`, look-alike identities resolved as
the Deduction metrics resolve them) is back-projected onto the plane its GT centre moves in
(`metrics.motion_plane`, as the velocity metric does), and velocities are central differences over
the frames' physical times (second-order on an uneven grid, `np.gradient`).

Two ways in: `tracks_from_segmentations` builds the tracks from segmentations already computed (the
Deduction metrics' own, `ObjectiveResult.segmentations`: the run's transition score costs no
segmentation beyond the answer's frame 0); `answer_tracks` segments a packet itself through
`objective.answer_segmentations` (the same context and chaining as the metrics), for tools that hold
a dense packet (every GT frame time). Consumers: the transition detector (`apt.detect`) and
programmatic QA answering.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from . import metrics as M
from .canonical import DeductionPacket
from .cases import EvalCase, ObjectTracks
from .segment import ClassicalSegmenter, Segmenter


def tracks_from_segmentations(case: EvalCase, segmentations: Sequence, times: Sequence[float]) -> ObjectTracks | None:
    """Tracks at `times` from one Segmentation per time (None: that frame is missing; its positions
    are NaN). A time that repeats (two timestamps on one answer frame) is kept once: a zero time
    step would make the differences infinite. None when the case has no camera or GT tracks (no
    motion plane) or fewer than three distinct times hold a segmentation."""
    from .objective import segmentation_positions

    gt = case.object_tracks()
    if gt is None or case.intrinsic is None or case.extrinsic is None:
        return None
    rows: dict[float, dict] = {}
    for s, t in zip(segmentations, times):
        t = float(t)
        if s is None or t in rows:
            continue
        rows[t] = segmentation_positions(case, s, t)
    if len(rows) < 3:
        return None
    ts = np.array(sorted(rows), float)
    pos, vel = {}, {}
    for o in case.objects:
        if o.id not in gt.positions:
            continue
        uv = np.array([[np.nan, np.nan] if rows[t].get(o.id) is None else rows[t][o.id] for t in ts], float)
        point, normal = M.motion_plane(gt.positions[o.id], case.extrinsic)
        P = M.backproject_to_plane(uv, case.intrinsic, case.extrinsic, point, normal)
        pos[o.id] = P
        vel[o.id] = np.stack([np.gradient(P[:, k], ts) for k in range(3)], axis=1)
    return ObjectTracks(times=ts, positions=pos, velocities=vel, source="answer")


def answer_tracks(case: EvalCase, packet: DeductionPacket, segmenter: Segmenter | None = None
                  ) -> ObjectTracks | None:
    """Positions/velocities (world frame, metres, m/s) of every case object at `packet.times` (and
    t = 0 from the answer's frame 0 when the packet carries it), estimated from the answer frames;
    NaN where an object was not located. None when the case has no camera or GT tracks (no motion
    plane to back-project onto), the packet is not a video or fewer than three frames were
    delivered."""
    from .objective import answer_segmentations

    if packet.protocol != "video" or case.object_tracks() is None or case.intrinsic is None or case.extrinsic is None:
        return None
    if sum(f is not None for f in packet.frames) < 3:
        return None
    seg = segmenter or ClassicalSegmenter()
    frames, times = list(packet.frames), [float(t) for t in packet.times]
    if packet.condition_frame is not None and (not times or times[0] > 0):
        # the answer's own frame 0 (t = 0): without it a motion that starts at t = 0 (a breakaway,
        # a launch) has no "before" in the track
        frames, times = [packet.condition_frame] + frames, [0.0] + times
    try:
        segs = answer_segmentations(case, frames, seg, times, condition=packet.condition_frame,
                                    source_size=packet.source_size)
    except ValueError:
        return None
    return tracks_from_segmentations(case, segs, times)
