"""`orchard-build validate DIR`: schema validation of every file plus cross-file consistency checks.

Every problem is reported as (file, field, reason); validation never stops at the first one.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .artifacts import frame_of, speed_label
from .io import safe_relative
from .materials import MaterialLibrary
from .primitives import Primitive
from .schemas import iter_errors

TOL = 1e-6

CASE_FILES = {
    "case.json": "case.schema.json",
    "timestamps.json": "timestamps.schema.json",
    "velocity.json": "velocity.schema.json",
    "events.json": "events.schema.json",
    "formula_info.json": "formula_info.schema.json",
}


@dataclass(frozen=True)
class Problem:
    file: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.file}: {self.field or '<root>'}: {self.reason}"


class _Collector:
    def __init__(self, root: Path):
        self.root, self.problems = root, []

    def add(self, path: Path, field: str, reason: str) -> None:
        try:
            shown = path.relative_to(self.root).as_posix()
        except ValueError:
            shown = str(path)
        self.problems.append(Problem(shown, field, reason))

    def load(self, path: Path, schema: str | None) -> Any:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            self.add(path, "", "file is missing")
            return None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            self.add(path, "", f"not readable JSON: {exc}")
            return None
        if schema:
            bad = False
            for field, reason in iter_errors(doc, schema):
                self.add(path, field, reason)
                bad = True
            if bad:
                return None
        return doc


def validate_dataset(root: str | Path, materials: MaterialLibrary | None = None) -> list[Problem]:
    root = Path(root)
    col = _Collector(root)
    index = col.load(root / "dataset.json", "dataset.schema.json")
    if index is None:
        return col.problems
    seen = set()
    for i, entry in enumerate(index["cases"]):
        where = f"cases[{i}]"
        if entry["case_id"] in seen:
            col.add(root / "dataset.json", f"{where}.case_id", f"duplicate case id {entry['case_id']}")
        seen.add(entry["case_id"])
        if not safe_relative(entry["path"]):
            col.add(root / "dataset.json", f"{where}.path", "path must be relative and stay inside the dataset")
            continue
        case = root / entry["path"]
        if not (case / "case.json").is_file():
            col.add(root / "dataset.json", f"{where}.path", f"no case directory with case.json at {entry['path']}")
            continue
        validate_case(case, col, materials, expected_id=entry["case_id"])
    return col.problems


def validate_case(case: Path, col: _Collector, materials: MaterialLibrary | None, expected_id: str | None) -> None:
    docs = {name: col.load(case / name, schema) for name, schema in CASE_FILES.items()}
    if (case / "qa.json").is_file():
        qa = col.load(case / "qa.json", "qa.schema.json")
        if qa is not None and not qa["passed"]:
            failed = ", ".join(c["name"] for c in qa["checks"] if not c["passed"])
            col.add(case / "qa.json", "passed", f"the case failed QA ({failed})")
    c = docs["case.json"]
    if c is None:
        return
    T, fps, tstar = c["physics_duration"], c["gt_fps"], c["target_time"]
    cj = case / "case.json"
    if expected_id and c["case_id"] != expected_id:
        col.add(cj, "case_id", f"{c['case_id']} does not match the dataset index entry {expected_id}")
    if not case.as_posix().endswith(c["case_id"]):
        col.add(cj, "case_id", f"case id {c['case_id']} does not match the directory {case.name}")
    if tstar > T + TOL:
        col.add(cj, "target_time", f"t* = {tstar} lies after T = {T}")
    if c["n_frames"] != round(T * fps) + 1:
        col.add(cj, "n_frames", f"{c['n_frames']} ≠ round(T·fps) + 1 = {round(T * fps) + 1}")
    for key, rel in c["artifacts"].items():
        if not (case / rel).exists():
            col.add(cj, f"artifacts.{key}", f"listed file {rel} is missing")
    _check_duration_file(case, T, col)
    _check_masses(c, cj, col, materials)
    if docs["timestamps.json"]:
        _check_timestamps(docs["timestamps.json"], case / "timestamps.json", T, fps, tstar, col)
    if docs["velocity.json"]:
        _check_velocity(docs["velocity.json"], case / "velocity.json", c, tstar, fps, col)
    if docs["events.json"]:
        _check_events(docs["events.json"], case / "events.json", T, fps, col)
    if docs["formula_info.json"]:
        _check_formulas(docs["formula_info.json"], case / "formula_info.json", col)


def _check_duration_file(case: Path, T: float, col: _Collector) -> None:
    p = case / "physics_duration.txt"
    try:
        value = float(p.read_text(encoding="utf-8").strip())
    except FileNotFoundError:
        col.add(p, "", "file is missing")
        return
    except (OSError, ValueError) as exc:
        col.add(p, "", f"not a number: {exc}")
        return
    if abs(value - T) > TOL:
        col.add(p, "", f"{value} ≠ physics_duration {T} in case.json")


def _check_masses(c: dict, cj: Path, col: _Collector, materials: MaterialLibrary | None) -> None:
    for i, o in enumerate(c["objects"]):
        f = f"objects[{i}]"
        try:
            prim = Primitive(o["shape"], dict(o["size"]))
        except ValueError as exc:
            col.add(cj, f"{f}.size", str(exc))
            continue
        if not math.isclose(prim.volume, o["volume"], rel_tol=1e-6):
            col.add(cj, f"{f}.volume", f"{o['volume']} ≠ analytic volume {prim.volume:.9g} of the {o['shape']}")
        density = o["density"]
        # simulated objects take their density from the material library; real objects are measured
        # (mass on a balance, size with a caliper), so only m = ρV itself is checked for them
        if materials is not None and c.get("source", "simulated") == "simulated":
            if o["material"] not in materials:
                col.add(cj, f"{f}.material", f"unknown material {o['material']!r} in the material library")
            else:
                density = materials[o["material"]].density
                if not math.isclose(density, o["density"], rel_tol=1e-9):
                    col.add(cj, f"{f}.density", f"{o['density']} ≠ library density {density} of {o['material']!r}")
        if not math.isclose(density * prim.volume, o["mass"], rel_tol=1e-6):
            col.add(cj, f"{f}.mass", f"{o['mass']} ≠ ρV = {density * prim.volume:.9g}")


def _check_timestamps(ts: dict, path: Path, T: float, fps: float, tstar: float, col: _Collector) -> None:
    times = ts["timestamps"]
    if abs(ts["physics_duration"] - T) > TOL or abs(ts["target_time"] - tstar) > TOL or ts["fps"] != fps:
        col.add(path, "", "fps / physics_duration / target_time disagree with case.json")
    if times != sorted(set(times)):
        col.add(path, "timestamps", "timestamps must be sorted and unique")
    for i, t in enumerate(times):
        if not 0 < t <= T + TOL:
            col.add(path, f"timestamps[{i}]", f"{t} lies outside (0, T = {T}]")
    if not any(abs(t - tstar) <= TOL for t in times):
        col.add(path, "timestamps", f"the target time {tstar} is not among the timestamps")
    if [e["t"] for e in ts["entries"]] != times:
        col.add(path, "entries", "entries do not list exactly the timestamps")
    for i, e in enumerate(ts["entries"]):
        if e["frame"] != max(1, frame_of(e["t"], fps)):
            col.add(path, f"entries[{i}].frame", f"{e['frame']} ≠ round(t·fps) = {frame_of(e['t'], fps)}")


def _check_velocity(v: dict, path: Path, c: dict, tstar: float, fps: float, col: _Collector) -> None:
    if abs(v["target_time"] - tstar) > TOL:
        col.add(path, "target_time", f"{v['target_time']} ≠ case target_time {tstar}")
    ids = {o["id"] for o in c["objects"]}
    for i, o in enumerate(v["objects"]):
        f = f"objects[{i}]"
        if o["id"] not in ids:
            col.add(path, f"{f}.id", f"unknown object {o['id']!r}")
        speed = math.sqrt(sum(x * x for x in o["velocity_world"]))
        if abs(speed - o["speed"]) > 1e-6:
            col.add(path, f"{f}.speed", f"{o['speed']} ≠ |velocity| = {speed:.9g}")
        if o["label"] != speed_label(o["speed"]):
            col.add(path, f"{f}.label", f"{o['label']!r} ≠ {speed_label(o['speed'])!r}")
        if o["moving"] != (o["label"] != "v = 0"):
            col.add(path, f"{f}.moving", "moving flag disagrees with the label")
        if not o["moving"] and o["arrow_direction_image"] is not None:
            col.add(path, f"{f}.arrow_direction_image", "an object at rest has no arrow")


def _check_events(ev: dict, path: Path, T: float, fps: float, col: _Collector) -> None:
    prev = -1.0
    n_stages = len(ev["stages"])
    for i, e in enumerate(ev["events"]):
        f = f"events[{i}]"
        if not -TOL <= e["t"] <= T + TOL:
            col.add(path, f"{f}.t", f"{e['t']} lies outside [0, T = {T}]")
        if e["t"] < prev - TOL:
            col.add(path, f"{f}.t", "events are not in time order")
        prev = e["t"]
        if e["frame"] != frame_of(e["t"], fps):
            col.add(path, f"{f}.frame", f"{e['frame']} ≠ round(t·fps) = {frame_of(e['t'], fps)}")
        if e["stage"] >= n_stages:
            col.add(path, f"{f}.stage", f"stage {e['stage']} does not exist")
    t_prev = 0.0
    for i, s in enumerate(ev["stages"]):
        f = f"stages[{i}]"
        if s["index"] != i:
            col.add(path, f"{f}.index", f"{s['index']} ≠ position {i}")
        if abs(s["t_start"] - t_prev) > TOL or s["t_end"] < s["t_start"] - TOL:
            col.add(path, f, "stages must tile [0, T] in order")
        t_prev = s["t_end"]
    if ev["stages"] and abs(t_prev - T) > TOL:
        col.add(path, "stages", f"the last stage ends at {t_prev}, not at T = {T}")


def _check_formulas(fi: dict, path: Path, col: _Collector) -> None:
    letters = "ABCD"
    letter = fi["correct_letter"]
    cands = {c["letter"]: c for c in fi["candidates"]}
    if sorted(cands) != list(letters):
        col.add(path, "candidates", "candidates must carry the letters A–D once each")
        return
    if cands[letter]["kind"] != "correct":
        col.add(path, "correct_letter", f"candidate {letter} is tagged {cands[letter]['kind']!r}, not 'correct'")
    kinds = sorted(c["kind"] for c in fi["candidates"])
    if kinds != ["confusing", "correct", "fabricated", "unrelated"]:
        col.add(path, "candidates", f"kinds {kinds} are not one correct, confusing, unrelated and fabricated")
    if fi["correct_formula"] != cands[letter]["display"]:
        col.add(path, "correct_formula", "differs from the correct candidate's display text")
    for i, choice in enumerate(fi["choices"]):
        if not choice.startswith(f"{letters[i]}. ") or choice[3:] != cands[letters[i]]["display"]:
            col.add(path, f"choices[{i}]", f"does not read '{letters[i]}. ' + candidate {letters[i]}")
