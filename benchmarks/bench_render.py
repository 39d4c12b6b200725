"""Raw throughput of the MuJoCo engine: renderer frames/s (rgb + depth + instance) and simulation steps/s.

    python benchmarks/bench_render.py [--frames 96]

The scene is a typical case: a ramp, a platform, four primitives on the ground plane with shadows.
Frame poses come from the MuJoCo simulation of that scene, so objects move as in a real case.
"""
from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchard_build.engines import gl  # noqa: E402

gl.configure()

from orchard_build.config import resolve_config  # noqa: E402
from orchard_build.engines import get_backend, get_renderer  # noqa: E402
from orchard_build.materials import load_materials  # noqa: E402
from orchard_build.resources import scenes_dir  # noqa: E402

RAW = {
    "schema_version": 1, "task": "composition", "case_number": 0, "seed": 0, "environment": {"g": 9.81},
    "ground": {"material": "concrete"},
    "supports": {
        "ramps": [{"id": "ramp", "material": "oak", "angle_deg": 25, "length": 1.2, "width": 0.4, "foot": [0.2, 0.3, 0.0]}],
        "platforms": [{"id": "table", "material": "ceramic", "center": [0.9, 0.3, 0.1], "size": [0.5, 0.4, 0.2]}],
    },
    "objects": [
        {"id": "ball", "shape": "sphere", "size": {"radius": 0.06}, "material": "rubber",
         "placement": {"ramp": {"ramp": "ramp", "distance_from_top": 0.2}}},
        {"id": "box", "shape": "cube", "size": {"edge": 0.1}, "material": "steel",
         "placement": {"surface": {"xy": [-0.3, -0.3], "velocity": [0.5, 0.0]}}},
        {"id": "can", "shape": "cylinder", "size": {"radius": 0.05, "height": 0.12}, "material": "abs_plastic",
         "placement": {"surface": {"xy": [0.9, 0.3], "support": "table"}}},
        {"id": "cone", "shape": "cone", "size": {"radius": 0.06, "height": 0.14}, "material": "brass",
         "placement": {"surface": {"xy": [0.5, -0.4]}}},
    ],
    "camera": {"position": [0.3, -3.0, 1.2], "look_at": [0.3, 0.0, 0.3], "fov_deg": 40, "resolution": [640, 360]},
    "timing": {"fps": 24, "duration": 3.958333333333333, "target_time": 1.0},
}


def config(width: int, height: int):
    raw = copy.deepcopy(RAW)
    raw["camera"]["resolution"] = [width, height]
    return resolve_config(raw, "bench.yaml", load_materials(scenes_dir() / "materials.yaml"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=96)
    args = ap.parse_args()
    import mujoco

    cfg = config(640, 360)
    times = cfg.timing.frame_times[: args.frames]
    backend = get_backend("mujoco")
    t0 = time.perf_counter()
    run = backend.simulate(cfg, times)
    sim_s = time.perf_counter() - t0
    steps = run.info["steps"]
    print(f"MuJoCo {mujoco.__version__}, GL platform {gl.configure()}, timestep {run.info['timestep'] * 1e3:.4f} ms")
    print(f"simulation: {steps} steps ({steps * run.info['timestep']:.2f} s simulated) in {sim_s:.2f} s "
          f"= {steps / sim_s:,.0f} steps/s (incl. model build and recording)")
    poses = run.poses()
    for w, h in ((640, 360), (1280, 720)):
        cfg_wh = config(w, h)
        r = get_renderer("mujoco")
        try:
            r.render(cfg_wh, {k: (p[:1], q[:1]) for k, (p, q) in poses.items()})  # warm-up: context + textures
            for passes in (("rgb", "depth", "instance"), ("rgb",)):
                t0 = time.perf_counter()
                n = 0
                for _ in r.frames(cfg_wh, poses, passes=passes):
                    n += 1
                dt = time.perf_counter() - t0
                print(f"render {w}x{h} {'+'.join(passes):<20} {n} frames in {dt:6.2f} s = {n / dt:6.2f} frames/s")
        finally:
            r.close()


if __name__ == "__main__":
    main()
