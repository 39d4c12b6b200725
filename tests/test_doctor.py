"""`orchard-build doctor` / `orchard-eval doctor` on this machine: every capability tried for real, a
broken GL backend, a judge endpoint and a Label Studio server (local stand-ins speaking HTTP), a full disk,
the published apple_pi package; secrets never reach the output."""
import json
import threading
from collections import namedtuple
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from orchard_build import doctor as D
from orchard_build.cli import main as build_cli
from orchard_eval.cli import main as eval_cli
from tests.test_apple_pi_prompts import stand_in

JUDGE_KEY = "sk-doctor-test-0123456789"
LS_TOKEN = "ls-doctor-token-9876"
ENV = ("ORCHARD_JUDGE_API_KEY", "OPENAI_API_KEY", "ORCHARD_JUDGE_BASE_URL", "OPENAI_BASE_URL", "ORCHARD_JUDGE_MODEL",
       "LABEL_STUDIO_URL", "LABEL_STUDIO_API_KEY")


@pytest.fixture
def clean_env(monkeypatch):
    for e in ENV:
        monkeypatch.delenv(e, raising=False)
    return monkeypatch


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _send(self, code, doc):
        body = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        auth = self.headers.get("Authorization", "")
        if self.path == "/v1/models":
            if auth == f"Bearer {JUDGE_KEY}":
                return self._send(200, {"object": "list", "data": [{"id": "judge-model"}, {"id": "other"}]})
            return self._send(401, {"error": {"message": f"bad key {auth}"}})
        if self.path == "/health":
            return self._send(200, {"status": "UP"})
        if self.path == "/api/current-user/whoami":
            if auth == f"Token {LS_TOKEN}":
                return self._send(200, {"id": 1, "email": "annotator@example.org"})
            return self._send(401, {"detail": "Invalid token."})
        return self._send(404, {})


@pytest.fixture(scope="module")
def server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


def _by_name(checks):
    return {c.name: c for c in checks}


def test_the_whole_report_on_this_machine(clean_env, tmp_path, capsys):
    assert build_cli(["doctor", "--json", "--out", str(tmp_path / "orchard")]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["default_path_works"] is True and doc["partial"] is False
    checks = {c["name"]: c for c in doc["checks"]}
    for name in ("render: egl", "render: osmesa", "render (build)", "video: H.264", "fonts", "ocr (programmatic judge)",
                 "judge endpoint (--judge openai)", "label studio (annotate)", "apple_pi (--templates apple-pi)",
                 "isaac sim (--backend isaac)", "usd-core (export-usd)", "newton (optional)", "ray (optional)", "disk"):
        assert name in checks, name
    assert all(c["status"] in ("ok", "missing", "broken") and c["detail"] for c in checks.values())
    assert {n for n, c in checks.items() if c["required"]} == {"render (build)", "video: H.264", "fonts", "disk"}
    assert all(checks[n]["status"] == "ok" for n in ("render (build)", "video: H.264", "fonts", "disk"))
    assert checks["judge endpoint (--judge openai)"]["status"] == "missing"       # nothing configured
    assert checks["label studio (annotate)"]["status"] == "missing"
    assert all(c["fix"] for c in checks.values() if c["status"] != "ok")
    # the same checks from the evaluator's command line, as text
    assert eval_cli(["doctor", "--out", str(tmp_path)]) == 0
    text = capsys.readouterr().out
    assert "default path: works" in text and "render (build)" in text and "fix: " in text


def test_a_gl_backend_that_does_not_exist(clean_env, capsys):
    clean_env.setenv("MUJOCO_GL", "nonexistent")
    assert build_cli(["doctor", "--only", "render"]) == 1
    text = capsys.readouterr().out
    line = next(ln for ln in text.splitlines() if "render (build)" in ln)
    assert line.startswith("broken") and "nonexistent" in line
    assert "unset it" in text and "cannot work (render (build))" in text
    clean_env.setenv("MUJOCO_GL", "egl")
    checks = _by_name(D.run_checks(only=("render",)))
    assert checks["render (build)"].status == "ok" and "MUJOCO_GL=egl" in checks["render (build)"].detail


def test_judge_endpoint(clean_env, server, capsys):
    clean_env.setenv("ORCHARD_JUDGE_BASE_URL", server + "/v1")
    clean_env.setenv("ORCHARD_JUDGE_MODEL", "judge-model")
    clean_env.setenv("ORCHARD_JUDGE_API_KEY", JUDGE_KEY)
    c = D.check_judge()[0]
    assert c.status == "ok" and "'judge-model' listed" in c.detail and "ORCHARD_JUDGE_API_KEY" in c.detail
    clean_env.setenv("ORCHARD_JUDGE_API_KEY", JUDGE_KEY[::-1])
    c = D.check_judge()[0]
    assert c.status == "broken" and "rejected the key" in c.detail
    assert eval_cli(["doctor", "--only", "judge", "--json"]) == 0      # not part of the default path
    out = capsys.readouterr().out
    assert JUDGE_KEY not in out and JUDGE_KEY[::-1] not in out and "rejected the key" in out
    clean_env.setenv("ORCHARD_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens on the discard port
    c = D.check_judge(timeout=3)[0]
    assert c.status == "broken" and "cannot reach" in c.detail and JUDGE_KEY[::-1] not in c.detail + c.fix
    clean_env.delenv("ORCHARD_JUDGE_MODEL")
    clean_env.setenv("ORCHARD_JUDGE_BASE_URL", server + "/v1")
    clean_env.setenv("ORCHARD_JUDGE_API_KEY", JUDGE_KEY)
    c = D.check_judge()[0]
    assert c.status == "missing" and "ORCHARD_JUDGE_MODEL" in c.fix


def test_label_studio(clean_env, server, capsys):
    assert D.check_label_studio()[0].status == "missing"
    c = D.check_label_studio(server)[0]
    assert c.status == "missing" and "LABEL_STUDIO_API_KEY" in c.detail       # up, but no token to try
    clean_env.setenv("LABEL_STUDIO_API_KEY", LS_TOKEN)
    c = D.check_label_studio(server)[0]
    assert c.status == "ok" and "annotator@example.org" in c.detail
    clean_env.setenv("LABEL_STUDIO_URL", server)
    clean_env.setenv("LABEL_STUDIO_API_KEY", "wrong-" + LS_TOKEN)
    assert build_cli(["doctor", "--only", "label-studio"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("broken") and "rejected the API token" in out and LS_TOKEN not in out
    c = D.check_label_studio("http://127.0.0.1:9", timeout=3)[0]
    assert c.status == "broken" and "cannot reach" in c.detail


def test_too_little_disk(clean_env, tmp_path, monkeypatch):
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(D.shutil, "disk_usage", lambda p: usage(10**11, 10**11 - 3 * 10**8, 3 * 10**8))
    c = D.check_disk(tmp_path / "not" / "yet")[0]
    assert c.status == "broken" and c.required and "0.3 GB free" in c.detail and str(tmp_path) in c.detail
    assert build_cli(["doctor", "--only", "disk", "--out", str(tmp_path)]) == 1


def test_apple_pi_package(clean_env, tmp_path, monkeypatch):
    import sys

    def purge():
        for m in [m for m in sys.modules if m == "apple_pi" or m.startswith("apple_pi.")]:
            del sys.modules[m]
    purge()
    try:
        assert D.check_apple_pi()[0].status == "missing"
        monkeypatch.syspath_prepend(str(stand_in(tmp_path / "site")))
        purge()
        first = D.check_apple_pi()[0]
        assert first.status == "ok" and "prompt_version 1.0" in first.detail and not first.required
    finally:
        purge()
