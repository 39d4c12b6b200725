"""Rendered cases: every shipped config builds with the engine inside the analytic tolerance, and the
images, masks, depth, video and reference answers are right, legible and deterministic."""
import io
import json
from pathlib import Path

import numpy as np
import pytest

from orchard_build.build import build, find_configs
from orchard_build.tasks import TASK_NAMES
from orchard_build.validate import validate_dataset
from orchard_build.video import decode_mp4, read_png
from tests.conftest import FIXTURES, SCENES
from tests.test_build import tree_digest

MATERIALS = SCENES / "materials.yaml"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    out = tmp_path_factory.mktemp("rendered")
    report = build(find_configs(FIXTURES, TASK_NAMES), MATERIALS, out, jobs=2, progress=False)
    assert report.failed == [], "\n".join(f"{c}: {r}" for c, r in report.failed)
    return out


def cases(root: Path):
    for case_json in sorted(root.glob("cases/*/*/*/case.json")):
        yield case_json.parent, json.loads(case_json.read_text())


def test_rendered_dataset_validates(rendered, materials):
    assert [str(p) for p in validate_dataset(rendered, materials)] == []


def test_engine_within_tolerance_or_declared_analytic(rendered):
    for case, doc in cases(rendered):
        diag = json.loads((case / "diagnostics.json").read_text())
        assert doc["provenance"]["playback"] == diag["playback"]
        if diag["playback"] == "engine":
            for oid, entry in diag["objects"].items():
                assert entry["max_deviation"] <= entry["tolerance"], (doc["case_id"], oid)
        else:
            assert diag["playback_reason"]


def test_media_decode_and_counts(rendered):
    for case, doc in cases(rendered):
        frames, fps = decode_mp4(case / "gt" / "video.mp4")
        n, (w, h) = doc["n_frames"], (doc["frame_size"]["width"], doc["frame_size"]["height"])
        assert frames.shape == (n, h, w, 3), doc["case_id"]
        assert fps == pytest.approx(doc["gt_fps"])
        masks = sorted((case / "gt" / "masks").glob("*.png"))
        assert len(masks) == n
        depth = np.load(case / "gt" / "depth.npz")["maps"]
        assert depth.shape == (n, h, w) and depth.dtype == np.float32
        first = read_png(case / "first_frame.png")
        assert first.shape == (h, w, 3)
        # the video is near-lossless: its first frame is the clean first frame up to H.264 rounding
        assert np.abs(frames[0].astype(int) - first.astype(int)).mean() < 2.0
        for role in ("annotated_first_frame", "clean_plate", "ref_perception_text", "ref_perception_graphic",
                     "ref_formulation_text", "ref_formulation_graphic"):
            assert read_png(case / doc["artifacts"][role]).shape[:2] == (h, w)


def test_masks_contain_projected_centres_and_depth_matches(rendered):
    for case, doc in cases(rendered):
        K = np.array(doc["camera"]["intrinsic"])
        E = np.array(doc["camera"]["extrinsic"])
        states = np.load(case / "gt" / "states.npz")
        depth = np.load(case / "gt" / "depth.npz")["maps"]
        src = "engine" if doc["provenance"]["playback"] == "engine" else "analytic"
        n = doc["n_frames"]
        for k in sorted({0, n // 2, n - 1}):
            mask = read_png(case / "gt" / "masks" / f"{k:04d}.png")
            for obj in doc["objects"]:
                p = states[f"{src}/{obj['id']}/position"][k]
                pc = E[:, :3] @ p + E[:, 3]
                u, v = (K @ (pc / pc[2]))[:2]
                iu, iv = int(np.floor(u)), int(np.floor(v))
                if not (0 <= iu < mask.shape[1] and 0 <= iv < mask.shape[0]):
                    continue  # objects leaving the frame are the QA issue's concern
                if mask[iv, iu] != obj["instance_id"]:
                    continue  # the centre may be hidden behind another object
                if obj["shape"] == "sphere":
                    # depth at the centre's pixel: the sphere's front surface along that ray
                    r = obj["size"]["radius"]
                    ray = np.linalg.inv(K) @ np.array([iu + 0.5, iv + 0.5, 1.0])
                    ray /= np.linalg.norm(ray)
                    b = ray @ pc
                    t = b - np.sqrt(max(b * b - (pc @ pc - r * r), 0.0))
                    assert depth[k, iv, iu] == pytest.approx(t * ray[2], abs=3e-3), (doc["case_id"], k)
            centre_hits = 0
            for obj in doc["objects"]:
                p = states[f"{src}/{obj['id']}/position"][k]
                pc = E[:, :3] @ p + E[:, 3]
                u, v = (K @ (pc / pc[2]))[:2]
                if 0 <= u < mask.shape[1] and 0 <= v < mask.shape[0]:
                    centre_hits += int(mask[int(v), int(u)] == obj["instance_id"])
            assert centre_hits >= 1, (doc["case_id"], k)


def test_annotations_inside_frame_off_masks_and_apart(rendered):
    for case, doc in cases(rendered):
        layer = json.loads((case / "annotations.json").read_text())
        mask0 = read_png(case / "gt" / "masks" / "0000.png") > 0
        h, w = mask0.shape
        boxes = [lab["box"] for lab in layer["labels"]]
        for (x0, y0, x1, y1), lab in zip(boxes, layer["labels"]):
            assert 0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h, (doc["case_id"], lab["text"])
            assert not mask0[int(y0):int(np.ceil(y1)), int(x0):int(np.ceil(x1))].any(), (doc["case_id"], lab["text"])
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                a, b = boxes[i], boxes[j]
                assert not (a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]), (doc["case_id"], i, j)
        texts = " ".join(lab["text"] for lab in layer["labels"])
        assert "g = " in texts
        for obj in doc["objects"]:
            if "mass" in obj["annotate"]:
                assert f"m = {obj['mass']:.2f} kg" in texts


def test_reference_backgrounds_are_pure_white(rendered):
    for case, doc in cases(rendered):
        art = doc["artifacts"]
        pt = read_png(case / art["ref_perception_text"])
        layer = json.loads((case / "annotations.json").read_text())
        drawn = np.zeros(pt.shape[:2], bool)
        for lab in layer["labels"]:
            x0, y0, x1, y1 = lab["box"]
            drawn[max(0, int(y0) - 2):int(np.ceil(y1)) + 2, max(0, int(x0) - 2):int(np.ceil(x1)) + 2] = True
        for a in layer["arrows"]:
            xs, ys = zip(a["start"], a["end"])
            drawn[max(0, int(min(ys)) - 12):int(max(ys)) + 12, max(0, int(min(xs)) - 12):int(max(xs)) + 12] = True
        for arc in layer["arcs"]:
            (cx, cy), r = arc["center"], arc["radius"]
            drawn[max(0, int(cy - r) - 4):int(cy + r) + 4, max(0, int(cx - r) - 4):int(cx + r) + 4] = True
        assert (pt[~drawn] == 255).all(), doc["case_id"]
        pg = read_png(case / art["ref_perception_graphic"])
        pg_mask = read_png(case / art["ref_perception_graphic_mask"])
        assert (pg[pg_mask == 0] == 255).all() and (pg_mask > 0).any(), doc["case_id"]
        ft = read_png(case / art["ref_formulation_text"])
        assert (ft[:5] == 255).all() and (ft[-5:] == 255).all() and (ft < 128).any()


def test_rebuild_is_deterministic(rendered, tmp_path):
    picks = [FIXTURES / "inclined_plane" / "000001.yaml", FIXTURES / "perfectly_inelastic_collision" / "000000.yaml",
             FIXTURES / "composition" / "000000.yaml"]
    build(picks, MATERIALS, tmp_path, progress=False)
    again = tree_digest(tmp_path / "cases")
    first = tree_digest(rendered / "cases")
    assert again and all(first[k] == v for k, v in again.items()), [k for k, v in again.items() if first[k] != v]
