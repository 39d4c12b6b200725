"""Pinhole camera: intrinsics from a vertical field of view, extrinsics from position/look-at.

Conventions (OpenCV): camera x right, y down, z forward. `extrinsic` maps world → camera,
x_cam = R · x_world + t. Pixel coordinates are continuous with (0, 0) at the top-left corner of
the top-left pixel, so the pixel index of a point is floor(u), floor(v) and the principal point
of a centred camera is (W/2, H/2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np


@dataclass(frozen=True)
class Camera:
    position: np.ndarray
    look_at: np.ndarray
    up: np.ndarray
    fov_deg: float
    width: int
    height: int
    rotation: np.ndarray = field(init=False, repr=False)  # world → camera rotation (3×3)

    def __post_init__(self) -> None:
        forward = self.look_at - self.position
        if np.linalg.norm(forward) < 1e-9:
            raise ValueError("camera position and look_at coincide")
        f = forward / np.linalg.norm(forward)
        right = np.cross(f, self.up)
        if np.linalg.norm(right) < 1e-6:
            raise ValueError("camera up vector is parallel to the viewing direction")
        right /= np.linalg.norm(right)
        down = np.cross(f, right)
        object.__setattr__(self, "rotation", np.stack([right, down, f]))

    @property
    def fy(self) -> float:
        return (self.height / 2.0) / math.tan(math.radians(self.fov_deg) / 2.0)

    @property
    def intrinsic(self) -> np.ndarray:
        return np.array([[self.fy, 0.0, self.width / 2.0], [0.0, self.fy, self.height / 2.0], [0.0, 0.0, 1.0]])

    @property
    def translation(self) -> np.ndarray:
        return -self.rotation @ self.position

    @property
    def extrinsic(self) -> np.ndarray:
        return np.hstack([self.rotation, self.translation[:, None]])

    @property
    def fov_x_deg(self) -> float:
        return math.degrees(2.0 * math.atan((self.width / 2.0) / self.fy))

    def to_camera(self, points: np.ndarray) -> np.ndarray:
        return np.asarray(points, float) @ self.rotation.T + self.translation

    def project(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World points (…, 3) → pixel coordinates (…, 2) and depth along the optical axis (…)."""
        pc = self.to_camera(points)
        z = pc[..., 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            uv = (pc[..., :2] / z[..., None]) * self.fy + np.array([self.width / 2.0, self.height / 2.0])
        return uv, z

    def project_direction(self, point: np.ndarray, direction: np.ndarray, step: float = 1e-3) -> np.ndarray:
        """Unit image-plane direction of a world direction applied at a world point (zero if it projects to a point)."""
        d = np.asarray(direction, float)
        n = np.linalg.norm(d)
        if n < 1e-12:
            return np.zeros(2)
        a, _ = self.project(point)
        b, _ = self.project(np.asarray(point, float) + step * d / n)
        img = b - a
        m = np.linalg.norm(img)
        return img / m if m > 1e-12 else np.zeros(2)

    def to_dict(self) -> dict:
        return {
            "model": "pinhole",
            "width": self.width,
            "height": self.height,
            "fov_y_deg": self.fov_deg,
            "position": self.position.tolist(),
            "look_at": self.look_at.tolist(),
            "up": self.up.tolist(),
            "intrinsic": self.intrinsic.tolist(),
            "extrinsic": self.extrinsic.tolist(),
            "convention": "opencv: x right, y down, z forward; extrinsic maps world to camera; pixel (0,0) is the top-left corner",
        }
