"""`orchard-build ingest VIDEO --task T --source self-recorded|internet`: a real-world case directory.

The case lands in the dataset layout of simulated cases (`cases/<Pillar>/<Task>/<six digits>/`) and is
written into a staging directory first, then renamed into place. What ingest writes:

* `gt/rgb/NNNN.png` and `gt/video.mp4`: the clip inside the motion window at its native fps (probed
  with PyAV and checked against the frame timestamps, never assumed); frame 0 is the condition frame.
* `first_frame.png`, `source.json` (clip, fps, motion window, source metadata, task, law steps),
  `measurement.json` (every measured quantity with instrument, procedure and precision, Table 7).
* `gt/masks/NNNN.png` + `gt/mask_review.json` when the description gives mask seeds (colour keys or a
  background initialiser): propagated masks and the frames flagged for human correction.
* then everything derived (derive.py): case.json, timestamps, velocity, events, formula_info, the
  infographic first frame and the reference answers.

The description file (`--measurements`, YAML or JSON) is documented in docs/real-world.md.
"""
from __future__ import annotations

import os
import shutil
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..build import CASES_DIR, STAGING_DIR, write_dataset_index
from ..errors import OrchardError
from ..io import replace_dir, write_json
from ..primitives import SHAPES, SIZE_KEYS
from ..schemas import iter_errors
from ..tasks import TASK_NAMES, case_id as make_case_id
from ..video import write_png
from . import masks as MK
from . import measurements as M
from .derive import derive_case
from .media import probe_and_decode, write_mp4

SOURCES = ("self-recorded", "internet")
MAX_OBJECTS = 8


class IngestError(OrchardError):
    pass


def load_description(path: str | Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    path = Path(path)
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise IngestError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(doc, dict):
        raise IngestError(f"{path}: expected a mapping at the top level")
    return doc


def _window(desc: dict, n: int, fps: float, override: str | None) -> tuple[int, int]:
    """Motion window as clip frame indices [start, end] (inclusive)."""
    w = dict(desc.get("motion_window") or {})
    if override:
        a, _, b = override.partition(":")
        w = {"start": float(a) if a else 0.0, "end": float(b) if b else None}
    if "start_frame" in w or "end_frame" in w:
        start, end = int(w.get("start_frame", 0)), int(w.get("end_frame", n - 1))
    else:
        start = int(round(float(w.get("start") or 0.0) * fps))
        end = n - 1 if w.get("end") is None else int(round(float(w["end"]) * fps))
    if not 0 <= start < end <= n - 1:
        raise IngestError(f"motion window frames {start}–{end} do not fit the clip's {n} frames")
    return start, end


def _objects(desc: dict) -> list[dict[str, Any]]:
    objs = desc.get("objects")
    if not isinstance(objs, list) or not objs:
        raise IngestError("the description needs `objects`: at least one measured object")
    if len(objs) > MAX_OBJECTS:
        raise IngestError(f"at most {MAX_OBJECTS} objects per case")
    out, seen = [], set()
    for i, o in enumerate(objs, start=1):
        oid = str(o.get("id", ""))
        if not oid or oid in seen:
            raise IngestError(f"objects[{i - 1}].id: missing or duplicate")
        seen.add(oid)
        shape = o.get("shape")
        if shape not in SHAPES:
            raise IngestError(f"objects[{i - 1}].shape: expected one of {', '.join(SHAPES)}, got {shape!r}")
        size = o.get("size") or {}
        if set(size) != set(SIZE_KEYS[shape]):
            raise IngestError(f"objects[{i - 1}].size: a {shape} needs {', '.join(SIZE_KEYS[shape])} (metres)")
        if "mass" not in o:
            raise IngestError(f"objects[{i - 1}].mass: the balance mass (kg) is required")
        out.append({"id": oid, "instance_id": i, "shape": shape, "material": str(o.get("material", "unknown")),
                    "annotate": list(o.get("annotate", ["mass"])), **{k: o[k] for k in (
                        "rest_pose", "placement", "v0_direction", "v0_direction_image", "seed") if k in o},
                    "_size": size, "_mass": o["mass"], "_extra": {k: o[k] for k in (
                        "height", "v0", "restitution", "friction") if k in o}})
    return out


def measurement_doc(desc: dict, objects: list[dict], fps: float, case_id: str) -> dict[str, Any]:
    """measurement.json from the description: Table 7 defaults, overridable per quantity."""
    over = {(m["name"], m.get("object"), m.get("dimension")): m for m in desc.get("measurements", []) or []}

    def rec(name: str, value: Any, obj: str | None = None, dim: str | None = None, source: str = "measured") -> dict:
        o = over.get((name, obj, dim), {})
        return M.quantity(name, o.get("value", value), object_id=obj, dimension=dim, instrument=o.get("instrument"),
                          procedure=o.get("procedure"), precision=o.get("precision"), source=o.get("source", source),
                          fps=fps, notes=o.get("notes"))

    env = desc.get("environment") or {}
    qs = [rec("g", env.get("g", M.EARTH_G), source="case metadata" if "g" in env else "default Earth value")]
    for o in objects:
        qs.append(rec("mass", o["_mass"], o["id"]))
        for dim, v in o["_size"].items():
            qs.append(rec("size", v, o["id"], dim))
        for name, v in o["_extra"].items():
            qs.append(rec(name, v, o["id"]))
    for name in ("restitution", "friction"):
        if name in desc:
            qs.append(rec(name, desc[name]))
    if "ramp_angle_deg" in desc:
        qs.append(rec("angle", desc["ramp_angle_deg"]))
    known = {(q["name"], q["object"], q["dimension"]) for q in qs}
    for key, m in over.items():
        if key not in known:
            qs.append(rec(key[0], m["value"], key[1], key[2]))
    doc: dict[str, Any] = {"schema_version": 1, "case_id": case_id, "fps": fps, "quantities": qs,
                           "reviewed": False, "origin": "ingest"}
    if desc.get("scale_m_per_px"):
        doc["scale"] = {"value": float(desc["scale_m_per_px"]), "unit": "m/px",
                        "procedure": str(desc.get("scale_procedure", "visible calibration cue"))}
    return doc


def _seed(frames: np.ndarray, objects: list[dict], desc: dict) -> tuple[np.ndarray | None, str]:
    ids = [o["instance_id"] for o in objects]
    colors = {o["instance_id"]: (o["seed"]["color"], float(o["seed"].get("tolerance", 30.0)))
              for o in objects if isinstance(o.get("seed"), dict) and "color" in o["seed"]}
    if colors and len(colors) == len(objects):
        return MK.seed_from_colors(frames[0], colors), "colour keys on frame 0"
    if desc.get("mask_seed") == "background":
        bg = MK.background_median(frames)
        return MK.seed_from_background(frames[0], bg, ids, float(desc.get("background_threshold", 25.0))), \
            "difference to the temporal-median background on frame 0"
    return None, ""


def ingest(video: str | Path, task: str, source: str, out_root: str | Path, description: str | Path | None = None,
           case_number: int | None = None, fps: str = "native", window: str | None = None,
           index: bool = True) -> Path:
    """Create one real-world case; returns its directory."""
    if task not in TASK_NAMES:
        raise IngestError(f"unknown task {task!r}; expected one of {', '.join(TASK_NAMES)}")
    if source not in SOURCES:
        raise IngestError(f"--source must be one of {', '.join(SOURCES)}, got {source!r}")
    desc = load_description(description)
    if desc.get("task", task) != task:
        raise IngestError(f"the description says task {desc['task']!r}, the command line {task!r}")
    number = case_number if case_number is not None else desc.get("case_number")
    if number is None:
        raise IngestError("a case number is required (--case-number N or `case_number` in the description)")
    cid = make_case_id(task, int(number))
    objects = _objects(desc)
    internet = None
    if source == "internet":
        internet = dict(desc.get("internet") or {})
        missing = [k for k in ("url", "channel", "licence") if not internet.get(k)]
        if missing:
            raise IngestError(f"an Internet clip needs internet.{', internet.'.join(missing)} in the description")

    info, frames = probe_and_decode(video)
    native = info.fps
    if fps != "native":
        try:
            asked = Fraction(fps)
        except (ValueError, ZeroDivisionError) as exc:
            raise IngestError(f"--fps must be 'native' or a number, got {fps!r}") from exc
        if abs(float(asked) - float(native)) > 1e-3 * float(native):
            raise IngestError(f"--fps {fps} does not match the clip's native {float(native):g} fps; real-world "
                              "cases keep the native rate (nothing is resampled)")
    f = float(native)
    start, end = _window(desc, info.n_frames, f, window)
    clip = frames[start:end + 1]
    h2, w2 = clip.shape[1] // 2 * 2, clip.shape[2] // 2 * 2
    clip = clip[:, :h2, :w2]
    n = len(clip)
    T = (n - 1) / f
    tstar = desc.get("target_time")
    if tstar is None:
        raise IngestError("the description needs `target_time` (seconds after the condition frame)")
    if not 0 < float(tstar) <= T + 1e-9:
        raise IngestError(f"target_time {tstar} s lies outside (0, T = {T:.6g} s] of the motion window")

    out_root = Path(out_root)
    staging_root = out_root / STAGING_DIR
    staging_root.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=staging_root, prefix="rw-"))
    os.chmod(stage, 0o755)
    try:
        for k, fr in enumerate(clip):
            write_png(stage / "gt" / "rgb" / f"{k:04d}.png", fr)
        write_png(stage / "first_frame.png", clip[0])
        write_mp4(stage / "gt" / "video.mp4", clip, native)
        src = {
            "schema_version": 1, "case_id": cid, "source": source, "task": task, "seed": int(desc.get("seed", number)),
            "description": str(desc.get("description", "")), "fps": f,
            "fps_rational": f"{native.numerator}/{native.denominator}", "fps_origin": "probed from the clip stream and its frame timestamps",
            "clip": info.to_dict(),
            "motion_window": {"start_frame": start, "end_frame": end, "n_frames": n,
                              "start_time": start / f, "end_time": end / f},
            "target_time": float(tstar),
            "objects": [{k: v for k, v in o.items() if not k.startswith("_")} for o in objects],
        }
        for key in ("law_steps", "events", "target_state", "camera_distance", "origin_px", "label_anchors", "body"):
            if key in desc:
                src[key] = desc[key]
        if internet is not None:
            internet["retained_window"] = {"start_time": start / f, "end_time": end / f,
                                           "start_frame": start, "end_frame": end}
            src["internet"] = internet
        if source == "self-recorded" and desc.get("recording"):
            src["recording"] = desc["recording"]
        problems = list(iter_errors(src, "realworld_source.schema.json"))
        if problems:
            raise IngestError("source description: " + "; ".join(f"{a or '<root>'}: {b}" for a, b in problems))
        write_json(stage / "source.json", src)
        meas = measurement_doc(desc, objects, f, cid)
        problems = list(iter_errors(meas, "measurement.schema.json"))
        if problems:
            raise IngestError("measurements: " + "; ".join(f"{a or '<root>'}: {b}" for a, b in problems))
        write_json(stage / "measurement.json", meas)

        seed, how = _seed(clip, objects, desc)
        if seed is not None:
            result = MK.run_pipeline(clip, {0: seed}, {o["instance_id"]: o["id"] for o in objects})
            for k, m in enumerate(result.masks):
                write_png(stage / "gt" / "masks" / f"{k:04d}.png", m.astype(np.uint8))
            write_json(stage / "gt" / "mask_review.json", MK.review_document(result, f"seed: {how}; OpenCV "
                                                                           "Farnebäck flow + colour-model propagation"))
        derive_case(stage)
        final = out_root / CASES_DIR / cid
        replace_dir(stage, final)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    finally:
        if staging_root.is_dir() and not any(staging_root.iterdir()):
            staging_root.rmdir()
    if index:
        write_dataset_index(out_root)
    return final
