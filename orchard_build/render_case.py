"""Render passes, video, infographic and reference answers of one case (the render producer).

The video shows the engine's simulation; the answer key stays analytic. Every case records the
per-frame engine–analytic deviation in diagnostics.json, and a case whose deviation exceeds the
tolerance fails. Motions no engine honours (perfectly inelastic sticking) are played back from the
analytic trajectory, and say so (`playback: analytic`); a config may also ask for analytic playback
explicitly with `render: {playback: analytic, reason: …}`.
"""
from __future__ import annotations

import queue
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from .config import CaseConfig
from .errors import OrchardError
from .io import read_json, write_json, write_npz
from .overlay import build_first_frame_layer, draw_layer
from .references import draw_answer_layer, formulation_graphic_layer, formulation_text_image
from .video import write_mp4, write_png

DEVIATION_FRACTION = 0.01  # of the object's analytic travel …
DEVIATION_FLOOR = 0.005  # … or 5 mm, whichever is larger
ANALYTIC_ONLY_LAWS = {"perfectly_inelastic_collision"}  # sticking is no contact property of any engine
TIMINGS: dict[str, float] = {}  # wall time per step of the last case built in this process (benchmarks read it)


class _timed:
    def __init__(self, name: str):
        self.name = name

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        TIMINGS[self.name] = TIMINGS.get(self.name, 0.0) + time.perf_counter() - self.t0


class EngineDeviationError(OrchardError):
    """The engine's trajectory left the analytic answer key by more than the tolerance."""


def playback_mode(cfg: CaseConfig, law_steps) -> tuple[str, str]:
    requested = cfg.render.get("playback")
    if requested == "analytic":
        return "analytic", str(cfg.render.get("reason", "requested by the config"))
    if any(s.law in ANALYTIC_ONLY_LAWS for s in law_steps):
        return "analytic", "perfectly inelastic sticking is not a contact property of any engine"
    return "engine", "engine simulation"


def deviation_report(cfg: CaseConfig, analytic: dict[str, np.ndarray], engine: dict[str, np.ndarray] | None,
                     times: np.ndarray) -> dict[str, Any]:
    out: dict[str, Any] = {"tolerance_rule": f"max({DEVIATION_FRACTION:g} × analytic travel, {DEVIATION_FLOOR:g} m)",
                           "objects": {}}
    for o in cfg.objects:
        a = analytic[o.id]
        travel = float(np.sum(np.linalg.norm(np.diff(a, axis=0), axis=1)))
        tol = max(DEVIATION_FRACTION * travel, DEVIATION_FLOOR)
        entry: dict[str, Any] = {"travel": travel, "tolerance": tol}
        if engine is not None:
            dev = np.linalg.norm(engine[o.id] - a, axis=1)
            k = int(np.argmax(dev))
            entry.update({"max_deviation": float(dev[k]), "max_deviation_time": float(times[k]),
                          "mean_deviation": float(dev.mean()), "per_frame": dev, "within_tolerance": bool(dev[k] <= tol)})
        out["objects"][o.id] = entry
    return out


def _backend(cfg: CaseConfig):
    from .engines import get_backend, get_renderer

    name = cfg.render.get("backend", "mujoco")
    try:
        return name, get_backend(name), get_renderer(name)
    except KeyError as exc:
        raise OrchardError(f"{cfg.source_path}: render.backend: {exc.args[0]}") from exc


class _WriterCancelled(Exception):
    """The render loop was interrupted; the writer stops at its next frame."""


def _finish_writer(work: queue.Queue, done: threading.Event, cancel: threading.Event) -> None:
    """Hand the writer its end marker and wait until it has stopped. An interruption that lands in
    this wait (a SIGINT while the renderer is ahead of the encoder) must not leave the writer
    running: the caller is about to remove the directory it writes into, and a mask written after
    that removal would recreate it. So the wait goes on, and the interruption is raised after it.
    The writer's own `done` event is waited on, not `Thread.join`: a join interrupted by a signal
    marks the thread stopped while it still runs."""
    pending: BaseException | None = None
    sent = False
    while True:
        try:
            if not sent:
                work.put(None, timeout=0.05)
                sent = True
            if done.wait(0.05):
                break
        except queue.Full:
            continue
        except BaseException as exc:  # noqa: B902 - re-raised once the writer is gone
            cancel.set()
            pending = pending or exc
    if pending is not None:
        raise pending


def _render_and_write_passes(renderer, cfg: CaseConfig, poses, stage: Path):
    """Render every frame and, in a second thread, encode the video and write the mask PNGs while the
    next frames render (the renderer, x264 and zlib all release the GIL). Returns frame 0's RGB, the
    depth stack and the instance stack."""
    n, (h, w) = cfg.timing.n_frames, (cfg.camera.height, cfg.camera.width)
    depth = np.empty((n, h, w), np.float32)
    inst = np.empty((n, h, w), np.uint8)
    rgb0 = None
    frames = getattr(renderer, "frames", None)
    if frames is None:  # a renderer without a streaming form: render everything, then write
        res = renderer.render(cfg, poses)
        stream = ({"rgb": res.rgb[k], "depth": res.depth[k], "instance": res.instance[k]} for k in range(n))
    else:
        stream = frames(cfg, poses)
    work: queue.Queue = queue.Queue(maxsize=8)
    errors: list[BaseException] = []
    cancel, done = threading.Event(), threading.Event()

    ended = threading.Event()   # the writer has taken the end marker: nothing more will be put

    def consume() -> None:
        def rgb_frames():
            while True:
                item = work.get()
                if item is None:
                    ended.set()
                    return
                if cancel.is_set():  # abandon the encode instead of flushing it: the stage is going away
                    raise _WriterCancelled
                k, rgb, mask = item
                write_png(stage / "gt" / "masks" / f"{k:04d}.png", mask)
                yield rgb
        try:
            write_mp4(stage / "gt" / "video.mp4", rgb_frames(), cfg.timing.fps)
        except BaseException as exc:  # reported in the main thread
            errors.append(exc)
            # drain so the producer never blocks, up to the end marker unless the encoder already
            # took it (an interruption before frame 0: write_mp4 then fails on an empty stream)
            while not ended.is_set() and work.get() is not None:
                pass
        finally:
            done.set()

    writer = threading.Thread(target=consume, name="orchard-pass-writer", daemon=True)
    writer.start()
    try:
        for k, frame in enumerate(stream):
            if k == 0:
                rgb0 = frame["rgb"].copy()
            depth[k] = frame["depth"]
            inst[k] = frame["instance"]
            work.put((k, frame["rgb"].copy(), inst[k].copy()))
    except BaseException:
        cancel.set()
        raise
    finally:
        _finish_writer(work, done, cancel)
    if errors:
        raise errors[0]
    return rgb0, depth, inst


def write_render_artifacts(case, stage: Path, artifacts: dict) -> None:
    from .engines.base import HIDE_OBJECTS, poses_from_trajectory

    cfg, traj = case.config, case.trajectory
    times = cfg.timing.frame_times
    ids = [o.id for o in cfg.objects]
    analytic = traj.sample(times)
    mode, reason = playback_mode(cfg, traj.law_steps())
    name, backend, renderer = _backend(cfg)
    try:
        with _timed("simulate"):
            run = backend.simulate(cfg, times)
        engine_pos = {i: run.states[i].position for i in ids}
        diag = deviation_report(cfg, {i: analytic[i]["position"] for i in ids}, engine_pos, times)
        diag.update({"engine": run.engine, "engine_info": run.info, "playback": mode, "playback_reason": reason})
        if mode == "engine":
            bad = {i: e for i, e in diag["objects"].items() if not e["within_tolerance"]}
            if bad:
                desc = "; ".join(f"{i}: {e['max_deviation'] * 1000:.1f} mm at t = {e['max_deviation_time']:.3f} s "
                                 f"(tolerance {e['tolerance'] * 1000:.1f} mm)" for i, e in bad.items())
                raise EngineDeviationError(f"{cfg.source_path}: engine {run.engine} deviates from the analytic "
                                           f"trajectory: {desc}")
            poses = run.poses()
            states_src = run.states
        else:
            poses = poses_from_trajectory(traj, ids, times)
            states_src = None

        with _timed("render + encode + write passes"):
            rgb0, depth, inst = _render_and_write_passes(renderer, cfg, poses, stage)
        write_png(stage / "first_frame.png", rgb0)
        with _timed("write depth"):
            write_npz(stage / "gt" / "depth.npz", {"maps": depth})
        state_arrays: dict[str, np.ndarray] = {"times": times}
        for i in ids:
            for key in ("position", "quaternion", "linear_velocity", "angular_velocity"):
                state_arrays[f"analytic/{i}/{key}"] = analytic[i][key]
                if states_src is not None or mode == "analytic":
                    src = run.states[i]
                    state_arrays[f"engine/{i}/{key}"] = getattr(src, key)
        write_npz(stage / "gt" / "states.npz", state_arrays)
        write_json(stage / "gt" / "contacts.json", {"engine": run.engine, "contacts": [
            {"t": c.t, "a": c.body_a, "b": c.body_b, "kind": c.kind} for c in run.contacts]})
        write_json(stage / "diagnostics.json", diag)

        t_refs = time.perf_counter()
        frame0 = {i: (p[:1], q[:1]) for i, (p, q) in poses.items()}
        plate = renderer.render(cfg, frame0, passes=("rgb",), hide=(HIDE_OBJECTS,))
        write_png(stage / "clean_plate.png", plate.rgb[0])

        # infographic first frame and the Perception-Text reference (same layer, on white)
        stays_at_rest = {i: all(traj.mode(i, float(t)) == "rest" for t in times) for i in ids}
        layer = build_first_frame_layer(cfg, inst[0], friction_static=stays_at_rest)
        write_png(stage / "annotated_first_frame.png", draw_layer(layer, rgb0))
        write_json(stage / "annotations.json", layer.to_dict())
        refs = stage / "references"
        write_png(refs / "perception_text.png", draw_layer(layer, None))

        # Perception-Graphic: the annotated objects alone on white
        objs = renderer.render(cfg, frame0, passes=("rgb", "instance"), background="white")
        write_png(refs / "perception_graphic.png", objs.rgb[0])
        write_png(refs / "perception_graphic_mask.png", objs.instance[0].astype(np.uint8))

        # Formulation-Text: letter, symbolic formula, substituted formula
        fi = read_json(stage / "formula_info.json")
        ft_img, ft_meta = formulation_text_image(cfg.camera.width, cfg.camera.height,
                                                 (fi["correct_letter"], fi["correct_formula"], fi["substituted"]["display"]))
        write_png(refs / "formulation_text.png", ft_img)

        # Formulation-Graphic: the analytic state at t*, rendered, with orange velocity arrows
        tstar = cfg.timing.target_time
        star = {i: (traj.state(i, tstar).position[None], traj.state(i, tstar).quaternion[None]) for i in ids}
        scene = renderer.render(cfg, star, passes=("rgb", "instance"))
        velocity = read_json(stage / "velocity.json")
        fg_layer = formulation_graphic_layer(cfg.camera.width, cfg.camera.height, velocity, scene.instance[0])
        write_png(refs / "formulation_graphic.png", draw_answer_layer(fg_layer, scene.rgb[0]))
        write_png(refs / "formulation_graphic_mask.png", scene.instance[0].astype(np.uint8))
        write_json(refs / "references.json", {"formulation_text": ft_meta, "formulation_graphic": fg_layer.to_dict(),
                                              "target_time": tstar})
        TIMINGS["plate, overlay, references"] = time.perf_counter() - t_refs
    finally:
        renderer.close()

    artifacts.update({
        "first_frame": "first_frame.png", "annotated_first_frame": "annotated_first_frame.png",
        "annotations": "annotations.json", "clean_plate": "clean_plate.png",
        "video": "gt/video.mp4", "masks": "gt/masks", "depth": "gt/depth.npz", "states": "gt/states.npz",
        "contacts": "gt/contacts.json", "diagnostics": "diagnostics.json",
        "ref_perception_text": "references/perception_text.png",
        "ref_perception_graphic": "references/perception_graphic.png",
        "ref_perception_graphic_mask": "references/perception_graphic_mask.png",
        "ref_formulation_text": "references/formulation_text.png",
        "ref_formulation_graphic": "references/formulation_graphic.png",
        "ref_formulation_graphic_mask": "references/formulation_graphic_mask.png",
        "references": "references/references.json",
    })
