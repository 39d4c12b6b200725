"""Automatic camera framing: place a camera so that everything that matters over [0, T] stays in view.

The points to keep in view are the objects' analytic trajectories (inflated by their bounding radius)
and the supports. Given a viewing direction (azimuth, elevation) and a field of view, the camera
looks at the centre of those points and backs off until every point projects inside the frame with a
margin. Objects then appear as large as the motion allows.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .camera import Camera
from .config import CaseConfig


def keep_in_view(cfg: CaseConfig, trajectory, n_samples: int = 48, supports: bool = True) -> np.ndarray:
    """World points that must stay inside the frame: sampled object surfaces and support outlines."""
    pts = []
    times = np.linspace(0.0, cfg.timing.duration, n_samples)
    offsets = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], float) / math.sqrt(3)
    for o in cfg.objects:
        r = o.primitive.bounding_radius
        for t in times:
            p = trajectory.state(o.id, float(t)).position
            pts.append(p + r * offsets)
    if supports:
        for ramp in cfg.ramps:
            for d in (0.0, ramp.length):
                for lat in (-ramp.width / 2, ramp.width / 2):
                    q = ramp.surface_point(d, lat)
                    pts.append(np.array([q, [q[0], q[1], 0.0]]))
        for track in cfg.tracks:
            phis = np.linspace(track.arc[0], track.arc[1], 25)
            for phi in phis:
                q = track.surface_point(float(phi))
                pts.append(np.array([q - track.lateral * track.width / 2, q + track.lateral * track.width / 2]))
        for plat in cfg.platforms:
            half = plat.size / 2
            corners = [plat.center + half * np.array([sx, sy, sz]) for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)]
            pts.append(np.array(corners))
    return np.vstack(pts)


def frame(points: np.ndarray, azimuth_deg: float, elevation_deg: float, fov_deg: float,
          resolution: tuple[int, int], margin: float = 0.08, look_at_height: float | None = None) -> dict[str, Any]:
    """Camera dict (config form) viewing `points` from the given direction, as close as the margin allows.

    azimuth 0 looks along +y (camera on the −y side), positive azimuth moves the camera toward +x;
    elevation is the angle above the horizontal at which the camera looks down.
    """
    lo, hi = points.min(axis=0), points.max(axis=0)
    target = (lo + hi) / 2.0
    if look_at_height is not None:
        target[2] = look_at_height
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    back = np.array([math.sin(az) * math.cos(el), -math.cos(az) * math.cos(el), math.sin(el)])
    w, h = resolution

    def fits(dist: float) -> bool:
        cam = Camera(target + back * dist, target, np.array([0.0, 0.0, 1.0]), fov_deg, w, h)
        uv, z = cam.project(points)
        if np.any(z <= 0.05):
            return False
        mx, my = margin * w, margin * h
        return bool(np.all((uv[:, 0] >= mx) & (uv[:, 0] <= w - mx) & (uv[:, 1] >= my) & (uv[:, 1] <= h - my)))

    near, far = 0.2, 1.0
    while not fits(far):
        far *= 1.6
        if far > 1e4:
            raise ValueError("no camera distance keeps the points in view")
    for _ in range(40):
        mid = 0.5 * (near + far)
        if fits(mid):
            far = mid
        else:
            near = mid
    pos = target + back * far
    return {"position": [round(float(x), 4) for x in pos], "look_at": [round(float(x), 4) for x in target],
            "fov_deg": fov_deg, "resolution": [int(w), int(h)]}
