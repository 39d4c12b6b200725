"""`orchard-eval apt export`: the APT chain benchmark's inputs, one folder per case.

OUT/
  apt_manifest.json                 schemas/apt_manifest.schema.json: prompt version, frames per case, cases
  cases/<case_id>/video.mp4         the GT video, byte for byte
  cases/<case_id>/frames/NN.png     the sampled frames (at most `frame_width` px wide)
  cases/<case_id>/request.json      schemas/apt_request.schema.json: the prompt and each frame's marker and time
  cases/<case_id>/gt_chain.json     schemas/apt_chain.schema.json: the GT chain from events.json

Each case is written into a temporary folder beside its final place and renamed into it, so an
interrupted export leaves whole cases only; a rerun skips the cases already there with the same
prompt version and frame count.
"""
from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

from PIL import Image

from ..cases import EvalCase, load_dataset, schema_errors
from ..media import resize_rgb
from ..paths import safe_join
from .prompt import DEFAULT_FRAMES, PROMPT_VERSION, chain_prompt, frame_marker, object_names, sample_frames
from .taxonomy import Transition

DEFAULT_FRAME_WIDTH = 640


class ExportError(ValueError):
    """The export cannot proceed (no case with events, an output that is not ours)."""


def chain_doc(case_id: str, chain: Iterable[Transition], duration: float | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {"case_id": case_id, "transitions": [
        {"type": t.type, "t_ms": int(round(t.t * 1000.0)), "objects": list(t.objects)} for t in chain]}
    if duration is not None:
        doc["duration_ms"] = int(round(duration * 1000.0))
    return doc


def request_doc(case: EvalCase, n_frames: int) -> dict[str, Any]:
    frames = sample_frames(case, n_frames)
    return {"case_id": case.case_id, "prompt_version": PROMPT_VERSION, "task": case.task, "pillar": case.pillar,
            "duration_ms": int(round(case.physics_duration * 1000.0)), "fps": case.gt_fps,
            "objects": object_names(case), "prompt": chain_prompt(case, frames),
            "frames": [{"file": f"frames/{k:02d}.png", "index": s.index, "t_ms": s.t_ms,
                        "marker": frame_marker(k, len(frames), s)} for k, s in enumerate(frames)]}


def _write_json(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _complete(folder: Path, n_frames: int) -> bool:
    """A case folder an earlier export finished with the same prompt version and frame count."""
    try:
        req = json.loads((folder / "request.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (req.get("prompt_version") == PROMPT_VERSION and req.get("n_frames_asked") == n_frames
            and (folder / "gt_chain.json").is_file() and all((folder / f["file"]).is_file() for f in req["frames"]))


def export_case(case: EvalCase, root: Path, n_frames: int, frame_width: int) -> Path:
    final = safe_join(root / "cases", case.case_id)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=final.parent))
    try:
        req = request_doc(case, n_frames)
        req["n_frames_asked"] = n_frames
        (tmp / "frames").mkdir()
        frames = case.gt_frames([f["index"] for f in req["frames"]])
        for f in req["frames"]:
            img = frames.get(f["index"])
            if img is None:
                raise ExportError(f"{case.case_id}: GT frame {f['index']} cannot be decoded")
            h, w = img.shape[:2]
            if frame_width and w > frame_width:
                img = resize_rgb(img, (frame_width, max(1, int(round(h * frame_width / w)))))
            Image.fromarray(img).save(tmp / f["file"], format="PNG")
        video = (case.extra.get("artifacts") or {}).get("video")
        if video:
            shutil.copyfile(safe_join(case.path, video), tmp / "video.mp4")
            req["video"] = "video.mp4"
        chain = chain_doc(case.case_id, case.events or (), case.physics_duration)
        for doc, schema in ((req, "apt_request.schema.json"), (chain, "apt_chain.schema.json")):
            errs = schema_errors(doc, schema)
            if errs:
                raise ExportError(f"{case.case_id}: {schema}: " + "; ".join(errs[:3]))
        _write_json(tmp / "request.json", req)
        _write_json(tmp / "gt_chain.json", chain)
        if final.exists():
            shutil.rmtree(final)
        tmp.rename(final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return final


def export(cases: str | Path, out: str | Path, n_frames: int = DEFAULT_FRAMES, frame_width: int = DEFAULT_FRAME_WIDTH,
           progress: Callable[[int], None] | None = None) -> dict[str, Any]:
    """Export every case of the dataset that has events; returns the manifest."""
    if n_frames < 2:
        raise ExportError("at least 2 frames per case")
    ds = load_dataset(cases)
    chosen = [c for _, c in sorted(ds.cases.items()) if c.events is not None]
    if not chosen:
        raise ExportError(f"{cases}: no case has an events.json (nothing to export)")
    root = Path(out)
    manifest_path = root / "apt_manifest.json"
    if root.exists() and any(root.iterdir()) and not manifest_path.is_file():
        raise ExportError(f"{root} exists, is not empty and holds no apt_manifest.json: choose another --out")
    root.mkdir(parents=True, exist_ok=True)
    done = skipped = 0
    for case in chosen:
        folder = safe_join(root / "cases", case.case_id)
        if _complete(folder, n_frames):
            skipped += 1
        else:
            export_case(case, root, n_frames, frame_width)
            done += 1
        if progress:
            progress(1)
    manifest = {"benchmark": "orchard-apt", "prompt_version": PROMPT_VERSION, "n_frames": n_frames,
                "frame_width": frame_width, "dataset": str(Path(cases).resolve()), "dataset_name": ds.name,
                "cases": [{"case_id": c.case_id, "path": f"cases/{c.case_id}", "task": c.task, "pillar": c.pillar,
                           "n_transitions": len(c.events or ())} for c in chosen]}
    errs = schema_errors(manifest, "apt_manifest.schema.json")
    if errs:  # pragma: no cover - our own document
        raise ExportError("; ".join(errs))
    tmp = manifest_path.with_name(manifest_path.name + ".tmp")
    _write_json(tmp, manifest)
    tmp.replace(manifest_path)
    return {"manifest": manifest, "written": done, "skipped": skipped, "problems": list(ds.problems)}
