"""Balanced yes/no questions: balance, determinism, the GT oracle, and the constant answerer at chance."""
import copy
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from orchard_eval.cases import load_dataset
from orchard_eval.questions import answer_questions, generate_questions, score_answers
from orchard_eval.apt.observable import shown_events

REPO = Path(__file__).resolve().parents[1]
CONFIGS = ["free_fall", "projectile_motion", "perfectly_elastic_collision", "inclined_plane", "uniform_linear_motion"]


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    """Real cases built from the hand-written fixture configs (one per task named above)."""
    pytest.importorskip("mujoco")
    root = tmp_path_factory.mktemp("questions") / "orchard"
    exe = shutil.which("orchard-build")
    cmd = [exe] if exe else [sys.executable, "-c", "import sys; from orchard_build.cli import main; sys.exit(main())"]
    configs = [str(REPO / "tests" / "fixtures" / "scenes" / t / "000000.yaml") for t in CONFIGS]
    proc = subprocess.run(cmd + ["--config", *configs, "--out", str(root), "--no-progress"], cwd=REPO,
                          env=dict(os.environ, ORCHARD_NO_PROGRESS="1"), capture_output=True, text=True, timeout=600)
    if not (root / "dataset.json").is_file():
        pytest.fail(f"orchard-build built nothing: {(proc.stderr or proc.stdout)[-300:]}")
    ds = load_dataset(root, strict=True)
    assert len(ds.cases) == len(CONFIGS)
    return ds, {c.case_id: generate_questions(c) for c in ds}


def test_half_true_half_false_per_case(docs):
    _, d = docs
    for doc in d.values():
        truths = [q["truth"] for q in doc["questions"]]
        assert len(truths) == 8 and sum(truths) == 4, doc["case_id"]


def test_deterministic(docs):
    ds, d = docs
    for c in ds:
        assert generate_questions(c) == d[c.case_id]


def test_oracle_and_constant_answerers(docs):
    ds, d = docs
    oracle = {cid: answer_questions(doc, ds.cases[cid].object_tracks(), shown_events(ds.cases[cid]))
              for cid, doc in d.items()}
    assert score_answers(d, oracle)["overall"]["accuracy"] == 1.0
    # event-time questions ask about what a video shows: every one names an event type the case
    # shows for that body
    for cid, doc in d.items():
        shown = {(e.type, o) for e in shown_events(ds.cases[cid]) for o in e.objects}
        for q in doc["questions"]:
            if q["kind"] == "event_time":
                assert (q["args"]["label"], q["args"]["obj"]) in shown, (cid, q["text"])
    yes = {cid: {q["id"]: True for q in doc["questions"]} for cid, doc in d.items()}
    rep = score_answers(d, yes)["overall"]
    assert rep["accuracy"] == 0.5 and rep["balanced_accuracy"] == 0.5


def test_a_state_question_holds_one_frame_either_side(docs):
    """A video reads a state at t from the frames around it: every speed, direction and which-is-faster
    question keeps its answer one frame before and after (a bounce or an apex within a frame of t would
    make the frames disagree with the instant), and a direction question holds the frames next to the
    clip's ends."""
    from orchard_eval.questions.quantities import evaluate

    ds, d = docs
    asked = 0
    for cid, doc in d.items():
        case = ds.cases[cid]
        tracks, dt, T = case.object_tracks(), 1.0 / case.gt_fps, case.physics_duration
        for q in doc["questions"]:
            if q["kind"] == "heading_cosine":
                shifted = [{**q["args"], "t0": dt}, {**q["args"], "t1": T - dt}]
                assert {1, round(T * case.gt_fps) - 1} <= set(q["frames"]), (cid, q["text"])
            elif q["kind"] in ("speed", "speed_gap"):
                shifted = [{**q["args"], "t": x} for x in (q["args"]["t"] - dt, q["args"]["t"] + dt) if 0 <= x <= T]
            else:
                continue
            asked += 1
            for args in shifted:
                v = evaluate(q["kind"], args, tracks, ())
                assert (v > q["threshold"] if q["cmp"] == ">" else v < q["threshold"]) == q["truth"], (cid, q["text"], args)
    assert asked >= 5


def test_broken_tracks_are_caught(docs):
    """Tracks of a body that never moves must fail the motion questions of a moving case."""
    ds, d = docs
    cid = next(c for c in d if "projectile" in c.lower())
    tracks = copy.deepcopy(ds.cases[cid].object_tracks())
    for k in tracks.positions:
        tracks.positions[k][:] = tracks.positions[k][0]
        tracks.velocities[k][:] = 0.0
    got = answer_questions(d[cid], tracks, ())
    assert score_answers({cid: d[cid]}, {cid: got})["overall"]["accuracy"] < 0.9


def test_documents_match_schema(docs):
    import json

    import jsonschema

    schema = json.loads((Path(__file__).parents[1] / "schemas" / "questions.schema.json").read_text())
    for doc in docs[1].values():
        jsonschema.validate(doc, schema)


def test_bad_questions_files_are_named_errors(docs, tmp_path):
    """A questions file that is not JSON, breaks the schema, repeats a case or asks about a case the
    dataset lacks is a ValueError naming the file or the case, never a KeyError deep inside."""
    import json

    from orchard_eval.questions.commands import oracle_answers, read_questions

    ds, d = docs
    cid, doc = sorted(d.items())[0]

    def write(rel, text):
        f = tmp_path / rel / "questions.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        return f

    good = write("a/" + cid, json.dumps(doc))
    assert read_questions(str(tmp_path / "a")) == {cid: doc}
    bad = write("b/x", "{not json")
    with pytest.raises(ValueError, match="b/x/questions.json: not readable JSON"):
        read_questions(str(tmp_path / "b"))
    bad.write_text(json.dumps({**doc, "questions": [{"id": "q0"}]}))
    with pytest.raises(ValueError, match=r"not a questions document: questions\.0: 'kind' is a required"):
        read_questions(str(tmp_path / "b"))
    write("c/one", json.dumps(doc))
    write("c/two", json.dumps(doc))
    with pytest.raises(ValueError, match=f"case {cid} is also asked in"):
        read_questions(str(tmp_path / "c"))
    write("e/x", json.dumps({**doc, "case_id": "Nowhere/000000"}))
    with pytest.raises(ValueError, match="1 case\\(s\\) not in .*: Nowhere/000000"):
        oracle_answers(str(ds.root), read_questions(str(tmp_path / "e")))
    assert good.is_file()


def test_vlm_answerer_against_a_loopback_endpoint(docs, tmp_path, monkeypatch):
    """`questions ask`: the prior, the question and its frames reach the endpoint (never the truth);
    an endpoint that knows the truth scores 1, one that says yes to everything 0.5, an unclear reply
    leaves the question unanswered; a rerun with the same cache asks nothing."""
    pytest.importorskip("openai")
    import json

    from chat_server import ChatServer

    from orchard_eval.cli import main
    from orchard_eval.questions.vlm import parse_answer

    ds, d = docs
    qdir = tmp_path / "q"
    for cid, doc in d.items():
        (qdir / cid).mkdir(parents=True)
        (qdir / cid / "questions.json").write_text(json.dumps(doc))
    truth = {q["text"]: q["truth"] for doc in d.values() for q in doc["questions"]}
    monkeypatch.setenv("ORCHARD_JUDGE_API_KEY", "sk-questions-test")

    def knows(body):
        texts = [p["text"] for p in body["messages"][0]["content"] if p["type"] == "text"]
        asked = next(t for t in truth if t in texts[-1])
        return "Sure.\n" + json.dumps({"answer": "yes" if truth[asked] else "no"})

    server = ChatServer()
    server.default = ("ok", knows)
    try:
        out = tmp_path / "ask"
        argv = ["questions", "ask", "--cases", str(ds.root), "--questions", str(qdir), "--model", "vlm-q",
                "--base-url", server.base_url, "--out", str(out), "--jobs", "2"]
        assert main(argv) == 0
        rep = json.loads((out / "report.json").read_text())
        n = sum(len(doc["questions"]) for doc in d.values())
        assert rep["overall"]["n"] == n and rep["overall"]["accuracy"] == 1.0
        assert len(server.requests) == n
        first = server.requests[0]["body"]["messages"][0]["content"]
        assert first[0]["text"].startswith("Physical prior for this scene:")
        images = [p for p in first if p["type"] == "image_url"]
        assert images and images[0]["image_url"]["url"].startswith("data:image/png;base64,")
        assert all("truth" not in p.get("text", "") for p in first)
        # the same cache: nothing asked again
        assert main(argv[:-4] + ["--out", str(tmp_path / "ask2"), "--cache", str(out / "cache")]) == 0
        assert len(server.requests) == n
        # a yes-to-everything model scores chance; a reply without yes/no leaves the question open
        server.default = ("ok", '{"answer": "yes"}')
        assert main(argv[:-4] + ["--model", "vlm-yes", "--out", str(tmp_path / "yes")]) == 0
        assert json.loads((tmp_path / "yes" / "report.json").read_text())["overall"]["balanced_accuracy"] == 0.5
    finally:
        server.close()
    assert parse_answer("I think not. no.") is False and parse_answer("yes or no?") is None
    assert parse_answer('{"answer":"Yes"}') is True and parse_answer("") is None


def test_measured_answerer_reads_the_answer_video(docs, tmp_path):
    """`questions answer`: the oracle's video (the GT itself) answers nearly every question right from
    the tracks measured in it; the input held still answers far fewer (only what holds at rest)."""
    import json

    from orchard_eval.baselines import write_baseline
    from orchard_eval.cli import main

    ds, d = docs
    qdir = tmp_path / "q"
    for cid, doc in d.items():
        (qdir / cid).mkdir(parents=True)
        (qdir / cid / "questions.json").write_text(json.dumps(doc))
    acc = {}
    for kind in ("oracle", "static"):
        pred = tmp_path / kind
        write_baseline(kind, ds, pred, protocol="video", num_rollouts=1)
        out = tmp_path / f"{kind}.json"
        assert main(["questions", "answer", "--cases", str(ds.root), "--questions", str(qdir),
                     "--predictions", str(pred), "--out", str(out)]) == 0
        doc = json.loads(out.read_text())
        assert doc["problems"] == [] and doc["answerer"].startswith("programmatic/measured")
        acc[kind] = score_answers(d, doc["answers"])["overall"]["accuracy"]
    assert acc["oracle"] >= 0.9, acc
    assert acc["static"] <= acc["oracle"] - 0.2, acc
