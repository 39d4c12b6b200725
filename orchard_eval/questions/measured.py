"""The programmatic answerer on a model's answer (`orchard-eval questions answer`): each case's
questions decided from the tracks measured in the submission's Deduction video, as the GT-track
oracle decides them from the analytic tracks.

Per case the answer video is read at the union of the questions' frame times (their question-aware
windows, which span t = 0 to T for the whole-clip questions), segmented by the metrics' own path
(`tracks.answer_tracks`: `objective.answer_segmentations`, back-projection onto each body's motion
plane), and event-time questions read the transitions detected in those tracks (`apt.detect`), never
the case's own events. A case whose answer is missing or unreadable, or whose tracks cannot be
measured, leaves its questions unanswered (scored wrong) and says why.
"""
from __future__ import annotations

from pathlib import Path

from ..cases import load_dataset
from .answer import answer_questions


def measured_answers(cases: str, docs: dict[str, dict], predictions: str | Path, rollout: int = 0
                     ) -> tuple[dict[str, dict[str, bool | None]], list[str]]:
    """(case id → question id → answer, problems)."""
    from ..apt.detect import detect_transitions
    from ..canonical import canonical_deduction
    from ..predictions import load_submission, rollout_path
    from ..tracks import answer_tracks

    sub = load_submission(predictions)
    ds = load_dataset(cases, case_ids=sorted(docs))
    answers: dict[str, dict[str, bool | None]] = {}
    problems: list[str] = []
    for cid, doc in sorted(docs.items()):
        answers[cid] = {q["id"]: None for q in doc["questions"]}
        case = ds.cases.get(cid)
        if case is None:
            problems.append(f"{cid}: not in the dataset")
            continue
        times = sorted({0.0, *(float(t) for q in doc["questions"] for t in q["times"])})
        try:
            packet = canonical_deduction(case, rollout_path(sub, cid, "deduction", rollout), sub.protocol, times=times)
        except ValueError as exc:   # a hostile case id
            problems.append(f"{cid}: {exc}")
            continue
        if not packet.ok:
            problems.append(f"{cid}: answer unreadable ({packet.error_kind}: {packet.error})")
            continue
        tracks = answer_tracks(case, packet)
        if tracks is None:
            problems.append(f"{cid}: no tracks could be measured (image protocol, no camera, or < 3 frames)")
            continue
        answers[cid] = answer_questions(doc, tracks, detect_transitions(case, tracks))
    return answers, problems
