"""Per-case visuals of a report page: answer images next to the case's reference image (P-T, P-G,
F-T, F-G) and, for Deduction rollout 0, GT and answer frames with both objects' mask outlines per
timestamp plus the image-plane centroid trajectories (GT vs answer). Anything missing on disk
becomes a note on the page, never an error: a report must open even for a broken run."""
from __future__ import annotations

import io
from functools import lru_cache
from pathlib import Path

import numpy as np
from PIL import Image

from .cache import VisualCache, case_sha256, file_sha256, png_to_text, text_to_png
from . import svg
from .html import esc

THUMB = 320  # thumbnails, never full frames: a 400-case report stays small and fast
REFERENCE_ROLES = {"perception_text": "perception_text", "perception_graphic": "perception_graphic",
                   "formulation_text": "formulation_text", "formulation_graphic": "formulation_graphic",
                   "P-T": "perception_text", "P-G": "perception_graphic", "F-T": "formulation_text",
                   "F-G": "formulation_graphic"}
GT_COLOUR = (0, 200, 255)      # cyan: GT mask outline
ANSWER_COLOUR = (255, 40, 200)  # magenta: answer mask outline


@lru_cache(maxsize=2)
def _manifest(dataset: str) -> tuple[dict[str, str], str | None] | None:
    """{case id: case path} and layout of a dataset with a dataset.json, read and checked once per
    process (load_dataset validates the manifest and every path in it: a tenth of a second for 400
    cases, too much to pay on every page); None without a manifest."""
    from orchard_eval.cases import load_dataset, read_json_file

    index_path = Path(dataset) / "dataset.json"
    if not index_path.is_file():
        return None
    load_dataset(dataset, case_ids=())  # raises on a bad manifest
    index = read_json_file(index_path)
    return {str(e["case_id"]): str(e["path"]) for e in index.get("cases", [])}, index.get("layout") or None


def load_case_once(dataset: str | None, cid: str):
    """The EvalCase `cid` of the dataset, or None (dataset gone, case left out, case unreadable)."""
    if dataset is None:
        return None
    from orchard_eval.cases import load_case, load_dataset
    from orchard_eval.paths import safe_join

    try:
        man = _manifest(dataset)
        if man is None:
            return load_dataset(dataset, case_ids=[cid]).cases.get(cid)
        paths, layout = man
        if cid not in paths:
            return None
        return load_case(safe_join(Path(dataset), paths[cid]), case_id=cid, layout=layout, strict=False)
    except Exception:  # noqa: BLE001 - a broken dataset or case must not stop the page
        return None


def _img(href: str, alt: str) -> str:
    return f'<figure><img class="thumb" alt="{esc(alt)}" src="{esc(href)}"><figcaption>{esc(alt)}</figcaption></figure>'


def _missing(what: str) -> str:
    return f'<figure><div class="warn">missing: {esc(what)}</div></figure>'


def thumb_png(arr: np.ndarray) -> bytes:
    """PNG bytes of a thumbnail (at most THUMB px; zlib's default level: at this size it costs about a
    millisecond, as level 1 does, for a file some 20 % smaller)."""
    im = Image.fromarray(np.ascontiguousarray(arr[..., :3]).astype(np.uint8))
    im.thumbnail((THUMB, THUMB))
    buf = io.BytesIO()
    im.save(buf, "PNG")
    return buf.getvalue()


def _write(dst: Path, data: bytes) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)


def last_frame(src: Path, n_hint: int | None) -> np.ndarray:
    """The last decodable frame of a video, as the scorer reads it (App. D.1). With the frame count
    the scorer recorded (`artifact.n_frames`), only that frame is converted to RGB; when the file
    does not end there (changed since scoring), the full scan decides."""
    from orchard_eval.media import iter_video, last_decodable_frame

    if n_hint:
        got, last_index = None, -1
        for i, rgb in iter_video(src, keep=(int(n_hint) - 1,)):
            last_index = i
            if rgb is not None:
                got = rgb
        if got is not None and last_index == int(n_hint) - 1:
            return got
    return last_decodable_frame(src)[0]


def answer_thumb_data(src: Path, n_hint: int | None) -> dict:
    """{"png": base64 PNG, "video": bool} of an image-subtrack answer, or {"error": text}."""
    from orchard_eval.media import read_image, sniff_format

    try:
        # video protocol: the answer is the video's last decodable frame, as the scorer reads it (App. D.1)
        is_video = sniff_format(src) in ("mp4", "webm", "avi", "gif")
        arr = last_frame(src, n_hint) if is_video else read_image(src)
        return {"png": png_to_text(thumb_png(arr)), "video": is_video}
    except Exception as exc:  # noqa: BLE001 - an undecodable answer: say it
        return {"error": f"{type(exc).__name__}: {exc}"}


def reference_block(case, rec: dict, pred_root: Path | None, out: Path, stem: str, tag: str,
                    cache: VisualCache | None = None) -> str:
    """Answer image (thumbnail) next to the reference image for an image subtrack."""
    role = REFERENCE_ROLES[rec["subtrack"]]
    cells = []
    art = rec.get("artifact") or {}
    rel = art.get("path")
    src = pred_root / rel if pred_root is not None and rel else None
    name = f"{stem}__{tag}_answer.png"
    if src is None or not src.is_file():
        cells.append(_missing(f"answer image {rel or '(no artifact)'}"
                              + ("" if pred_root is not None else " (prediction dir unknown)")))
    else:
        cache = cache or VisualCache(None)
        # the answer thumbnail depends on the answer file only (and the code), not on the case
        key = cache.key("answer-thumb", file_sha256(src), "", art.get("n_frames"))
        data = cache.get(key)
        if data is None:
            data = answer_thumb_data(src, art.get("n_frames"))
            cache.put(key, data)
        if "png" in data:
            _write(out / "thumbs" / name, text_to_png(data["png"]))
            cells.append(_img(f"../thumbs/{name}", f"answer ({rel}{', last frame' if data.get('video') else ''})"))
        else:
            cells.append(_missing(f"answer image {rel}: {data.get('error')}"))
    ref_name = f"{stem}__ref_{role}.png"
    ref = None
    if case is not None and not (out / "thumbs" / ref_name).is_file():
        try:
            ref = case.image(role)
        except Exception:  # noqa: BLE001
            ref = None
        if ref is not None:
            _write(out / "thumbs" / ref_name, thumb_png(ref))
    if (out / "thumbs" / ref_name).is_file():
        cells.append(_img(f"../thumbs/{ref_name}", f"reference {role}"))
    else:
        cells.append(_missing(f"reference image {role}"))
    return '<div class="pair">' + "".join(cells) + "</div>"


def outline(mask: np.ndarray) -> np.ndarray:
    """One-pixel inner edge of a boolean mask (morphological: the mask minus its 4-neighbour erosion)."""
    m = mask.astype(bool)
    er = m.copy()
    er[1:, :] &= m[:-1, :]
    er[:-1, :] &= m[1:, :]
    er[:, 1:] &= m[:, :-1]
    er[:, :-1] &= m[:, 1:]
    return m & ~er


def draw_outlines(frame: np.ndarray, gt: dict, ans: dict) -> np.ndarray:
    img = np.ascontiguousarray(frame[..., :3]).astype(np.uint8).copy()
    h, w = img.shape[:2]
    for masks, colour in ((gt, GT_COLOUR), (ans, ANSWER_COLOUR)):
        for m in masks.values():
            if m is None or m.shape[:2] != (h, w):
                continue
            e = outline(m)
            # thicken by one pixel so the outline survives the thumbnail downscale
            e2 = e.copy()
            e2[1:] |= e[:-1]
            e2[:, 1:] |= e[:, :-1]
            img[e2] = colour
    return img


def centroid(mask: np.ndarray | None) -> list[float] | None:
    """Mask centroid (x, y) in pixels; every mask here is at the GT frame size."""
    if mask is None or not mask.any():
        return None
    ys, xs = np.nonzero(mask)
    return [float(xs.mean()), float(ys.mean())]


def trajectory_svg(tracks: dict[str, tuple[list, list]], shape, title: str) -> str:
    """Image-plane paths, GT solid cyan and answer dashed magenta, per object; y grows downwards as in the frame."""
    h, w = shape[:2]
    W = 360
    H = max(int(W * h / max(w, 1)), 120)
    sx, sy = W / max(w, 1), H / max(h, 1)
    parts = [f'<svg class="trajectory" xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H + 20}" '
             f'viewBox="0 0 {W} {H + 20}"><title>{esc(title)}</title>'
             f'<rect x="0" y="0" width="{W}" height="{H}" fill="#fafafa" stroke="#999"/>']
    for oid, (g, a) in sorted(tracks.items()):
        for pts, colour, dash in ((g, "rgb(0,160,210)", ""), (a, "rgb(220,30,170)", ' stroke-dasharray="4 3"')):
            xy = [(x * sx, y * sy) for p in pts if p is not None for x, y in [p]]
            if not xy:
                continue
            d = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5"{dash} points="{d}"/>')
            parts.extend(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2" fill="{colour}"/>' for x, y in xy)
        if g and g[0] is not None:
            parts.append(f'<text x="{g[0][0] * sx + 4:.1f}" y="{g[0][1] * sy - 4:.1f}" font-size="10">{esc(oid)}</text>')
    parts.append(f'<text x="4" y="{H + 14}" font-size="11">GT solid (cyan), answer dashed (magenta)</text></svg>')
    return "".join(parts)


def answer_packet(case, rec: dict, src: Path, protocol: str):
    """The Deduction answer at the case's timestamps exactly as it was scored: frames resized to the
    GT size, the answer's own frame 0 and its source size (the segmenter's context uses both).
    Video: the frames the scorer chose (`artifact.pred_indices`, so no counting pass); image
    protocol: the keyframe of each timestamp."""
    from orchard_eval.canonical import DeductionPacket, canonical_deduction
    from orchard_eval.media import read_video_frames, resize_rgb

    times = tuple(float(t) for t in case.timestamps)
    if protocol == "image":
        return canonical_deduction(case, src, "image")
    idx = list((rec.get("artifact") or {}).get("pred_indices") or [])
    if len(idx) != len(times):
        raise ValueError(f"the record names {len(idx)} chosen frames for {len(times)} timestamps")
    got, _ = read_video_frames(src, {int(i) for i in idx if i is not None} | {0})
    cond = got.get(0)
    resized = {i: resize_rgb(f, case.frame_size) for i, f in got.items()}
    frames = [None if i is None else resized.get(int(i)) for i in idx]
    return DeductionPacket("video", times, idx, frames, condition_frame=resized.get(0),
                           source_size=None if cond is None else (int(cond.shape[1]), int(cond.shape[0])))


def deduction_data(case, rec: dict, src: Path, protocol: str, segmenter: str) -> dict:
    """Everything the Deduction visuals draw, as plain data (cacheable): per timestamp the GT and
    answer thumbnails with outlines, and per object the GT and answer mask-centroid paths."""
    from orchard_eval.canonical import gt_deduction
    from orchard_eval.objective import _segment_sequence
    from orchard_eval.segment import get_segmenter

    pk = answer_packet(case, rec, src, protocol)
    if not pk.ok:
        return {"error": pk.error or "no decodable answer frame"}
    gt = gt_deduction(case, pk.times)
    keep: list = []
    # the scorer's own segmentation path (same context, same chaining of priors), run once
    _, _, _, where, _ = _segment_sequence(case, pk.frames, get_segmenter(segmenter), pk.times, gt.frames,
                                          pk.condition_frame, pk.source_size, keep=keep)
    frames, tracks = [], {}
    for k, t in enumerate(pk.times):
        inst = gt.instances[k]
        gt_masks = {} if inst is None else {o.id: inst == o.instance_id for o in case.objects}
        seg = keep[k] if k < len(keep) else None
        ans_masks = dict(getattr(seg, "masks", {}) or {})
        for oid in sorted(set(gt_masks) | set(ans_masks)):
            g, a = tracks.setdefault(oid, ([], []))
            g.append(centroid(gt_masks.get(oid)))
            a.append(centroid(ans_masks.get(oid)))
        f = pk.frames[k]
        frames.append({"t": t, "gt_index": gt.indices[k], "pred_index": pk.pred_indices[k],
                       "gt_png": png_to_text(thumb_png(draw_outlines(gt.frames[k], gt_masks, gt_masks))),
                       "answer_png": None if f is None else png_to_text(thumb_png(draw_outlines(f, gt_masks, ans_masks)))})
    h, w = gt.frames[0].shape[:2]
    return {"shape": [h, w], "frames": frames, "tracks": tracks, "notes": list(pk.notes),
            "speed": speeds(case, pk.times, where)}


MAX_GT_SPEED_POINTS = 120  # the GT track is dense (every simulator step); a plot needs far fewer points


def _finite(v) -> float | None:
    return float(v) if np.isfinite(v) else None


def speeds(case, times, where) -> dict | None:
    """Speed |v| (m/s) per object: GT from the case's tracks; answer from the located image positions
    back-projected onto the plane the object's GT centre moves in (as the velocity metric and
    tracks.answer_tracks do), differenced between consecutive timestamps. None without camera or GT
    tracks."""
    from orchard_eval import metrics as M

    gt = case.object_tracks()
    if gt is None or case.intrinsic is None or case.extrinsic is None or len(times) < 2:
        return None
    t = np.asarray(times, float)
    out = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        for o in case.objects:
            if o.id not in gt.positions:
                continue
            uv = np.array([[np.nan, np.nan] if w.get(o.id) is None else w[o.id] for w in where], float)
            point, normal = M.motion_plane(gt.positions[o.id], case.extrinsic)
            P = M.backproject_to_plane(uv, case.intrinsic, case.extrinsic, point, normal)
            # differences between consecutive timestamps, placed at the interval midpoints: exact for a
            # constant acceleration, where np.gradient's one-sided end points are not (a free fall
            # sampled at three times would look too slow at its last one)
            v = np.diff(P, axis=0) / np.diff(t)[:, None]
            tm = (t[1:] + t[:-1]) / 2
            step = max(1, len(gt.times) // MAX_GT_SPEED_POINTS)
            keep = gt.times <= t.max() + 1e-9
            gtt, gtv = gt.times[keep][::step], np.linalg.norm(gt.velocities[o.id][keep], axis=1)[::step]
            out[o.id] = {"gt": [[float(x) for x in gtt], [_finite(x) for x in gtv]],
                         "answer": [[float(x) for x in tm], [_finite(x) for x in np.linalg.norm(v, axis=1)]]}
    return out


def speed_svg(sp: dict | None) -> str:
    if not sp:
        return '<p class="legend">velocity vs time: not drawn (the case has no camera or no GT tracks)</p>'
    series = []
    for oid in sorted(sp):
        series.append((f"GT {oid}", *sp[oid]["gt"]))
        series.append((f"answer {oid}", *sp[oid]["answer"]))
    return (svg.lines(series, "speed |v| vs time", w=360, xlabel="t (s)", ylabel="speed (m/s)", ymin=0.0)
            .replace('<svg class="lines"', '<svg class="lines speed"', 1)
            + '<p class="legend">speed: GT solid from the case\'s tracks; answer dashed, its mask positions '
              "back-projected onto each object's GT motion plane, differenced between consecutive timestamps and "
              "drawn at the interval midpoints.</p>")


def deduction_block(case, rec: dict, pred_root: Path | None, out: Path, stem: str, tag: str,
                    cache: VisualCache | None = None) -> str:
    """GT vs answer frames with mask outlines per timestamp, and the centroid trajectory plot."""
    if case is None:
        return '<div class="warn">missing: the case (dataset not on disk), no Deduction frames</div>'
    art = rec.get("artifact") or {}
    protocol = str(rec.get("protocol") or "video")
    if pred_root is None or not art.get("path"):
        return '<div class="warn">missing: the Deduction answer (prediction dir unknown?)</div>'
    src = pred_root / art["path"]
    if protocol == "video" and not src.is_file() or protocol == "image" and not src.is_dir():
        return f'<div class="warn">missing: answer {"video" if protocol == "video" else "keyframes"} {esc(art["path"])}</div>'
    segmenter = str((rec.get("provenance") or {}).get("segmenter") or "classical")
    cache = cache or VisualCache(None)
    try:
        answer_sha = file_sha256(src) if src.is_file() else _dir_sha256(src)
        key = cache.key("deduction", answer_sha, case_sha256(str(case.path)),
                        [protocol, segmenter, art.get("pred_indices"), list(case.timestamps)])
        data = cache.get(key)
        if data is None:
            data = deduction_data(case, rec, src, protocol, segmenter)
            cache.put(key, data)
    except Exception as exc:  # noqa: BLE001 - an undecodable answer still gets its page
        data = {"error": f"{type(exc).__name__}: {exc}"}
    if "error" in data:
        return f'<div class="warn">the Deduction answer could not be drawn: {esc(data["error"])}</div>'
    cells = []
    for k, fr in enumerate(data["frames"]):
        t = fr["t"]
        gname, aname = f"{stem}__{tag}_t{k}_gt.png", f"{stem}__{tag}_t{k}_answer.png"
        _write(out / "thumbs" / gname, text_to_png(fr["gt_png"]))
        where = f"frame {fr['pred_index']}" if fr["pred_index"] is not None else "keyframe"
        if fr["answer_png"] is None:
            ans_cell = _missing(f"answer {where} at t={t:.2f} s")
        else:
            _write(out / "thumbs" / aname, text_to_png(fr["answer_png"]))
            ans_cell = _img(f"../thumbs/{aname}", f"answer {where} at t={t:.2f} s")
        cells.append('<div class="pair">' + _img(f"../thumbs/{gname}", f"GT frame {fr['gt_index']} at t={t:.2f} s")
                     + ans_cell + "</div>")
    legend = ('<p class="legend">Outlines: GT masks cyan, answer masks (the scoring segmenter, '
              f'{esc(segmenter)}) magenta; the GT outline is also drawn on the answer frame.</p>')
    plot = trajectory_svg(data["tracks"], data["shape"], "image-plane centroid trajectory per object")
    return (legend + '<div class="frames">' + "".join(cells) + '</div><div class="plots">' + plot
            + speed_svg(data.get("speed")) + "</div>")


def _dir_sha256(d: Path) -> str:
    """SHA-256 of a keyframe directory (names and bytes of its files)."""
    import hashlib

    h = hashlib.sha256()
    for p in sorted(x for x in d.iterdir() if x.is_file()):
        h.update(p.name.encode() + b"\0" + file_sha256(p).encode())
    return h.hexdigest()
