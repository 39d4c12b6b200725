"""Programmatic answerer: decides each question from measured tracks (+ events). The seam is
`answer_questions(doc, tracks, events)`: the oracle passes the case's GT tracks and events; the
measured answerer (`measured.py`) the tracks and transitions measured in an answer video."""
from __future__ import annotations

import math

from ..cases import ObjectTracks
from .quantities import evaluate


def answer_questions(doc: dict, tracks: ObjectTracks, events=()) -> dict[str, bool | None]:
    """question id -> yes/no; None where the tracks cannot decide (an object missing, no motion)."""
    out: dict[str, bool | None] = {}
    for q in doc["questions"]:
        v = evaluate(q["kind"], q["args"], tracks, events)
        out[q["id"]] = None if not math.isfinite(v) else (v > q["threshold"] if q["cmp"] == ">" else v < q["threshold"])
    return out
