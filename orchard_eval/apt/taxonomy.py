"""The APT taxonomy: 14 transition types in four mechanism domains, with their before/after regimes.

The names are those of `schemas/events.schema.json` (what `orchard_build` writes into events.json).
"""
from __future__ import annotations

from dataclasses import dataclass

# domain -> ((type, regime before, regime after), ...)
DOMAINS: dict[str, tuple[tuple[str, str, str], ...]] = {
    "contact": (("contact_init", "separated", "interacting"),
                ("contact_break", "interacting", "separated"),
                ("elastic_rebound", "approach", "retreat"),
                ("inelastic_capture", "moving", "captured or at rest")),
    "gravity": (("free_fall_onset", "supported", "falling"),
                ("projectile_apex", "ascending", "descending"),
                ("landing", "falling", "supported")),
    "friction": (("static_breakaway", "stationary", "moving"),
                 ("sliding_arrest", "moving", "stationary"),
                 ("surface_transition", "on surface A", "on surface B")),
    "rotation": (("rotation_onset", "non-rotating", "rotating"),
                 ("toppling", "stable", "unstable"),
                 ("rotation_arrest", "rotating", "stationary"),
                 ("settling", "disturbed", "at equilibrium")),
}
DOMAIN_OF: dict[str, str] = {t: d for d, rows in DOMAINS.items() for t, _, _ in rows}
APT_TYPES: tuple[str, ...] = tuple(DOMAIN_OF)
REGIMES: dict[str, tuple[str, str]] = {t: (b, a) for rows in DOMAINS.values() for t, b, a in rows}


@dataclass(frozen=True)
class Transition:
    """One typed transition at physical time `t` (seconds), optionally naming the bodies involved."""
    type: str
    t: float
    objects: tuple[str, ...] = ()
    confidence: float | None = None

    @property
    def domain(self) -> str | None:
        return DOMAIN_OF.get(self.type)


def events_to_transitions(events_doc: dict) -> list[Transition]:
    """The events of an events.json document as transitions, in time order."""
    out = [Transition(type=str(e["label"]), t=float(e["t"]), objects=tuple(str(o) for o in e["objects"]))
           for e in events_doc.get("events", [])]
    return sorted(out, key=lambda tr: tr.t)
