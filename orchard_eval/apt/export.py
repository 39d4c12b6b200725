"""`orchard-eval apt export`: one self-contained APT question per case (docs/apt.md).

    OUT/manifest.json                      settings and every case's entry (eval_apt_export.schema.json)
    OUT/cases/<case_id>/video.mp4          the GT video, copied byte for byte (encoded losslessly when the
                                           case has PNG frames instead)
    OUT/cases/<case_id>/frames/NN_<t>ms.png  the sampled frames at source resolution
    OUT/cases/<case_id>/prompt.json        the message parts (text / frame number) in order
    OUT/cases/<case_id>/prompt.txt         the same prompt as text, images as <image>
    OUT/cases/<case_id>/gt_chain.json      the GT chain from events.json (eval_apt_chain.schema.json)
    OUT/cases/<case_id>/entry.json         this case's manifest entry (written last: the case is done)

Each case is written into a staging folder and moved into place whole, so an interrupted export
leaves complete cases only; a rerun keeps the cases whose entry matches the settings and writes the
rest. Case ids come from the dataset index (checked by `load_dataset`) and every output path is
joined with `paths.safe_join`, so nothing is written outside OUT; OUT may not lie inside the dataset.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Iterable

from ..atomic import write_json_atomic
from ..cases import CaseFormatError, Dataset, EvalCase, load_dataset, schema_errors
from ..media import MediaError, read_video_frames
from ..paths import UnsafePathError, safe_join
from .observable import case_observable
from .prompt import DEFAULT_FRAMES, PROMPT_VERSION, frame_plan, prompt_as_text, prompt_parts

EXPORT_VERSION = 2   # 2: gt_chain.json holds the shown transitions, the unsure ones apart


def gt_chain_doc(case: EvalCase) -> dict:
    """The case's GT chain: the transitions its video shows, and those it may not (`observable`:
    excused where a reply names them, never required)."""
    ob = case_observable(case)
    shown, unsure = (ob.shown, ob.unsure) if ob is not None else ((), ())

    def rows(events):
        return [{"type": e.type, "t_ms": int(round(1000 * e.t)), "t_s": e.t, "objects": list(e.objects)}
                for e in events]
    return {"case_id": case.case_id, "duration_ms": int(round(1000 * case.physics_duration)),
            "transitions": rows(shown), "unsure": rows(unsure)}


def case_dir(out: Path, case_id: str) -> Path:
    return safe_join(out, f"cases/{case_id}")


def _settings(n_frames: int) -> dict:
    return {"export_version": EXPORT_VERSION, "prompt_version": PROMPT_VERSION, "n_frames": int(n_frames)}


def export_case(case: EvalCase, out: Path, n_frames: int) -> dict:
    """Write one case (staged, then moved into place) and return its manifest entry."""
    from PIL import Image

    if case.events is None:
        raise CaseFormatError(f"{case.case_id}: the case has no events.json (no GT chain)")
    final = case_dir(out, case.case_id)
    src = case.gt_video_file() if case.layout == "orchard" else None
    if src is not None:
        # decoded here rather than through the case's frame cache, which would keep every case's
        # frames alive for the whole export (gigabytes over 400 cases)
        try:
            decoded, n_video = read_video_frames(src)
        except MediaError as exc:
            raise CaseFormatError(f"{case.case_id}: GT video unreadable: {exc}") from exc
    else:
        n_video = case.n_gt_frames()
        decoded = case.gt_frames(range(n_video))
    if n_video != case.n_frames_declared:
        raise CaseFormatError(f"{case.case_id}: the GT video has {n_video} frames, case.json says "
                              f"{case.n_frames_declared}")
    plan = frame_plan(n_video, case.gt_fps, n_frames)
    staged = final.with_name(f".{final.name}.staging-{os.getpid()}")
    shutil.rmtree(staged, ignore_errors=True)
    (staged / "frames").mkdir(parents=True)
    try:
        if src is not None:
            shutil.copyfile(src, staged / "video.mp4")
        else:
            from ..baselines import encode_video

            encode_video(staged / "video.mp4", (decoded[i] for i in range(n_video)), fps=case.gt_fps, lossless=True)
        imgs = decoded
        frame_rows = []
        for f in plan:
            name = f"frames/{f.number:02d}_{f.t_ms:06d}ms.png"
            Image.fromarray(imgs[f.index]).save(staged / name, compress_level=6)
            frame_rows.append({"number": f.number, "index": f.index, "t_ms": f.t_ms, "file": name})
        parts = prompt_parts(plan, n_video, case.gt_fps)
        write_json_atomic(staged / "prompt.json", {"prompt_version": PROMPT_VERSION, "parts": parts})
        (staged / "prompt.txt").write_text(prompt_as_text(parts), encoding="utf-8")
        doc = gt_chain_doc(case)
        write_json_atomic(staged / "gt_chain.json", doc)
        entry = {"case_id": case.case_id, "dir": f"cases/{case.case_id}", "video": "video.mp4",
                 "fps": float(case.gt_fps), "n_video_frames": n_video,
                 "duration_ms": int(round(1000 * (n_video - 1) / case.gt_fps)), "frames": frame_rows,
                 "prompt": "prompt.json", "prompt_text": "prompt.txt", "gt_chain": "gt_chain.json",
                 "n_gt": len(doc["transitions"]), **_settings(n_frames)}
        write_json_atomic(staged / "entry.json", entry)
        final.parent.mkdir(parents=True, exist_ok=True)
        if final.exists():
            shutil.rmtree(final)
        os.replace(staged, final)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    return entry


def _done_entry(out: Path, case_id: str, n_frames: int) -> dict | None:
    p = case_dir(out, case_id) / "entry.json"
    try:
        entry = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or any(entry.get(k) != v for k, v in _settings(n_frames).items()):
        return None
    return entry


def export_dataset(cases: str | Path | Dataset, out: str | Path, n_frames: int = DEFAULT_FRAMES,
                   case_ids: Iterable[str] | None = None) -> tuple[dict, list[str]]:
    """Export every case with events; returns (manifest, notes). Resumes a previous export."""
    ds = cases if isinstance(cases, Dataset) else load_dataset(cases, case_ids=case_ids)
    out = Path(out)
    root = Path(ds.root).resolve()
    real_out = out.resolve()
    if real_out == root or root in real_out.parents:
        raise UnsafePathError(f"{out}: the export may not be written inside the dataset {ds.root}")
    out.mkdir(parents=True, exist_ok=True)
    notes = [f"dataset problem (case skipped): {p}" for p in ds.problems]
    entries = []
    reused = 0
    for cid in sorted(ds.cases):
        case = ds.cases[cid]
        entry = _done_entry(out, cid, n_frames)
        if entry is not None:
            reused += 1
        else:
            try:
                entry = export_case(case, out, n_frames)
            except (CaseFormatError, OSError) as exc:
                notes.append(f"{cid}: not exported: {exc}")
                continue
        entries.append(entry)
    manifest = {"format": "orchard-apt-export", **_settings(n_frames), "tolerance_ms": 200,
                "dataset": {"name": ds.name, "version": ds.version, "root": str(ds.root)},
                "n_cases": len(entries), "cases": entries}
    errs = schema_errors(manifest, "eval_apt_export.schema.json")
    if errs:  # a bug here, not bad input
        raise AssertionError("APT export manifest breaks its schema: " + "; ".join(errs[:5]))
    write_json_atomic(out / "manifest.json", manifest)
    if reused:
        notes.append(f"{reused} case(s) already exported with these settings were kept")
    return manifest, notes
