"""Process pools whose workers die with their driver.

A `ProcessPoolExecutor` worker waits on a queue whose write end it holds itself, so it never sees
the driver go away: after a `kill -9` of `orchard-build` or `orchard-eval` the workers stay alive,
idle, holding their memory. Every pool of the project is made here; each worker runs a watchdog
thread that notices when its parent process is gone, interrupts the task it is running (so its
`finally` / `except` cleanup runs, e.g. a half-written staging directory is removed) and exits.

An interruption raised at an arbitrary bytecode can leave the interpreter unable to finish that
cleanup: one that lands inside an import leaves the import lock held, and the next thread to import
waits forever. So a task also registers what it would leave behind (`removed_if_abandoned`), and a
worker whose task has not returned `GRACE_S` after the interruption removes it itself and exits.
"""
from __future__ import annotations

import multiprocessing
import os
import shutil   # imported here, not in the watchdog: an import there could wait on a leaked lock
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

POLL_S = 0.5      # how often a worker looks for its parent
GRACE_S = 15.0    # how long an interrupted task may spend cleaning up before the worker exits anyway

_ORPHANED = threading.Event()  # set in a worker once its driver is gone
_ABANDONED: set[str] = set()   # directories the running task would leave half-written (GIL-atomic set ops)


@contextmanager
def removed_if_abandoned(path: str | Path) -> Iterator[None]:
    """While the block runs, `path` (a directory the block writes and, on success, moves away) is
    removed by the worker itself should its driver die and the interrupted block not return."""
    _ABANDONED.add(str(path))
    try:
        yield
    finally:
        _ABANDONED.discard(str(path))


class _OrphanAwarePool(ProcessPoolExecutor):
    """Runs every task through `_run_task`, so that a worker whose driver died neither starts a task
    still waiting in the call queue nor lingers after the interrupted one has cleaned up."""

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(_run_task, fn, args, kwargs)


def process_pool(jobs: int, initializer: Callable[..., None] | None = None,
                 initargs: Sequence[Any] = ()) -> ProcessPoolExecutor:
    """A spawn-context pool of `jobs` workers that exit when this process dies."""
    # spawn, never fork: the parent may hold an OpenGL (llvmpipe) context, a server fixture's or a
    # BLAS pool's threads, whose locks a forked child would inherit held and then hang on
    return _OrphanAwarePool(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init, initargs=(os.getpid(), initializer, tuple(initargs)))


def _init(parent_pid: int, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="orchard-parent-watch", daemon=True).start()
    if initializer is not None:
        initializer(*initargs)


def _run_task(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    if _ORPHANED.is_set():  # a queued task of a dead driver: starting it would only leave debris
        raise RuntimeError("the process that submitted this task has exited")
    try:
        return fn(*args, **kwargs)
    finally:
        if _ORPHANED.is_set():  # the task's own cleanup has run; nobody will read its result
            os._exit(1)


def _watch_parent(parent_pid: int) -> None:
    # an orphan is re-parented (to init or a subreaper), so its parent pid changes
    while os.getppid() == parent_pid:
        time.sleep(POLL_S)
    _ORPHANED.set()
    # nobody reads this worker's stderr any more; keep the interrupted task's traceback off the terminal
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    # a real SIGINT to the main thread: unlike a simulated one it also breaks a blocking sleep or read
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
    time.sleep(GRACE_S)
    # the task did not return (its cleanup is stuck or still running): remove its debris, then go
    for path in list(_ABANDONED):
        shutil.rmtree(path, ignore_errors=True)
    os._exit(1)
