"""Bad inputs to `orchard-eval run`: each becomes a per-response error that scores 0 (or a refused
input) and is logged; the run never crashes and never writes outside --out."""
import json
import shutil
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from orchard_eval import synthetic as syn
from orchard_eval.cli import main
from orchard_eval.records import read_records

CID = "UniversalGravitation/FreeFall/000000"
CID2 = "NewtonsFirstLaw/UniformLinearMotion/000001"


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _png_header_only(path: Path, w: int, h: int) -> None:
    """A PNG whose header claims w×h (its pixel data is a few bytes): must be refused unread."""
    def chunk(tag, data):
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 64))
                     + chunk(b"IEND", b""))


@pytest.fixture()
def world(tmp_path):
    ds = tmp_path / "ds"
    syn.write_orchard_case(ds, syn.Scene(width=96, height=64), CID)
    syn.write_orchard_case(ds, syn.Scene(width=96, height=64, background_seed=1), CID2,
                           task="uniform_linear_motion")
    syn.write_index(ds, [CID, CID2], "orchard")
    pred = tmp_path / "pred"
    assert main(["baseline", "--kind", "oracle", "--cases", str(ds), "--out", str(pred)]) == 0
    return tmp_path, ds, pred


def _run(ds, pred, out) -> int:
    return main(["run", "--judge", "none", "--cases", str(ds), "--predictions", str(pred), "--out", str(out), "--no-progress"])


def test_bad_media_score_zero_and_are_logged(world):
    tmp, ds, pred = world
    c = pred / "cases" / CID
    (c / "perception_graphic" / "rollout_00.mp4").write_bytes(b"")                         # zero bytes
    good = (c / "formulation_graphic" / "rollout_00.mp4").read_bytes()
    (c / "formulation_graphic" / "rollout_00.mp4").write_bytes(good[: len(good) // 3])     # truncated
    Image.fromarray(np.zeros((64, 96, 3), np.uint8)).save(c / "formulation_text" / "x.png")
    shutil.move(c / "formulation_text" / "x.png", c / "formulation_text" / "rollout_01.mp4")  # mislabelled PNG
    (c / "deduction" / "rollout_00.mp4").write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"\0" * 100)  # no frames
    syn.write_video(c / "deduction" / "rollout_01.mp4", [np.zeros((64, 96, 3), np.uint8)])   # condition frame only
    (c / "perception_text" / "rollout_02.mp4").unlink()                                      # missing
    (c / "deduction" / "rollout_02.mp4").write_bytes(b"not a video at all")                  # garbage
    before = _tree(tmp)
    out = tmp / "res"
    assert _run(ds, pred, out) == 0
    assert {p for p in _tree(tmp) - before if not p.startswith("res")} == set()
    recs = {(r["case_id"], r["subtrack"], r["rollout"]): r for r in read_records(out)}
    assert len(recs) == 2 * 5 * 3
    bad = {("perception_graphic", 0), ("formulation_graphic", 0), ("deduction", 0), ("deduction", 1),
           ("perception_text", 2), ("deduction", 2)}
    for st, r in bad:
        rec = recs[(CID, st, r)]
        assert rec["valid"] is False and rec["score"] == 0.0 and rec["error"]["kind"], (st, r, rec["error"])
    assert recs[(CID, "perception_text", 2)]["error"]["kind"] == "missing"
    assert recs[(CID, "deduction", 1)]["error"]["kind"] == "no_frames"
    # a truncated MP4 keeps its decodable prefix or is refused, never a crash
    assert recs[(CID2, "deduction", 0)]["valid"]
    log = (out / "eval.log").read_text()
    assert "scores 0" in log and f"{CID}/deduction/rollout_01" in log
    s = json.loads((out / "summary.json").read_text())
    assert s["counts"]["invalid"] >= 5 and s["complete"]
    # the affected case's deduction mean counts the invalid rollouts as 0
    assert s["cases"][CID]["deduction"] == 0.0


def test_oversized_png_is_refused_unread(world):
    tmp, ds, _ = world
    pred = tmp / "img"
    assert main(["baseline", "--kind", "blank", "--cases", str(ds), "--out", str(pred), "--protocol", "image"]) == 0
    _png_header_only(pred / "cases" / CID / "perception_graphic" / "rollout_00.png", 20000, 20000)
    kf = sorted((pred / "cases" / CID / "deduction" / "rollout_01").iterdir())
    for p in kf:
        _png_header_only(p, 20000, 20000)
    assert main(["validate-predictions", "--cases", str(ds), "--predictions", str(pred)]) == 1
    out = tmp / "res"
    assert _run(ds, pred, out) == 0
    recs = {(r["case_id"], r["subtrack"], r["rollout"]): r for r in read_records(out)}
    assert recs[(CID, "perception_graphic", 0)]["error"]["kind"] == "oversized"
    assert recs[(CID, "deduction", 1)]["valid"] is False


def test_unknown_case_prediction_is_logged_not_scored(world):
    tmp, ds, pred = world
    extra = pred / "cases" / "UniversalGravitation" / "FreeFall" / "999999" / "deduction"
    extra.mkdir(parents=True)
    shutil.copyfile(pred / "cases" / CID / "deduction" / "rollout_00.mp4", extra / "rollout_00.mp4")
    out = tmp / "res"
    assert _run(ds, pred, out) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["unknown_cases"] == ["UniversalGravitation/FreeFall/999999"]
    assert all(r["case_id"] != "UniversalGravitation/FreeFall/999999" for r in read_records(out))
    assert "unknown_case" in (out / "eval.log").read_text()


@pytest.mark.parametrize("bad_id", ["../../../outside/000000", "/abs/path/000000", "A/B/../../../x"])
def test_unsafe_manifest_is_refused_before_writing(world, bad_id, capsys):
    tmp, ds, pred = world
    doc = json.loads((ds / "dataset.json").read_text())
    doc["cases"][0]["case_id"] = bad_id
    doc["cases"][0]["path"] = bad_id if not bad_id.startswith("/") else bad_id
    (ds / "dataset.json").write_text(json.dumps(doc))
    before = _tree(tmp)
    out = tmp / "res"
    assert _run(ds, pred, out) == 2
    assert "error" in capsys.readouterr().err
    assert _tree(tmp) == before and not out.exists()


def test_symlink_escaping_prediction_dir_scores_zero(world):
    tmp, ds, pred = world
    secret = tmp / "elsewhere.mp4"
    target = pred / "cases" / CID / "deduction" / "rollout_00.mp4"
    shutil.copyfile(target, secret)
    target.unlink()
    target.symlink_to(secret)
    out = tmp / "res"
    assert _run(ds, pred, out) == 0
    rec = next(r for r in read_records(out) if r["case_id"] == CID and r["subtrack"] == "deduction"
               and r["rollout"] == 0)
    assert rec["valid"] is False and rec["error"]["kind"] == "unsafe_path"


def test_missing_submission_is_refused(world, capsys):
    tmp, ds, pred = world
    (pred / "submission.json").unlink()
    assert main(["validate-predictions", "--cases", str(ds), "--predictions", str(pred)]) == 1
    assert _run(ds, pred, tmp / "res") == 2
    assert "submission.json" in capsys.readouterr().err
