"""Material library: one key binds density, friction, restitution and visual look.

Pair rules are explicit data in the library file, and every consumer (analytic ground truth,
MuJoCo, Isaac Sim) asks this module for a pair's coefficients, so they cannot disagree.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError
from .schemas import validate_instance


@dataclass(frozen=True)
class Look:
    base_color: tuple[float, float, float]
    roughness: float
    metallic: float
    texture: str | None = None


@dataclass(frozen=True)
class Material:
    key: str
    density: float
    static_friction: float
    dynamic_friction: float
    restitution: float
    look: Look
    idealised: bool = False


@dataclass(frozen=True)
class PairCoefficients:
    static_friction: float
    dynamic_friction: float
    restitution: float


_COMBINE = {
    "geometric_mean": lambda a, b: math.sqrt(a * b),
    "min": min,
    "max": max,
    "average": lambda a, b: 0.5 * (a + b),
    "multiply": lambda a, b: a * b,
}


@dataclass(frozen=True)
class MaterialLibrary:
    materials: dict[str, Material]
    friction_rule: str
    restitution_rule: str
    overrides: dict[frozenset, dict[str, float]] = field(default_factory=dict)
    source: str = ""

    def __getitem__(self, key: str) -> Material:
        try:
            return self.materials[key]
        except KeyError:
            raise KeyError(f"unknown material {key!r}; known: {', '.join(sorted(self.materials))}") from None

    def __contains__(self, key: str) -> bool:
        return key in self.materials

    def pair(self, a: str, b: str) -> PairCoefficients:
        """Coefficients of the contact between materials a and b (symmetric)."""
        ma, mb = self[a], self[b]
        fr, rr = _COMBINE[self.friction_rule], _COMBINE[self.restitution_rule]
        values = {
            "static_friction": fr(ma.static_friction, mb.static_friction),
            "dynamic_friction": fr(ma.dynamic_friction, mb.dynamic_friction),
            "restitution": rr(ma.restitution, mb.restitution),
        }
        values.update(self.overrides.get(frozenset((a, b)), {}))
        return PairCoefficients(**values)


def load_materials(path: str | Path) -> MaterialLibrary:
    path = Path(path)
    try:
        raw: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(path, "", f"cannot read material library: {exc}") from exc
    validate_instance(raw, "materials.schema.json", path)
    mats = {}
    for key, m in raw["materials"].items():
        look = m["look"]
        mats[key] = Material(
            key=key,
            density=float(m["density"]),
            static_friction=float(m["static_friction"]),
            dynamic_friction=float(m["dynamic_friction"]),
            restitution=float(m["restitution"]),
            look=Look(tuple(float(c) for c in look["base_color"]), float(look["roughness"]),
                      float(look.get("metallic", 0.0)), look.get("texture")),
            idealised=bool(m.get("idealised", False)),
        )
        if m["dynamic_friction"] > m["static_friction"]:
            raise ConfigError(path, f"materials.{key}.dynamic_friction",
                              "dynamic friction exceeds static friction")
    rules = raw["pair_rules"]
    overrides = {}
    for i, o in enumerate(rules.get("overrides", [])):
        for end in ("a", "b"):
            if o[end] not in mats:
                raise ConfigError(path, f"pair_rules.overrides[{i}].{end}", f"unknown material {o[end]!r}")
        overrides[frozenset((o["a"], o["b"]))] = {k: float(v) for k, v in o.items() if k not in ("a", "b")}
    return MaterialLibrary(mats, rules["friction"], rules["restitution"], overrides, str(path))
