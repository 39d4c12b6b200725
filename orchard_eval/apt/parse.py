"""Tolerant reading of a model's APT chain reply into `Transition`s.

The documented answer format (docs/apt.md) is a JSON array of records `{"type": <label>, "t_ms": <int>}`.
Models stray from it, so the reader accepts, in order of repair:

* the array wrapped in prose or a Markdown code fence, or inside an object under a list-valued key
  (e.g. `{"transitions": [...]}`), or bare records with no enclosing brackets;
* trailing commas, `//` comments and Python literals (True/False/None) inside a record;
* a truncated reply (token limit): every complete leading record is kept, the cut-off one dropped;
* times as `t_ms` (milliseconds), `t_s` / `t_sec` / `seconds` (seconds), strings with a unit
  ("1.2 s", "1200 ms"), or a bare `t` / `time` / `timestamp` number — milliseconds as the prompt asks,
  unless the clip duration is known and every bare value fits inside it read as seconds (then seconds);
* type names in any case, with spaces or hyphens for underscores.

A record without a type or a finite time is dropped with a note. A type outside the taxonomy is kept
(it counts as a prediction that cannot match) and reported in `unknown_types`; nothing here raises on
model output.
"""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from .taxonomy import DOMAIN_OF, Transition

MS_KEYS = ("t_ms", "time_ms", "timestamp_ms", "ms")
S_KEYS = ("t_s", "t_sec", "time_s", "seconds", "timestamp_s")
BARE_KEYS = ("t", "time", "timestamp")
TYPE_KEYS = ("type", "label", "apt", "transition", "name")
LIST_KEYS = ("transitions", "apts", "chain", "events", "predictions")


@dataclass
class ParsedChain:
    transitions: list[Transition]
    records: int = 0                    # record objects found (complete ones)
    dropped: int = 0                    # records without a usable type or time
    truncated: bool = False             # the reply stopped inside a record
    found: bool = False                 # any JSON array or record was found at all
    unknown_types: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {"records": self.records, "dropped": self.dropped, "truncated": self.truncated,
                "found": self.found, "unknown_types": list(self.unknown_types), "notes": list(self.notes)}


def normalise_type(name: object) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def _objects_in(s: str) -> tuple[list[str], bool]:
    """The complete top-level `{...}` texts of `s` in order, and whether the last one was cut off."""
    out: list[str] = []
    depth, start, in_str, esc = 0, -1, False, False
    for i, ch in enumerate(s):
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch == '"':
            in_str = depth > 0
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(s[start:i + 1])
        elif ch == "]" and depth == 0 and out:
            break   # the end of the first array of records
    return out, depth > 0


def _load(obj_text: str) -> object | None:
    for candidate in (obj_text, _repair(obj_text)):
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    return None


def _repair(s: str) -> str:
    s = re.sub(r"//[^\n]*", "", s)
    s = re.sub(r",\s*([}\]])", r"\1", s)
    s = re.sub(r"\bTrue\b", "true", s)
    s = re.sub(r"\bFalse\b", "false", s)
    s = re.sub(r"\bNone\b", "null", s)
    if '"' not in s:
        s = s.replace("'", '"')
    return s


def _region(text: str) -> str:
    """The part of the reply holding the records: a fenced block if there is one, from the first '['
    (or '{' when no '[' precedes it) onwards."""
    m = re.search(r"```(?:json|JSON)?\s*(.*?)(```|$)", text, flags=re.DOTALL)
    if m and ("{" in m.group(1) or "[" in m.group(1)):
        text = m.group(1)
    b, c = text.find("["), text.find("{")
    if b < 0 and c < 0:
        return ""
    if b >= 0 and (c < 0 or b < c):
        return text[b + 1:]
    return text[c:]


def _time(rec: dict, duration_s: float | None) -> tuple[float | None, str]:
    """(value, unit) with unit 'ms', 's' or 'bare' (decided later, once per reply)."""
    for keys, unit in ((MS_KEYS, "ms"), (S_KEYS, "s"), (BARE_KEYS, "bare")):
        for k in keys:
            if k in rec and rec[k] is not None:
                v = rec[k]
                if isinstance(v, bool):
                    return None, unit
                if isinstance(v, str):
                    m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(ms|msec|milliseconds?|s|sec|secs|seconds?)?\s*", v)
                    if not m:
                        return None, unit
                    num = float(m.group(1))
                    suffix = (m.group(2) or "").lower()
                    if suffix:
                        return num, "ms" if suffix.startswith("m") else "s"
                    return num, unit
                try:
                    num = float(v)
                except (TypeError, ValueError):
                    return None, unit
                return num, unit
    return None, "none"


def parse_chain(text: str | None, duration_s: float | None = None) -> ParsedChain:
    """Read `text` (a model's reply) into transitions with times in seconds, in the order given."""
    res = ParsedChain(transitions=[])
    if not text:
        res.notes.append("empty reply")
        return res
    region = _region(str(text))
    if not region:
        res.notes.append("no JSON array or record in the reply")
        return res
    res.found = True
    texts, cut = _objects_in(region)
    res.truncated = cut
    if cut:
        res.notes.append("reply truncated inside a record; the complete leading records are kept")
    records: list[dict] = []
    for t in texts:
        obj = _load(t)
        if isinstance(obj, dict):
            inner = next((obj[k] for k in LIST_KEYS if isinstance(obj.get(k), list)), None)
            if inner is not None and not any(k in obj for k in TYPE_KEYS):
                records.extend(r for r in inner if isinstance(r, dict))
                continue
            records.append(obj)
        else:
            res.dropped += 1
            res.notes.append(f"unreadable record: {t[:60]!r}")
    # a wrapper object that was itself cut off: read its records from inside
    if not records and cut and region.lstrip().startswith("{"):
        inner_start = region.find("[")
        if inner_start >= 0:
            sub = parse_chain("[" + region[inner_start + 1:], duration_s)
            sub.notes.insert(0, "records read from inside a truncated wrapper object")
            return sub
    res.records = len(records)
    rows: list[tuple[str, float, str, dict]] = []
    for rec in records:
        name = next((rec[k] for k in TYPE_KEYS if isinstance(rec.get(k), str) and rec[k].strip()), None)
        value, unit = _time(rec, duration_s)
        if name is None or value is None or not math.isfinite(value):
            res.dropped += 1
            res.notes.append(f"record without a type or a finite time dropped: {json.dumps(rec)[:80]}")
            continue
        rows.append((normalise_type(name), value, unit, rec))
    bare = [v for _, v, u, _ in rows if u == "bare"]
    bare_in_seconds = bool(bare) and duration_s is not None and all(0 <= v <= duration_s + 0.2 for v in bare) \
        and any(v > 0 for v in bare)
    if bare:
        res.notes.append(f"bare times read as {'seconds' if bare_in_seconds else 'milliseconds'}")
    for name, value, unit, rec in rows:
        seconds = value if unit == "s" or (unit == "bare" and bare_in_seconds) else value / 1000.0
        conf = rec.get("confidence")
        conf = float(conf) if isinstance(conf, (int, float)) and not isinstance(conf, bool) \
            and math.isfinite(float(conf)) else None
        objs = rec.get("objects")
        objs = tuple(str(o) for o in objs) if isinstance(objs, list) else ()
        res.transitions.append(Transition(type=name, t=seconds, objects=objs, confidence=conf))
    res.unknown_types = sorted({tr.type for tr in res.transitions if tr.type not in DOMAIN_OF})
    return res
