"""Real-world cases through a REAL Label Studio server (started by this module, see labelstudio_server.py).

push → annotations by three users through the API → pull: masks round-trip bit-exactly, measurements
and review records follow the 1+2 protocol, a review by the primary annotator or a missing second
review is refused, a dead server or a wrong token writes nothing and the token never reaches disk.
"""
from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np
import pytest

from labelstudio_server import find_label_studio, free_port, run_server
from test_realworld_ingest import ball_description, make_ball_clip

from orchard_build.io import read_json
from orchard_build.realworld import labelstudio as LS
from orchard_build.realworld.brush import mask_to_rle
from orchard_build.realworld.ingest import ingest
from orchard_build.video import read_png

LS_CMD = find_label_studio()
pytestmark = pytest.mark.skipif(LS_CMD is None, reason="label-studio is not installed (pip install "
                                "'orchard-bench[annotation-server]' or set ORCHARD_LABEL_STUDIO to its executable)")
CHECKS = ("initial_frame", "annotation_legibility", "physics_duration", "target_time", "mask_identity",
          "velocity_labels", "formula_candidates", "source_metadata")


@pytest.fixture(scope="session")
def server():
    with tempfile.TemporaryDirectory(prefix="orchard-ls-") as d:
        gen = run_server(LS_CMD, Path(d))
        srv = next(gen)
        try:
            print(f"\nlabel-studio {srv.version}: {'cold' if srv.cold else 'warm'} start {srv.start_seconds:.1f} s",
                  file=sys.stderr)
            yield srv
        finally:
            gen.close()


@pytest.fixture
def api(server):
    return LS.Client(server.url, server.token)


@pytest.fixture
def case(server, tmp_path):
    """A fresh two-object real-world case under the server's document root (one project pair per test)."""
    number = int(uuid.uuid4().int % 900_000) + 1000
    root = server.document_root / f"ds-{number}"
    clip = make_ball_clip(tmp_path / "ball.mp4", 30, 12, second_object=True)
    return ingest(clip, "free_fall", "self-recorded", root,
                  ball_description(tmp_path / "d.yaml", number=number, second_object=True))


def _users(api: LS.Client, n: int = 3) -> list[dict]:
    tag = uuid.uuid4().hex[:8]
    out = []
    for i in range(n):
        email = f"ann{i}-{tag}@orchard.test"
        out.append(api.request("POST", "api/users/", {"email": email, "username": email, "first_name": f"A{i}"}))
    return out


def _annotate(api, task_id: int, user: dict, result: list[dict]) -> dict:
    return api.request("POST", f"api/tasks/{task_id}/annotations/", {"result": result, "completed_by": user["id"]})


def _checks(verdicts: dict[str, str] | None = None) -> list[dict]:
    verdicts = verdicts or {}
    return [{"id": f"c{i}", "from_name": f"check_{c}", "to_name": "info", "type": "choices",
             "value": {"choices": [verdicts.get(c, "pass")]}} for i, c in enumerate(CHECKS)]


def _hand_masks(case: Path) -> dict[int, np.ndarray]:
    """What the primary annotator draws: frame 0 as ingested with a notch cut out, frame 5 shifted by 1 px."""
    m0 = read_png(case / "gt" / "masks" / "0000.png").copy()
    ys, xs = np.nonzero(m0 == 1)
    m0[ys.min():ys.min() + 3, xs.min():xs.min() + 5] = 0
    m5 = np.roll(read_png(case / "gt" / "masks" / "0005.png"), 1, axis=1)
    return {0: m0, 5: m5}


def _primary_result(case: Path, masks: dict[int, np.ndarray], mass: float) -> list[dict]:
    src = read_json(case / "source.json")
    meas = read_json(case / "measurement.json")
    fields = LS.measurement_fields(meas)
    values = {LS.M.key_of(q): q["value"] for q in meas["quantities"]}
    values["mass/ball"] = mass
    h, w = next(iter(masks.values())).shape
    return LS.mask_results(masks, src["objects"], w, h) + LS.number_results(values, fields)


def _snapshot(path: Path) -> dict[str, str]:
    return {p.relative_to(path).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(path.rglob("*")) if p.is_file()}


def _push(server, case):
    return LS.push(case, server.url, server.token, server.document_root, log=lambda *_: None)


def _pull(server, case):
    return LS.pull(case, server.url, server.token, log=lambda *_: None)


# ---------------------------------------------------------------------------------------------
def test_push_creates_projects_tasks_and_preannotations(server, api, case):
    summary = _push(server, case)[0]
    assert summary["state"] == "awaiting the primary annotation" and summary["review_task"] is None
    projects = {p["id"]: p for p in api.projects()}
    prim, rev = projects[summary["primary_project"]], projects[summary["review_project"]]
    assert prim["maximum_annotations"] == 1 and rev["maximum_annotations"] == 2
    assert '<Label value="ball"' in prim["label_config"] and 'name="mass__ball"' in prim["label_config"]
    assert 'name="check_formula_candidates"' in rev["label_config"]
    task = api.request("GET", f"api/tasks/{summary['primary_task']}/")
    assert len(task["data"]["frames"]) == 10  # the 30 fps window: clip frames 2–11, nothing resampled
    # frames are served through the local-files storage
    import urllib.request

    req = urllib.request.Request(server.url + task["data"]["frames"][0], headers={"Authorization": f"Token {server.token}"})
    with urllib.request.urlopen(req, timeout=30) as r:
        assert r.read() == (case / "gt" / "rgb" / "0000.png").read_bytes()
    preds = api.request("GET", "api/predictions/", params={"task": summary["primary_task"]})
    kinds = {r["type"] for r in preds[0]["result"]}
    assert kinds == {"brushlabels", "number"}
    # pushing again updates in place: same projects, same task, one prediction
    again = _push(server, case)[0]
    assert (again["primary_project"], again["primary_task"]) == (summary["primary_project"], summary["primary_task"])
    assert len(api.request("GET", "api/predictions/", params={"task": summary["primary_task"]})) == 1


def test_one_plus_two_round_trip(server, api, case):
    a, b, c = _users(api)
    summary = _push(server, case)[0]
    hand = _hand_masks(case)
    primary_result = _primary_result(case, hand, mass=0.05232)
    _annotate(api, summary["primary_task"], a, primary_result)

    # pull with no review yet: masks and values written, the case is not reviewed
    rec = _pull(server, case)[0]
    assert rec["status"] == "incomplete" and not rec["reviewed"]
    assert any("two independent reviews" in p for p in rec["problems"])
    for k, m in hand.items():  # annotated frames round-trip bit-exactly
        assert np.array_equal(read_png(case / "gt" / "masks" / f"{k:04d}.png"), m)
    assert read_png(case / "gt" / "masks" / "0003.png").max() == 2  # propagated frames in between
    meas = read_json(case / "measurement.json")
    mass = next(q for q in meas["quantities"] if q["name"] == "mass" and q["object"] == "ball")
    assert mass["value"] == 0.05232 and mass["source"] == f"annotated:{a['email']}" and mass["precision"] == 1e-5
    assert meas["reviewed"] is False and meas["origin"] == "label-studio" and meas["annotator"] == a["email"]
    assert read_json(case / "case.json")["objects"][0]["mass"] == 0.05232

    # second push: the review task carries the primary result as its pre-annotation
    summary = _push(server, case)[0]
    assert summary["state"] == "in review"
    pred = api.request("GET", "api/predictions/", params={"task": summary["review_task"]})[0]
    assert sorted(r["id"] for r in pred["result"]) == sorted(r["id"] for r in primary_result)

    # one review by B and one by the primary annotator A: refused
    _annotate(api, summary["review_task"], b, primary_result + _checks())
    self_review = _annotate(api, summary["review_task"], a, primary_result + _checks())
    env = dict(os.environ, LABEL_STUDIO_API_KEY=server.token)
    out = subprocess.run([sys.executable, "-m", "orchard_build.cli", "annotate", "pull", str(case), "--url", server.url],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 1, out.stderr
    rec = read_json(case / "review.json")
    assert rec["status"] == "invalid" and not rec["reviewed"]
    assert any("primary annotator" in p for p in rec["problems"])
    assert read_json(case / "measurement.json")["reviewed"] is False

    # replace the self-review by an independent reviewer C: reviewed
    api.request("DELETE", f"api/annotations/{self_review['id']}/")
    _annotate(api, summary["review_task"], c, primary_result + _checks())
    out = subprocess.run([sys.executable, "-m", "orchard_build.cli", "annotate", "pull", str(case), "--url", server.url],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    rec = read_json(case / "review.json")
    assert rec["status"] == "reviewed" and rec["reviewed"] and rec["problems"] == [] and rec["disagreements"] == []
    assert {r["annotator"] for r in rec["reviewers"]} == {b["email"], c["email"]}
    assert rec["primary"]["annotator"] == a["email"]
    assert read_json(case / "measurement.json")["reviewed"] is True
    for k, m in hand.items():
        assert np.array_equal(read_png(case / "gt" / "masks" / f"{k:04d}.png"), m)

    # the reviewed case validates (schemas and cross-file rules) and the evaluator loads it
    from orchard_build.schemas import iter_errors
    from orchard_build.validate import validate_dataset
    from orchard_eval.cases import load_dataset

    root = case.parents[3]
    assert list(iter_errors(rec, "review.schema.json")) == []
    assert list(iter_errors(read_json(case / "measurement.json"), "measurement.schema.json")) == []
    assert [str(p) for p in validate_dataset(root, None)] == []
    ev = load_dataset(root, strict=True).cases[read_json(case / "case.json")["case_id"]]
    assert ev.source == "real" and ev.gt_fps == 30 and np.array_equal(ev.gt_instances(5), hand[5])
    # the token never reaches the case
    for p in case.rglob("*"):
        if p.is_file():
            assert server.token.encode() not in p.read_bytes(), p


def test_disagreements_are_listed_with_the_resolution_order(server, api, case):
    a, b, c = _users(api)
    summary = _push(server, case)[0]
    primary_result = _primary_result(case, _hand_masks(case), mass=0.05231)
    _annotate(api, summary["primary_task"], a, primary_result)
    summary = _push(server, case)[0]
    _annotate(api, summary["review_task"], b, primary_result + _checks())
    changed = _primary_result(case, _hand_masks(case), mass=0.05300)  # off by 0.69 g > 0.01 g
    _annotate(api, summary["review_task"], c, changed + _checks({"formula_candidates": "fail", "velocity_labels": "fail"}))
    rec = _pull(server, case)[0]
    assert rec["status"] == "disagreement" and not rec["reviewed"]
    items = {d["item"]: d for d in rec["disagreements"]}
    assert items["formula_candidates"]["resolution_order"] == ["senior_arbitration", "domain_expert"]
    assert items["velocity_labels"]["resolution_order"] == ["analytic_backstop", "senior_arbitration", "domain_expert"]
    assert items["velocity_labels"]["kind"] == "reviewers_disagree"
    assert items["measurement:mass/ball"]["kind"] == "value_changed"
    assert items["measurement:mass/ball"]["values"][c["email"]] == 0.053
    assert read_json(case / "measurement.json")["reviewed"] is False


def test_missing_second_review_and_duplicate_reviewer_are_refused(server, api, case):
    a, b, _ = _users(api)
    summary = _push(server, case)[0]
    primary_result = _primary_result(case, _hand_masks(case), mass=0.05231)
    _annotate(api, summary["primary_task"], a, primary_result)
    summary = _push(server, case)[0]
    _annotate(api, summary["review_task"], b, primary_result + _checks())
    assert _pull(server, case)[0]["status"] == "incomplete"
    _annotate(api, summary["review_task"], b, primary_result + _checks())
    rec = _pull(server, case)[0]
    assert rec["status"] == "invalid" and any("more than once" in p for p in rec["problems"])


def test_dead_server_or_wrong_token_writes_nothing(server, case, tmp_path):
    before = _snapshot(case)
    with pytest.raises(LS.LabelStudioError, match="rejected the API token"):
        LS.pull(case, server.url, "wrong-token-123456", log=lambda *_: None)
    with pytest.raises(LS.LabelStudioError, match="rejected the API token"):
        LS.push(case, server.url, "wrong-token-123456", server.document_root, log=lambda *_: None)
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(LS.LabelStudioError, match="cannot reach Label Studio"):
        LS.pull(case, dead, server.token, log=lambda *_: None)
    env = {k: v for k, v in os.environ.items() if k != "LABEL_STUDIO_API_KEY"}
    out = subprocess.run([sys.executable, "-m", "orchard_build.cli", "annotate", "pull", str(case), "--url", dead],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "LABEL_STUDIO_API_KEY" in out.stderr
    env["LABEL_STUDIO_API_KEY"] = "wrong-token-123456"
    out = subprocess.run([sys.executable, "-m", "orchard_build.cli", "annotate", "pull", str(case), "--url", server.url],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 2 and "rejected the API token" in out.stderr
    assert "wrong-token-123456" not in out.stderr + out.stdout
    assert _snapshot(case) == before


def test_brush_masks_from_the_sdk_decode_bit_exactly(tmp_path):
    """Cross-check the brush codec against label_studio_sdk's converter when the SDK is importable by the
    server's interpreter (it normally is: label-studio pins label-studio-sdk)."""
    python = Path(LS_CMD[0]).with_name("python") if LS_CMD[0] != sys.executable else Path(sys.executable)
    rng = np.random.default_rng(5)
    mask = np.zeros((48, 64), bool)
    mask[5:30, 10:50] = True
    mask ^= rng.random(mask.shape) > 0.97
    np.save(tmp_path / "m.npy", mask)
    code = ("import json,sys,numpy as np\nfrom label_studio_sdk.converter.brush import mask2rle, decode_rle\n"
            f"m=np.load(r'{tmp_path / 'm.npy'}')\nours=json.load(open(r'{tmp_path / 'ours.json'}'))\n"
            "d=decode_rle(ours).reshape(m.shape[0], m.shape[1], 4)[..., 3] > 0\nassert (d == m).all()\n"
            "print(json.dumps([int(x) for x in mask2rle((m*255).astype(np.uint8))]))\n")
    (tmp_path / "ours.json").write_text(str(mask_to_rle(mask)))
    out = subprocess.run([str(python), "-c", code], capture_output=True, text=True)
    if "No module named" in out.stderr:
        pytest.skip("label_studio_sdk is not importable next to the server")
    assert out.returncode == 0, out.stderr
    import json

    from orchard_build.realworld.brush import rle_to_mask

    assert np.array_equal(rle_to_mask(json.loads(out.stdout), 64, 48), mask)
