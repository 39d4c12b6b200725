"""The APT chain benchmark on REAL built cases: `orchard-eval apt export` writes what a model is
shown, `apt score` reads replies tolerantly and scores them with one-to-one ±200 ms matching, and
`apt run` asks an OpenAI-compatible endpoint (a real HTTP server on 127.0.0.1), caches and resumes."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from orchard_eval.apt.export import chain_doc
from orchard_eval.apt.parse import parse_chain
from orchard_eval.apt.score import score_replies
from orchard_eval.cases import load_dataset, schema_errors
from orchard_eval.cli import main as cli
from orchard_eval.media import read_image

REPO = Path(__file__).resolve().parents[1]
CONFIGS = ["tests/fixtures/scenes/free_fall/000000.yaml", "tests/fixtures/scenes/perfectly_elastic_collision/000000.yaml"]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    pytest.importorskip("mujoco")
    ds = tmp_path_factory.mktemp("apt") / "orchard"
    exe = shutil.which("orchard-build")
    cmd = [exe] if exe else [sys.executable, "-c", "import sys; from orchard_build.cli import main; sys.exit(main())"]
    proc = subprocess.run(cmd + ["--config", *[str(REPO / c) for c in CONFIGS], "--out", str(ds), "--no-progress"],
                          env=dict(os.environ, ORCHARD_NO_PROGRESS="1"), cwd=REPO, capture_output=True, text=True,
                          timeout=300)
    if not (ds / "dataset.json").is_file():
        pytest.fail(f"orchard-build built nothing: {(proc.stderr or proc.stdout)[-300:]}")
    cases = [c for _, c in sorted(load_dataset(ds).cases.items())]
    assert len(cases) == 2 and all(c.events for c in cases)
    return ds, cases


@pytest.fixture(scope="module")
def exported(dataset, tmp_path_factory):
    ds, cases = dataset
    out = tmp_path_factory.mktemp("apt_export") / "x"
    assert cli(["apt", "export", "--cases", str(ds), "--out", str(out), "--no-progress"]) == 0
    return out


def gt_replies(cases, shift_ms=0, fmt=json.dumps):
    return {c.case_id: fmt([dict(d, t_ms=d["t_ms"] + shift_ms) for d in chain_doc(c.case_id, c.events)["transitions"]])
            for c in cases}


def test_export_writes_what_a_model_is_shown(dataset, exported):
    ds, cases = dataset
    manifest = json.loads((exported / "apt_manifest.json").read_text())
    assert schema_errors(manifest, "apt_manifest.schema.json") == []
    assert [c["case_id"] for c in manifest["cases"]] == [c.case_id for c in cases]
    for case in cases:
        folder = exported / "cases" / case.case_id
        req = json.loads((folder / "request.json").read_text())
        gt = json.loads((folder / "gt_chain.json").read_text())
        assert schema_errors(req, "apt_request.schema.json") == [] and schema_errors(gt, "apt_chain.schema.json") == []
        assert len(req["frames"]) == 16 and req["frames"][0]["t_ms"] == 0
        times = [f["t_ms"] for f in req["frames"]]
        assert times == sorted(times) and times[-1] == round((case.n_gt_frames() - 1) / case.gt_fps * 1000)
        assert all(f["marker"] == f"[Frame {k + 1}/16, t={f['t_ms']}ms]" for k, f in enumerate(req["frames"]))
        img = read_image(folder / req["frames"][5]["file"])
        assert img.shape[1] == 640 and img.std() > 1.0          # a real, scaled-down frame
        assert (folder / "video.mp4").read_bytes() == (case.path / case.extra["artifacts"]["video"]).read_bytes()
        assert [t["type"] for t in gt["transitions"]] == [e.type for e in case.events]
        for t in ("landing", "projectile_apex", "elastic_rebound"):   # every type is defined in the prompt
            assert f"- {t} (" in req["prompt"]


def test_export_resumes_and_refuses_a_foreign_folder(dataset, exported, tmp_path):
    ds, cases = dataset
    req = exported / "cases" / cases[0].case_id / "request.json"
    before = req.stat().st_mtime_ns
    shutil.rmtree(exported / "cases" / cases[1].case_id)
    assert cli(["apt", "export", "--cases", str(ds), "--out", str(exported), "--no-progress"]) == 0
    assert req.stat().st_mtime_ns == before                       # the finished case was skipped
    assert (exported / "cases" / cases[1].case_id / "gt_chain.json").is_file()
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "thesis.tex").write_text("keep me")
    assert cli(["apt", "export", "--cases", str(ds), "--out", str(foreign), "--no-progress"]) == 2
    assert [p.name for p in foreign.iterdir()] == ["thesis.tex"]


def test_scores_gt_shift_missing_and_reversed(dataset):
    _, cases = dataset
    n_gt = sum(len(c.events) for c in cases)
    rep = score_replies(cases, gt_replies(cases))
    assert rep["overall"]["f1"] == 1.0 and rep["median_dt_ms"] == pytest.approx(0.0, abs=1.0)
    assert rep["type_accuracy"] == 1.0 and rep["mean_gt_per_clip"] == n_gt / 2
    assert score_replies(cases, gt_replies(cases, 300))["overall"]["f1"] == 0.0
    assert score_replies(cases, gt_replies(cases, 150))["overall"]["f1"] == 1.0
    # one transition left out: precision stays 1, recall loses exactly one of n
    replies = gt_replies(cases, fmt=lambda x: x)
    victim = cases[0].case_id
    replies[victim] = replies[victim][1:]
    o = score_replies(cases, replies)["overall"]
    assert (o["precision"], o["tp"], o["n_gt"]) == (1.0, n_gt - 1, n_gt)
    # the same chain listed in reverse order (times kept) is the same chain
    rev = {k: list(reversed(v)) for k, v in gt_replies(cases, fmt=lambda x: x).items()}
    assert score_replies(cases, rev)["overall"]["f1"] == 1.0
    # types in reverse order on the GT times: only those whose type sits within 200 ms of itself survive
    case = max(cases, key=lambda c: len({round(e.t, 2) for e in c.events}))   # the one spread out in time
    docs = chain_doc(case.case_id, case.events)["transitions"]
    swapped = [dict(d, type=r["type"]) for d, r in zip(docs, reversed(docs))]
    expect = sum(1 for d, s in zip(docs, swapped)
                 if any(g["type"] == s["type"] and abs(g["t_ms"] - s["t_ms"]) <= 200 for g in docs))
    got = score_replies([case], {case.case_id: swapped})["overall"]["tp"]
    assert got <= expect and got < len(docs)
    # no reply at all: counted as missing, every transition missed
    rep = score_replies(cases, {})
    assert rep["n_missing"] == 2 and rep["overall"]["recall"] == 0.0


def test_tolerant_parsing_and_unknown_types(dataset):
    _, cases = dataset
    case = cases[0]
    chain = chain_doc(case.case_id, case.events)["transitions"]
    text = json.dumps(chain)
    variants = {
        "prose": f"Sure! Here is the chain:\n{text}\nHope this helps.",
        "fence": f"```json\n{text}\n```",
        "wrapped": json.dumps({"transitions": chain}),
        "trailing": text[:-1] + ",]",
        "seconds": json.dumps([{"type": d["type"], "t": d["t_ms"] / 1000} for d in chain]),
    }
    for name, reply in variants.items():
        rep = score_replies([case], {case.case_id: reply})
        assert rep["overall"]["f1"] == 1.0, name
    torn = text[: text.rindex("{") + 5]                    # cut inside the last record
    p = parse_chain(torn)
    assert len(p.transitions) == len(chain) - 1 and p.repaired
    rep = score_replies([case], {case.case_id: json.dumps(chain + [{"type": "bounce", "t_ms": 10}])})
    assert rep["unknown_types"] == {"bounce": 1} and rep["overall"]["precision"] < 1.0
    assert parse_chain("I cannot tell.").transitions == []


def test_frame_grid_ceiling_falls_with_fewer_frames(dataset):
    _, cases = dataset
    full = score_replies(cases, {}, n_frames=16)["ceiling"]["recall"]
    sparse = score_replies(cases, {}, n_frames=2)["ceiling"]["recall"]
    assert 0.0 <= sparse < full <= 1.0


def test_score_cli_writes_a_valid_report(dataset, tmp_path):
    ds, cases = dataset
    replies = tmp_path / "replies.jsonl"
    replies.write_text("".join(json.dumps({"case_id": k, "reply": v}) + "\n" for k, v in gt_replies(cases).items()))
    assert cli(["apt", "score", "--cases", str(ds), "--predictions", str(replies), "--out", str(tmp_path / "r")]) == 0
    rep = json.loads((tmp_path / "r" / "apt_report.json").read_text())
    assert schema_errors(rep, "apt_report.schema.json") == [] and rep["overall"]["f1"] == 1.0
    assert "| model | 100.0 | 100.0 | 100.0 |" in (tmp_path / "r" / "apt_report.md").read_text()
    replies.write_text('{"case_id": "x"\n')
    assert cli(["apt", "score", "--cases", str(ds), "--predictions", str(replies), "--out", str(tmp_path / "r2")]) == 2


def test_run_against_a_loopback_endpoint(dataset, exported, tmp_path, monkeypatch):
    pytest.importorskip("openai")
    from chat_server import ChatServer
    from orchard_eval.apt.vlm import ask_all
    from orchard_eval.apt.score import score_files

    ds, cases = dataset
    by_prompt = {}
    for c in cases:
        req = json.loads((exported / "cases" / c.case_id / "request.json").read_text())
        by_prompt[req["prompt"]] = "```json\n" + gt_replies([c])[c.case_id] + "\n```"

    def answer(body):
        content = body["messages"][0]["content"]
        assert [p["type"] for p in content[:3]] == ["text", "text", "image_url"]
        assert content[1]["text"].startswith("[Frame 1/16, t=0ms]")
        assert content[2]["image_url"]["url"].startswith("data:image/png;base64,")
        return by_prompt[content[0]["text"]]

    server = ChatServer()
    monkeypatch.setenv("ORCHARD_JUDGE_API_KEY", "sk-test-not-a-secret")
    try:
        server.script = [("status", 500)]            # the first request fails and is retried
        server.default = ("ok", answer)
        out = tmp_path / "run"
        res = ask_all(exported, out, "vlm-1", server.base_url, backoff=0.01)
        assert res["asked"] == 2 and not res["failed"] and len(server.requests) == 3
        rep = score_files(ds, res["replies"], out, model="vlm-1")
        assert rep["overall"]["f1"] == 1.0
        # a rerun asks nothing: every clip already has its reply
        again = ask_all(exported, out, "vlm-1", server.base_url)
        assert again["asked"] == 0 and len(server.requests) == 3
        assert len((out / "replies.jsonl").read_text().splitlines()) == 2
        # a new run folder with the same cache answers from the cache
        third = ask_all(exported, tmp_path / "run2", "vlm-1", server.base_url, cache_dir=out / "cache")
        assert third["cached"] == 2 and len(server.requests) == 3
        # and through the CLI, against the live server
        assert cli(["apt", "run", "--cases", str(ds), "--export", str(exported), "--base-url", server.base_url,
                    "--model", "vlm-2", "--out", str(tmp_path / "run3"), "--no-progress"]) == 0
        assert json.loads((tmp_path / "run3" / "apt_report.json").read_text())["overall"]["f1"] == 1.0
        assert "sk-test-not-a-secret" not in "".join(p.read_text() for p in (tmp_path / "run3").rglob("*.json*"))
    finally:
        server.close()
