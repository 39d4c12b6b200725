"""Evaluator timings on a synthetic 640×360 case (run on demand: `python benchmarks/bench_eval.py`).

Reports per-step wall time: reading a case, canonicalising a Deduction video at T_c and densely,
segmenting one in-scene frame and one objects-on-white answer, the objective metrics of one rollout.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from orchard_eval import synthetic as syn
from orchard_eval.canonical import canonical_deduction, dense_times
from orchard_eval.cases import load_dataset
from orchard_eval.objective import deduction_metrics, graphic_iou
from orchard_eval.segment import ClassicalSegmenter, context_for_case


def timed(label: str, fn, repeat: int = 1):
    t0 = time.perf_counter()
    for _ in range(repeat):
        out = fn()
    dt = (time.perf_counter() - t0) / repeat
    print(f"{label:<48s} {dt * 1000:9.1f} ms")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--width", type=int, default=640)
    ap.add_argument("--height", type=int, default=360)
    ap.add_argument("--duration", type=float, default=1.0)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sc = syn.Scene(width=args.width, height=args.height, duration=args.duration, target_time=args.duration / 2)
        cid = "UniversalGravitation/FreeFall/000000"
        timed("write synthetic case", lambda: syn.write_orchard_case(root, sc, cid,
                                                                      timestamps=(0.25, 0.5, 0.75, 1.0)))
        case = timed("load case", lambda: load_dataset(root, strict=True).cases[cid])
        video = root / "pred.mp4"
        n_phys = int(round(args.duration * 48))
        timed(f"write prediction ({n_phys + 1} frames, 1280×720)",
              lambda: syn.deduction_video(video, sc, n_physics=n_phys, size=(1280, 720)))
        pk = timed("canonical deduction at T_c", lambda: canonical_deduction(case, video, "video"))
        dn = timed("canonical deduction, dense", lambda: canonical_deduction(case, video, "video",
                                                                             times=dense_times(case)))
        seg = ClassicalSegmenter()
        ctx = context_for_case(case, "deduction")
        frame = pk.frames[0]
        seg.segment(frame, ctx)
        timed("segment one in-scene frame", lambda: seg.segment(frame, ctx), repeat=10)
        white = case.image("perception_graphic")
        timed("P-G mask IoU (segment + match)", lambda: graphic_iou(case, "perception_graphic", white), repeat=5)
        timed("deduction objective metrics (incl. velocity)", lambda: deduction_metrics(case, pk, dense=dn))


if __name__ == "__main__":
    main()
