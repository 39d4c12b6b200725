"""Real-world cases without a server: ingest at the native fps, masks and drift flags, brush RLE,
derived artifacts, validate and the evaluator's reader."""
from __future__ import annotations

import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
import yaml

from orchard_build.io import read_json
from orchard_build.realworld import masks as MK
from orchard_build.realworld.brush import decode_values, encode_values, mask_to_rle, rle_to_mask
from orchard_build.realworld.ingest import IngestError, ingest
from orchard_build.realworld.media import ClipError, probe_and_decode

SCALE = 0.004  # m per pixel of the synthetic scene
RADIUS_PX = 12
BALL_RGB = (220, 40, 40)
CUBE_RGB = (40, 90, 220)


def make_ball_clip(path: Path, fps, n: int, lead: int = 2, w: int = 320, h: int = 240, g: float = 9.81,
                   second_object: bool = False) -> Path:
    """H.264 clip of a red ball released at rest after `lead` frames (and optionally a resting cube)."""
    import av

    bg = np.zeros((h, w, 3), np.uint8)
    bg[...] = (200, 205, 170)
    bg[h - 16:] = (120, 110, 90)
    yy, xx = np.mgrid[0:h, 0:w]
    frames = []
    for k in range(n):
        t = max(0, k - lead) / float(fps)
        y = 36 + 0.5 * g * t * t / SCALE
        img = bg.copy()
        img[(xx + 0.5 - 110) ** 2 + (yy + 0.5 - y) ** 2 <= RADIUS_PX ** 2] = BALL_RGB
        if second_object:
            img[h - 46:h - 16, 230:260] = CUBE_RGB
        frames.append(img)
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=Fraction(fps))
        s.width, s.height, s.pix_fmt = w, h, "yuv420p"
        s.options = {"crf": "8"}
        for f in frames:
            for p in s.encode(av.VideoFrame.from_ndarray(f, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def ball_description(path: Path, number: int = 1, lead: int = 2, tstar: float = 0.2, internet: bool = False,
                     second_object: bool = False, **extra) -> Path:
    desc = {
        "description": "A red rubber ball dropped from rest onto a bench.",
        "case_number": number, "target_time": tstar, "motion_window": {"start_frame": lead},
        "environment": {"g": 9.81},
        "objects": [{"id": "ball", "shape": "sphere", "material": "rubber", "size": {"radius": RADIUS_PX * SCALE},
                     "mass": 0.05231, "height": 0.8, "annotate": ["mass"],
                     "seed": {"color": list(BALL_RGB), "tolerance": 30}}],
        "scale_m_per_px": SCALE, "scale_procedure": "ruler in the scene",
    }
    if second_object:
        desc["objects"].append({"id": "block", "shape": "cube", "material": "oak", "size": {"edge": 30 * SCALE},
                                "mass": 0.0402, "annotate": ["mass"], "seed": {"color": list(CUBE_RGB), "tolerance": 30}})
    if internet:
        desc["internet"] = {"url": "https://www.youtube.com/watch?v=abcdefghijk", "channel": "Physics Demos",
                            "licence": "CC BY 4.0", "title": "Ball drop"}
    desc.update(extra)
    path.write_text(yaml.safe_dump(desc, sort_keys=False))
    return path


# ---------------------------------------------------------------------------------------------
def test_brush_rle_round_trip_is_bit_exact():
    rng = np.random.default_rng(3)
    for mask in (rng.random((37, 53)) > 0.5, np.ones((300, 400), bool), np.zeros((5, 7), bool),
                 np.pad(np.ones((20, 30), bool), ((10, 40), (50, 3)))):
        rle = mask_to_rle(mask)
        assert all(0 <= b <= 255 for b in rle)
        assert np.array_equal(rle_to_mask(rle, mask.shape[1], mask.shape[0]), mask)
    # runs longer than the widest length field (2**16) are split
    flat = np.concatenate([np.full(70000, 7, np.uint8), np.arange(5, dtype=np.uint8), np.zeros(3, np.uint8)])
    assert np.array_equal(decode_values(encode_values(flat)), flat)


def test_brush_decoder_reads_literal_chunks():
    # hand-assembled: N=3, word 8, widths (3,4,8,16); one literal chunk of 3 words: 5, 6, 255
    bits = f"{3:032b}{7:05b}" + "".join(f"{w - 1:04b}" for w in (3, 4, 8, 16))
    bits += "0" + "00" + f"{2:03b}" + f"{5:08b}{6:08b}{255:08b}"
    bits += "0" * (-len(bits) % 8)
    data = [int(bits[i:i + 8], 2) for i in range(0, len(bits), 8)]
    assert decode_values(data).tolist() == [5, 6, 255]


@pytest.mark.parametrize("fps,n", [(30, 14), (25, 12), (Fraction(30000, 1001), 14)])
def test_probe_keeps_native_rate(tmp_path, fps, n):
    clip = make_ball_clip(tmp_path / "c.mp4", fps, n)
    info, frames = probe_and_decode(clip)
    assert info.fps == Fraction(fps)
    assert len(frames) == n == info.n_frames


def test_ingest_self_recorded_30fps(tmp_path):
    clip = make_ball_clip(tmp_path / "ball.mp4", 30, 14)
    case = ingest(clip, "free_fall", "self-recorded", tmp_path / "ds", ball_description(tmp_path / "d.yaml"))
    assert case == tmp_path / "ds" / "cases" / "UniversalGravitation" / "FreeFall" / "000001"
    c = read_json(case / "case.json")
    assert c["source"] == "self-recorded" and c["gt_fps"] == 30 and c["n_frames"] == 12
    assert c["physics_duration"] == pytest.approx(11 / 30)
    assert (case / "physics_duration.txt").read_text().strip() == f"{11 / 30:g}"
    o = c["objects"][0]
    assert o["mass"] == 0.05231 and o["size"] == {"radius": pytest.approx(RADIUS_PX * SCALE)}
    assert o["density"] * o["volume"] == pytest.approx(o["mass"])
    src = read_json(case / "source.json")
    assert src["fps_rational"] == "30/1" and src["motion_window"]["start_frame"] == 2
    # GT video: the motion window only, at the native rate, frame 0 = condition frame
    from orchard_build.video import decode_mp4, read_png

    video, rate = decode_mp4(case / "gt" / "video.mp4")
    assert len(video) == 12 and rate == pytest.approx(30)
    assert np.array_equal(read_png(case / "first_frame.png"), read_png(case / "gt" / "rgb" / "0000.png"))
    # Table 7 measurements
    meas = read_json(case / "measurement.json")
    by = {(q["name"], q["object"], q["dimension"]): q for q in meas["quantities"]}
    assert by[("mass", "ball", None)]["precision"] == 1e-5 and by[("mass", "ball", None)]["instrument"] == "digital balance"
    assert by[("size", "ball", "radius")]["precision"] == 5e-5
    assert by[("height", "ball", None)]["precision"] == 1e-3
    assert by[("g", None, None)]["value"] == 9.81 and meas["reviewed"] is False
    # velocity at t* from mask velocimetry ≈ g·t (ball released at rest on the condition frame)
    v = read_json(case / "velocity.json")
    assert v["source"] == "measured" and v["frame"] == 6
    ball = v["objects"][0]
    assert ball["speed"] == pytest.approx(9.81 * 0.2, rel=0.05)
    assert ball["velocity_world"][2] < 0 and ball["arrow_direction_image"][1] > 0.99
    # infographic: labels off the object mask; references present
    ann = read_json(case / "annotations.json")
    assert {l["kind"] for l in ann["labels"]} == {"global", "object"}
    mask0 = read_png(case / "gt" / "masks" / "0000.png")
    for lab in ann["labels"]:
        x0, y0, x1, y1 = (int(round(b)) for b in lab["box"])
        assert not mask0[max(0, y0):y1, max(0, x0):x1].any()
    fi = read_json(case / "formula_info.json")
    assert fi["substituted"]["values"]["g"] == 9.81
    for rel in c["artifacts"].values():
        assert (case / rel).exists()


def test_ingest_internet_25fps_keeps_rate_and_metadata(tmp_path):
    clip = make_ball_clip(tmp_path / "web.mp4", 25, 12)
    desc = ball_description(tmp_path / "d.yaml", number=7, internet=True)
    case = ingest(clip, "free_fall", "internet", tmp_path / "ds", desc)
    c = read_json(case / "case.json")
    assert c["gt_fps"] == 25 and c["source"] == "internet"
    src = read_json(case / "source.json")
    assert src["internet"]["licence"] == "CC BY 4.0"
    assert src["internet"]["retained_window"] == {"start_time": 0.08, "end_time": 11 / 25, "start_frame": 2,
                                                  "end_frame": 11}
    ts = read_json(case / "timestamps.json")
    assert ts["fps"] == 25 and all(e["frame"] == max(1, int(e["t"] * 25 + 0.5)) for e in ts["entries"])
    meas = read_json(case / "measurement.json")
    assert meas["fps"] == 25


def test_ingest_refusals(tmp_path):
    clip = make_ball_clip(tmp_path / "web.mp4", 25, 12)
    with pytest.raises(IngestError, match="internet.url"):
        ingest(clip, "free_fall", "internet", tmp_path / "ds", ball_description(tmp_path / "d.yaml"))
    with pytest.raises(IngestError, match="native 25 fps"):
        ingest(clip, "free_fall", "self-recorded", tmp_path / "ds", ball_description(tmp_path / "d.yaml"), fps="24")
    with pytest.raises(IngestError, match="target_time"):
        ingest(clip, "free_fall", "self-recorded", tmp_path / "ds", ball_description(tmp_path / "d.yaml", tstar=5.0))
    with pytest.raises(ClipError):
        ingest(tmp_path / "missing.mp4", "free_fall", "self-recorded", tmp_path / "ds", ball_description(tmp_path / "d.yaml"))
    assert not (tmp_path / "ds" / "cases").exists()


def test_real_world_case_validates_and_loads(tmp_path):
    from orchard_build.validate import validate_dataset
    from orchard_eval.cases import load_dataset

    clip = make_ball_clip(tmp_path / "ball.mp4", 30, 14)
    ingest(clip, "free_fall", "self-recorded", tmp_path / "ds", ball_description(tmp_path / "d.yaml"))
    assert [str(p) for p in validate_dataset(tmp_path / "ds", None)] == []
    ds = load_dataset(tmp_path / "ds", strict=True)
    case = ds.cases["UniversalGravitation/FreeFall/000001"]
    assert case.source == "real" and case.source_detail == "self-recorded" and case.gt_fps == 30
    assert case.n_gt_frames() == 12
    assert case.gt_instances(5).max() == 1
    assert case.image("formulation_graphic") is not None and case.label_map("perception_graphic").max() == 1
    assert case.target_state[0].label.startswith("v = ")


def test_real_world_case_passes_cli_validate(tmp_path):
    clip = make_ball_clip(tmp_path / "ball.mp4", 30, 14)
    ingest(clip, "free_fall", "self-recorded", tmp_path / "ds", ball_description(tmp_path / "d.yaml"))
    out = subprocess.run([sys.executable, "-m", "orchard_build.cli", "validate", str(tmp_path / "ds")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_cli_ingest(tmp_path):
    clip = make_ball_clip(tmp_path / "ball.mp4", 25, 12)
    out = subprocess.run([sys.executable, "-m", "orchard_build.cli", "ingest", str(clip), "--task", "free_fall",
                          "--source", "self-recorded", "--measurements", str(ball_description(tmp_path / "d.yaml")),
                          "--case-number", "12", "--out", str(tmp_path / "ds")], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert read_json(tmp_path / "ds" / "cases" / "UniversalGravitation" / "FreeFall" / "000012" / "case.json")["gt_fps"] == 25
    bad = subprocess.run([sys.executable, "-m", "orchard_build.cli", "ingest", str(clip), "--task", "free_fall",
                          "--source", "internet", "--measurements", str(tmp_path / "d.yaml"), "--out", str(tmp_path / "x")],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "internet.url" in bad.stderr and not (tmp_path / "x" / "cases").exists()


# ---------------------------------------------------------------------------------------------
def _frames(n=14, second=True, fps=30):
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        info, frames = probe_and_decode(make_ball_clip(Path(d) / "c.mp4", fps, n, second_object=second))
    return frames


def test_propagation_tracks_the_ball_and_keeps_seeds():
    frames = _frames()
    seed = MK.seed_from_colors(frames[0], {1: (BALL_RGB, 30), 2: (CUBE_RGB, 30)})
    res = MK.run_pipeline(frames, {0: seed}, {1: "ball", 2: "block"})
    assert np.array_equal(res.masks[0], seed)
    yy, xx = np.mgrid[0:240, 0:320]
    for k in range(len(frames)):
        t = max(0, k - 2) / 30
        y = 36 + 0.5 * 9.81 * t * t / SCALE
        truth = (xx + 0.5 - 110) ** 2 + (yy + 0.5 - y) ** 2 <= RADIUS_PX ** 2
        got = res.masks[k] == 1
        assert np.count_nonzero(truth & got) / np.count_nonzero(truth | got) > 0.8, k
        assert np.count_nonzero(res.masks[k] == 2) > 700
    assert res.frames_to_correct() == []


def test_drift_detection_flags_jumps_and_reseeding_fixes_them():
    frames = _frames(second=False)
    seed = MK.seed_from_colors(frames[0], {1: (BALL_RGB, 30)})
    good = MK.propagate(frames, {0: seed}, [1])
    bad = [m.copy() for m in good]
    bad[6] = np.roll(bad[6], 40, axis=1)          # mask jumps sideways
    bad[9] = np.zeros_like(bad[9])                # mask lost
    flags = MK.detect_drift(bad, frames, {1: "ball"})
    kinds = {(f.frame, f.kind) for f in flags}
    assert (6, "centroid_jump") in kinds and (9, "lost") in kinds
    # a corrected frame re-seeds propagation and is kept verbatim
    reseeded = MK.propagate(frames, {0: seed, 6: good[6]}, [1])
    assert np.array_equal(reseeded[6], good[6])


def test_identity_swap_near_contact_is_flagged():
    h, w = 60, 80
    f0 = np.full((h, w, 3), 200, np.uint8)
    f0[20:40, 10:30] = BALL_RGB
    f0[20:40, 31:51] = CUBE_RGB
    m0 = np.zeros((h, w), np.uint8)
    m0[20:40, 10:30] = 1
    m0[20:40, 31:51] = 2
    m1 = np.where(m0 == 1, 2, np.where(m0 == 2, 1, 0)).astype(np.uint8)  # labels swapped
    flags = MK.detect_drift([m0, m1], np.stack([f0, f0]), {1: "ball", 2: "block"})
    assert {(f.frame, f.kind) for f in flags} >= {(1, "identity_swap"), (1, "contact")}


def test_background_initialiser_orders_objects_left_to_right():
    frames = _frames()
    bg = frames[0].copy()
    bg[:] = (200, 205, 170)
    bg[-16:] = (120, 110, 90)
    seed = MK.seed_from_background(frames[0], bg, [1, 2])
    assert MK.centroid(seed == 1)[0] < MK.centroid(seed == 2)[0]
    assert abs(np.count_nonzero(seed == 1) - np.pi * RADIUS_PX ** 2) < 60
