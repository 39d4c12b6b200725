"""A real Label Studio server for the tests: started once per session on 127.0.0.1, stopped in `finally`.

Where the server comes from: `$ORCHARD_LABEL_STUDIO` (path to a `label-studio` executable, e.g. one in
its own virtual environment), else `.venv-labelstudio/` in the repository (made by .ci/setup), else
`label-studio` on PATH, else the `label_studio` module of this
interpreter. Without any of them the tests that need it are skipped.

Start-up follows the measured facts of docs/real-world.md: an absolute data directory, a fixed admin
user and legacy token (they only apply when the organisation is first created), local-file serving
under a document root, telemetry off, a port picked here (the server silently moves to another one if
its port is busy). A fresh data directory costs ~40 s of database migrations; the migrated directory
is cached per label-studio version under `$ORCHARD_LS_CACHE` (default ~/.cache/orchard/label-studio)
and copied for each session (~5 s start).
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ADMIN_EMAIL = "admin@orchard.test"
ADMIN_PASSWORD = "orchard-admin-pw-1"
ADMIN_TOKEN = "orchard0test0token0abcdef1234"
START_TIMEOUT_S = 240.0


@dataclass
class LabelStudioServer:
    url: str
    token: str
    document_root: Path
    data_dir: Path
    start_seconds: float
    cold: bool
    version: str


def find_label_studio() -> list[str] | None:
    """Command that runs the label-studio CLI, or None when it is not installed."""
    env = os.environ.get("ORCHARD_LABEL_STUDIO")
    if env:
        return [env] if Path(env).is_file() else None
    local = Path(__file__).resolve().parents[1] / ".venv-labelstudio" / "bin" / "label-studio"
    if local.is_file():  # where .ci/setup installs the server (its own venv: it pins older numpy/opencv)
        return [str(local)]
    exe = shutil.which("label-studio")
    if exe:
        return [exe]
    if importlib.util.find_spec("label_studio") is not None:
        return [sys.executable, "-m", "label_studio.server"]
    return None


def label_studio_version(cmd: list[str]) -> str:
    python = Path(cmd[0]).with_name("python") if cmd[0] != sys.executable else Path(sys.executable)
    if not python.exists():
        python = Path(sys.executable)
    out = subprocess.run([str(python), "-c", "import importlib.metadata as m; print(m.version('label-studio'))"],
                         capture_output=True, text=True, timeout=60)
    return out.stdout.strip() or "unknown"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(data_dir: Path, doc_root: Path) -> dict[str, str]:
    env = dict(os.environ)
    for key in list(env):  # no inherited Label Studio settings or API keys leak into the test server
        if key.startswith("LABEL_STUDIO_"):
            env.pop(key)
    env.update({
        "LABEL_STUDIO_BASE_DATA_DIR": str(data_dir),
        "LABEL_STUDIO_USERNAME": ADMIN_EMAIL,
        "LABEL_STUDIO_PASSWORD": ADMIN_PASSWORD,
        "LABEL_STUDIO_USER_TOKEN": ADMIN_TOKEN,
        "LABEL_STUDIO_ENABLE_LEGACY_API_TOKEN": "true",
        "LABEL_STUDIO_DISABLE_SIGNUP_WITHOUT_LINK": "true",
        "LABEL_STUDIO_LOCAL_FILES_SERVING_ENABLED": "true",
        "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT": str(doc_root),
        "SENTRY_DSN": "", "FRONTEND_SENTRY_DSN": "", "LATEST_VERSION_CHECK": "false", "COLLECT_ANALYTICS": "false",
    })
    return env


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return json.loads(r.read().decode()).get("status") == "UP"
    except (OSError, ValueError):
        return False


def _start(cmd: list[str], data_dir: Path, doc_root: Path, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    fh = open(log, "ab")
    proc = subprocess.Popen([*cmd, "start", "--no-browser", "--internal-host", "127.0.0.1", "--port", str(port)],
                            env=_env(data_dir, doc_root), stdout=fh, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, cwd=str(data_dir))
    fh.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"label-studio exited with {proc.returncode}; log: {log}\n{log.read_text()[-3000:]}")
        if _healthy(url):
            return proc, url
        time.sleep(0.5)
    stop(proc)
    raise RuntimeError(f"label-studio did not answer /health within {START_TIMEOUT_S:.0f} s; log: {log}")


def stop(proc: subprocess.Popen) -> None:
    """SIGINT to the server's process group, then SIGTERM, then SIGKILL if it lingers."""
    for sig, wait in ((signal.SIGINT, 15), (signal.SIGTERM, 10), (signal.SIGKILL, 10)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


def cache_root() -> Path:
    return Path(os.environ.get("ORCHARD_LS_CACHE", Path.home() / ".cache" / "orchard" / "label-studio"))


def run_server(cmd: list[str], workdir: Path):
    """Context-manager body: start (from the cached migrated data dir when there is one), yield, stop."""
    version = label_studio_version(cmd)
    cached = cache_root() / version
    data_dir = workdir / "ls-data"
    doc_root = workdir / "documents"
    doc_root.mkdir(parents=True, exist_ok=True)
    cold = not (cached / "label_studio.sqlite3").is_file()
    if not cold:
        shutil.copytree(cached, data_dir)
    else:
        data_dir.mkdir(parents=True)
    t0 = time.monotonic()
    proc, url = _start(cmd, data_dir, doc_root, workdir / "label-studio.log")
    cold_seconds = time.monotonic() - t0
    if cold:  # migrations done: stop, keep a copy of the idle database for later sessions, restart
        stop(proc)
        try:
            cached.parent.mkdir(parents=True, exist_ok=True)
            staged = cached.with_name(cached.name + f".tmp-{os.getpid()}")
            shutil.rmtree(staged, ignore_errors=True)
            shutil.copytree(data_dir, staged, ignore=shutil.ignore_patterns("media", "export", "*.log"))
            if cached.exists():
                shutil.rmtree(staged, ignore_errors=True)
            else:
                os.replace(staged, cached)
        except OSError:
            pass
        proc, url = _start(cmd, data_dir, doc_root, workdir / "label-studio.log")
    try:
        yield LabelStudioServer(url=url, token=ADMIN_TOKEN, document_root=doc_root, data_dir=data_dir,
                                start_seconds=cold_seconds, cold=cold, version=version)
    finally:
        stop(proc)
