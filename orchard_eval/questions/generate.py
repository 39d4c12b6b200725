"""Balanced yes/no questions from a case's analytic solution. Every question is "quantity ⋚ threshold"
over tracks and events (see `quantities`); each true statement gets a false twin (the threshold moved to
the other side of the true value by a margin, or the comparison flipped), so half are true by
construction. Deterministic: the choice is seeded from the case id and `SEED_KEY`."""
from __future__ import annotations

import hashlib
import json
import math
import random

import numpy as np

from ..apt.observable import shown_events
from ..cases import EvalCase
from .priors import case_prior
from .quantities import evaluate

GENERATOR_VERSION = "questions-2"
# the draw's seed, apart from the version: questions-2 changed only which candidates qualify (events a
# video shows, states that hold a frame either side), so a case none of whose candidates changed keeps
# its questions
SEED_KEY = "questions-1"
PAIRS_PER_CASE = 4  # 4 true/false pairs -> 8 questions


def _frames(case: EvalCase, t0: float, t1: float | None = None, ends: bool = False) -> list[int]:
    """The GT frame indices needed to decide a question: the frames spanning [t0, t1] (a point question
    gets its neighbours too, since a speed needs two frames); with `ends`, a long window keeps the
    frames next to its first and last as well (a direction there is read over one frame interval)."""
    n = case.n_frames_declared or int(round(case.physics_duration * case.gt_fps)) + 1
    lo = int(math.floor(t0 * case.gt_fps)) - (1 if t1 is None else 0)
    hi = int(math.ceil((t0 if t1 is None else t1) * case.gt_fps)) + (1 if t1 is None else 0)
    lo, hi = max(lo, 0), min(hi, n - 1)
    idx = list(range(lo, hi + 1))
    if len(idx) > 9:  # a long window: 9 evenly spaced frames are enough to see the motion
        idx = sorted({int(round(x)) for x in np.linspace(lo, hi, 9)} | ({lo + 1, hi - 1} if ends else set()))
    return idx


def _threshold_pair(kind, args, value, margin, rng, text, unit, digits=2):
    """True and false statement about `value` compared with a threshold `margin` away on either side."""
    cmp = rng.choice([">", "<"])
    word = {">": "more than", "<": "less than"}[cmp]
    true_thr = value - margin if cmp == ">" else value + margin
    false_thr = value + margin if cmp == ">" else value - margin
    out = []
    for thr, truth in ((true_thr, True), (false_thr, False)):
        thr = round(thr, digits)
        out.append({"kind": kind, "args": args, "cmp": cmp, "threshold": thr, "truth": truth,
                    "text": text.format(word=word, thr=f"{thr:.{digits}f}{unit}")})
    return out


def _around(t: float, dt: float, T: float) -> list[float]:
    """The frame times next to t inside [0, T]: a point question is decided from them too."""
    return [x for x in (t - dt, t + dt) if 0.0 <= x <= T]


def _candidates(case: EvalCase, tracks, events, rng) -> list[tuple[str, list[dict], list[int]]]:
    """Every candidate pair. A video decides a state at t from the frames around it, so a question
    about the state at t (a speed, a direction, which body is faster) is a candidate only where its
    answer is the same one frame before and after: a bounce or an apex within a frame of t would
    make the frames disagree with the instant."""
    T = case.physics_duration
    dt = 1.0 / case.gt_fps
    ts = [t for t in (case.target_time, round(T / 2, 3)) if 0 < t <= T]
    ids = sorted(tracks.positions)
    out = []
    for obj in ids:
        z = tracks.positions[obj][:, 2]
        extent = float(np.nanmax(z) - np.nanmin(z)) if np.isfinite(z).any() else 0.0
        for t in ts:
            v = evaluate("speed", {"obj": obj, "t": t}, tracks, events)
            if math.isfinite(v):
                margin = max(0.15, 0.3 * v)
                qs = _threshold_pair("speed", {"obj": obj, "t": t}, v, margin, rng,
                                     f"At t = {t:.2f} s, is {obj} moving at {{word}} {{thr}}?", " m/s")
                near = [evaluate("speed", {"obj": obj, "t": x}, tracks, events) for x in _around(t, dt, T)]
                if all(abs(u - v) < margin for u in near):
                    out.append(("speed", qs, _frames(case, t)))
            h = evaluate("height", {"obj": obj, "t": t}, tracks, events)
            if math.isfinite(h):
                qs = _threshold_pair("height", {"obj": obj, "t": t}, h, max(0.05, 0.3 * extent), rng,
                                     f"At t = {t:.2f} s, is the centre of {obj} at {{word}} {{thr}} above the ground plane?", " m")
                out.append(("height", qs, _frames(case, t)))
        d = evaluate("displacement", {"obj": obj, "t0": 0.0, "t1": T}, tracks, events)
        if math.isfinite(d):
            qs = _threshold_pair("displacement", {"obj": obj, "t0": 0.0, "t1": T}, d, max(0.05, 0.3 * d), rng,
                                 f"Between t = 0 and t = {T:.2f} s, does {obj} end up {{word}} {{thr}} from where it started?", " m")
            out.append(("displacement", qs, _frames(case, 0.0, T)))
        c = evaluate("heading_cosine", {"obj": obj, "t0": 0.0, "t1": T}, tracks, events)
        # the directions a video shows are over its first and last frame intervals
        ends = [evaluate("heading_cosine", {"obj": obj, "t0": a, "t1": b}, tracks, events)
                for a, b in ((dt, T), (0.0, T - dt))] if T > dt else []
        if math.isfinite(c) and abs(c) > 0.5 and all(e * c > 0 for e in ends):  # clearly reversed or kept
            args = {"obj": obj, "t0": 0.0, "t1": T}
            qs = [{"kind": "heading_cosine", "args": args, "cmp": "<", "threshold": 0.0, "truth": c < 0,
                   "text": f"Is {obj} moving against its initial direction of motion at t = {T:.2f} s?"},
                  {"kind": "heading_cosine", "args": args, "cmp": ">", "threshold": 0.0, "truth": c > 0,
                   "text": f"Is {obj} still moving in its initial direction of motion at t = {T:.2f} s?"}]
            out.append(("heading_cosine", qs, _frames(case, 0.0, T, ends=True)))
        for label in dict.fromkeys(e.type for e in events or () if obj in e.objects or not e.objects):
            te = evaluate("event_time", {"label": label, "obj": obj}, tracks, events)
            m = max(0.2, 4.0 / case.gt_fps)
            if math.isfinite(te) and te - m > 0:
                qs = _threshold_pair("event_time", {"label": label, "obj": obj}, te, m, rng,
                                     "", " s")
                for q in qs:  # phrase as before/after a time
                    q["text"] = (f"Does the first '{label}' event of {obj} happen "
                                 f"{'after' if q['cmp'] == '>' else 'before'} t = {q['threshold']:.2f} s?")
                out.append(("event_time", qs, _frames(case, te - m, te + m)))
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            for t in ts:
                g = evaluate("speed_gap", {"obj": a, "other": b, "t": t}, tracks, events)
                near = [evaluate("speed_gap", {"obj": a, "other": b, "t": x}, tracks, events)
                        for x in _around(t, dt, T)]
                if math.isfinite(g) and abs(g) > 0.15 and all(u * g > 0 for u in near):  # a gap visible from video
                    args = {"obj": a, "other": b, "t": t}
                    qs = [{"kind": "speed_gap", "args": args, "cmp": ">", "threshold": 0.0, "truth": g > 0,
                           "text": f"At t = {t:.2f} s, is {a} moving faster than {b}?"},
                          {"kind": "speed_gap", "args": args, "cmp": "<", "threshold": 0.0, "truth": g < 0,
                           "text": f"At t = {t:.2f} s, is {b} moving faster than {a}?"}]
                    out.append(("speed_gap", qs, _frames(case, t)))
    return out


def generate_questions(case: EvalCase) -> dict:
    """The questions document of one case (see schemas/questions.schema.json)."""
    tracks = case.object_tracks()
    if tracks is None:
        raise ValueError(f"{case.case_id}: no analytic tracks to derive questions from")
    # event-time questions ask about what a video shows only: the first apex of a body launched almost
    # level, a few ms after the launch and under a pixel above it, is no consequence a video decides
    events = shown_events(case)
    seed = int(hashlib.sha256(f"{SEED_KEY}:{case.case_id}".encode()).hexdigest()[:16], 16)
    rng = random.Random(seed)
    cands = _candidates(case, tracks, events, rng)
    # round-robin over kinds (in a seeded order) so a case's questions cover different consequences
    by_kind: dict[str, list] = {}
    for c in cands:
        by_kind.setdefault(c[0], []).append(c)
    kinds = sorted(by_kind)
    rng.shuffle(kinds)
    for k in kinds:
        rng.shuffle(by_kind[k])
    chosen = []
    while len(chosen) < PAIRS_PER_CASE and any(by_kind.values()):
        for k in kinds:
            if by_kind[k] and len(chosen) < PAIRS_PER_CASE:
                chosen.append(by_kind[k].pop())
    questions = []
    for _, pair, frames in chosen:
        for q in pair:
            questions.append({**q, "frames": frames,
                              "times": [round(f / case.gt_fps, 4) for f in frames]})
    rng.shuffle(questions)
    for i, q in enumerate(questions):
        q["id"] = f"q{i}"
    events_doc = None
    p = case.path / "events.json"
    if p.is_file():
        events_doc = json.loads(p.read_text(encoding="utf-8"))
    return {"schema_version": 1, "generator": GENERATOR_VERSION, "case_id": case.case_id,
            "task": case.task, "pillar": case.pillar, "gt_fps": case.gt_fps,
            "prior": case_prior(events_doc), "questions": questions}
