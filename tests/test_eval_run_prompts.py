"""`orchard-eval prompts`: records per case × subtrack (× timestamp), variants, user templates."""
import json

import pytest

from orchard_eval import synthetic as syn
from orchard_eval.cli import main
from orchard_eval.prompts import PLACEHOLDERS, TemplateError, build_prompts, load_templates, render

CID = "UniversalGravitation/FreeFall/000000"


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    root = tmp_path_factory.mktemp("pds")
    syn.write_orchard_case(root, syn.Scene(width=96, height=64), CID)
    syn.write_index(root, [CID], "orchard")
    return root


def _read(p):
    return [json.loads(x) for x in p.read_text().splitlines()]


def test_video_and_image_protocols(ds, tmp_path):
    out = tmp_path / "v.jsonl"
    assert main(["prompts", "--cases", str(ds), "--protocol", "video", "--out", str(out)]) == 0
    recs = _read(out)
    assert [r["subtrack"] for r in recs] == ["perception_text", "perception_graphic", "formulation_text",
                                             "formulation_graphic", "deduction"]
    for r in recs:
        assert r["input_image"] == f"cases/{CID}/annotated_first_frame.png"
        assert r["num_rollouts"] == 3 and r["prompt_version"] == "orchard-prompts-v1"
        assert not any("{" + k + "}" in r["prompt"] for k in PLACEHOLDERS)
        assert r["expected_output"]["kind"] == "video" and r["expected_output"]["file"].endswith("rollout_XX.mp4")
    ft = recs[2]["prompt"]
    assert "A. x = v·t" in ft and "D. F = q·v·B" in ft
    assert "t = 0.25 s" in recs[3]["prompt"] and "0.5 seconds" in recs[4]["prompt"]
    assert recs[4]["expected_output"]["scored"] == "full_video"
    out = tmp_path / "i.jsonl"
    assert main(["prompts", "--cases", str(ds), "--protocol", "image", "--out", str(out)]) == 0
    recs = _read(out)
    ded = [r for r in recs if r["subtrack"] == "deduction"]
    assert [r["timestamp"] for r in ded] == [0.125, 0.25, 0.5]
    assert "t = 0.125 s" in ded[0]["prompt"]
    assert ded[0]["expected_output"]["file"].endswith("rollout_XX/frame_000_t0.125s.png")
    assert recs[0]["expected_output"]["file"].endswith("rollout_XX.png")


def test_variants(ds):
    default, _ = build_prompts(ds, "video", "default")
    concise, _ = build_prompts(ds, "video", "concise")
    textp, _ = build_prompts(ds, "video", "text-parameter")
    assert all(len(c["prompt"]) < 0.6 * len(d["prompt"]) for c, d in zip(concise, default))
    assert "perception_text" not in {r["subtrack"] for r in textp}
    for r in textp:
        assert r["input_image"] == f"cases/{CID}/first_frame.png"
        assert "g = 9.81" in r["prompt"] and "m = 1.00" in r["prompt"]
    ded = next(r for r in textp if r["subtrack"] == "deduction")
    assert "- env: g = 9.81\n- mass: m = 1.00\n" in ded["prompt"]


def test_user_templates(ds, tmp_path):
    tm = tmp_path / "mine.json"
    tm.write_text(json.dumps({"prompt_version": "mine-2", "families": {"video": {
        "deduction": {"default": "Simulate {physics_duration} s. Keep {braces} as they are.",
                      "expected_output": {"kind": "video"}}}}}))
    recs, notes = build_prompts(ds, "video", templates=tm)
    assert len(recs) == 1 and recs[0]["prompt"] == "Simulate 0.5 s. Keep {braces} as they are."
    assert recs[0]["prompt_version"] == "mine-2" and any("no template" in n for n in notes)
    bad = tmp_path / "bad.yaml"
    bad.write_text("families: [1, 2]\n")
    with pytest.raises(TemplateError):
        load_templates(bad)
    assert main(["prompts", "--cases", str(ds), "--protocol", "video", "--templates", str(bad),
                 "--out", str(tmp_path / "x.jsonl")]) == 2
    with pytest.raises(TemplateError):
        render("at {time_point}", {})


def test_shipped_templates_are_our_own_wording():
    """Guard against pasting the paper's prompt text: none of its characteristic sentences appear."""
    tm = load_templates()
    text = json.dumps(tm["families"])
    for phrase in ("gradually fade to pure white", "Static camera, no zoom, no rotation",
                   "human-drawn annotations", "Exactly ONE is the correct governing equation",
                   "perfectly rigid -- nothing breaks"):
        assert phrase.lower() not in text.lower()
