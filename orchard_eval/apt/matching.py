"""One-to-one matching of a predicted transition chain to the ground truth (APT protocol).

A prediction matches a truth when the types are equal, the times differ by at most `tolerance`
(0.2 s) and, if asked, both name the same set of objects. Predictions are taken greedily — by
confidence where every prediction has one, otherwise in the order given — and each takes the nearest
still-unmatched truth; every truth is matched at most once, so repeating a transition never earns
more than one hit. Times are physical seconds, never frame indices, so that clips of different frame
rates are comparable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

from .taxonomy import DOMAIN_OF, Transition

TOLERANCE_S = 0.2


@dataclass
class Counts:
    """Hits, predictions and truths of one slice (all, one type, one domain)."""
    tp: int = 0
    n_pred: int = 0
    n_gt: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / self.n_pred if self.n_pred else None

    @property
    def recall(self) -> float | None:
        return self.tp / self.n_gt if self.n_gt else None

    @property
    def f1(self) -> float | None:
        """2·TP / (P + G); 1.0 when both chains are empty (nothing to find, nothing claimed)."""
        if self.n_pred + self.n_gt == 0:
            return 1.0
        return 2.0 * self.tp / (self.n_pred + self.n_gt)

    def add(self, other: "Counts") -> None:
        self.tp += other.tp
        self.n_pred += other.n_pred
        self.n_gt += other.n_gt

    def as_dict(self) -> dict:
        return {"tp": self.tp, "n_pred": self.n_pred, "n_gt": self.n_gt, "precision": self.precision,
                "recall": self.recall, "f1": self.f1}


@dataclass
class MatchResult:
    pairs: list[tuple[int, int]]          # (prediction index, truth index)
    overall: Counts
    per_type: dict[str, Counts]
    per_domain: dict[str, Counts]
    timing_errors: list[float]            # |Δt| of the matched pairs, seconds
    type_accuracy: float | None = None    # on pairs matched by time (and objects) alone
    n_loose: int = 0                      # how many such pairs
    unknown_types: list[str] = field(default_factory=list)

    @property
    def median_timing_error(self) -> float | None:
        return float(np.median(self.timing_errors)) if self.timing_errors else None

    def as_dict(self) -> dict:
        return {**self.overall.as_dict(), "median_dt_s": self.median_timing_error,
                "type_accuracy": self.type_accuracy, "unknown_types": list(self.unknown_types),
                "per_type": {k: v.as_dict() for k, v in sorted(self.per_type.items())},
                "per_domain": {k: v.as_dict() for k, v in sorted(self.per_domain.items())}}


def _order(pred: Sequence[Transition]) -> list[int]:
    if pred and all(p.confidence is not None for p in pred):
        # stable: equal confidences keep the given order
        return sorted(range(len(pred)), key=lambda i: -float(pred[i].confidence))  # type: ignore[arg-type]
    return list(range(len(pred)))


def _greedy(pred: Sequence[Transition], gt: Sequence[Transition], tolerance: float, match_objects: bool,
            match_type: bool) -> list[tuple[int, int]]:
    taken = [False] * len(gt)
    pairs = []
    for i in _order(pred):
        p = pred[i]
        best, best_dt = -1, None
        for j, g in enumerate(gt):
            if taken[j] or (match_type and g.type != p.type):
                continue
            if match_objects and frozenset(g.objects) != frozenset(p.objects):
                continue
            dt = abs(g.t - p.t)
            if dt <= tolerance + 1e-9 and (best_dt is None or dt < best_dt):
                best, best_dt = j, dt
        if best >= 0:
            taken[best] = True
            pairs.append((i, best))
    return pairs


def match_chains(pred: Sequence[Transition], gt: Sequence[Transition], tolerance: float = TOLERANCE_S,
                 match_objects: bool = False) -> MatchResult:
    """Score `pred` against `gt`: counts overall, per type and per mechanism domain, timing errors,
    and the type accuracy of the time-matched pairs (which isolates naming from finding)."""
    pairs = _greedy(pred, gt, tolerance, match_objects, match_type=True)
    per_type: dict[str, Counts] = {}
    per_domain: dict[str, Counts] = {}

    def slot(table: dict[str, Counts], key: str) -> Counts:
        return table.setdefault(key, Counts())

    for p in pred:
        slot(per_type, p.type).n_pred += 1
        slot(per_domain, DOMAIN_OF.get(p.type, "unknown")).n_pred += 1
    for g in gt:
        slot(per_type, g.type).n_gt += 1
        slot(per_domain, DOMAIN_OF.get(g.type, "unknown")).n_gt += 1
    for _, j in pairs:
        slot(per_type, gt[j].type).tp += 1
        slot(per_domain, DOMAIN_OF.get(gt[j].type, "unknown")).tp += 1
    overall = Counts(tp=len(pairs), n_pred=len(pred), n_gt=len(gt))
    loose = _greedy(pred, gt, tolerance, match_objects, match_type=False)
    type_acc = (sum(pred[i].type == gt[j].type for i, j in loose) / len(loose)) if loose else None
    unknown = sorted({p.type for p in pred if p.type not in DOMAIN_OF})
    return MatchResult(pairs=pairs, overall=overall, per_type=per_type, per_domain=per_domain,
                       timing_errors=[abs(pred[i].t - gt[j].t) for i, j in pairs], type_accuracy=type_acc, n_loose=len(loose),
                       unknown_types=unknown)


def without_excused(pred: Sequence[Transition], gt: Sequence[Transition], unsure: Sequence[Transition],
                    tolerance: float = TOLERANCE_S, match_objects: bool = False) -> list[Transition]:
    """`pred` less the predictions that no truth of `gt` takes but a transition of `unsure` does (same
    rule as `match_chains`): real transitions a video may not show, whose report is not held against
    the chain (`observable`). Scoring the rest against `gt` gives every truth the same prediction it
    had before, since an excused one took none."""
    if not unsure:
        return list(pred)
    taken = {i for i, _ in _greedy(pred, gt, tolerance, match_objects, match_type=True)}
    rest = [i for i in range(len(pred)) if i not in taken]
    excused = {rest[i] for i, _ in _greedy([pred[k] for k in rest], unsure, tolerance, match_objects, match_type=True)}
    return [p for i, p in enumerate(pred) if i not in excused]


def frame_grid_ceiling(gt: Sequence[Transition], frame_times: Iterable[float],
                       tolerance: float = TOLERANCE_S) -> Counts:
    """The best a chain could score if every timestamp had to be one of `frame_times`: each truth with
    a frame time within the tolerance is found by one correctly typed prediction at that time, and
    nothing else is claimed."""
    times = np.asarray(list(frame_times), dtype=np.float64)
    reachable = sum(1 for g in gt if times.size and float(np.min(np.abs(times - g.t))) <= tolerance + 1e-9)
    return Counts(tp=reachable, n_pred=reachable, n_gt=len(gt))


def pooled(results: Iterable[MatchResult]) -> dict[str, Counts]:
    """Micro-averaged counts over many chains: 'overall', every type and every 'domain:<name>'."""
    out: dict[str, Counts] = {"overall": Counts()}
    for r in results:
        out["overall"].add(r.overall)
        for k, c in r.per_type.items():
            out.setdefault(k, Counts()).add(c)
        for k, c in r.per_domain.items():
            out.setdefault(f"domain:{k}", Counts()).add(c)
    return out
