"""Tolerant reading of a model's transition chain.

Accepts the documented JSON array and the ways models stray from it: prose around it, code fences,
an object wrapping the list (`{"transitions": [...]}`), trailing commas, single records, and replies
cut off mid-array (every complete leading record is kept, the torn tail dropped). Times come as
`t_ms` (milliseconds) or `t` / `time` / `t_s` (seconds); `type` may be called `label`. Records
without a usable type or time are counted, not fatal; unknown type names are kept, so the score can
report them.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from .taxonomy import Transition

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([\]}])")


@dataclass
class ParsedChain:
    transitions: list[Transition]
    n_records: int = 0          # records found (usable or not)
    n_dropped: int = 0          # records without a usable type or time
    repaired: list[str] = field(default_factory=list)   # what had to be repaired to read it


def _objects(text: str, start: int) -> list[str]:
    """Balanced {...} spans from `start` on, ignoring braces inside strings; stops at a torn one."""
    out, depth, begin, in_str, esc = [], 0, -1, False, False
    for i in range(start, len(text)):
        c = text[i]
        if in_str:
            if esc:
                esc = False
            elif c == "\\":
                esc = True
            elif c == '"':
                in_str = False
            continue
        if c == '"':
            in_str = True
        elif c == "{":
            if depth == 0:
                begin = i
            depth += 1
        elif c == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                out.append(text[begin:i + 1])
        elif c == "]" and depth == 0:
            break
    return out


def _load(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return json.loads(_TRAILING_COMMA.sub(r"\1", text))


def _time(rec: dict) -> float | None:
    for key, per_s in (("t_ms", 1000.0), ("time_ms", 1000.0), ("timestamp_ms", 1000.0), ("t", 1.0), ("t_s", 1.0),
                       ("time", 1.0), ("time_s", 1.0)):
        v = rec.get(key)
        if isinstance(v, bool):
            continue
        if isinstance(v, (int, float)):
            return float(v) / per_s
        if isinstance(v, str):
            m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(ms|s)?\s*", v)
            if m:
                unit = m.group(2)
                return float(m.group(1)) / (1000.0 if unit == "ms" else 1.0 if unit == "s" else per_s)
    return None


def parse_record(rec: Any) -> Transition | None:
    if not isinstance(rec, dict):
        return None
    kind = rec.get("type", rec.get("label", rec.get("apt")))
    t = _time(rec)
    if not isinstance(kind, str) or not kind.strip() or t is None:
        return None
    objs = rec.get("objects", ())
    if isinstance(objs, str):
        objs = [objs]
    objs = tuple(str(o) for o in objs) if isinstance(objs, (list, tuple)) else ()
    conf = rec.get("confidence")
    conf = float(conf) if isinstance(conf, (int, float)) and not isinstance(conf, bool) else None
    return Transition(type=kind.strip().lower(), t=t, objects=objs, confidence=conf)


def parse_chain(reply: str) -> ParsedChain:
    """The transitions of a reply, in the order given (an unreadable reply is an empty chain)."""
    text = reply or ""
    repaired: list[str] = []
    fence = _FENCE.search(text)
    if fence:
        text = fence.group(1)
        repaired.append("code fence")
    records: list[Any] | None = None
    start = min([i for i in (text.find("["), text.find("{")) if i >= 0], default=-1)
    if start >= 0:
        body = text[start:]
        end = body.rfind("]") if body.startswith("[") else body.rfind("}")
        candidate = body[:end + 1] if end >= 0 else body
        try:
            doc = _load(candidate)
            if candidate != body.strip():
                repaired.append("text around the JSON")
            if isinstance(doc, dict):
                inner = next((v for k in ("transitions", "apts", "events", "chain") if isinstance(v := doc.get(k), list)),
                             None)
                records = inner if inner is not None else [doc]
                repaired.append("object around the list" if inner is not None else "single record")
            elif isinstance(doc, list):
                records = doc
        except ValueError:
            records = None
        if records is None:   # torn or malformed: keep the complete leading records
            spans = _objects(body, 1 if body.startswith("[") else 0)
            records = []
            for s in spans:
                try:
                    records.append(_load(s))
                except ValueError:
                    break
            repaired.append("truncated or malformed JSON: kept the complete leading records")
    records = records or []
    chain = [r for r in map(parse_record, records) if r is not None]
    return ParsedChain(chain, n_records=len(records), n_dropped=len(records) - len(chain), repaired=repaired)
