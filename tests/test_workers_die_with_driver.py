"""Pool workers notice a driver killed with SIGKILL, clean up the task they were running and exit:
the pool itself, `orchard-eval run --jobs 2` and `orchard-build --jobs 2`."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from orchard_eval import synthetic as syn
from orchard_eval.cli import main

REPO = Path(__file__).resolve().parents[1]
ENV = dict(os.environ, PYTHONPATH=str(REPO))


def _children(pid: int) -> list[int]:
    kids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            kids.append(int(stat.parent.name))
    return kids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _wait(cond, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _kill_and_expect_orphans_gone(proc: subprocess.Popen, workers: list[int], timeout: float = 30) -> None:
    assert workers, "the driver had started no worker"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _wait(lambda: not any(_alive(w) for w in workers), timeout, f"workers {workers} to exit")


pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")


def test_pool_workers_clean_up_and_exit_when_the_driver_dies(tmp_path):
    driver = tmp_path / "driver.py"
    driver.write_text(textwrap.dedent(f"""
        import os, sys, time
        from pathlib import Path
        from orchard_build.pool import process_pool

        MARK = Path({str(tmp_path)!r})

        def slow(i):
            (MARK / f"started-{{os.getpid()}}").touch()
            try:
                time.sleep(600)
            finally:
                (MARK / f"cleaned-{{os.getpid()}}").touch()

        if __name__ == "__main__":
            with process_pool(2) as pool:
                futs = [pool.submit(slow, i) for i in range(2)]
                time.sleep(600)
    """))
    proc = subprocess.Popen([sys.executable, str(driver)], env=ENV, stderr=subprocess.DEVNULL)
    _wait(lambda: len(list(tmp_path.glob("started-*"))) == 2, 60, "both tasks to start")
    workers = [int(p.name.split("-")[1]) for p in tmp_path.glob("started-*")]
    _kill_and_expect_orphans_gone(proc, workers)
    # the interrupted tasks ran their cleanup before the workers went
    assert sorted(p.name.split("-")[1] for p in tmp_path.glob("cleaned-*")) == sorted(map(str, workers))


def test_a_worker_whose_interrupted_task_does_not_return_removes_its_debris_and_exits(tmp_path):
    """The task swallows the interruption and goes on (as one whose cleanup waits on a lock an
    interrupted import left held would): after the grace period the worker removes the directory
    the task registered and exits anyway."""
    driver = tmp_path / "driver.py"
    debris = tmp_path / "stage"
    driver.write_text(textwrap.dedent(f"""
        import os, time
        from pathlib import Path
        from orchard_build.pool import process_pool, removed_if_abandoned

        def stuck(path):
            Path(path).mkdir()
            with removed_if_abandoned(path):
                (Path(path) / "half-written").touch()
                while True:
                    try:
                        time.sleep(600)
                    except KeyboardInterrupt:
                        pass

        if __name__ == "__main__":
            with process_pool(1) as pool:
                pool.submit(stuck, {str(debris)!r})
                time.sleep(600)
    """))
    proc = subprocess.Popen([sys.executable, str(driver)], env=ENV, stderr=subprocess.DEVNULL)
    _wait(lambda: (debris / "half-written").exists(), 60, "the task to start")
    workers = [w for w in _children(proc.pid) if "resource_tracker" not in Path(f"/proc/{w}/cmdline").read_text()]
    _kill_and_expect_orphans_gone(proc, workers)
    assert not debris.exists()


def test_orchard_eval_run_workers_exit_when_the_driver_is_killed(tmp_path):
    cids = ["UniversalGravitation/FreeFall/000000", "UniversalGravitation/ProjectileMotion/000001",
            "ConservationOfMomentum/PerfectlyElasticCollision/000002", "NewtonsFirstLaw/UniformLinearMotion/000003"]
    tasks = ["free_fall", "projectile_motion", "perfectly_elastic_collision", "uniform_linear_motion"]
    ds = tmp_path / "ds"
    for k, (cid, task) in enumerate(zip(cids, tasks)):
        syn.write_orchard_case(ds, syn.Scene(width=96, height=64, background_seed=k), cid, task=task)
    syn.write_index(ds, cids, "orchard")
    pred = tmp_path / "pred"
    assert main(["baseline", "--kind", "oracle", "--cases", str(ds), "--out", str(pred)]) == 0
    out = tmp_path / "res"
    proc = subprocess.Popen([sys.executable, "-m", "orchard_eval.cli", "run", "--judge", "none", "--jobs", "2",
                             "--cases", str(ds), "--predictions", str(pred), "--out", str(out), "--no-progress"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # both pool workers up (the resource tracker is a child too)
    _wait(lambda: len(_children(proc.pid)) >= 3 or proc.poll() is not None, 60, "the pool to start")
    assert proc.poll() is None, "the run ended before it could be killed"
    workers = _children(proc.pid)
    _kill_and_expect_orphans_gone(proc, workers)


def test_orchard_build_workers_exit_and_leave_no_staging_when_the_driver_is_killed(tmp_path):
    configs = [REPO / "tests/fixtures/scenes/free_fall/000000.yaml", REPO / "tests/fixtures/scenes/free_fall/000001.yaml"]
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "orchard_build.cli", "--config", *map(str, configs),
                             "--scenes", str(REPO / "tests/fixtures/scenes"), "--materials", str(REPO / "scenes/materials.yaml"),
                             "--out", str(out), "--jobs", "2", "--force", "--no-progress"],
                            env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    staging = out / ".staging"
    _wait(lambda: len(list(staging.glob("case-*"))) >= 1 or proc.poll() is not None, 120, "a case to be staged")
    assert proc.poll() is None, "the build ended before it could be killed"
    workers = _children(proc.pid)
    _kill_and_expect_orphans_gone(proc, workers)
    # a worker interrupted mid-case removed its half-written staging directory
    assert not list(staging.glob("case-*"))


def test_an_interrupt_while_waiting_for_the_pass_writer_stops_it_before_the_stage_is_removed(tmp_path, monkeypatch):
    """The renderer is ahead of the encoder, so the SIGINT a worker's watchdog sends lands while the
    main thread waits for the writer thread; the writer must be stopped, not left writing masks into
    (and so recreating) the staging directory the build is about to remove."""
    import shutil
    import threading
    from types import SimpleNamespace

    import numpy as np

    from orchard_build import render_case

    n, h, w = 6, 16, 16

    class FastRenderer:
        def frames(self, cfg, poses):
            for _ in range(n):
                yield {"rgb": np.zeros((h, w, 3), np.uint8), "depth": np.zeros((h, w), np.float32),
                       "instance": np.zeros((h, w), np.uint8)}

    slow_png = render_case.write_png

    main = threading.main_thread().ident

    def write_png(path, mask):
        time.sleep(0.1)
        slow_png(path, mask)
        if Path(path).name == "0001.png":  # by now every frame is queued: the main thread waits in the writer
            signal.pthread_kill(main, signal.SIGINT)

    monkeypatch.setattr(render_case, "write_png", write_png)
    cfg = SimpleNamespace(timing=SimpleNamespace(n_frames=n, fps=30), camera=SimpleNamespace(height=h, width=w))
    stage = tmp_path / "case-x"
    stage.mkdir()

    class Interrupted(Exception):
        pass

    def raise_interrupted(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGINT, raise_interrupted)
    try:
        with pytest.raises(Interrupted):
            render_case._render_and_write_passes(FastRenderer(), cfg, None, stage)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert not any(t.name == "orchard-pass-writer" and t.is_alive() for t in threading.enumerate())
    written = len(list((stage / "gt" / "masks").glob("*.png")))
    assert 0 < written < n, "the interrupt came before any mask or after the last one"
    shutil.rmtree(stage)
    time.sleep(0.3)
    assert not stage.exists(), sorted(map(str, stage.rglob("*")))


def test_an_interrupt_before_the_first_frame_does_not_leave_the_pass_writer_waiting(tmp_path):
    """The encoder takes the end marker at once and fails on an empty stream; its drain must not
    then wait for a second marker that never comes (the main thread would wait on it forever)."""
    import threading
    from types import SimpleNamespace

    from orchard_build import render_case

    class Interrupted(Exception):
        pass

    class DeadRenderer:
        def frames(self, cfg, poses):
            raise Interrupted
            yield  # a generator, as a streaming renderer's frames()

    cfg = SimpleNamespace(timing=SimpleNamespace(n_frames=4, fps=30), camera=SimpleNamespace(height=8, width=8))
    outcome = []

    def run():
        try:
            render_case._render_and_write_passes(DeadRenderer(), cfg, None, tmp_path / "case-x")
        except Interrupted:
            outcome.append("interrupted")

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(10)
    assert outcome == ["interrupted"]
    assert not any(w.name == "orchard-pass-writer" and w.is_alive() for w in threading.enumerate())
