"""Reader for the published Apple-PI-GT v1.0 case layout (`metadata.json` plus `initial_state/`,
`instantaneous_velocity/`, `rgb/`, `instance_segmentation/`, `mask/` and, for simulator cases,
`depth/`, `velocity/`, `camera_parameters/`; dense arrays are NPZ files with the key `maps` and include
the condition frame). `metadata.json` is checked against `schemas/eval_apple_pi_metadata.schema.json`.

Objects: simulator cases name their instances in `initial_state/instance_segmentation_mapping_0000.json`
(`{"<id>": "<prim path>"}`); invalid, ground and support entries (ramp, circular track) are not objects.
Real-world cases treat every non-zero instance id of the condition frame as an object.
The camera is read from `camera_parameters/0000.json` (the evaluator assumes a static camera).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

import numpy as np

from ..cases import (TASK_PILLAR, TASK_SNAKE, CaseFormatError, EvalCase, FormulaInfo, ObjectInfo, ObjectTracks,
                     as_matrix, read_json_file, schema_errors)
from ..media import MediaError, probe_image, read_image
from ..paths import UnsafePathError, safe_join
from ._common import FrameSource, first_map

PATH_KEYS = ("input_image", "clean_first_frame", "annotations_only_reference", "objects_only_reference",
             "future_state_reference", "gt_frames_dir", "gt_video")
IMAGE_KEYS = {"condition_frame": "clean_first_frame", "annotated_first_frame": "input_image",
              "perception_text": "annotations_only_reference", "perception_graphic": "objects_only_reference",
              "formulation_graphic": "future_state_reference"}
# short names the published prompts use for some tasks
TASK_ALIASES = {"Projectile": "projectile_motion", "Circular": "circular_motion", "UniformLinear": "uniform_linear_motion"}
NOT_OBJECTS = re.compile(r"invalid|ground|circular|inclinedplane|ramp|track|platform|table|wall", re.IGNORECASE)


def _load_maps(path: Path) -> np.ndarray | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if "maps" not in z.files:
                raise CaseFormatError(f"{path}: no array under the key 'maps'")
            return np.asarray(z["maps"])
    except (OSError, ValueError) as exc:
        raise CaseFormatError(f"{path}: unreadable NPZ: {exc}") from exc


def _load_npy(path: Path) -> np.ndarray | None:
    if not path.is_file():
        return None
    try:
        a = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise CaseFormatError(f"{path}: unreadable NPY: {exc}") from exc
    return a[..., 0] if a.ndim == 3 else a


class ApplePiAssets:
    def __init__(self, case_dir: Path, meta: dict, objects: tuple[ObjectInfo, ...], gt_fps: float,
                 K: np.ndarray | None, E: np.ndarray | None):
        self.dir, self.meta, self.objects, self.gt_fps, self.K, self.E = case_dir, meta, objects, gt_fps, K, E
        self._frames: FrameSource | None = None
        self._inst: np.ndarray | None | bool = False
        self._tracks: ObjectTracks | None | bool = False

    def _rel(self, key: str) -> Path | None:
        rel = self.meta.get(key)
        return None if not rel else safe_join(self.dir, rel)

    def has(self, role: str) -> bool:
        if role in IMAGE_KEYS:
            p = self._rel(IMAGE_KEYS[role])
            return p is not None and p.is_file()
        return False

    def _frame_source(self) -> FrameSource:
        if self._frames is None:
            video = self._rel("gt_video")
            # a declared GT video already holds frame 0; never prepend rgb/0000.png to it
            self._frames = FrameSource(video if video is not None else self._rel("gt_frames_dir"))
        return self._frames

    def n_gt_frames(self) -> int:
        return len(self._frame_source())

    def gt_frames(self, indices: Iterable[int]) -> dict[int, np.ndarray]:
        return self._frame_source().frames(indices)

    def _instances(self) -> np.ndarray | None:
        if self._inst is False:
            self._inst = _load_maps(self.dir / "instance_segmentation" / "maps.npz")
        return self._inst  # type: ignore[return-value]

    def gt_instances(self, index: int) -> np.ndarray | None:
        inst = self._instances()
        if inst is None or not (0 <= index < inst.shape[0]):
            return None
        return inst[index]

    def image(self, role: str) -> np.ndarray | None:
        key = IMAGE_KEYS.get(role)
        p = None if key is None else self._rel(key)
        if p is None or not p.is_file():
            return None
        try:
            return read_image(p)
        except MediaError as exc:
            raise CaseFormatError(str(exc)) from exc

    def label_map(self, role: str) -> np.ndarray | None:
        if role in ("condition_frame", "perception_graphic"):
            a = _load_npy(self.dir / "initial_state" / "instance_segmentation_0000.npy")
            return a if a is not None else self.gt_instances(0)
        if role == "formulation_graphic":
            return _load_npy(self.dir / "instantaneous_velocity" / "mask.npy")
        return None

    def condition_depth(self) -> np.ndarray | None:
        return first_map(self.dir / "depth" / "maps.npz")

    def object_tracks(self) -> ObjectTracks | None:
        """Simulator cases: centre of each object's visible surface (depth back-projected through the
        camera) and the mean of the dense velocity map over its mask, per GT frame."""
        if self._tracks is not False:
            return self._tracks  # type: ignore[return-value]
        tracks = None
        depth = _load_maps(self.dir / "depth" / "maps.npz")
        vel = _load_maps(self.dir / "velocity" / "maps.npz")
        inst = self._instances()
        if depth is not None and vel is not None and inst is not None and self.K is not None and self.E is not None:
            n = min(depth.shape[0], vel.shape[0], inst.shape[0])
            K, R, t = self.K, self.E[:, :3], self.E[:, 3]
            pos = {o.id: np.full((n, 3), np.nan) for o in self.objects}
            vv = {o.id: np.full((n, 3), np.nan) for o in self.objects}
            for k in range(n):
                for o in self.objects:
                    m = inst[k] == o.instance_id
                    if not m.any():
                        continue
                    ys, xs = np.nonzero(m)
                    z = depth[k][m].astype(np.float64)
                    ok = np.isfinite(z) & (z > 0)
                    if ok.any():
                        xs_, ys_, z_ = xs[ok] + 0.5, ys[ok] + 0.5, z[ok]
                        cam = np.stack([(xs_ - K[0, 2]) * z_ / K[0, 0], (ys_ - K[1, 2]) * z_ / K[1, 1], z_], axis=1)
                        world = (cam - t) @ R
                        pos[o.id][k] = world.mean(axis=0)
                    vv[o.id][k] = vel[k][m].reshape(-1, 3).astype(np.float64).mean(axis=0)
            tracks = ObjectTracks(times=np.arange(n) / self.gt_fps, positions=pos, velocities=vv, source="gt-maps")
        self._tracks = tracks
        return tracks


def _objects(case_dir: Path, is_real: bool) -> tuple[ObjectInfo, ...]:
    init = case_dir / "initial_state"
    seg = _load_npy(init / "instance_segmentation_0000.npy")
    if seg is None:
        maps = _load_maps(case_dir / "instance_segmentation" / "maps.npz")
        seg = None if maps is None else maps[0]
    present = set() if seg is None else {int(v) for v in np.unique(seg) if int(v) != 0}
    mapping_path = init / "instance_segmentation_mapping_0000.json"
    out: list[ObjectInfo] = []
    if not is_real and mapping_path.is_file():
        mapping = read_json_file(mapping_path)
        if not isinstance(mapping, dict):
            raise CaseFormatError(f"{mapping_path}: expected an object of id -> label")
        used: set[str] = set()
        for key, label in sorted(mapping.items(), key=lambda kv: int(kv[0]) if str(kv[0]).isdigit() else 0):
            try:
                iid = int(key)
            except ValueError:
                continue
            label = str(label)
            if iid == 0 or NOT_OBJECTS.search(label):
                continue
            if present and iid not in present:
                continue
            name = label.rstrip("/").split("/")[-1] or f"object_{iid}"
            if name in used:
                name = f"{name}_{iid}"
            used.add(name)
            out.append(ObjectInfo(id=name, instance_id=iid))
    else:
        out = [ObjectInfo(id=f"object_{iid}", instance_id=iid) for iid in sorted(present)]
    return tuple(out)


def read_case(case_dir: str | Path, case_id: str | None = None, strict: bool = True) -> EvalCase:
    case_dir = Path(case_dir)
    meta = read_json_file(case_dir / "metadata.json")
    errs = schema_errors(meta, "eval_apple_pi_metadata.schema.json")
    if errs:
        raise CaseFormatError(f"{case_dir / 'metadata.json'}: " + "; ".join(errs[:5]))
    for key in PATH_KEYS:
        if meta.get(key):
            try:
                safe_join(case_dir, meta[key])
            except UnsafePathError as exc:
                raise CaseFormatError(f"{case_dir / 'metadata.json'}: {key}: {exc}") from exc
    cid = str(meta["case_id"])
    if case_id is not None and cid != case_id:
        raise CaseFormatError(f"{case_dir}: metadata.json says {cid!r}, the index says {case_id!r}")
    pillar, task_pascal, _ = cid.split("/")
    task = TASK_SNAKE.get(task_pascal) or TASK_SNAKE.get(str(meta["physics_type"])) \
        or TASK_ALIASES.get(str(meta["physics_type"]))
    if task is None:
        raise CaseFormatError(f"{case_dir}: unknown task {task_pascal!r}")
    T = float(meta["physics_duration"])
    timestamps = tuple(sorted({float(t) for t in meta["deduction_timestamps"] if 0 < float(t) <= T + 1e-9}))
    if not timestamps:
        raise CaseFormatError(f"{case_dir}: no deduction timestamp lies in (0, T = {T}]")
    clean = safe_join(case_dir, meta["clean_first_frame"])
    try:
        info = probe_image(clean)
    except MediaError as exc:
        raise CaseFormatError(f"{case_dir}: clean first frame: {exc}") from exc
    K = E = None
    cam_path = case_dir / "camera_parameters" / "0000.json"
    if cam_path.is_file():
        cam = read_json_file(cam_path)
        try:
            K = as_matrix(cam.get("intrinsic"), (3, 3))
            E = as_matrix(cam.get("extrinsic"), (3, 4))
        except CaseFormatError as exc:
            raise CaseFormatError(f"{cam_path}: {exc}") from exc
    is_real = bool(meta["is_realworld"])
    objects = _objects(case_dir, is_real)
    fi = meta["formula_info"]
    formula = FormulaInfo(choices=tuple(str(c) for c in fi["choices"]), correct_letter=str(fi["correct_letter"]),
                          correct_formula=str(fi["correct_formula"]), substituted=fi.get("substituted"))
    gt_fps = float(meta["gt_fps"])
    total = meta.get("gt_total_frames")
    assets = ApplePiAssets(case_dir, meta, objects, gt_fps, K, E)
    return EvalCase(
        case_id=cid, task=task, pillar=pillar if pillar in TASK_PILLAR.values() else TASK_PILLAR[task],
        source="real" if is_real else "sim", source_detail="real-world" if is_real else "simulator",
        layout="apple-pi-gt", path=case_dir, gt_fps=gt_fps, physics_duration=T,
        target_time=float(meta["target_time"]), timestamps=timestamps, frame_size=(info.width, info.height),
        objects=objects, intrinsic=K, extrinsic=E, formula=formula, annotation_text=str(meta["annotation"]),
        n_frames_declared=int(total) if total else None, extra={"physics_type": meta["physics_type"]}, assets=assets,
    )
