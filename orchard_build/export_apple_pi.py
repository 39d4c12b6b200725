"""Export Orchard cases in the published Apple-PI-GT v1.0 layout, so the authors' evaluator (and ours)
can consume Orchard-built cases.

Layout facts (see the interop note): per case `metadata.json`, `initial_state/`, `instantaneous_velocity/`,
`rgb/` (PNG frames including frame 0), `instance_segmentation/`, `mask/`, and for simulator cases `depth/`,
`velocity/` (per-pixel world-space velocity of the rigid body seen there), `camera_parameters/`; dense
arrays are NPZ files with the key `maps`. Our GT video is H.264 near-lossless; the exported `rgb/` frames
are its decoded frames (frame 0 is replaced by the lossless clean first frame).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import numpy as np

from . import __version__
from .errors import OrchardError
from .io import read_json, replace_dir, write_json, write_npz
from .schemas import iter_errors
from .video import decode_mp4, read_png, write_png

VELOCITY_DTYPE = np.float32


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
        "case_id": case["case_id"], "physics_type": case["task_pascal"], "is_realworld": case["source"] != "simulated",
        "annotation": annotation_text(layer, case), "input_image": "initial_state/rgb_0000.png",
        "clean_first_frame": "rgb/0000.png", "annotations_only_reference": "initial_state/rgb_0000_white_bg.png",
        "objects_only_reference": "initial_state/rgb_0000_white_bg_obj.png",
        "future_state_reference": "instantaneous_velocity/velocity_annotated.png",
        "target_time": case["target_time"], "physics_duration": case["physics_duration"], "gt_frames_dir": "rgb",
        "gt_video": None, "gt_fps": case["gt_fps"], "gt_total_frames": n,
        "deduction_timestamps": ts["timestamps"],
        "formula_info": {"choices": fi["choices"], "correct_letter": fi["correct_letter"],
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
            replace_dir(stage, out / "cases" / entry["case_id"])
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise
        exported.append(entry["case_id"])
    shutil.rmtree(staging_root, ignore_errors=True)
    dataset = {"name": index.get("name", "orchard"), "version": index.get("version", __version__),
               "prompt_version": index.get("prompt_version", "orchard-prompts-v1"), "num_rollouts": 3,
               "layout": "apple-pi-gt",
               "cases": [{"case_id": cid, "path": f"cases/{cid}", "split": "test"} for cid in exported]}
    problems = list(iter_errors(dataset, "dataset.schema.json"))
    if problems:
        raise ExportError(f"exported dataset.json breaks its schema: {problems[:3]}")
    write_json(out / "dataset.json", dataset)
    return exported
