"""World-frame object tracks estimated from a Deduction answer video.

The answer is segmented with the same path as the Deduction metrics (`objective._segment_sequence`:
same segmenter, same context, same identity resolution of look-alike objects), each object's
located image position is back-projected onto the plane its GT centre moves in (`metrics.motion_plane`,
as the velocity metric does), and velocities are central differences over the packet's times.
Consumers: the transition detector (`apt.detect`) and programmatic QA answering.
"""
from __future__ import annotations

import numpy as np

from . import metrics as M
from .canonical import DeductionPacket
from .cases import EvalCase, ObjectTracks
from .segment import ClassicalSegmenter, Segmenter


def answer_tracks(case: EvalCase, packet: DeductionPacket, segmenter: Segmenter | None = None
                  ) -> ObjectTracks | None:
    """Positions/velocities (world frame, metres, m/s) of every case object at `packet.times` (and t = 0 from the answer's frame 0 when the packet carries it),
    estimated from the answer frames; NaN where an object was not located. None when the case has
    no camera or GT tracks (no motion plane to back-project onto), the packet is not a video or
    fewer than three frames were delivered."""
    from .objective import _segment_sequence

    gt = case.object_tracks()
    if packet.protocol != "video" or gt is None or case.intrinsic is None or case.extrinsic is None:
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
        _, _, _, where, _ = _segment_sequence(case, frames, seg, times,
                                              condition=packet.condition_frame, source_size=packet.source_size)
    except ValueError:
        return None
    times = np.asarray(times, float)
    pos, vel = {}, {}
    for o in case.objects:
        if o.id not in gt.positions:
            continue
        uv = np.array([[np.nan, np.nan] if w.get(o.id) is None else w[o.id] for w in where], float)
        point, normal = M.motion_plane(gt.positions[o.id], case.extrinsic)
        P = M.backproject_to_plane(uv, case.intrinsic, case.extrinsic, point, normal)
        pos[o.id] = P
        vel[o.id] = np.stack([np.gradient(P[:, k], times) for k in range(3)], axis=1)
    return ObjectTracks(times=times, positions=pos, velocities=vel, source="answer")
