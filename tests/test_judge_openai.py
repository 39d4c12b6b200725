"""The OpenAI-compatible judge against a real HTTP server on 127.0.0.1 (started here, speaking the
chat-completions protocol): injected 500s, 429s, timeouts, malformed and truncated JSON, the cache,
and that the API key never leaks into cache files or results."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("openai")

from chat_server import ChatServer  # noqa: E402
from orchard_eval.judges import JudgeRequest, get_judge  # noqa: E402
from orchard_eval.judging.openai import JudgeFailure, sample_indices  # noqa: E402
from orchard_eval.rubrics import DEDUCTION_VIDEO, FORMULATION_TEXT, PERCEPTION_TEXT  # noqa: E402

SECRET = "sk-test-SECRET-do-not-leak-1234567890"


def reply_for(rubric, value=0.75, fence=False, extra=""):
    doc = {k: value for k in rubric.criteria}
    doc["feedback"] = "fine" + extra
    text = json.dumps(doc)
    return f"```json\n{text}\n```" if fence else text


@pytest.fixture
def server():
    s = ChatServer()
    yield s
    s.close()


@pytest.fixture
def judge_env(monkeypatch, tmp_path):
    monkeypatch.setenv("ORCHARD_JUDGE_API_KEY", SECRET)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return tmp_path


def make_judge(server, cache_dir=None, **kw):
    opts = dict(model="judge-model", base_url=server.base_url, backoff=0.01, max_backoff=0.05, timeout=5.0)
    opts.update(kw)
    if cache_dir is not None:
        opts["cache_dir"] = str(cache_dir)
    return get_judge("openai", **opts)


def request(rubric=PERCEPTION_TEXT, seed=0, n=1):
    rng = np.random.default_rng(seed)
    frames = [rng.integers(0, 255, (36, 64, 3), dtype=np.uint8) for _ in range(n)]
    refs = {"perception_text": np.full((36, 64, 3), 255, np.uint8),
            "annotated_first_frame": np.zeros((36, 64, 3), np.uint8)}
    facts = {"correct_letter": "B", "correct_formula": "a = g·sinθ", "annotation_text": "g = 9.81 m/s²",
             "physics_duration": 1.5}
    return JudgeRequest("Pillar/Task/000001", rubric.subtrack, rubric, frames, refs, facts)


def test_happy_path_protocol(server, judge_env):
    server.default = ("ok", reply_for(PERCEPTION_TEXT, 0.75, fence=True))
    j = make_judge(server)
    res = j.score(request())
    assert set(res.scores) == set(PERCEPTION_TEXT.criteria) and all(v == 0.75 for v in res.scores.values())
    assert res.feedback == "fine"
    (req,) = server.requests
    assert req["path"].endswith("/chat/completions")
    body = req["body"]
    assert body["model"] == "judge-model" and body["temperature"] == 0
    assert {k.lower(): v for k, v in req["headers"].items()}.get("authorization") == f"Bearer {SECRET}"   # the key goes to the endpoint only
    user = body["messages"][1]["content"]
    images = [p for p in user if p["type"] == "image_url"]
    assert len(images) == 2 and all(p["image_url"]["url"].startswith("data:image/png;base64,") for p in images)
    text = user[-1]["text"]
    for k in PERCEPTION_TEXT.criteria:
        assert f'"{k}"' in text


def test_formulation_text_prompt_carries_answer_key(server, judge_env):
    server.default = ("ok", reply_for(FORMULATION_TEXT, 1.0))
    make_judge(server).score(request(FORMULATION_TEXT))
    text = server.requests[0]["body"]["messages"][1]["content"][-1]["text"]
    assert "correct choice: B" in text and "a = g·sinθ" in text and "g = 9.81 m/s²" in text


def test_video_is_sent_as_sampled_frames(server, judge_env):
    server.default = ("ok", reply_for(DEDUCTION_VIDEO, 0.5))
    j = make_judge(server, max_frames=4)
    j.score(request(DEDUCTION_VIDEO, n=30))
    user = server.requests[0]["body"]["messages"][1]["content"]
    assert sum(p["type"] == "image_url" for p in user) == 1 + 4   # input frame + 4 sampled frames
    assert sample_indices(30, 4) == [0, 10, 19, 29]


def test_retries_500_429_then_succeeds(server, judge_env):
    server.script = [("status", 500), ("status", 429, 0), ("status", 503)]
    server.default = ("ok", reply_for(PERCEPTION_TEXT, 0.5))
    res = make_judge(server).score(request())
    assert res.scores["text_content_match"] == 0.5
    assert len(server.requests) == 4


def test_timeout_is_retried(server, judge_env):
    server.script = [("sleep", 1.5, reply_for(PERCEPTION_TEXT, 0.1))]
    server.default = ("ok", reply_for(PERCEPTION_TEXT, 0.9))
    res = make_judge(server, timeout=0.5).score(request())
    assert res.scores["white_background"] == 0.9
    assert len(server.requests) == 2


def test_persistent_failure_raises_with_reason(server, judge_env, caplog):
    server.default = ("status", 500)
    j = make_judge(server, max_retries=2)
    with pytest.raises(JudgeFailure, match="HTTP 500"):
        j.score(request())
    assert len(server.requests) == 3
    assert SECRET not in caplog.text


def test_client_error_is_not_retried(server, judge_env):
    server.default = ("status", 401)
    with pytest.raises(JudgeFailure, match="HTTP 401"):
        make_judge(server).score(request())
    assert len(server.requests) == 1


def test_malformed_reply_is_asked_again(server, judge_env):
    server.script = [("ok", "I think the image is fine."), ("ok", '{"text_font_match": 7}')]
    server.default = ("ok", reply_for(PERCEPTION_TEXT, 0.25))
    res = make_judge(server).score(request())
    assert res.scores["axes_angle_match"] == 0.25 and len(server.requests) == 3


def test_truncated_reply_is_closed_when_complete_enough(server, judge_env):
    full = reply_for(PERCEPTION_TEXT, 0.6, extra=" and a long explanation that is cut")
    server.default = ("ok", full[:-12])              # cut inside the feedback string
    res = make_judge(server).score(request())
    assert res.scores["white_background"] == 0.6 and res.feedback.startswith("fine and a long")


def test_truncated_before_all_criteria_fails(server, judge_env):
    server.default = ("ok", reply_for(PERCEPTION_TEXT)[:120])
    with pytest.raises(JudgeFailure, match="unparsable"):
        make_judge(server, parse_retries=1).score(request())
    assert len(server.requests) == 2


def test_garbage_http_body_is_a_failure(server, judge_env):
    server.default = ("raw", "<html>bad gateway</html>")
    with pytest.raises(Exception):
        make_judge(server, max_retries=0, parse_retries=0).score(request())


def test_cache_hit_sends_nothing_and_is_identical(server, judge_env):
    cache = judge_env / "cache"
    server.default = ("ok", reply_for(PERCEPTION_TEXT, 0.4))
    r1 = make_judge(server, cache_dir=cache).score(request(seed=1))
    assert len(server.requests) == 1
    server.default = ("ok", reply_for(PERCEPTION_TEXT, 0.9))    # a different reply would show a miss
    r2 = make_judge(server, cache_dir=cache).score(request(seed=1))
    assert len(server.requests) == 1
    assert r1.scores == r2.scores and r1.feedback == r2.feedback
    make_judge(server, cache_dir=cache).score(request(seed=2))   # another input byte → a new request
    assert len(server.requests) == 2
    make_judge(server, cache_dir=cache, model="other").score(request(seed=1))   # another model → new
    assert len(server.requests) == 3
    files = list(cache.rglob("*.json"))
    assert len(files) == 3 and not list(cache.rglob(".tmp-*"))
    for f in files:
        assert SECRET not in f.read_text()
    assert SECRET not in json.dumps(r1.__dict__)


def test_key_not_in_config_or_cache_key(server, judge_env, monkeypatch, tmp_path):
    from orchard_eval.judges import judge_config
    from orchard_eval.judging.cache import cache_key

    j = make_judge(server)
    assert SECRET not in json.dumps(judge_config(j))
    _, parts = j.build_messages(request())
    k1 = cache_key(parts)
    monkeypatch.setenv("ORCHARD_JUDGE_API_KEY", "another-key")
    _, parts2 = make_judge(server).build_messages(request())
    assert cache_key(parts2) == k1 and SECRET not in json.dumps(parts)


def test_bounded_concurrency(server, judge_env):
    server.default = ("sleep", 0.2, reply_for(PERCEPTION_TEXT, 0.5))
    j = make_judge(server, concurrency=2)
    out = j.score_many([request(seed=i) for i in range(6)])
    assert all(not isinstance(r, Exception) for r in out)
    assert server.max_in_flight <= 2 and len(server.requests) == 6


def test_user_prompt_file_replaces_default(server, judge_env, tmp_path):
    from orchard_eval.judging.prompts import PROMPT_DIR

    src = (PROMPT_DIR / "perception_text.yaml").read_text().replace('version: "1.0.0"', 'version: "9.9-local"')
    src = src.replace("Task given to the model", "CUSTOM WORDING. Task given to the model")
    p = tmp_path / "pt.yaml"
    p.write_text(src)
    server.default = ("ok", reply_for(PERCEPTION_TEXT, 0.5))
    j = make_judge(server, prompts=str(p))
    assert j.config()["prompt_versions"]["perception_text"] == "9.9-local"
    j.score(request())
    assert "CUSTOM WORDING" in server.requests[0]["body"]["messages"][1]["content"][-1]["text"]


def test_orchard_eval_run_with_the_openai_judge_on_loopback(server, judge_env, tmp_path):
    """`orchard-eval run --judge openai --model … --base-url …` end to end against the loopback server:
    every criterion comes from the endpoint, results name the judge, and the key stays out of them."""
    from orchard_eval import synthetic as syn
    from orchard_eval.cli import main
    from orchard_eval.records import read_records
    from orchard_eval.rubrics import rubric_for

    ds = tmp_path / "ds"
    syn.write_orchard_case(ds, syn.Scene(width=96, height=64), "UniversalGravitation/FreeFall/000000", task="free_fall")
    syn.write_index(ds, ["UniversalGravitation/FreeFall/000000"], "orchard")
    pred = tmp_path / "pred"
    assert main(["baseline", "--kind", "oracle", "--cases", str(ds), "--out", str(pred)]) == 0

    def reply(body):  # the criteria of the rubric the prompt asks about, each scored 0.9
        text = json.dumps(body)
        rubric = next(rubric_for(sub) for sub in ("perception_text", "perception_graphic", "formulation_text",
                                                   "formulation_graphic", "deduction")
                      if all(k in text for k in rubric_for(sub).criteria))
        return json.dumps(dict({k: 0.9 for k in rubric.criteria}, feedback="fine"))
    server.default = ("ok", reply)
    out = tmp_path / "res"
    code = main(["run", "--judge", "openai", "--model", "judge-model", "--base-url", server.base_url,
                 "--judge-cache", str(tmp_path / "cache"), "--cases", str(ds), "--predictions", str(pred),
                 "--out", str(out), "--no-progress"])
    assert code == 0 and server.requests, "the endpoint was never asked"
    recs = read_records(out)
    assert len(recs) == 5 * 3
    assert all(r["provenance"]["judge"]["name"] == "openai" for r in recs)
    assert all(r["score"] is not None for r in recs)
    for f in out.rglob("*"):
        if f.is_file():
            assert SECRET not in f.read_text(errors="ignore")
