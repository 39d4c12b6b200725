"""End-to-end authoring: build the shipped configs, validate, rebuild byte-identically, refuse bad input."""
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import yaml

from orchard_build.build import build, find_configs
from orchard_build.cli import main as cli
from orchard_build.materials import load_materials
from orchard_build.schemas import iter_errors
from orchard_build.tasks import TASK_NAMES
from orchard_build.validate import validate_dataset
from tests.conftest import FIXTURES, SCENES

MATERIALS = SCENES / "materials.yaml"


def tree_digest(root: Path) -> dict[str, str]:
    if not root.exists():
        return {}
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    out = tmp_path_factory.mktemp("orchard")
    report = build(find_configs(FIXTURES, TASK_NAMES), MATERIALS, out, render=False, progress=False)
    assert not report.failed, report.failed
    return out


def test_every_task_builds(dataset):
    index = json.loads((dataset / "dataset.json").read_text())
    tasks = {c["task"] for c in index["cases"]}
    assert tasks == set(TASK_NAMES)
    assert len(index["cases"]) == len(find_configs(FIXTURES, TASK_NAMES))
    for entry in index["cases"]:
        case = dataset / entry["path"]
        for name in ("case.json", "config.yaml", "config_resolved.json", "physics_duration.txt", "timestamps.json",
                     "formula_info.json", "velocity.json", "events.json"):
            assert (case / name).is_file(), f"{entry['case_id']} lacks {name}"
        assert entry["case_id"].count("/") == 2 and entry["path"] == f"cases/{entry['case_id']}"


def test_every_artifact_validates(dataset, materials):
    assert [str(p) for p in validate_dataset(dataset, materials)] == []
    schema_of = {"case.json": "case.schema.json", "velocity.json": "velocity.schema.json",
                 "events.json": "events.schema.json", "timestamps.json": "timestamps.schema.json",
                 "formula_info.json": "formula_info.schema.json"}
    for case_json in dataset.glob("cases/*/*/*/case.json"):
        for name, schema in schema_of.items():
            doc = json.loads((case_json.parent / name).read_text())
            assert list(iter_errors(doc, schema)) == [], (case_json.parent, name)


def test_rebuild_is_byte_identical(dataset, tmp_path):
    out = tmp_path / "again"
    build(find_configs(FIXTURES, TASK_NAMES), MATERIALS, out, render=False, progress=False)
    first, second = tree_digest(dataset), tree_digest(out)
    assert first.keys() == second.keys()
    differing = [k for k in first if first[k] != second[k]]
    assert differing == []


def test_unchanged_cases_are_skipped(dataset):
    paths = find_configs(FIXTURES, ["inclined_plane"])
    report = build(paths, MATERIALS, dataset, render=False, progress=False)
    assert report.built == [] and len(report.skipped) == len(paths)


def test_case_json_records_provenance(dataset):
    doc = json.loads(next(dataset.glob("cases/*/InclinedPlane/000000/case.json")).read_text())
    assert doc["seed"] == 1300
    assert len(doc["config"]["sha256"]) == 64
    assert doc["provenance"]["tool"] == "orchard-build"
    assert "numpy" in doc["provenance"]["dependencies"]
    cube = doc["objects"][0]
    assert cube["mass"] == pytest.approx(7850 * 0.1**3)


def test_velocity_label_and_target_state(dataset):
    v = json.loads(next(dataset.glob("cases/*/InclinedPlane/000000/velocity.json")).read_text())
    cube = v["objects"][0]
    # steel on oak at 30°: a = g(sinθ − μk cosθ), from rest: v(t*) = a t*
    import math
    mu_k = math.sqrt(0.40 * 0.45)
    a = 9.81 * (math.sin(math.radians(30)) - mu_k * math.cos(math.radians(30)))
    assert cube["speed"] == pytest.approx(a * 0.5, rel=1e-6)
    assert cube["label"] == f"v = {a * 0.5:.2f}"
    assert cube["moving"] and cube["arrow_direction_image"] is not None


# ---- bad input: a clear error and nothing written ----------------------------------------------
def _scenes_copy(tmp_path: Path) -> Path:
    dst = tmp_path / "scenes"
    shutil.copytree(FIXTURES, dst)
    return dst


@pytest.mark.parametrize("breakage,expected", [
    (lambda raw: raw["objects"][0].__setitem__("material", "kryptonite"), "objects[0].material: unknown material"),
    (lambda raw: raw["objects"][0].__setitem__("shape", "torus"), "objects[0].shape"),
    (lambda raw: raw["objects"][0]["size"].__setitem__("edge", -0.1), "objects[0].size.edge"),
    (lambda raw: raw["supports"]["ramps"][0].__setitem__("angle_deg", 95), "angle_deg: ramp angle must lie strictly"),
    (lambda raw: raw["timing"].__setitem__("target_time", 9.0), "timing.target_time"),
    (lambda raw: raw["objects"][0].__setitem__("mass", 3.0), "must not state a mass"),
    (lambda raw: raw.__setitem__("case_number", 1), "duplicate case id"),
])
def test_bad_config_stops_build_and_writes_nothing(tmp_path, capsys, breakage, expected):
    scenes = _scenes_copy(tmp_path)
    target = scenes / "inclined_plane" / "000000.yaml"
    raw = yaml.safe_load(target.read_text())
    breakage(raw)
    target.write_text(yaml.safe_dump(raw))
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("existing data")
    before = tree_digest(out)
    code = cli(["--task", "inclined_plane", "--scenes", str(scenes), "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2
    assert expected in err and "000000.yaml" in err and "nothing was written" in err
    assert tree_digest(out) == before


# ---- validate catches hand-broken copies ----------------------------------------------------------
@pytest.fixture
def broken(dataset, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(dataset, dst)
    case = dst / "cases" / "UniversalGravitation" / "InclinedPlane" / "000000"
    return dst, case


def _edit(path: Path, fn):
    doc = json.loads(path.read_text())
    fn(doc)
    path.write_text(json.dumps(doc))


def _problems(root, materials):
    return [str(p) for p in validate_dataset(root, materials)]


def test_validate_mass_mismatch(broken, materials):
    root, case = broken
    _edit(case / "case.json", lambda d: d["objects"][0].__setitem__("mass", 1.0))
    probs = _problems(root, materials)
    assert any("InclinedPlane/000000/case.json: objects[0].mass: 1.0 ≠ ρV" in p for p in probs), probs


def test_validate_timestamp_outside_duration(broken, materials):
    root, case = broken
    def f(d):
        d["timestamps"][-1] = 7.5
        d["entries"][-1]["t"] = 7.5
    _edit(case / "timestamps.json", f)
    probs = _problems(root, materials)
    assert any("timestamps.json: timestamps[" in p and "outside (0, T" in p for p in probs), probs


def test_validate_wrong_letter(broken, materials):
    root, case = broken
    def f(d):
        d["correct_letter"] = next(c["letter"] for c in d["candidates"] if c["kind"] != "correct")
    _edit(case / "formula_info.json", f)
    probs = _problems(root, materials)
    assert any("formula_info.json: correct_letter: candidate" in p for p in probs), probs


def test_validate_event_order_and_schema(broken, materials):
    root, case = broken
    _edit(case / "events.json", lambda d: d["events"].append({"t": 0.9, "frame": 3, "label": "teleport",
                                                                "objects": ["cube"], "stage": 0}))
    probs = _problems(root, materials)
    assert any("events.json: events[" in p and "teleport" in p for p in probs), probs


def test_validate_missing_file_and_bad_json(broken, materials):
    root, case = broken
    (case / "velocity.json").unlink()
    (case / "physics_duration.txt").write_text("soon")
    probs = _problems(root, materials)
    assert any("velocity.json: <root>: file is missing" in p for p in probs)
    assert any("physics_duration.txt: <root>: not a number" in p for p in probs)


def test_validate_cli_exit_codes(dataset, broken, capsys):
    assert cli(["validate", str(dataset)]) == 0
    root, case = broken
    _edit(case / "velocity.json", lambda d: d["objects"][0].__setitem__("label", "v = 9.99"))
    assert cli(["validate", str(root)]) == 1
    assert "velocity.json: objects[0].label" in capsys.readouterr().out


def test_hostile_dataset_path(broken, materials):
    root, _ = broken
    _edit(root / "dataset.json", lambda d: d["cases"][0].__setitem__("path", "../../etc"))
    probs = _problems(root, materials)
    assert any("dataset.json: cases[0].path" in p for p in probs)
