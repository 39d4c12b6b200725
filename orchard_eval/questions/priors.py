"""The structured physical prior attached to each case's questions: governing law(s) from the analytic
stages, the expected event sequence from events.json, and per-law observable signatures and common
generation failures (keyed by law name, so shared by every case that obeys the law)."""
from __future__ import annotations

SIGNATURES = {
    "free_fall": ["vertical speed grows linearly with time", "height falls as a parabola in time"],
    "projectile_motion": ["constant horizontal velocity", "parabolic path with one apex"],
    "inclined_plane": ["motion along the ramp only", "speed along the ramp grows linearly (or stays 0 when friction holds)"],
    "circular_motion": ["constant distance from the centre", "constant speed, direction turning steadily"],
    "uniform_linear_motion": ["straight path", "constant speed"],
    "at_rest": ["no object moves"],
}
FAILURES = {
    "free_fall": ["constant-speed fall", "hovering or slowing before landing", "no rebound or a too-high rebound"],
    "projectile_motion": ["straight-line flight", "horizontal speed changes in flight", "asymmetric or missing apex"],
    "inclined_plane": ["body leaves the ramp surface", "slides though friction should hold it", "speed not growing"],
    "circular_motion": ["radius drifts", "body flies off the circle", "speed changes"],
    "uniform_linear_motion": ["spontaneous stop or acceleration", "path curves", "bodies pass through each other"],
    "at_rest": ["objects drift or jitter", "objects appear or vanish"],
}


def case_prior(events_doc: dict | None) -> dict:
    stages = (events_doc or {}).get("stages", [])
    laws = list(dict.fromkeys(str(s["law"]) for s in stages))
    events = sorted((events_doc or {}).get("events", []), key=lambda e: float(e["t"]))
    return {
        "laws": laws,
        "expected_events": [{"label": str(e["label"]), "t": round(float(e["t"]), 4),
                             "objects": [str(o) for o in e["objects"]]} for e in events],
        "signatures": [s for law in laws for s in SIGNATURES.get(law, [])],
        "common_failures": [f for law in laws for f in FAILURES.get(law, [])],
    }
