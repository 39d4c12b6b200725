"""Reader for Orchard's own case directories (docs/case-format.md): `case.json` with an `artifacts`
map of role → relative path, validated against `schemas/case.schema.json` (and the timestamps,
velocity and events schemas) before anything is used."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np

from ..apt.taxonomy import Transition, events_to_transitions
from ..cases import (TASK_PILLAR, CaseFormatError, EvalCase, FormulaInfo, ObjectInfo, ObjectTracks,
                     TargetState, as_matrix, read_json_file, schema_errors)
from ..media import MediaError, read_image, read_label_image
from ..paths import UnsafePathError, check_relpath, safe_join
from ._common import FrameSource, first_map

SOURCE_MAP = {"simulated": "sim", "self-recorded": "real", "internet": "real"}

# evaluator image role -> case.json artifact role
IMAGE_ARTIFACTS = {
    "condition_frame": "first_frame", "annotated_first_frame": "annotated_first_frame",
    "clean_plate": "clean_plate", "perception_text": "ref_perception_text",
    "perception_graphic": "ref_perception_graphic", "formulation_text": "ref_formulation_text",
    "formulation_graphic": "ref_formulation_graphic",
}
MASK_ARTIFACTS = {"perception_graphic": "ref_perception_graphic_mask",
                  "formulation_graphic": "ref_formulation_graphic_mask"}


class OrchardAssets:
    def __init__(self, case_dir: Path, artifacts: dict[str, str], object_ids: list[str],
                 playback: str | None = None):
        self.dir = case_dir
        # the trajectory the GT video shows (provenance.playback); GT tracks follow it, so that the
        # velocity metric measures against the same motion as the masks and frames
        self.playback = playback
        self.artifacts = artifacts
        self.object_ids = object_ids
        self._frames: FrameSource | None = None
        self._tracks: ObjectTracks | None | bool = False

    def _path(self, role: str) -> Path | None:
        rel = self.artifacts.get(role)
        if rel is None:
            return None
        return safe_join(self.dir, rel)

    def has(self, role: str) -> bool:
        art = IMAGE_ARTIFACTS.get(role, MASK_ARTIFACTS.get(role, role))
        p = self._path(art)
        return p is not None and p.exists()

    def _frame_source(self) -> FrameSource:
        if self._frames is None:
            p = self._path("video") or self._path("frames")
            if p is None:
                raise CaseFormatError(f"{self.dir}: the case has no GT video (render the case first)")
            self._frames = FrameSource(p)
        return self._frames

    def n_gt_frames(self) -> int:
        return len(self._frame_source())

    def gt_frames(self, indices: Iterable[int]) -> dict[int, np.ndarray]:
        return self._frame_source().frames(indices)

    def gt_instances(self, index: int) -> np.ndarray | None:
        d = self._path("masks")
        if d is None:
            return None
        p = d / f"{int(index):04d}.png"
        if not p.is_file():
            return None
        return read_label_image(p)

    def image(self, role: str) -> np.ndarray | None:
        p = self._path(IMAGE_ARTIFACTS[role])
        if p is None or not p.is_file():
            return None
        try:
            return read_image(p)
        except MediaError as exc:
            raise CaseFormatError(str(exc)) from exc

    def label_map(self, role: str) -> np.ndarray | None:
        if role == "condition_frame":
            return self.gt_instances(0)
        p = self._path(MASK_ARTIFACTS[role])
        if p is None or not p.is_file():
            return None
        return read_label_image(p)

    def condition_depth(self) -> np.ndarray | None:
        p = self._path("depth")
        return None if p is None else first_map(p)

    def object_tracks(self) -> ObjectTracks | None:
        if self._tracks is not False:
            return self._tracks  # type: ignore[return-value]
        p = self._path("states")
        tracks = None
        if p is not None and p.is_file():
            with np.load(p, allow_pickle=False) as z:
                keys = set(z.files)
                if "times" in keys:
                    times = np.asarray(z["times"], dtype=np.float64)
                    pos, vel, att = {}, {}, {}
                    src = "analytic"
                    for oid in self.object_ids:
                        order = ("engine", "analytic") if self.playback == "engine" else ("analytic", "engine")
                        for prefix in order:
                            pk, vk = f"{prefix}/{oid}/position", f"{prefix}/{oid}/linear_velocity"
                            if pk in keys and vk in keys:
                                pos[oid] = np.asarray(z[pk], dtype=np.float64).reshape(-1, 3)
                                vel[oid] = np.asarray(z[vk], dtype=np.float64).reshape(-1, 3)
                                src = prefix
                                break
                        quats = [np.asarray(z[k], dtype=np.float64).reshape(-1, 4)
                                 for k in (f"analytic/{oid}/quaternion", f"engine/{oid}/quaternion") if k in keys]
                        if quats:
                            att[oid] = tuple(quats)
                    if pos:
                        tracks = ObjectTracks(times=times, positions=pos, velocities=vel, source=src, attitudes=att)
        self._tracks = tracks
        return tracks


def _annotation_text(path: Path | None) -> str:
    if path is None or not path.is_file():
        return ""
    doc = read_json_file(path)
    lines = []
    for label in doc.get("labels", []) if isinstance(doc, dict) else []:
        text = label.get("text")
        if isinstance(text, str) and text:
            lines.append(text)
        elif isinstance(label.get("lines"), list):
            lines.append(" ".join(str(s) for s in label["lines"]))
    return "\n".join(lines)


def _formula(path: Path | None) -> FormulaInfo | None:
    if path is None or not path.is_file():
        return None
    doc = read_json_file(path)
    try:
        sub = doc.get("substituted")
        if isinstance(sub, dict):
            sub = sub.get("display")
        return FormulaInfo(choices=tuple(str(c) for c in doc["choices"]), correct_letter=str(doc["correct_letter"]),
                           correct_formula=str(doc["correct_formula"]),
                           substituted=None if sub is None else str(sub))
    except (KeyError, TypeError) as exc:
        raise CaseFormatError(f"{path}: formula info lacks {exc}") from exc


def _target_state(path: Path | None) -> tuple[TargetState, ...]:
    if path is None or not path.is_file():
        return ()
    doc = read_json_file(path)
    errs = schema_errors(doc, "velocity.schema.json")
    if errs:
        raise CaseFormatError(f"{path}: " + "; ".join(errs[:5]))
    out = []
    for o in doc["objects"]:
        arrow = o.get("arrow_direction_image")
        out.append(TargetState(id=o["id"], instance_id=int(o["instance_id"]), center_world=tuple(o["center_world"]),
                               center_image=tuple(o["center_image"]), velocity_world=tuple(o["velocity_world"]),
                               speed=float(o["speed"]), label=o["label"], moving=bool(o["moving"]),
                               arrow_direction_image=None if arrow is None else tuple(arrow)))
    return tuple(out)


def _events(path: Path | None) -> tuple[Transition, ...] | None:
    if path is None or not path.is_file():
        return None
    doc = read_json_file(path)
    errs = schema_errors(doc, "events.schema.json")
    if errs:
        raise CaseFormatError(f"{path}: " + "; ".join(errs[:5]))
    return tuple(events_to_transitions(doc))


def read_case(case_dir: str | Path, case_id: str | None = None, strict: bool = True) -> EvalCase:
    case_dir = Path(case_dir)
    doc = read_json_file(case_dir / "case.json")
    errs = schema_errors(doc, "case.schema.json")
    if errs:
        raise CaseFormatError(f"{case_dir / 'case.json'}: " + "; ".join(errs[:5]))
    if case_id is not None and doc["case_id"] != case_id:
        raise CaseFormatError(f"{case_dir}: case.json says {doc['case_id']!r}, the index says {case_id!r}")
    artifacts: dict[str, str] = dict(doc.get("artifacts", {}))
    for role, rel in artifacts.items():
        try:
            check_relpath(rel)
            safe_join(case_dir, rel)
        except UnsafePathError as exc:
            raise CaseFormatError(f"{case_dir / 'case.json'}: artifacts.{role}: {exc}") from exc

    def opt(role: str) -> Path | None:
        rel = artifacts.get(role)
        return None if rel is None else safe_join(case_dir, rel)

    ts_path = opt("timestamps") or case_dir / "timestamps.json"
    ts_doc = read_json_file(ts_path)
    errs = schema_errors(ts_doc, "timestamps.schema.json")
    if errs:
        raise CaseFormatError(f"{ts_path}: " + "; ".join(errs[:5]))
    T = float(doc["physics_duration"])
    timestamps = tuple(float(t) for t in ts_doc["timestamps"])
    if any(not (0 < t <= T + 1e-9) for t in timestamps):
        raise CaseFormatError(f"{ts_path}: timestamps must lie in (0, T = {T}]")

    objects = tuple(ObjectInfo(id=o["id"], instance_id=int(o["instance_id"]), shape=o.get("shape"),
                               material=o.get("material"), mass=float(o["mass"]),
                               size=tuple(sorted((str(k), float(v)) for k, v in o.get("size", {}).items())),
                               rest_pose=o.get("rest_pose"))
                    for o in doc["objects"])
    if len({o.instance_id for o in objects}) != len(objects):
        raise CaseFormatError(f"{case_dir / 'case.json'}: instance ids are not unique")
    cam = doc["camera"]
    try:
        K = as_matrix(cam["intrinsic"], (3, 3))
        E = as_matrix(cam["extrinsic"], (3, 4))
    except CaseFormatError as exc:
        raise CaseFormatError(f"{case_dir / 'case.json'}: camera: {exc}") from exc
    assets = OrchardAssets(case_dir, artifacts, [o.id for o in objects],
                           playback=(doc.get("provenance") or {}).get("playback"))
    return EvalCase(
        case_id=doc["case_id"], task=doc["task"], pillar=doc["pillar"] or TASK_PILLAR[doc["task"]],
        source=SOURCE_MAP[doc["source"]], source_detail=doc["source"], layout="orchard", path=case_dir,
        gt_fps=float(doc["gt_fps"]), physics_duration=T, target_time=float(doc["target_time"]),
        timestamps=timestamps, frame_size=(int(doc["frame_size"]["width"]), int(doc["frame_size"]["height"])),
        objects=objects, intrinsic=K, extrinsic=E, formula=_formula(opt("formula_info")),
        annotation_text=_annotation_text(opt("annotations")), target_state=_target_state(opt("velocity")),
        events=_events(opt("events") or case_dir / "events.json"),
        n_frames_declared=int(doc["n_frames"]), extra={"artifacts": artifacts, "law_level": doc.get("law_level")},
        assets=assets,
    )
