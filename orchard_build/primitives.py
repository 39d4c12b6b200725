"""Analytic geometry of the four primitive solids.

Body frame convention (shared by mechanics, engines and renderers): origin at the centre of mass,
symmetry axis along local +z. A cone's base lies at z = -h/4 and its apex at z = +3h/4.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

SHAPES = ("sphere", "cube", "cylinder", "cone")
SIZE_KEYS = {"sphere": ("radius",), "cube": ("edge",), "cylinder": ("radius", "height"), "cone": ("radius", "height")}
REST_POSES = {"sphere": ("any",), "cube": ("upright",), "cylinder": ("upright", "side"), "cone": ("upright",)}


@dataclass(frozen=True)
class Primitive:
    shape: str
    size: dict[str, float]

    def __post_init__(self) -> None:
        if self.shape not in SHAPES:
            raise ValueError(f"unknown shape {self.shape!r}; expected one of {', '.join(SHAPES)}")
        want = set(SIZE_KEYS[self.shape])
        if set(self.size) != want:
            raise ValueError(f"{self.shape} needs size keys {sorted(want)}, got {sorted(self.size)}")
        for k, v in self.size.items():
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"size.{k} must be a positive finite number, got {v!r}")

    # ---- mass properties -------------------------------------------------------------------
    @property
    def volume(self) -> float:
        s = self.size
        if self.shape == "sphere":
            return 4.0 / 3.0 * math.pi * s["radius"] ** 3
        if self.shape == "cube":
            return s["edge"] ** 3
        if self.shape == "cylinder":
            return math.pi * s["radius"] ** 2 * s["height"]
        return math.pi * s["radius"] ** 2 * s["height"] / 3.0

    def mass(self, density: float) -> float:
        return density * self.volume

    def inertia_diagonal(self, mass: float) -> np.ndarray:
        """Principal moments (Ixx, Iyy, Izz) about the centre of mass in the body frame."""
        s = self.size
        if self.shape == "sphere":
            i = 0.4 * mass * s["radius"] ** 2
            return np.array([i, i, i])
        if self.shape == "cube":
            i = mass * s["edge"] ** 2 / 6.0
            return np.array([i, i, i])
        r, h = s["radius"], s["height"]
        if self.shape == "cylinder":
            ixx = mass * (3 * r**2 + h**2) / 12.0
            return np.array([ixx, ixx, 0.5 * mass * r**2])
        ixx = mass * (3.0 / 20.0 * r**2 + 3.0 / 80.0 * h**2)
        return np.array([ixx, ixx, 0.3 * mass * r**2])

    @property
    def com_from_base(self) -> float:
        """Height of the centre of mass above the flat base (cone, cylinder, cube) or centre (sphere)."""
        s = self.size
        if self.shape == "sphere":
            return 0.0
        if self.shape == "cube":
            return s["edge"] / 2.0
        if self.shape == "cylinder":
            return s["height"] / 2.0
        return s["height"] / 4.0

    # ---- contact geometry ------------------------------------------------------------------
    def support_distance(self, rest_pose: str) -> float:
        """Distance from the centre of mass to a supporting plane in the given rest pose."""
        s = self.size
        if self.shape == "sphere":
            return s["radius"]
        if rest_pose == "side":
            return s["radius"]
        return self.com_from_base

    def rolls(self, rest_pose: str) -> bool:
        return self.shape == "sphere" or (self.shape == "cylinder" and rest_pose == "side")

    def rolling_radius(self) -> float:
        return self.size["radius"]

    def rolling_inertia_ratio(self) -> float:
        """k = I / (m r^2) about the rolling axis: 2/5 for a sphere, 1/2 for a cylinder on its side."""
        return 0.4 if self.shape == "sphere" else 0.5

    def tipping_angle(self, rest_pose: str) -> float:
        """Slope angle (rad) beyond which an upright body topples rather than slides."""
        if self.rolls(rest_pose):
            return math.pi / 2
        s = self.size
        half_base = s["edge"] / 2.0 if self.shape == "cube" else s["radius"]
        return math.atan2(half_base, self.com_from_base)

    @property
    def bounding_radius(self) -> float:
        s = self.size
        if self.shape == "sphere":
            return s["radius"]
        if self.shape == "cube":
            return s["edge"] * math.sqrt(3) / 2.0
        if self.shape == "cylinder":
            return math.hypot(s["radius"], s["height"] / 2.0)
        return max(0.75 * s["height"], math.hypot(s["radius"], s["height"] / 4.0))

    # ---- meshes ------------------------------------------------------------------------------
    def mesh(self, sections: int = 64):
        """Watertight trimesh of the solid, with its origin at the centre of mass."""
        import trimesh

        s = self.size
        if self.shape == "sphere":
            subdivisions = max(3, min(6, int(math.log2(sections)) - 2))  # 64 sections → 4, 512 → 6
            m = trimesh.creation.icosphere(subdivisions=subdivisions, radius=s["radius"])
        elif self.shape == "cube":
            m = trimesh.creation.box(extents=(s["edge"],) * 3)
        elif self.shape == "cylinder":
            m = trimesh.creation.cylinder(radius=s["radius"], height=s["height"], sections=sections)
        else:
            m = trimesh.creation.cone(radius=s["radius"], height=s["height"], sections=sections)
            m.apply_translation((0.0, 0.0, -s["height"] / 4.0))  # trimesh puts the base at z = 0
        return m
