"""Export Orchard cases in the published Apple-PI-GT v1.0 layout, so the authors' evaluator (and ours)
can consume Orchard-built cases.

Layout facts (see the interop note): per case `metadata.json`, `initial_state/`, `instantaneous_velocity/`,
`rgb/` (PNG frames including frame 0), `instance_segmentation/`, `mask/`, and for simulator cases `depth/`,
`velocity/` (per-pixel world-space velocity of the rigid body seen there), `camera_parameters/`; dense
arrays are NPZ files with the key `maps`. Our GT video is H.264 near-lossless; the exported `rgb/` frames
are its decoded frames (frame 0 is replaced by the lossless clean first frame).

The published evaluator (package `apple_pi`) loads a dataset only when `dataset.json` says
`name: "Apple-PI"` and `num_rollouts: 3`; the export therefore writes the release's manifest values
(`APPLE_PI_MANIFEST`) and keeps Orchard's own provenance under the extra key `orchard`, which that
loader ignores. Before a case is moved into place it is checked against the rules the published
`validate-gt` applies (`case_problems`), and the manifest against its loader's (`manifest_problems`):
an export that their tools would refuse is not written.
"""
from __future__ import annotations

import json
import shutil
import tempfile
import zipfile
from pathlib import Path

import numpy as np

from . import __version__
from .errors import OrchardError
from .io import read_json, replace_dir, write_json, write_npz
from .schemas import iter_errors
from .video import decode_mp4, read_png, write_png

VELOCITY_DTYPE = np.float32

# What the published release's manifest says, and what its dataset loader insists on (name and rollout
# count are refused otherwise). The same values are known to the evaluator as
# orchard_eval.readers.apple_pi_gt.APPLE_PI_MANIFEST.
APPLE_PI_MANIFEST = {"name": "Apple-PI", "version": "1.0", "prompt_version": "1.0", "num_rollouts": 3}
METADATA_SCHEMA_VERSION = "1.0"


class ExportError(OrchardError):
    pass


def annotation_text(layer: dict, case: dict) -> str:
    """One line per entity, as the published metadata's `annotation` field: the overlay's values."""
    lines = []
    g = [lab["text"] for lab in layer["labels"] if lab["kind"] == "global"]
    lines.append("Environment: " + ", ".join(t.replace(" ", "") for t in g))
    for o in case["objects"]:
        labs = [lab for lab in layer["labels"] if lab["kind"] == "object" and lab["object_id"] == o["id"]]
        if labs:
            lines.append(f"{o['id']} ({o['shape']}, {o['material']}): "
                         + ", ".join(line.replace(" ", "") for line in labs[0]["lines"]))
    for kind, name in (("angle", "Ramp"), ("friction", "Surface")):
        vals = [lab["text"].replace(" ", "") for lab in layer["labels"] if lab["kind"] == kind]
        if vals:
            lines.append(f"{name}: " + ", ".join(vals))
    return "\n".join(lines)


def bare_choice(choice: str, letter: str) -> str:
    """A formula choice without our "A. " label: the published metadata lists bare formulas and its
    prompt builder adds the letters itself (a kept label would read "A) A. …")."""
    c = str(choice).strip()
    for sep in (". ", ") "):
        if c.startswith(letter + sep):
            return c[len(letter) + len(sep):].strip()
    return c


def pixel_velocities(depth: np.ndarray, inst: np.ndarray, K: np.ndarray, E: np.ndarray,
                     states: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]]) -> np.ndarray:
    """World velocity of the rigid body seen at each pixel: v + ω × (p − c), p back-projected from depth."""
    h, w = depth.shape
    out = np.zeros((h, w, 3), VELOCITY_DTYPE)
    R, t = E[:, :3], E[:, 3]
    for iid, (c, v, omega) in states.items():
        m = inst == iid
        if not m.any():
            continue
        ys, xs = np.nonzero(m)
        z = depth[ys, xs].astype(np.float64)
        cam = np.stack([(xs + 0.5 - K[0, 2]) * z / K[0, 0], (ys + 0.5 - K[1, 2]) * z / K[1, 1], z], axis=1)
        p = (cam - t) @ R  # camera → world
        out[ys, xs] = (v + np.cross(omega, p - c)).astype(VELOCITY_DTYPE)
    return out


def export_case(case_dir: Path, dest: Path) -> None:
    case = read_json(case_dir / "case.json")
    art = case["artifacts"]
    if "video" not in art:
        raise ExportError(f"{case_dir}: the case has no rendered artifacts (build it without --no-render)")
    ts = read_json(case_dir / "timestamps.json")
    fi = read_json(case_dir / "formula_info.json")
    layer = read_json(case_dir / art["annotations"])
    K = np.array(case["camera"]["intrinsic"])
    E = np.array(case["camera"]["extrinsic"])
    frames, _ = decode_mp4(case_dir / art["video"])
    n = case["n_frames"]
    if len(frames) != n:
        raise ExportError(f"{case_dir}: video has {len(frames)} frames, case.json says {n}")
    frames[0] = read_png(case_dir / art["first_frame"])
    inst = np.stack([read_png(case_dir / "gt" / "masks" / f"{k:04d}.png") for k in range(n)]).astype(np.int32)
    depth = np.load(case_dir / art["depth"])["maps"]
    states = np.load(case_dir / art["states"])
    src = "engine" if case["provenance"].get("playback") == "engine" else "analytic"

    # rgb/ and the dense maps
    for k in range(n):
        write_png(dest / "rgb" / f"{k:04d}.png", frames[k])
        write_json(dest / "camera_parameters" / f"{k:04d}.json", {"intrinsic": K, "extrinsic": E})
    write_npz(dest / "instance_segmentation" / "maps.npz", {"maps": inst})
    write_npz(dest / "mask" / "maps.npz", {"maps": (inst > 0).astype(np.uint8)})
    write_npz(dest / "depth" / "maps.npz", {"maps": depth.astype(np.float32)})
    vel = np.zeros(inst.shape + (3,), VELOCITY_DTYPE)
    for k in range(n):
        per = {o["instance_id"]: (states[f"{src}/{o['id']}/position"][k], states[f"{src}/{o['id']}/linear_velocity"][k],
                                  states[f"{src}/{o['id']}/angular_velocity"][k]) for o in case["objects"]}
        vel[k] = pixel_velocities(depth[k], inst[k], K, E, per)
    write_npz(dest / "velocity" / "maps.npz", {"maps": vel})

    # initial state and the references
    mapping = {"0": "BACKGROUND"}
    mapping.update({str(o["instance_id"]): f"/World/Objects/{o['id']}" for o in case["objects"]})
    init = dest / "initial_state"
    shutil.copyfile(case_dir / art["annotated_first_frame"], _mk(init / "rgb_0000.png"))
    shutil.copyfile(case_dir / art["ref_perception_text"], init / "rgb_0000_white_bg.png")
    shutil.copyfile(case_dir / art["ref_perception_graphic"], init / "rgb_0000_white_bg_obj.png")
    np.save(init / "mask_0000.npy", (inst[0] > 0).astype(np.uint8))
    np.save(init / "instance_segmentation_0000.npy", inst[0])
    write_json(init / "instance_segmentation_mapping_0000.json", mapping)
    iv = dest / "instantaneous_velocity"
    shutil.copyfile(case_dir / art["ref_formulation_graphic"], _mk(iv / "velocity_annotated.png"))
    np.save(iv / "mask.npy", read_png(case_dir / art["ref_formulation_graphic_mask"]).astype(np.int32))
    write_json(iv / "mapping.json", mapping)

    meta = {
        "schema_version": METADATA_SCHEMA_VERSION,
        "case_id": case["case_id"], "physics_type": case["task_pascal"], "is_realworld": case["source"] != "simulated",
        "annotation": annotation_text(layer, case), "input_image": "initial_state/rgb_0000.png",
        "clean_first_frame": "rgb/0000.png", "annotations_only_reference": "initial_state/rgb_0000_white_bg.png",
        "objects_only_reference": "initial_state/rgb_0000_white_bg_obj.png",
        "future_state_reference": "instantaneous_velocity/velocity_annotated.png",
        "target_time": case["target_time"], "physics_duration": case["physics_duration"], "gt_frames_dir": "rgb",
        "gt_video": None, "gt_fps": case["gt_fps"], "gt_total_frames": n,
        "deduction_timestamps": ts["timestamps"],
        "formula_info": {"choices": [bare_choice(c, L) for c, L in zip(fi["choices"], "ABCD")],
                         "correct_letter": fi["correct_letter"],
                         "correct_formula": fi["correct_formula"], "substituted": fi["substituted"]["display"]},
        "source_tool": f"orchard-build {__version__}",
    }
    errors = list(iter_errors(meta, "eval_apple_pi_metadata.schema.json"))
    if errors:
        raise ExportError(f"{case_dir}: exported metadata breaks the Apple-PI-GT schema: {errors[:3]}")
    write_json(dest / "metadata.json", meta)


def _mk(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


# ---------------------------------------------------------------------------------------------
# The published tools' acceptance rules (their `validate-gt` and dataset loader), checked on our output
# ---------------------------------------------------------------------------------------------
def npz_maps_shape(path: Path) -> tuple[int, ...]:
    """Shape of the array stored under the key `maps` of an NPZ file, read from its header only.
    Raises ValueError when the file is not a zip archive or has no `maps.npy` member."""
    try:
        with zipfile.ZipFile(path) as zf:
            if "maps.npy" not in zf.namelist():
                raise ValueError("no array under the key 'maps'")
            with zf.open("maps.npy") as fh:
                major, _ = np.lib.format.read_magic(fh)
                reader = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
                shape, _, _ = reader(fh)
    except (OSError, zipfile.BadZipFile) as exc:
        raise ValueError(f"not a readable NPZ archive: {exc}") from exc
    return tuple(int(n) for n in shape)


def _number(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def case_problems(case_dir: Path, meta: dict | None = None) -> list[str]:
    """Everything the published `validate-gt` would report for one exported case directory, plus the
    consistency it takes for granted (one camera file and one RGB frame per dense-map frame)."""
    case_dir = Path(case_dir)
    out: list[str] = []
    if meta is None:
        try:
            meta = json.loads((case_dir / "metadata.json").read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            return [f"metadata.json: unreadable: {exc}"]
    out.extend(f"metadata.json: {e}" for e in iter_errors(meta, "eval_apple_pi_metadata.schema.json"))
    sim = not bool(meta.get("is_realworld"))

    def must_exist(key: str, label: str) -> None:
        rel = meta.get(key)
        if not rel:
            out.append(f"metadata.json: {key}: the {label} must be declared")
        elif not (case_dir / rel).exists():
            out.append(f"{rel}: the {label} is missing")

    must_exist("input_image", "annotated input image")
    must_exist("clean_first_frame", "clean first frame")
    must_exist("gt_frames_dir", "GT frame directory")
    must_exist("annotations_only_reference", "annotations-only reference (P-T)")
    must_exist("objects_only_reference", "objects-only reference (P-G)")
    must_exist("future_state_reference", "future-state reference (F-G)")
    if meta.get("gt_video") and not (case_dir / meta["gt_video"]).is_file():
        out.append(f"{meta['gt_video']}: the declared GT video is missing")

    required = ["initial_state/instance_segmentation_0000.npy", "instantaneous_velocity/mask.npy"]
    if sim:
        required += ["initial_state/mask_0000.npy", "initial_state/instance_segmentation_mapping_0000.json",
                     "instantaneous_velocity/mapping.json"]
    out.extend(f"{rel}: missing" for rel in required if not (case_dir / rel).is_file())

    maps = {"instance_segmentation": 3, "mask": 3}
    if sim:
        maps.update(depth=3, velocity=4)
    shapes: dict[str, tuple[int, ...]] = {}
    for name, ndim in maps.items():
        rel = f"{name}/maps.npz"
        if not (case_dir / rel).is_file():
            out.append(f"{rel}: missing")
            continue
        try:
            shape = npz_maps_shape(case_dir / rel)
        except ValueError as exc:
            out.append(f"{rel}: {exc}")
            continue
        if len(shape) != ndim:
            out.append(f"{rel}: expected {ndim} dimensions, got shape {shape}")
        shapes[name] = shape
    inst = shapes.get("instance_segmentation")
    for name in ("mask", "depth"):
        if inst is not None and name in shapes and shapes[name] != inst:
            out.append(f"{name}/maps.npz: shape {shapes[name]} differs from instance_segmentation's {inst}")
    vel = shapes.get("velocity")
    if vel is not None and (vel[-1:] != (3,) or (inst is not None and vel[:-1] != inst)):
        out.append(f"velocity/maps.npz: expected shape {inst} + (3,), got {vel}")

    if sim:
        cams = sorted((case_dir / "camera_parameters").glob("*.json"))
        if not cams:
            out.append("camera_parameters/: no camera JSON files")
        elif inst is not None and len(cams) != inst[0]:
            out.append(f"camera_parameters/: {len(cams)} files for {inst[0]} frames")
        for cam in cams:
            try:
                doc = json.loads(cam.read_text(encoding="utf-8"))
                ok = (np.asarray(doc["intrinsic"], float).shape == (3, 3)
                      and np.asarray(doc["extrinsic"], float).shape == (3, 4))
            except (OSError, ValueError, KeyError, TypeError):
                ok = False
            if not ok:
                out.append(f"camera_parameters/{cam.name}: needs a 3×3 'intrinsic' and a 3×4 'extrinsic'")
    frames_dir = meta.get("gt_frames_dir")
    if sim and frames_dir and inst is not None and not meta.get("gt_video"):
        n_png = len(list((case_dir / frames_dir).glob("*.png")))
        if n_png != inst[0]:
            out.append(f"{frames_dir}/: {n_png} frames for {inst[0]} dense-map frames")

    fi = meta.get("formula_info") if isinstance(meta.get("formula_info"), dict) else {}
    if len(fi.get("choices") or []) != 4:
        out.append("metadata.json: formula_info.choices: exactly four formula choices are required")
    target, duration = _number(meta.get("target_time")), _number(meta.get("physics_duration"))
    if target is None or target < 0:
        out.append("metadata.json: target_time must be a non-negative number")
    stamps = meta.get("deduction_timestamps") or []
    if duration is not None and any(_number(t) is None or not 0 < float(t) <= duration for t in stamps):
        out.append(f"metadata.json: deduction_timestamps {stamps} must all lie in (0, physics_duration = {duration}]")
    return out


def manifest_problems(dataset: dict) -> list[str]:
    """What the published dataset loader refuses (and what its manifest schema requires)."""
    out = [f"dataset.json: {e}" for e in iter_errors(dataset, "dataset.schema.json")]
    for key in ("name", "num_rollouts"):
        if dataset.get(key) != APPLE_PI_MANIFEST[key]:
            out.append(f"dataset.json: {key} must be {APPLE_PI_MANIFEST[key]!r} (the published loader refuses "
                       f"{dataset.get(key)!r})")
    if not isinstance(dataset.get("version"), str):
        out.append("dataset.json: version must be a string")
    if not dataset.get("cases"):
        out.append("dataset.json: no cases listed")
    return out


def export_dataset(src: Path, out: Path, progress: bool = True) -> list[str]:
    index = read_json(src / "dataset.json")
    out.mkdir(parents=True, exist_ok=True)
    staging_root = out / ".staging"
    staging_root.mkdir(exist_ok=True)
    from tqdm import tqdm

    exported = []
    for entry in tqdm(index["cases"], disable=not progress, unit="case"):
        stage = Path(tempfile.mkdtemp(dir=staging_root))
        try:
            export_case(src / entry["path"], stage)
            problems = case_problems(stage)
            if problems:
                raise ExportError(f"{entry['case_id']}: the exported case would not pass the published "
                                  f"validate-gt: " + "; ".join(problems[:5]))
            replace_dir(stage, out / "cases" / entry["case_id"])
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        exported.append(entry["case_id"])
    shutil.rmtree(staging_root, ignore_errors=True)
    dataset = dict(APPLE_PI_MANIFEST)
    dataset.update({
        "layout": "apple-pi-gt",
        # Orchard's provenance: extra keys, ignored by the published loader
        "orchard": {"tool": "orchard-build", "tool_version": __version__,
                    "source": {"name": index.get("name"), "version": index.get("version"),
                               "prompt_version": index.get("prompt_version")}},
        "cases": [{"case_id": cid, "path": f"cases/{cid}", "split": "test"} for cid in exported],
    })
    problems = manifest_problems(dataset)
    if problems:
        raise ExportError("exported dataset.json would be refused: " + "; ".join(problems[:3]))
    write_json(out / "dataset.json", dataset)
    return exported
