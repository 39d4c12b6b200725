"""Hierarchical aggregation (App. E.4): rollouts → case (fusion.rollout_mean) → slices → model.

* track-wise score S_k: mean of the case-level scores of subtrack k over the cases;
* overall S: mean over every (case, subtrack) pair (eq. 14);
* pillar-wise (Grav., Mom., N1, Multi) and source-wise (Sim., Real) scores: the same means restricted
  to the cases of the slice — computed from case-level scores, never as means of table cells.

Scores of one table must share a mode: judged and objective-only scores are never combined. In
objective-only mode the subtracks without objective metrics (P-T, F-T) have no case scores and are
reported as absent, not as zero.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from .cases import PILLAR_SHORT, PILLARS, SOURCE_SHORT, SOURCES, SUBTRACK_SHORT, SUBTRACKS
from .fusion import CaseSubtrackScore, ModeMixError


@dataclass(frozen=True)
class CaseScore:
    case_id: str
    subtrack: str
    score: float
    pillar: str
    source: str
    mode: str


@dataclass
class SliceScore:
    overall: float | None
    per_subtrack: dict[str, float | None]
    n_cases: int
    n_pairs: int


@dataclass
class Aggregate:
    mode: str
    subtracks: tuple[str, ...]
    all: SliceScore
    pillars: dict[str, SliceScore]
    sources: dict[str, SliceScore]
    incomplete: list[str] = field(default_factory=list)   # (case, subtrack) pairs without a score

    def row(self) -> dict[str, float | None]:
        """One table row: P-T … Ded., Grav. … Multi, Sim., Real, Overall (short column names)."""
        r: dict[str, float | None] = {SUBTRACK_SHORT[k]: self.all.per_subtrack.get(k) for k in SUBTRACKS}
        r.update({PILLAR_SHORT[p]: self.pillars[p].overall for p in PILLARS})
        r.update({SOURCE_SHORT[s]: self.sources[s].overall for s in SOURCES})
        r["Overall"] = self.all.overall
        return r

    def to_dict(self) -> dict[str, Any]:
        def sl(s: SliceScore) -> dict[str, Any]:
            return {"overall": s.overall, "per_subtrack": s.per_subtrack, "n_cases": s.n_cases, "n_pairs": s.n_pairs}

        return {"mode": self.mode, "subtracks": list(self.subtracks), "all": sl(self.all),
                "pillars": {k: sl(v) for k, v in self.pillars.items()},
                "sources": {k: sl(v) for k, v in self.sources.items()}, "row": self.row(),
                "incomplete": self.incomplete}


def _mean(xs: list[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def _slice(scores: list[CaseScore], subtracks: tuple[str, ...]) -> SliceScore:
    per = {k: _mean([s.score for s in scores if s.subtrack == k]) for k in subtracks}
    return SliceScore(_mean([s.score for s in scores]), per, len({s.case_id for s in scores}), len(scores))


def case_scores_from(results: Iterable[CaseSubtrackScore], cases: Mapping[str, Any]) -> list[CaseScore]:
    """Attach pillar and source to case-level results; results without a score (None) are skipped."""
    out = []
    for r in results:
        if r.score is None:
            continue
        c = cases[r.case_id]
        out.append(CaseScore(r.case_id, r.subtrack, float(r.score), c.pillar, c.source, r.mode))
    return out


def aggregate(scores: Iterable[CaseScore], subtracks: Iterable[str] | None = None,
              expected_cases: Iterable[str] | None = None) -> Aggregate:
    """Aggregate case-level scores (one per case and subtrack). Subtracks with no score at all are
    left out of the overall mean (objective-only P-T/F-T); missing (case, subtrack) pairs among the
    remaining subtracks are listed in `incomplete`."""
    scores = list(scores)
    modes = {s.mode for s in scores}
    if len(modes) > 1:
        raise ModeMixError(f"scores mix {sorted(modes)}")
    seen: set[tuple[str, str]] = set()
    for s in scores:
        if (s.case_id, s.subtrack) in seen:
            raise ValueError(f"two scores for {s.case_id}/{s.subtrack}")
        if not (0.0 <= s.score <= 1.0):
            raise ValueError(f"{s.case_id}/{s.subtrack}: score {s.score} outside [0, 1]")
        seen.add((s.case_id, s.subtrack))
    wanted = tuple(subtracks) if subtracks is not None else SUBTRACKS
    present = tuple(k for k in wanted if any(s.subtrack == k for s in scores))
    scores = [s for s in scores if s.subtrack in present]
    case_ids = sorted(set(expected_cases) if expected_cases is not None else {s.case_id for s in scores})
    incomplete = [f"{c}/{k}" for c in case_ids for k in present if (c, k) not in seen]
    return Aggregate(
        mode=modes.pop() if modes else "judged", subtracks=present, all=_slice(scores, present),
        pillars={p: _slice([s for s in scores if s.pillar == p], present) for p in PILLARS},
        sources={src: _slice([s for s in scores if s.source == src], present) for src in SOURCES},
        incomplete=incomplete,
    )
