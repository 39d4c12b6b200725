"""Throughput of `orchard-eval run` (prints figures; asserts nothing).

    python benchmarks/bench_eval_run.py [--cases DATASET] [--pred-size 1280x720] [--pred-seconds 5] [--judge NAME]

Without --cases a small synthetic 640×360 dataset is written. For every case a prediction directory is
written whose rollouts are all DISTINCT files (so the per-process cache never answers), shaped like
real model outputs: the answer videos and a Deduction video of `--pred-seconds` at 24 fps and
`--pred-size` (the GT motion resampled onto it). The script reports

* responses per second for each subtrack (one process; objective-only scoring unless `--judge`),
* for Deduction, our time against a pure PyAV decode of the same videos (decode + RGB conversion of
  every frame, nothing else),
* an extrapolation to the paper's load, 400 cases × 5 subtracks × 3 rollouts, on 2 cores
  (goals: ≤ 15 min; Deduction ≤ 2 × pure decode).

The one-process figures are a breakdown, not a throughput: onnxruntime and OpenCV use every core in
one process, so halving them for two cores counts the cores twice. With `--jobs N` the script also
runs `orchard-eval run --jobs N` itself (the pool of the real run, one library thread per worker)
twice on the same cases: the first model on a machine (an empty OCR store) and a second model whose
answers are new but whose references the store now holds. Their wall-clock times, per scored
response, give the extrapolation to trust; the pool's start (timed apart, a pool whose workers only
initialise) is paid once per run, so it is counted once, not once per slice of cases.
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from orchard_eval import synthetic as syn
from orchard_eval.baselines import encode_video
from orchard_eval.cases import SUBTRACK_SHORT, SUBTRACKS, load_dataset
from orchard_eval.run import Scorer, build_scorer


def pure_decode(path: Path) -> float:
    import av

    t0 = time.perf_counter()
    with av.open(str(path)) as c:
        for f in c.decode(c.streams.video[0]):
            f.to_ndarray(format="rgb24")
    return time.perf_counter() - t0


def make_predictions(ds_root: Path, pred: Path, size: tuple[int, int], seconds: float, rollouts: int,
                     shade: int = 0) -> None:
    """`shade` brightens every answer frame: another "model" whose answers no cache has seen."""
    import cv2

    ds = load_dataset(ds_root)
    syn.write_submission(pred, "video", rollouts, model="bench")
    for cid, case in ds.cases.items():
        n_gt = case.n_gt_frames()
        gt = case.gt_frames(range(n_gt))
        n_pred = int(round(seconds * 24))
        for r in range(rollouts):
            d = pred / "cases" / cid
            # answers: the references (or the input) as the last frame of a 2-s clip
            for st in SUBTRACKS[:4]:
                img = case.image(st) if case.has(st) else case.image("condition_frame")
                if img is None:
                    img = case.image("condition_frame")
                frames = [cv2.resize(img, size)] * 47 + [cv2.resize(np.clip(img.astype(int) + r + shade, 0, 255)
                                                                    .astype(np.uint8), size)]
                encode_video(d / st / f"rollout_{r:02d}.mp4", frames)
            # deduction: the GT motion resampled to n_pred physics frames at the prediction size
            frames = []
            for k in range(n_pred + 1):
                i = min(int(round(k / n_pred * (n_gt - 1))), n_gt - 1)
                f = cv2.resize(gt[i], size, interpolation=cv2.INTER_LINEAR)
                if r + shade:
                    f = np.clip(f.astype(np.int16) + r + shade, 0, 255).astype(np.uint8)
                frames.append(f)
            encode_video(d / "deduction" / f"rollout_{r:02d}.mp4", frames)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", help="dataset root (default: synthetic)")
    ap.add_argument("--pred-size", default="1280x720")
    ap.add_argument("--pred-seconds", type=float, default=5.0)
    ap.add_argument("--rollouts", type=int, default=2)
    ap.add_argument("--judge", default="none", help="judge to score with (default none: objective-only)")
    ap.add_argument("--shade", type=int, default=0,
                    help="brighten every answer by this many levels: answers new to the judge's OCR store, "
                         "whose references a previous run may hold (a second model's run)")
    ap.add_argument("--jobs", type=int, default=0,
                    help="also time the real run (`orchard-eval run --jobs N`) on the same answers (0: skip)")
    args = ap.parse_args()
    size = tuple(int(x) for x in args.pred_size.split("x"))
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        if args.cases:
            ds_root = Path(args.cases)
        else:
            ds_root = tmp / "ds"
            cids = ["UniversalGravitation/FreeFall/000000", "UniversalGravitation/ProjectileMotion/000001",
                    "NewtonsFirstLaw/UniformLinearMotion/000002"]
            for k, cid in enumerate(cids):
                sc = syn.Scene(width=640, height=360, duration=1.0, target_time=0.5, background_seed=k)
                syn.write_orchard_case(ds_root, sc, cid, timestamps=(0.25, 0.5, 0.75, 1.0))
            syn.write_index(ds_root, cids, "orchard")
        pred = tmp / "pred"
        t0 = time.perf_counter()
        make_predictions(ds_root, pred, size, args.pred_seconds, args.rollouts, args.shade)
        print(f"wrote predictions ({size[0]}×{size[1]}, Deduction {args.pred_seconds:g} s at 24 fps) "
              f"in {time.perf_counter() - t0:.1f} s")
        scorer: Scorer = build_scorer(str(ds_root), str(pred), args.judge, None, "paper", "classical")
        ds = scorer.dataset
        n_cases = len(ds.cases)
        per_st: dict[str, list[float]] = {st: [] for st in SUBTRACKS}
        decode_t: list[float] = []
        for cid in sorted(ds.cases):
            scorer.score(cid, "deduction", 0)   # warm the GT caches like a long run does …
            scorer.forget_answers()             # … but not the answer's own result, which is timed below
            for st in SUBTRACKS:
                for r in range(args.rollouts):
                    t = time.perf_counter()
                    rec = scorer.score(cid, st, r)
                    per_st[st].append(time.perf_counter() - t)
                    assert rec["valid"], rec["error"]
                    if st == "deduction":
                        decode_t.append(pure_decode(pred / "cases" / cid / "deduction" / f"rollout_{r:02d}.mp4"))
        mode = "objective-only" if args.judge == "none" else f"judge {args.judge}"
        print(f"\n{n_cases} cases × {args.rollouts} rollouts, one process, {mode}\n")
        print(f"{'subtrack':<22s}{'mean s/resp':>12s}{'resp/s':>10s}")
        for st in SUBTRACKS:
            m = statistics.mean(per_st[st])
            print(f"{st:<22s}{m:12.3f}{1 / m:10.1f}")
        ded, dec = statistics.mean(per_st["deduction"]), statistics.mean(decode_t)
        print(f"\nDeduction: ours {ded:.3f} s, pure PyAV decode {dec:.3f} s → ratio {ded / dec:.2f} (goal ≤ 2)")
        per_case = sum(statistics.mean(v) for v in per_st.values())
        total = 400 * 3 * per_case / 2
        print(f"one-process figures halved for 2 cores: 400 cases × 5 subtracks × 3 rollouts ≈ {total / 60:.1f} min "
              f"({per_case:.2f} s per case and rollout; libraries already use both cores here, so this is "
              f"optimistic)")
        if args.jobs > 0:
            pooled_runs(ds_root, pred, tmp, size, args, n_cases)


def pool_start(ds_root: Path, pred: Path, args, store: Path) -> float:
    """Seconds from asking for the run's pool to every worker ready (spawned, its scorer built, the
    judge's engines loaded by a first empty task) and shut down again."""
    from orchard_build.pool import process_pool
    from orchard_eval.run import _init_worker

    opts = {"cache_dir": str(store)} if args.judge == "programmatic" else {}
    spec = dict(cases=str(ds_root), predictions=str(pred), judge=args.judge, judge_options=opts, rule="paper",
                segmenter="classical", fuse_transitions=False)
    t0 = time.perf_counter()
    with process_pool(args.jobs, _init_worker, (spec,)) as pool:
        for fut in [pool.submit(_warm, args.judge) for _ in range(args.jobs)]:
            fut.result()
    return time.perf_counter() - t0


def _warm(judge: str) -> None:
    """In a worker: load what its first response would (the OCR engine for the programmatic judge)."""
    from orchard_eval.run import _work

    _work([])
    if judge == "programmatic":
        from orchard_eval.judging import ocr

        if ocr.available():
            ocr.engine()


def pooled_runs(ds_root: Path, pred: Path, tmp: Path, size: tuple[int, int], args, n_cases: int) -> None:
    """The real run's pool on the same cases: a first model (empty OCR store), then a second model's
    new answers against the store the first filled."""
    import json

    from orchard_eval.run import RunOptions, run_evaluation

    store = tmp / "store"
    second = tmp / "pred_second"
    make_predictions(ds_root, second, size, args.pred_seconds, args.rollouts, args.shade + 3)
    start = pool_start(ds_root, pred, args, store)
    print(f"\norchard-eval run --jobs {args.jobs} --judge {args.judge} on the same {n_cases} cases "
          f"({args.rollouts} rollouts each); the pool's start (spawning {args.jobs} workers, importing, "
          f"loading the scorer and its engines) takes {start:.1f} s, paid once per run: the "
          f"extrapolation counts it once\n")
    print(f"{'run':<34s}{'responses':>10s}{'wall s':>9s}{'400×5×3 min':>13s}   cpu s/response per subtrack")
    for label, answers in (("first model (empty OCR store)", pred), ("second model (store warm)", second)):
        out = tmp / f"run_{answers.name}"
        opts = {"cache_dir": str(store)} if args.judge == "programmatic" else {}
        t0 = time.perf_counter()
        res = run_evaluation(RunOptions(cases=str(ds_root), predictions=str(answers), out=str(out), judge=args.judge,
                                        judge_options=opts, jobs=args.jobs, progress=False))
        wall = time.perf_counter() - t0
        recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]
        scored = [r for r in recs if r["valid"]]
        cpu = {st: statistics.mean(r["elapsed_s"] for r in scored if r["subtrack"] == st) for st in SUBTRACKS
               if any(r["subtrack"] == st for r in scored)}
        full = start + max(wall - start, 0.0) / max(1, len(scored)) * 400 * 5 * 3
        print(f"{label:<34s}{len(scored):>10d}{wall:>9.1f}{full / 60:>13.1f}   "
              + "  ".join(f"{SUBTRACK_SHORT[st]} {v:.2f}" for st, v in cpu.items()))
        assert res.n_scored == len(recs)
    print("\n(goal: ≤ 15 min for 400 × 5 × 3 with --jobs 2 on 2 cores; the wall time includes the pool's start)")


if __name__ == "__main__":
    main()
