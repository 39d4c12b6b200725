"""Whole-case build time against raw render time (issue target: whole case ≤ 1.3 × raw render).

    python benchmarks/bench_build.py [--repeat 1]

For one 4 s, 24 fps case (97 frames) at 640×360 and at 1280×720 it prints: raw renderer frames/s
for rgb + depth + instance over the case's own poses, the whole-case build wall time, their ratio,
and where the build's time goes.
"""
from __future__ import annotations

import argparse
import copy
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchard_build.engines import gl  # noqa: E402

gl.configure()

from orchard_build import render_case  # noqa: E402
from orchard_build.build import PreparedCase, build_case  # noqa: E402
from orchard_build.config import resolve_config  # noqa: E402
from orchard_build.engines import get_backend, get_renderer  # noqa: E402
from orchard_build.materials import load_materials  # noqa: E402
from orchard_build.mechanics import solve  # noqa: E402
from orchard_build.resources import scenes_dir  # noqa: E402


def make_case(width: int, height: int, tmp: Path) -> PreparedCase:
    fixture = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "scenes" / "uniform_linear_motion" / "000000.yaml"
    raw = yaml.safe_load(fixture.read_text())
    raw = copy.deepcopy(raw)
    raw["timing"] = {"fps": 24, "duration": 4.0, "target_time": 2.0}
    raw["objects"][0]["placement"]["surface"]["velocity"] = [0.45, 0.0]
    raw["camera"]["resolution"] = [width, height]
    path = tmp / f"bench_{width}.yaml"
    path.write_text(yaml.safe_dump(raw))
    cfg = resolve_config(raw, path, load_materials(scenes_dir() / "materials.yaml"), config_bytes=path.read_bytes())
    return PreparedCase(path, cfg, solve(cfg))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for width, height in ((640, 360), (1280, 720)):
            case = make_case(width, height, tmp)
            cfg = case.config
            run = get_backend("mujoco").simulate(cfg, cfg.timing.frame_times)
            renderer = get_renderer("mujoco")
            t0 = time.perf_counter()
            renderer.render(cfg, run.poses())
            raw_render = time.perf_counter() - t0
            renderer.close()
            best = None
            for _ in range(args.repeat):
                render_case.TIMINGS.clear()
                t0 = time.perf_counter()
                build_case(case, tmp / f"out{width}")
                total = time.perf_counter() - t0
                if best is None or total < best[0]:
                    best = (total, dict(render_case.TIMINGS))
            total, parts = best
            n = cfg.timing.n_frames
            print(f"{width}×{height}, {n} frames: raw render {raw_render:.2f} s ({n / raw_render:.1f} frames/s, "
                  f"rgb+depth+instance); whole case {total:.2f} s; ratio {total / raw_render:.2f}")
            print("   " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items()))


if __name__ == "__main__":
    main()
