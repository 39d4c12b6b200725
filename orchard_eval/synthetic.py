"""Tiny synthetic cases and predictions for the evaluator's tests and benchmarks.

A scene of a textured backdrop with coloured discs whose centres follow analytic motion in the world
plane y = 0, seen by a pinhole camera at (0, −5, 1) looking along +y. Writers produce the same case
in Orchard's layout and in the Apple-PI-GT v1.0 layout, plus prediction directories in the published
submission layout. Nothing here is used when scoring real data.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
from PIL import Image

from .media import write_video

G = 9.81


@dataclass
class Disc:
    id: str
    instance_id: int
    color: tuple[int, int, int]
    radius: float                                   # metres
    motion: Callable[[float], np.ndarray]           # t -> world centre (x, 0, z)
    velocity: Callable[[float], np.ndarray]


def free_fall(x0: float, z0: float) -> tuple[Callable, Callable]:
    return (lambda t: np.array([x0, 0.0, z0 - 0.5 * G * t * t]),
            lambda t: np.array([0.0, 0.0, -G * t]))


def uniform(x0: float, z0: float, vx: float) -> tuple[Callable, Callable]:
    return (lambda t: np.array([x0 + vx * t, 0.0, z0]), lambda t: np.array([vx, 0.0, 0.0]))


@dataclass
class Scene:
    width: int = 96
    height: int = 64
    fps: float = 24.0
    duration: float = 0.5
    target_time: float = 0.25
    discs: list[Disc] = field(default_factory=list)
    background_seed: int = 0
    background: str = "texture"        # or "flat"

    def __post_init__(self):
        if not self.discs:
            p, v = free_fall(-0.5, 1.8)
            q, w = uniform(0.5, 0.5, 1.6)
            self.discs = [Disc("ball", 1, (220, 40, 40), 0.3, p, v), Disc("cube", 2, (40, 70, 220), 0.3, q, w)]

    # camera -------------------------------------------------------------------------------------
    @property
    def K(self) -> np.ndarray:
        f = 80.0 * self.width / 96.0
        return np.array([[f, 0, self.width / 2], [0, f, self.height / 2], [0, 0, 1.0]])

    @property
    def E(self) -> np.ndarray:
        R = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])
        C = np.array([0.0, -5.0, 1.0])
        return np.concatenate([R, (-R @ C)[:, None]], axis=1)

    def project(self, X: np.ndarray) -> np.ndarray:
        c = self.E[:, :3] @ X + self.E[:, 3]
        uvw = self.K @ c
        return uvw[:2] / uvw[2]

    @property
    def n_frames(self) -> int:
        return int(round(self.duration * self.fps)) + 1

    def times(self) -> np.ndarray:
        return np.arange(self.n_frames) / self.fps

    # rendering ----------------------------------------------------------------------------------
    def plate(self) -> np.ndarray:
        h, w = self.height, self.width
        if self.background == "flat":
            return np.full((h, w, 3), 150, np.uint8)
        rng = np.random.default_rng(self.background_seed)
        yy, xx = np.mgrid[0:h, 0:w]
        base = 120 + 40 * (yy / h) + 10 * (((xx // 8) + (yy // 8)) % 2)
        img = np.stack([base, base * 0.95 + 5, base * 0.9 + 10], axis=2)
        img += rng.normal(0, 1.0, img.shape)
        return np.clip(img, 0, 255).astype(np.uint8)

    def render(self, t: float, background: np.ndarray | None = None, offset: tuple[float, float] = (0.0, 0.0)
               ) -> tuple[np.ndarray, np.ndarray]:
        img = (self.plate() if background is None else background).copy()
        inst = np.zeros((self.height, self.width), np.uint8)
        yy, xx = np.mgrid[0:self.height, 0:self.width] + 0.5
        f = self.K[0, 0]
        for d in self.discs:
            X = d.motion(t)
            u, v = self.project(X)
            u, v = u + offset[0], v + offset[1]
            depth = (self.E[:, :3] @ X + self.E[:, 3])[2]
            r = d.radius * f / depth
            m = (xx - u) ** 2 + (yy - v) ** 2 <= r * r
            shade = 1.0 - 0.25 * np.clip(((xx - u) ** 2 + (yy - v) ** 2) / max(r * r, 1e-9), 0, 1)
            col = np.array(d.color, float)[None, None, :] * shade[..., None]
            img[m] = np.clip(col[m], 0, 255).astype(np.uint8)
            inst[m] = d.instance_id
        return img, inst

    def white(self, t: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
        return self.render(t, background=np.full((self.height, self.width, 3), 255, np.uint8))

    def gt_sequence(self) -> tuple[list[np.ndarray], list[np.ndarray]]:
        rgb, inst = zip(*(self.render(t) for t in self.times()))
        return list(rgb), list(inst)


def annotate(img: np.ndarray) -> np.ndarray:
    """A crude 'infographic': a dark label box and an axis bar."""
    out = img.copy()
    out[2:8, 2:30] = (20, 20, 20)
    out[-6:-4, 4:40] = (250, 140, 0)
    return out


def _png(path: Path, a: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(a).save(path)


def _json(path: Path, doc) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1), encoding="utf-8")


TIMESTAMPS = (0.125, 0.25, 0.5)


# ---------------------------------------------------------------------------------------------
# Orchard layout
# ---------------------------------------------------------------------------------------------
def write_orchard_case(root: Path, scene: Scene, case_id: str = "UniversalGravitation/FreeFall/000000",
                       task: str = "free_fall", source: str = "simulated",
                       timestamps: Sequence[float] = TIMESTAMPS) -> Path:
    pillar = case_id.split("/")[0]
    d = Path(root) / "cases" / case_id
    rgb, inst = scene.gt_sequence()
    write_video(d / "gt" / "video.mp4", rgb, fps=scene.fps, crf=4)
    for k, m in enumerate(inst):
        _png(d / "gt" / "masks" / f"{k:04d}.png", m)
    _png(d / "first_frame.png", rgb[0])
    _png(d / "annotated_first_frame.png", annotate(rgb[0]))
    _png(d / "clean_plate.png", scene.plate())
    white, winst = scene.white(0.0)
    _png(d / "references" / "perception_graphic.png", white)
    _png(d / "references" / "perception_graphic_mask.png", winst)
    pt = np.full_like(white, 255)
    pt[2:8, 2:30] = (20, 20, 20)
    _png(d / "references" / "perception_text.png", pt)
    _png(d / "references" / "formulation_text.png", pt)
    fg, fginst = scene.render(scene.target_time)
    _png(d / "references" / "formulation_graphic.png", fg)
    _png(d / "references" / "formulation_graphic_mask.png", fginst)
    times = scene.times()
    states = {"times": times}
    for disc in scene.discs:
        states[f"analytic/{disc.id}/position"] = np.stack([disc.motion(t) for t in times])
        states[f"analytic/{disc.id}/linear_velocity"] = np.stack([disc.velocity(t) for t in times])
    (d / "gt").mkdir(parents=True, exist_ok=True)
    np.savez_compressed(d / "gt" / "states.npz", **states)
    ts = sorted(set(float(t) for t in timestamps) | {scene.target_time})
    _json(d / "timestamps.json", {
        "fps": scene.fps, "physics_duration": scene.duration, "target_time": scene.target_time, "timestamps": ts,
        "entries": [{"t": t, "frame": max(1, int(round(t * scene.fps))),
                     "kinds": ["target"] if t == scene.target_time else ["grid"]} for t in ts]})
    vel_objs = []
    for disc in scene.discs:
        X, V = disc.motion(scene.target_time), disc.velocity(scene.target_time)
        sp = float(np.linalg.norm(V))
        vel_objs.append({"id": disc.id, "instance_id": disc.instance_id, "center_world": X.tolist(),
                         "center_image": scene.project(X).tolist(), "depth": 5.0, "velocity_world": V.tolist(),
                         "speed": sp, "label": f"v = {sp:.2f}", "moving": sp > 0,
                         "arrow_direction_image": [0.0, 1.0] if sp > 0 else None})
    _json(d / "velocity.json", {"target_time": scene.target_time, "frame": int(round(scene.target_time * scene.fps)),
                                "source": "analytic", "objects": vel_objs})
    choices = ["A. x = v·t", "B. y(t) = h - (1/2)·g·t²", "C. E = m·c²", "D. F = q·v·B"]
    _json(d / "formula_info.json", {"choices": choices, "correct_letter": "B",
                                    "correct_formula": "y(t) = h - (1/2)·g·t²",
                                    "substituted": {"display": "y(t) = 1.8 - (1/2)·9.81·t²"}})
    _json(d / "annotations.json", {"labels": [{"kind": "env", "text": "g = 9.81", "lines": ["g = 9.81"]},
                                              {"kind": "mass", "text": "m = 1.00", "lines": ["m = 1.00"]}]})
    (d / "physics_duration.txt").write_text(f"{scene.duration:g}\n")
    sha = hashlib.sha256(b"synthetic").hexdigest()
    doc = {
        "schema_version": 1, "case_id": case_id, "source": source, "pillar": pillar, "task": task,
        "law_level": "single", "seed": 0, "gt_fps": scene.fps, "n_frames": scene.n_frames,
        "frame_size": {"width": scene.width, "height": scene.height}, "physics_duration": scene.duration,
        "target_time": scene.target_time, "environment": {"g": G, "gravity": [0, 0, -G]},
        "objects": [{"id": disc.id, "instance_id": disc.instance_id, "shape": "sphere",
                     "size": {"radius": disc.radius}, "material": "rubber", "density": 1000.0, "volume": 0.1,
                     "mass": 100.0, "inertia_diagonal": [1.0, 1.0, 1.0]} for disc in scene.discs],
        "supports": {}, "camera": {"intrinsic": scene.K.tolist(), "extrinsic": scene.E.tolist(),
                                   "width": scene.width, "height": scene.height},
        "config": {"file": "synthetic.yaml", "sha256": sha, "materials_sha256": sha, "resolved_sha256": sha},
        "provenance": {"tool": "orchard-build", "tool_version": "0", "python": "3", "dependencies": {}},
        "artifacts": {
            "first_frame": "first_frame.png", "annotated_first_frame": "annotated_first_frame.png",
            "annotations": "annotations.json", "clean_plate": "clean_plate.png", "video": "gt/video.mp4",
            "masks": "gt/masks", "states": "gt/states.npz", "timestamps": "timestamps.json",
            "velocity": "velocity.json", "formula_info": "formula_info.json",
            "physics_duration": "physics_duration.txt",
            "ref_perception_text": "references/perception_text.png",
            "ref_perception_graphic": "references/perception_graphic.png",
            "ref_perception_graphic_mask": "references/perception_graphic_mask.png",
            "ref_formulation_text": "references/formulation_text.png",
            "ref_formulation_graphic": "references/formulation_graphic.png",
            "ref_formulation_graphic_mask": "references/formulation_graphic_mask.png",
        },
    }
    _json(d / "case.json", doc)
    return d


def write_index(root: Path, case_ids: Sequence[str], layout: str, name: str = "synthetic") -> None:
    _json(Path(root) / "dataset.json", {"name": name, "version": "0", "prompt_version": "1.0", "num_rollouts": 3,
                                        "layout": layout,
                                        "cases": [{"case_id": c, "path": f"cases/{c}", "split": "test"}
                                                  for c in case_ids]})


# ---------------------------------------------------------------------------------------------
# Apple-PI-GT layout
# ---------------------------------------------------------------------------------------------
def write_apple_case(root: Path, scene: Scene, case_id: str = "UniversalGravitation/FreeFall/000001",
                     is_real: bool = False, timestamps: Sequence[float] = TIMESTAMPS,
                     gt_as_video: bool = False) -> Path:
    d = Path(root) / "cases" / case_id
    rgb, inst = scene.gt_sequence()
    for k, f in enumerate(rgb):
        if gt_as_video and k > 0:
            break
        _png(d / "rgb" / f"{k:04d}.png", f)
    if gt_as_video:
        write_video(d / "rgb" / "video.mp4", rgb, fps=scene.fps, crf=4)
    init = d / "initial_state"
    _png(init / "rgb_0000.png", annotate(rgb[0]))
    white, winst = scene.white(0.0)
    pt = np.full_like(white, 255)
    pt[2:8, 2:30] = (20, 20, 20)
    _png(init / "rgb_0000_white_bg.png", pt)
    _png(init / "rgb_0000_white_bg_obj.png", white)
    np.save(init / "instance_segmentation_0000.npy", inst[0].astype(np.int32))
    np.save(init / "mask_0000.npy", (inst[0] > 0).astype(np.uint8))
    if not is_real:
        mapping = {"0": "INVALID", "5": "/World/Ground"}
        mapping.update({str(disc.instance_id): f"/World/{disc.id}" for disc in scene.discs})
        _json(init / "instance_segmentation_mapping_0000.json", mapping)
    fg, fginst = scene.render(scene.target_time)
    iv = d / "instantaneous_velocity"
    _png(iv / "velocity_annotated.png", fg)
    np.save(iv / "mask.npy", fginst.astype(np.int32))
    (d / "instance_segmentation").mkdir(parents=True, exist_ok=True)
    np.savez_compressed(d / "instance_segmentation" / "maps.npz", maps=np.stack(inst).astype(np.int32))
    (d / "mask").mkdir(parents=True, exist_ok=True)
    np.savez_compressed(d / "mask" / "maps.npz", maps=(np.stack(inst) > 0).astype(np.uint8))
    if not is_real:
        n = scene.n_frames
        depth = np.full((n, scene.height, scene.width), 5.0, np.float32)
        vel = np.zeros((n, scene.height, scene.width, 3), np.float32)
        for k, t in enumerate(scene.times()):
            for disc in scene.discs:
                vel[k][inst[k] == disc.instance_id] = disc.velocity(t)
        for sub, arr in (("depth", depth), ("velocity", vel)):
            (d / sub).mkdir(parents=True, exist_ok=True)
            np.savez_compressed(d / sub / "maps.npz", maps=arr)
        for k in range(n):
            _json(d / "camera_parameters" / f"{k:04d}.json", {"intrinsic": scene.K.tolist(),
                                                               "extrinsic": scene.E.tolist()})
    meta = {
        "schema_version": "1.0", "case_id": case_id, "physics_type": case_id.split("/")[1], "is_realworld": is_real,
        "annotation": "Environment: g=-9.81\nball: m = 1.0", "input_image": "initial_state/rgb_0000.png",
        "clean_first_frame": "rgb/0000.png", "annotations_only_reference": "initial_state/rgb_0000_white_bg.png",
        "objects_only_reference": "initial_state/rgb_0000_white_bg_obj.png",
        "future_state_reference": "instantaneous_velocity/velocity_annotated.png",
        "target_time": scene.target_time, "physics_duration": scene.duration, "gt_frames_dir": "rgb",
        "gt_video": "rgb/video.mp4" if gt_as_video else None, "gt_fps": scene.fps, "gt_total_frames": scene.n_frames,
        "deduction_timestamps": list(timestamps),
        "formula_info": {"choices": ["x = v·t", "y(t) = h - (1/2)·g·t²", "E = m·c²", "F = q·v·B"],
                         "correct_letter": "B", "correct_formula": "y(t) = h - (1/2)·g·t²"},
    }
    _json(d / "metadata.json", meta)
    return d


# ---------------------------------------------------------------------------------------------
# Predictions
# ---------------------------------------------------------------------------------------------
def write_submission(pred_dir: Path, protocol: str = "video", num_rollouts: int = 3, model: str = "synthetic") -> None:
    _json(Path(pred_dir) / "submission.json", {"model": model, "protocol": protocol, "num_rollouts": num_rollouts,
                                               "prompt_version": "1.0", "notes": "synthetic"})


def answer_video(path: Path, final: np.ndarray, start: np.ndarray, n: int = 6, fps: float = 24) -> None:
    frames = [((1 - a) * start.astype(float) + a * final.astype(float)).astype(np.uint8)
              for a in np.linspace(0, 1, n)]
    write_video(path, frames, fps=fps)


def deduction_video(path: Path, scene: Scene, n_physics: int, size: tuple[int, int] | None = None,
                    time_scale: float = 1.0, fps: float = 16) -> None:
    """A prediction whose N physics frames span T (frame k at k·T/N), optionally at another resolution
    and with its motion running `time_scale` times as fast."""
    import cv2

    frames = []
    for k in range(n_physics + 1):
        img, _ = scene.render(min(k * scene.duration / n_physics * time_scale, scene.duration * time_scale))
        if size is not None:
            img = cv2.resize(img, size, interpolation=cv2.INTER_LINEAR)
        frames.append(img)
    write_video(path, frames, fps=fps)
