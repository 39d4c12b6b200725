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
    oracle = {cid: answer_questions(doc, ds.cases[cid].object_tracks(), ds.cases[cid].events or ())
              for cid, doc in d.items()}
    assert score_answers(d, oracle)["overall"]["accuracy"] == 1.0
    yes = {cid: {q["id"]: True for q in doc["questions"]} for cid, doc in d.items()}
    rep = score_answers(d, yes)["overall"]
    assert rep["accuracy"] == 0.5 and rep["balanced_accuracy"] == 0.5


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
