"""`orchard-eval prompts --templates apple-pi`: the paper's prompts rendered from an installed copy of the
published `apple_pi` package. None of its text is in this repository: each test writes a stand-in package
with the same module layout (apple_pi/{constants,types}.py, apple_pi/prompts/{templates,builder}.py) and
invented template text into a temporary folder and puts it on sys.path (or PYTHONPATH)."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from orchard_eval import synthetic as syn
from orchard_eval.apple_pi_prompts import ApplePiUnavailable, load_apple_pi
from orchard_eval.cli import main
from orchard_eval.prompts import TemplateError, build_prompts, prompt_provenance, prompt_source
from orchard_eval.tables import mixed_prompts, to_csv, to_markdown

REPO = Path(__file__).resolve().parents[1]
ORCHARD_CID = "UniversalGravitation/FreeFall/000000"
APPLE_CID = "UniversalGravitation/FreeFall/000001"

TYPES = '''
from enum import Enum


class Subtrack(str, Enum):
    PERCEPTION_TEXT = "perception_text"
    PERCEPTION_GRAPHIC = "perception_graphic"
    FORMULATION_TEXT = "formulation_text"
    FORMULATION_GRAPHIC = "formulation_graphic"
    DEDUCTION = "deduction"


class InferenceProtocol(str, Enum):
    VIDEO = "video"
    IMAGE = "image"
'''

# invented wording; literal braces in an unformatted template stay, doubled ones in formatted templates halve
TEMPLATES = '''
from apple_pi.types import Subtrack

VM_PROMPT_TEMPLATES = {
    Subtrack.PERCEPTION_TEXT: "stand-in video P-T {kept as written}",
    Subtrack.PERCEPTION_GRAPHIC: "stand-in video P-G",
    Subtrack.FORMULATION_TEXT: "stand-in video F-T, pick one:\\n{formula_choices}\\nend {{braces}}",
    Subtrack.FORMULATION_GRAPHIC: "stand-in video F-G at t = {target_time}s",
    Subtrack.DEDUCTION: "stand-in video Ded. for {physics_duration} s",
}
UM_PROMPT_TEMPLATES = {
    Subtrack.PERCEPTION_TEXT: "stand-in image P-T",
    Subtrack.PERCEPTION_GRAPHIC: "stand-in image P-G",
    Subtrack.FORMULATION_TEXT: "stand-in image F-T:\\n{formula_choices}",
    Subtrack.FORMULATION_GRAPHIC: "stand-in image F-G at t = {target_time}s",
    Subtrack.DEDUCTION: "stand-in image Ded. at t = {time_point}s",
}
'''

# a builder following release 1.0's documented rules; `MARK` lets a test see that it is the one called
BUILDER = '''
from apple_pi.types import InferenceProtocol, Subtrack

from .templates import UM_PROMPT_TEMPLATES, VM_PROMPT_TEMPLATES

MARK = ""


def build_prompt(protocol, subtrack, *, formula_choices=None, target_time=None, physics_duration=None,
                 time_point=None):
    protocol, subtrack = InferenceProtocol(protocol), Subtrack(subtrack)
    video = protocol == InferenceProtocol.VIDEO
    template = (VM_PROMPT_TEMPLATES if video else UM_PROMPT_TEMPLATES)[subtrack]
    if subtrack == Subtrack.FORMULATION_TEXT:
        lines = [("  " if video else "") + f"{l}) {c}" for l, c in zip("ABCD", formula_choices)]
        return MARK + template.format(formula_choices="\\n".join(lines))
    if subtrack == Subtrack.FORMULATION_GRAPHIC:
        return MARK + template.format(target_time=target_time)
    if subtrack == Subtrack.DEDUCTION:
        if video:
            return MARK + template.format(physics_duration=int(physics_duration))
        return MARK + template.format(time_point=time_point)
    return MARK + template
'''


def stand_in(root: Path, builder: bool = True, mark: str = "", prompt_version: str = "1.0") -> Path:
    pkg = root / "apple_pi"
    (pkg / "prompts").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from .constants import NUM_ROLLOUTS, PROMPT_VERSION\n")
    (pkg / "constants.py").write_text(f"PROMPT_VERSION = {prompt_version!r}\nNUM_ROLLOUTS = 3\n")
    (pkg / "types.py").write_text(textwrap.dedent(TYPES))
    (pkg / "prompts" / "templates.py").write_text(textwrap.dedent(TEMPLATES))
    if builder:
        (pkg / "prompts" / "builder.py").write_text(textwrap.dedent(BUILDER).replace('MARK = ""', f"MARK = {mark!r}"))
        (pkg / "prompts" / "__init__.py").write_text("from .builder import build_prompt\n")
    else:
        (pkg / "prompts" / "__init__.py").write_text("")
    return root


@pytest.fixture
def fresh_import(monkeypatch):
    """Each test sees only the stand-in it installs (and none left over from another test)."""
    def purge():
        for name in [m for m in sys.modules if m == "apple_pi" or m.startswith("apple_pi.")]:
            del sys.modules[name]
    purge()

    def install(path: Path):
        monkeypatch.syspath_prepend(str(path))
        purge()
    yield install
    purge()


@pytest.fixture(scope="module")
def datasets(tmp_path_factory):
    """An Orchard-layout and an Apple-PI-GT-layout case; the latter with T = 1.5 s (video Deduction says 1)."""
    orchard = tmp_path_factory.mktemp("orchard_ds")
    syn.write_orchard_case(orchard, syn.Scene(width=96, height=64), ORCHARD_CID)
    syn.write_index(orchard, [ORCHARD_CID], "orchard")
    apple = tmp_path_factory.mktemp("apple_ds")
    syn.write_apple_case(apple, syn.Scene(width=96, height=64, duration=1.5, target_time=0.75), APPLE_CID,
                         timestamps=(0.375, 0.75, 1.5))
    syn.write_index(apple, [APPLE_CID], "apple-pi-gt")
    return orchard, apple


def _by_key(recs):
    return {(r["subtrack"], r["timestamp"]): r for r in recs}


EXPECTED_VIDEO_FT = ("stand-in video F-T, pick one:\n  A) x = v·t\n  B) y(t) = h - (1/2)·g·t²\n  C) E = m·c²\n"
                     "  D) F = q·v·B\nend {braces}")


@pytest.mark.parametrize("builder", [True, False], ids=["package-builder", "release-rules"])
def test_renders_the_installed_templates_as_the_builder_does(datasets, tmp_path, fresh_import, builder):
    orchard, apple = datasets
    fresh_import(stand_in(tmp_path / "site", builder=builder))
    for ds in (orchard, apple):   # Orchard's "A. " labels are not doubled; the published layout has none
        recs, _ = build_prompts(ds, "video", templates="apple-pi")
        v = _by_key(recs)
        assert v[("formulation_text", None)]["prompt"] == EXPECTED_VIDEO_FT
        assert v[("perception_text", None)]["prompt"] == "stand-in video P-T {kept as written}"
    v = _by_key(build_prompts(apple, "video", templates="apple-pi")[0])
    assert v[("formulation_graphic", None)]["prompt"] == "stand-in video F-G at t = 0.75s"
    assert v[("deduction", None)]["prompt"] == "stand-in video Ded. for 1 s"      # int(1.5), as the builder does
    for r in v.values():
        assert r["prompt_version"] == "1.0" and r["variant"] == "default" and r["num_rollouts"] == 3
        assert r["input_image"] == f"cases/{APPLE_CID}/initial_state/rgb_0000.png"
        assert r["templates"]["source"] == "apple-pi" and r["templates"]["module"] == "apple_pi.prompts.templates"
        assert len(r["templates"]["sha256"]) == 64
        assert r["templates"]["renderer"] == ("apple_pi.prompts.builder.build_prompt" if builder
                                              else "orchard (release-1.0 rules)")
        assert r["expected_output"]["file"].endswith("rollout_XX.mp4")
    i = _by_key(build_prompts(apple, "image", templates="apple-pi")[0])
    assert i[("formulation_text", None)]["prompt"] == ("stand-in image F-T:\nA) x = v·t\nB) y(t) = h - (1/2)·g·t²\n"
                                                        "C) E = m·c²\nD) F = q·v·B")
    assert [k[1] for k in i if k[0] == "deduction"] == [0.375, 0.75, 1.5]
    assert i[("deduction", 0.375)]["prompt"] == "stand-in image Ded. at t = 0.375s"
    assert i[("deduction", 1.5)]["expected_output"]["file"].endswith("rollout_XX/frame_002_t1.500s.png")


def test_the_packages_own_builder_is_used_when_it_has_one(datasets, tmp_path, fresh_import):
    _, apple = datasets
    fresh_import(stand_in(tmp_path / "site", mark="[pkg] ", prompt_version="1.1"))
    recs, _ = build_prompts(apple, "video", templates="apple-pi")
    assert all(r["prompt"].startswith("[pkg] ") for r in recs)
    assert {r["prompt_version"] for r in recs} == {"1.1"}      # the package's PROMPT_VERSION is recorded


def test_cli_and_pythonpath(datasets, tmp_path):
    """The command line in a fresh interpreter that finds the package through PYTHONPATH."""
    _, apple = datasets
    site = stand_in(tmp_path / "site")
    out = tmp_path / "p.jsonl"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(REPO)]))
    res = subprocess.run([sys.executable, "-m", "orchard_eval.cli", "prompts", "--cases", str(apple), "--protocol",
                          "video", "--templates", "apple-pi", "--out", str(out)], env=env, capture_output=True,
                         text=True)
    assert res.returncode == 0, res.stderr
    recs = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(recs) == 5 and recs[2]["prompt"] == EXPECTED_VIDEO_FT
    assert "non-integer physics_duration" in res.stderr


def test_a_clear_error_without_the_package(datasets, tmp_path, fresh_import, capsys):
    orchard, _ = datasets
    fresh_import(tmp_path / "empty")
    with pytest.raises(ApplePiUnavailable, match="apple_pi"):
        load_apple_pi()
    assert main(["prompts", "--cases", str(orchard), "--protocol", "video", "--templates", "apple-pi",
                 "--out", str(tmp_path / "x.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "`apple_pi`" in err and "not importable" in err and not (tmp_path / "x.jsonl").exists()


def test_bad_installs_and_variants_are_refused(datasets, tmp_path, fresh_import):
    orchard, _ = datasets
    site = stand_in(tmp_path / "site")
    fresh_import(site)
    with pytest.raises(TemplateError, match="one variant only"):
        build_prompts(orchard, "video", "concise", templates="apple-pi")
    tpl = site / "apple_pi" / "prompts" / "templates.py"
    tpl.write_text(tpl.read_text().replace("    Subtrack.DEDUCTION: \"stand-in image Ded. at t = {time_point}s\",\n", ""))
    fresh_import(site)
    with pytest.raises(ApplePiUnavailable, match="UM_PROMPT_TEMPLATES has no template for deduction"):
        load_apple_pi()


def test_our_shipped_templates_keep_their_source(datasets):
    orchard, _ = datasets
    recs, _ = build_prompts(orchard, "video")
    assert {r["templates"]["source"] for r in recs} == {"orchard"} and recs[0]["prompt_version"] == "orchard-prompts-v1"


def test_prompt_source_of_a_submission(tmp_path, fresh_import):
    assert prompt_source("1.0") == "apple-pi" and prompt_source("orchard-prompts-v1") == "orchard"
    assert prompt_source("mine-2") == "custom" and prompt_source(None) == "unknown"
    fresh_import(tmp_path / "empty")
    assert prompt_provenance("1.0")["apple_pi"]["installed"] is False
    fresh_import(stand_in(tmp_path / "site"))
    p = prompt_provenance("1.0")
    assert p["source"] == "apple-pi" and p["apple_pi"]["installed"] and len(p["apple_pi"]["sha256"]) == 64
    assert "apple_pi" not in prompt_provenance("orchard-prompts-v1")


def _summary(model, prompts):
    row = {c: 0.5 for c in ("Avg.", "P-T", "P-G", "F-T", "F-G", "Ded.", "Grav.", "Mom.", "N1", "Multi", "Sim.", "Real")}
    return {"model": model, "mode": "judged", "protocol": "video", "table_row": row,
            "provenance": {} if prompts is None else {"prompts": prompts}}


def test_tables_mark_runs_made_under_different_prompts(tmp_path, capsys):
    paper = _summary("a", {"source": "apple-pi", "prompt_version": "1.0"})
    ours = _summary("b", {"source": "orchard", "prompt_version": "orchard-prompts-v1"})
    old = _summary("c", None)                      # a summary written before prompts were recorded
    assert mixed_prompts([paper, paper]) == []
    assert "different prompts" not in to_markdown([paper, paper])
    md = to_markdown([paper, ours, old])
    assert "| a | judged | apple-pi 1.0 |" in md and "| b | judged | orchard orchard-prompts-v1 |" in md
    assert "| c | judged | unknown |" in md and "Rows answered different prompts" in md
    assert to_csv([paper]).splitlines()[1].startswith("a,judged,video,apple-pi 1.0,")
    for name, s in (("a", paper), ("b", ours)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(s))
    assert main(["table", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "answered different prompts" in capsys.readouterr().err
