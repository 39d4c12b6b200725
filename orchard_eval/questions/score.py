"""Accuracy and balanced accuracy of yes/no answers, per case, task, pillar and overall. Balanced
accuracy is the mean of the rate on true and on false statements; since each case is half true, half
false by construction, both are 0.5 for a constant answerer (chance). An unanswered question counts wrong."""
from __future__ import annotations

CHANCE = 0.5


def _rates(pairs: list[tuple[bool, bool | None]]) -> dict:
    n = len(pairs)
    correct = sum(1 for truth, ans in pairs if ans is not None and ans == truth)
    pos = [(t, a) for t, a in pairs if t]
    neg = [(t, a) for t, a in pairs if not t]
    tpr = sum(1 for _, a in pos if a is True) / len(pos) if pos else None
    tnr = sum(1 for _, a in neg if a is False) / len(neg) if neg else None
    bal = (tpr + tnr) / 2 if tpr is not None and tnr is not None else None
    return {"n": n, "accuracy": correct / n if n else None, "balanced_accuracy": bal,
            "unanswered": sum(1 for _, a in pairs if a is None)}


def score_answers(docs: dict[str, dict], answers: dict[str, dict[str, bool | None]]) -> dict:
    """`docs`: case id -> questions document; `answers`: case id -> question id -> answer."""
    groups: dict[str, dict[str, list]] = {"case": {}, "task": {}, "pillar": {}}
    every = []
    for cid, doc in sorted(docs.items()):
        got = answers.get(cid, {})
        pairs = [(bool(q["truth"]), got.get(q["id"])) for q in doc["questions"]]
        every += pairs
        for level, key in (("case", cid), ("task", doc["task"]), ("pillar", doc["pillar"])):
            groups[level].setdefault(key, []).extend(pairs)
    return {"chance": CHANCE, "overall": _rates(every),
            **{f"by_{level}": {k: _rates(v) for k, v in sorted(g.items())} for level, g in groups.items()}}
