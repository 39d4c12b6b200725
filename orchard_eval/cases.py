"""The evaluator's in-memory case model and dataset loading.

An `EvalCase` holds everything scoring needs about one case, whatever layout it came from (Orchard's
own case directories or the published Apple-PI-GT v1.0 release): identity, timing, camera, objects,
the formula answer key, the annotation text, the target-time state, and lazy accessors for the heavy
data (GT frames, per-frame instance masks, reference images and masks, the clean plate, object tracks).
The readers in `orchard_eval.readers` build it; nothing in this package imports `orchard_build`.

Frame convention (both layouts): GT frame 0 is the condition frame, frame k lies at physical time
k / gt_fps, and physics frames start at 1.
"""
from __future__ import annotations

import json
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Protocol

import numpy as np

from .apt.taxonomy import Transition
from .paths import UnsafePathError, safe_join

SUBTRACKS = ("perception_text", "perception_graphic", "formulation_text", "formulation_graphic", "deduction")
SUBTRACK_SHORT = {"perception_text": "P-T", "perception_graphic": "P-G", "formulation_text": "F-T",
                  "formulation_graphic": "F-G", "deduction": "Ded."}

PILLARS = ("UniversalGravitation", "ConservationOfMomentum", "NewtonsFirstLaw", "MultiLaw")
PILLAR_SHORT = {"UniversalGravitation": "Grav.", "ConservationOfMomentum": "Mom.", "NewtonsFirstLaw": "N1",
                "MultiLaw": "Multi"}
SOURCES = ("sim", "real")
SOURCE_SHORT = {"sim": "Sim.", "real": "Real"}

TASK_PASCAL = {
    "free_fall": "FreeFall", "projectile_motion": "ProjectileMotion", "inclined_plane": "InclinedPlane",
    "circular_motion": "CircularMotion", "perfectly_elastic_collision": "PerfectlyElasticCollision",
    "perfectly_inelastic_collision": "PerfectlyInelasticCollision", "inelastic_collision": "InelasticCollision",
    "at_rest": "AtRest", "uniform_linear_motion": "UniformLinearMotion", "composition": "Composition",
}
TASK_SNAKE = {v: k for k, v in TASK_PASCAL.items()}
TASK_PILLAR = {
    "free_fall": "UniversalGravitation", "projectile_motion": "UniversalGravitation",
    "inclined_plane": "UniversalGravitation", "circular_motion": "UniversalGravitation",
    "perfectly_elastic_collision": "ConservationOfMomentum", "perfectly_inelastic_collision": "ConservationOfMomentum",
    "inelastic_collision": "ConservationOfMomentum", "at_rest": "NewtonsFirstLaw",
    "uniform_linear_motion": "NewtonsFirstLaw", "composition": "MultiLaw",
}

# Image roles every reader maps its files onto.
IMAGE_ROLES = ("condition_frame", "annotated_first_frame", "clean_plate", "perception_text",
               "perception_graphic", "formulation_text", "formulation_graphic")
# Label-map roles (integer instance ids, 0 = background).
MASK_ROLES = ("condition_frame", "perception_graphic", "formulation_graphic")


MEMO_CASES = 6
GT_MAPS_KEPT = 32   # GT instance maps kept per case (`EvalCase.gt_instances`)
_MEMO: "OrderedDict[tuple[str, str], dict[str, Any]]" = OrderedDict()


class CaseFormatError(ValueError):
    """A case or dataset that does not follow its layout's contract."""


@dataclass(frozen=True)
class ObjectInfo:
    id: str
    instance_id: int
    shape: str | None = None
    material: str | None = None
    mass: float | None = None
    size: tuple[tuple[str, float], ...] = ()   # primitive dimensions in metres, e.g. (("radius", 0.05),)
    rest_pose: str | None = None   # how it rests on a support: "upright", "side" (a lying cylinder), "any"


@dataclass(frozen=True)
class FormulaInfo:
    choices: tuple[str, ...]
    correct_letter: str
    correct_formula: str
    substituted: str | None = None


@dataclass(frozen=True)
class TargetState:
    """One object's answer key at t* (velocity.json)."""
    id: str
    instance_id: int
    center_world: tuple[float, float, float] | None
    center_image: tuple[float, float] | None
    velocity_world: tuple[float, float, float] | None
    speed: float | None
    label: str | None
    moving: bool | None
    arrow_direction_image: tuple[float, float] | None


@dataclass
class ObjectTracks:
    """GT centre positions and velocities (world frame) of every object at `times` (seconds)."""
    times: np.ndarray
    positions: dict[str, np.ndarray]   # object id -> (N, 3)
    velocities: dict[str, np.ndarray]  # object id -> (N, 3)
    source: str = "analytic"
    # object id -> attitude sequences (each (N, 4), unit quaternions w, x, y, z), one per recorded
    # source (analytic model, engine); empty where the layout records none
    attitudes: dict[str, tuple[np.ndarray, ...]] = field(default_factory=dict)

    def at(self, t: float) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """Linear interpolation of positions and velocities at time t."""
        pos = {k: np.array([np.interp(t, self.times, v[:, d]) for d in range(3)]) for k, v in self.positions.items()}
        vel = {k: np.array([np.interp(t, self.times, v[:, d]) for d in range(3)]) for k, v in self.velocities.items()}
        return pos, vel


class CaseAssets(Protocol):
    """What a reader provides for the heavy, lazily loaded part of a case."""

    def n_gt_frames(self) -> int: ...
    def gt_frames(self, indices: Iterable[int]) -> dict[int, np.ndarray]: ...
    def gt_instances(self, index: int) -> np.ndarray | None: ...
    def image(self, role: str) -> np.ndarray | None: ...
    def label_map(self, role: str) -> np.ndarray | None: ...
    def has(self, role: str) -> bool: ...
    def object_tracks(self) -> ObjectTracks | None: ...
    # optional: def condition_depth(self) -> np.ndarray | None — depth of GT frame 0 (metres along the
    # optical axis); readers without one simply lack the method


@dataclass(eq=False)
class EvalCase:
    case_id: str
    task: str                      # snake_case task name
    pillar: str                    # PascalCase law pillar
    source: str                    # "sim" or "real"
    layout: str                    # "orchard" or "apple-pi-gt"
    path: Path
    gt_fps: float
    physics_duration: float
    target_time: float
    timestamps: tuple[float, ...]  # the evaluation set T_c, all in (0, T]
    frame_size: tuple[int, int]    # (width, height) of the GT frames
    objects: tuple[ObjectInfo, ...]
    intrinsic: np.ndarray | None = None   # 3×3
    extrinsic: np.ndarray | None = None   # 3×4, world → camera (OpenCV axes)
    formula: FormulaInfo | None = None
    annotation_text: str = ""
    target_state: tuple[TargetState, ...] = ()
    n_frames_declared: int | None = None
    source_detail: str = ""
    # the case's typed analytic events (events.json), in time order; None where the layout has none
    events: "tuple[Transition, ...] | None" = None
    extra: dict[str, Any] = field(default_factory=dict)
    assets: CaseAssets | None = field(default=None, repr=False)

    # -- identity -----------------------------------------------------------------------------
    @property
    def task_pascal(self) -> str:
        return TASK_PASCAL.get(self.task, self.task)

    @property
    def instance_ids(self) -> dict[str, int]:
        return {o.id: o.instance_id for o in self.objects}

    # -- timing -------------------------------------------------------------------------------
    def gt_index(self, t: float) -> int:
        """Nearest GT frame to physical time t (App. D.2 eq. 1), clipped to the decoded frames."""
        n = self.n_gt_frames()
        return int(min(max(round(t * self.gt_fps), 0), max(n - 1, 0)))

    def n_gt_frames(self) -> int:
        if self.assets is None:
            if self.n_frames_declared is None:
                raise CaseFormatError(f"{self.case_id}: no GT frames")
            return self.n_frames_declared
        return self.assets.n_gt_frames()

    # -- heavy data ---------------------------------------------------------------------------
    def _need(self) -> CaseAssets:
        if self.assets is None:
            raise CaseFormatError(f"{self.case_id}: the case has no assets attached")
        return self.assets

    def gt_frames(self, indices: Iterable[int]) -> dict[int, np.ndarray]:
        """RGB uint8 GT frames by index (frame 0 = condition frame)."""
        return self._need().gt_frames(indices)

    def gt_frame(self, index: int) -> np.ndarray:
        frames = self.gt_frames([index])
        if index not in frames:
            raise CaseFormatError(f"{self.case_id}: GT frame {index} is not available")
        return frames[index]

    def gt_instances(self, index: int) -> np.ndarray | None:
        """Instance-id map of GT frame `index` (0 = background) or None when the case has none.
        Read-only: the last `GT_MAPS_KEPT` maps read stay with the case (every response of a case
        compares with the same few)."""
        kept = self.memo("gt_instances", OrderedDict)
        index = int(index)
        if index in kept:
            kept.move_to_end(index)
            return kept[index]
        inst = self._need().gt_instances(index)
        if inst is not None:
            inst.setflags(write=False)
        kept[index] = inst
        while len(kept) > GT_MAPS_KEPT:
            kept.popitem(last=False)
        return inst

    def gt_object_masks(self, index: int) -> dict[str, np.ndarray]:
        """Boolean mask per object at GT frame `index` (objects absent from the frame get empty masks)."""
        inst = self.gt_instances(index)
        if inst is None:
            return {}
        return {o.id: inst == o.instance_id for o in self.objects}

    def image(self, role: str) -> np.ndarray | None:
        """A reference/condition image by role (see IMAGE_ROLES); None when the case lacks it."""
        if role not in IMAGE_ROLES:
            raise KeyError(f"unknown image role {role!r}")
        return self._need().image(role)

    def label_map(self, role: str) -> np.ndarray | None:
        """An instance-id map by role (see MASK_ROLES); None when the case lacks it."""
        if role not in MASK_ROLES:
            raise KeyError(f"unknown mask role {role!r}")
        return self._need().label_map(role)

    def has(self, role: str) -> bool:
        return self.assets is not None and self.assets.has(role)

    def clean_plate(self) -> np.ndarray | None:
        return self.image("clean_plate") if self.has("clean_plate") else None

    def gt_video_file(self) -> Path | None:
        """The case's GT video file (Orchard: the `video` artifact; Apple-PI-GT: the metadata's
        `gt_video`), inside the case directory; None when it has none or the path escapes."""
        if self.layout == "orchard":
            rel = self.extra.get("artifacts", {}).get("video")
        else:
            meta = getattr(self.assets, "meta", None)
            rel = meta.get("gt_video") if isinstance(meta, dict) else None
        if not rel:
            return None
        try:
            p = safe_join(self.path, rel)
        except UnsafePathError:
            return None
        return p if p.is_file() else None

    def object_tracks(self) -> ObjectTracks | None:
        return None if self.assets is None else self.assets.object_tracks()

    def image_centres(self, t: float) -> dict[str, tuple[float, float]]:
        """Where each object's GT centre projects at time t (pixel (u, v)); empty without tracks or
        camera, objects without a finite position left out."""
        tracks = self.object_tracks()
        if tracks is None or self.intrinsic is None or self.extrinsic is None:
            return {}
        from .metrics import project_points

        pos, _ = tracks.at(t)
        ids = [k for k, X in pos.items() if np.all(np.isfinite(X))]
        if not ids:
            return {}
        uv = project_points(np.stack([pos[k] for k in ids]), self.intrinsic, self.extrinsic)
        return {k: (float(u), float(v)) for k, (u, v) in zip(ids, uv)}

    def memo(self, key: str, compute):
        """`compute()` once per case and key: derived models that every response of the case reuses
        (scene depth, rigid models, the light). Kept for the last `MEMO_CASES` cases only — a run goes
        case by case, and a whole dataset's depth maps would not fit in memory."""
        tag = (str(self.path), self.case_id)
        entry = _MEMO.get(tag)
        if entry is None:
            entry = _MEMO[tag] = {}
            while len(_MEMO) > MEMO_CASES:
                _MEMO.popitem(last=False)
        else:
            _MEMO.move_to_end(tag)
        if key not in entry:
            entry[key] = compute()
        return entry[key]

    def scene_depth(self) -> np.ndarray | None:
        """Depth (metres along the optical axis, float32 (H, W) at GT resolution) of the static scene
        as the condition frame shows it: the objects' own pixels are +inf (what lies behind them is
        not seen), as are pixels without a finite positive depth. It tells where a support (a ramp's
        edge, a track's rail) stands in front of a body placed anywhere in the scene. None when the
        case ships no depth for frame 0 or no instance map to remove the objects with."""
        if self.assets is None or not hasattr(self.assets, "condition_depth"):
            return None
        return self.memo("scene_depth", self._scene_depth)

    def _scene_depth(self) -> np.ndarray | None:
        depth = self.assets.condition_depth()
        inst = self.gt_instances(0) if depth is not None else None
        if depth is None or inst is None or depth.shape != inst.shape:
            return None
        return np.where((inst == 0) & np.isfinite(depth) & (depth > 0), depth, np.inf).astype(np.float32)

    def reference_object_masks(self, role: str) -> dict[str, np.ndarray]:
        lm = self.label_map(role)
        if lm is None:
            return {}
        return {o.id: lm == o.instance_id for o in self.objects}


@dataclass
class Dataset:
    root: Path
    layout: str
    name: str
    version: str
    num_rollouts: int
    cases: dict[str, EvalCase]
    problems: list[str] = field(default_factory=list)
    prompt_version: str | None = None

    def __iter__(self):
        return iter(self.cases.values())

    def __len__(self) -> int:
        return len(self.cases)


# ---------------------------------------------------------------------------------------------
# Schema access (the repository's schemas/ directory; the evaluator reads cases through them)
# ---------------------------------------------------------------------------------------------
SCHEMA_DIR = Path(__file__).resolve().parent.parent / "schemas"
_validators: dict[str, Any] = {}


def schema_validator(name: str):
    """A cached Draft 2020-12 validator for `schemas/<name>`, or None when the schemas directory is not
    shipped with this installation."""
    if name in _validators:
        return _validators[name]
    path = SCHEMA_DIR / name
    v = None
    if path.is_file():
        from jsonschema import Draft202012Validator

        v = Draft202012Validator(json.loads(path.read_text(encoding="utf-8")))
    _validators[name] = v
    return v


def schema_errors(doc: Any, name: str) -> list[str]:
    v = schema_validator(name)
    if v is None:
        return []
    out = []
    for e in sorted(v.iter_errors(doc), key=lambda e: list(e.absolute_path)):
        where = ".".join(str(p) for p in e.absolute_path) or "(root)"
        out.append(f"{where}: {e.message}")
    return out


def read_json_file(path: Path) -> Any:
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise CaseFormatError(f"{path}: file is missing") from exc
    except (OSError, ValueError) as exc:
        raise CaseFormatError(f"{path}: not readable JSON: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# Loading
# ---------------------------------------------------------------------------------------------
def detect_case_layout(case_dir: Path) -> str:
    if (case_dir / "case.json").is_file():
        return "orchard"
    if (case_dir / "metadata.json").is_file():
        return "apple-pi-gt"
    raise CaseFormatError(f"{case_dir}: neither case.json (Orchard) nor metadata.json (Apple-PI-GT)")


def load_case(case_dir: str | Path, case_id: str | None = None, layout: str | None = None,
              strict: bool = True) -> EvalCase:
    """Read one case directory in either layout (autodetected unless `layout` is given)."""
    case_dir = Path(case_dir)
    layout = layout or detect_case_layout(case_dir)
    if layout == "orchard":
        from .readers.orchard import read_case
    elif layout == "apple-pi-gt":
        from .readers.apple_pi_gt import read_case
    else:
        raise CaseFormatError(f"unknown layout {layout!r}")
    return read_case(case_dir, case_id=case_id, strict=strict)


def _walk_case_dirs(root: Path) -> list[tuple[str, str]]:
    out = []
    cases = root / "cases"
    if not cases.is_dir():
        return out
    for pillar in sorted(p for p in cases.iterdir() if p.is_dir()):
        for task in sorted(p for p in pillar.iterdir() if p.is_dir()):
            for num in sorted(p for p in task.iterdir() if p.is_dir()):
                cid = f"{pillar.name}/{task.name}/{num.name}"
                out.append((cid, f"cases/{cid}"))
    return out


def load_dataset(path: str | Path, strict: bool = False, case_ids: Iterable[str] | None = None) -> Dataset:
    """Load a dataset root in either layout. The layout comes from `dataset.json` (`layout` key) or,
    failing that, from the first case directory. Manifest paths are checked (no `..`, no absolute
    paths). With `strict`, the first bad case raises; otherwise bad cases are left out and described
    in `Dataset.problems`."""
    root = Path(path)
    if (root / "case.json").is_file() or (root / "metadata.json").is_file():
        case = load_case(root, strict=strict)
        return Dataset(root=root, layout=case.layout, name=case.case_id, version="", num_rollouts=3,
                       cases={case.case_id: case})
    problems: list[str] = []
    index_path = root / "dataset.json"
    if index_path.is_file():
        index = read_json_file(index_path)
        errs = schema_errors(index, "dataset.schema.json")
        if errs:
            raise CaseFormatError(f"{index_path}: " + "; ".join(errs[:5]))
        entries = []
        for e in index.get("cases", []):
            try:
                safe_join(root, e["path"])
            except UnsafePathError as exc:
                raise CaseFormatError(f"{index_path}: case {e.get('case_id')!r}: {exc}") from exc
            if ".." in str(e["case_id"]).split("/") or str(e["case_id"]).startswith("/"):
                raise CaseFormatError(f"{index_path}: unsafe case_id {e['case_id']!r}")
            entries.append((e["case_id"], e["path"]))
        name, version = str(index.get("name", "")), str(index.get("version", ""))
        num_rollouts = int(index.get("num_rollouts", 3))
        layout = index.get("layout")
        prompt_version = index.get("prompt_version")
    else:
        entries = _walk_case_dirs(root)
        if not entries:
            raise CaseFormatError(f"{root}: no dataset.json and no cases/<pillar>/<task>/<number>/ directories")
        name, version, num_rollouts, layout, prompt_version = root.name, "", 3, None, None
    wanted = None if case_ids is None else set(case_ids)
    cases: dict[str, EvalCase] = {}
    for cid, rel in entries:
        if wanted is not None and cid not in wanted:
            continue
        case_dir = safe_join(root, rel)
        try:
            lay = layout or detect_case_layout(case_dir)
            layout = layout or lay
            case = load_case(case_dir, case_id=cid, layout=lay, strict=strict)
        except (CaseFormatError, UnsafePathError, OSError) as exc:
            if strict:
                raise
            problems.append(f"{cid}: {exc}")
            continue
        if case.case_id in cases:
            problems.append(f"{cid}: duplicate case id")
            continue
        cases[case.case_id] = case
    return Dataset(root=root, layout=layout or "unknown", name=name, version=version,
                   num_rollouts=num_rollouts, cases=cases, problems=problems, prompt_version=prompt_version)


def frame_size_of(img: np.ndarray | None) -> tuple[int, int] | None:
    return None if img is None else (int(img.shape[1]), int(img.shape[0]))


def as_matrix(value: Any, shape: tuple[int, int]) -> np.ndarray | None:
    if value is None:
        return None
    a = np.asarray(value, dtype=np.float64)
    if a.shape != shape or not np.all(np.isfinite(a)):
        raise CaseFormatError(f"expected a finite {shape} matrix, got shape {a.shape}")
    return a


def mapping_get(d: Mapping[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in d and d[k] is not None:
            return d[k]
    return default
