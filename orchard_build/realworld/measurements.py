"""Measured quantities of real-world cases, with the instruments and precisions of App. B.2 Table 7.

Every quantity is stored in SI units with the instrument or procedure that produced it and its
precision. Table 7 fixes the defaults:

| quantity | instrument / procedure | precision |
|---|---|---|
| mass | digital balance | ±0.01 g |
| size | digital caliper | ±0.05 mm |
| height (drop / launch) | steel tape plus frame-interpolation check | ±1 mm |
| v0 | frame-by-frame velocimetry at the recorded fps | ±0.05 m/s |
| restitution e | two-drop ratio test on the surface | ±0.02 |
| friction μ | inclined-plane tilt-threshold test | ±0.05 |
| g | case metadata (Earth default for ordinary clips) | stored per case |

A ramp angle θ is not in Table 7; it is accepted with an inclinometer default of ±0.5°.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

EARTH_G = 9.81


@dataclass(frozen=True)
class QuantitySpec:
    name: str
    unit: str
    instrument: str
    precision: float | None  # SI, ± half-width; None: stored per case (no instrument)
    precision_text: str
    table7: bool = True


QUANTITIES: dict[str, QuantitySpec] = {
    "mass": QuantitySpec("mass", "kg", "digital balance", 1e-5, "±0.01 g"),
    "size": QuantitySpec("size", "m", "digital caliper", 5e-5, "±0.05 mm"),
    "height": QuantitySpec("height", "m", "steel tape plus frame-interpolation check", 1e-3, "±1 mm"),
    "v0": QuantitySpec("v0", "m/s", "frame-by-frame velocimetry at the recorded fps", 0.05, "±0.05 m/s"),
    "restitution": QuantitySpec("restitution", "1", "two-drop ratio test on the surface", 0.02, "±0.02"),
    "friction": QuantitySpec("friction", "1", "inclined-plane tilt-threshold test", 0.05, "±0.05"),
    "g": QuantitySpec("g", "m/s^2", "case metadata (default Earth value for ordinary real-world clips)", None,
                      "stored per case"),
    "angle": QuantitySpec("angle", "deg", "digital inclinometer", 0.5, "±0.5° (not in Table 7)", table7=False),
}

# fields of the Label Studio measurement form and agreement files → (quantity, dimension)
FIELD_NAMES = ("mass", "size", "height", "v0", "restitution", "friction", "g", "angle")


class MeasurementError(ValueError):
    pass


def quantity(name: str, value: float, *, object_id: str | None = None, dimension: str | None = None,
             instrument: str | None = None, procedure: str | None = None, precision: float | None = None,
             source: str = "measured", fps: float | None = None, notes: str | None = None) -> dict[str, Any]:
    """One measurement record (measurement.schema.json `quantities[]`)."""
    if name not in QUANTITIES:
        raise MeasurementError(f"unknown quantity {name!r}; expected one of {', '.join(QUANTITIES)}")
    spec = QUANTITIES[name]
    try:
        value = float(value)
    except (TypeError, ValueError) as exc:
        raise MeasurementError(f"{name}: value must be a number, got {value!r}") from exc
    if value != value or value in (float("inf"), float("-inf")):
        raise MeasurementError(f"{name}: value must be finite")
    if name in ("mass", "size", "g") and value <= 0:
        raise MeasurementError(f"{name}{'.' + dimension if dimension else ''}: must be positive, got {value}")
    if name in ("height", "friction") and value < 0:
        raise MeasurementError(f"{name}: must not be negative, got {value}")
    if name == "restitution" and not 0 <= value <= 1:
        raise MeasurementError(f"restitution must lie in [0, 1], got {value}")
    proc = procedure or spec.instrument
    if name == "v0" and fps is not None and procedure is None:
        proc = f"{spec.instrument} ({fps:g} fps)"
    prec = spec.precision if precision is None else float(precision)
    rec = {"name": name, "object": object_id, "dimension": dimension, "value": value, "unit": spec.unit,
           "instrument": instrument or spec.instrument, "procedure": proc,
           "precision": prec, "precision_text": spec.precision_text if precision is None else f"±{prec:g} {spec.unit}",
           "table7": spec.table7, "source": source}
    if notes:
        rec["notes"] = notes
    return rec


def quantize(value: float, step: float | None) -> float:
    """Round to the instrument grid (the agreement study quantises before ICC)."""
    if not step:
        return float(value)
    return round(round(float(value) / step) * step, 12)


def find(quantities: list[dict[str, Any]], name: str, object_id: str | None = None,
         dimension: str | None = None) -> dict[str, Any] | None:
    for q in quantities:
        if q["name"] == name and q.get("object") == object_id and (dimension is None or q.get("dimension") == dimension):
            return q
    return None


def value_of(quantities: list[dict[str, Any]], name: str, object_id: str | None = None,
             dimension: str | None = None, default: float | None = None) -> float | None:
    q = find(quantities, name, object_id, dimension)
    return default if q is None else float(q["value"])


def key_of(q: dict[str, Any]) -> str:
    """Stable key of a measurement: name[/object][/dimension]."""
    return "/".join(x for x in (q["name"], q.get("object"), q.get("dimension")) if x)
