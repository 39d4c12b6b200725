"""Per-case visuals of a report page: answer images next to the case's reference image (P-T, P-G,
F-T, F-G) and, for Deduction rollout 0, GT and answer frames with both objects' mask outlines per
timestamp plus the image-plane centroid trajectories (GT vs answer). Anything missing on disk
becomes a note on the page, never an error: a report must open even for a broken run."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

from .html import esc

THUMB = 320  # thumbnails, never full frames: a 400-case report stays small and fast
REFERENCE_ROLES = {"perception_text": "perception_text", "perception_graphic": "perception_graphic",
                   "formulation_text": "formulation_text", "formulation_graphic": "formulation_graphic",
                   "P-T": "perception_text", "P-G": "perception_graphic", "F-T": "formulation_text",
                   "F-G": "formulation_graphic"}
GT_COLOUR = (0, 200, 255)      # cyan: GT mask outline
ANSWER_COLOUR = (255, 40, 200)  # magenta: answer mask outline


def save_thumb(arr: np.ndarray, dst: Path) -> None:
    im = Image.fromarray(np.ascontiguousarray(arr[..., :3]).astype(np.uint8))
    im.thumbnail((THUMB, THUMB))
    dst.parent.mkdir(parents=True, exist_ok=True)
    im.save(dst, "PNG")


def load_case_once(dataset: str | None, cid: str):
    """The EvalCase `cid` of the dataset, or None (dataset gone, case left out)."""
    if dataset is None:
        return None
    from orchard_eval.cases import load_dataset

    try:
        ds = load_dataset(dataset, case_ids=[cid])
    except Exception:  # noqa: BLE001 - a broken dataset must not stop the page
        return None
    return ds.cases.get(cid)  # cases keyed by case id


def _img(href: str, alt: str) -> str:
    return f'<figure><img class="thumb" alt="{esc(alt)}" src="{esc(href)}"><figcaption>{esc(alt)}</figcaption></figure>'


def _missing(what: str) -> str:
    return f'<figure><div class="warn">missing: {esc(what)}</div></figure>'


def reference_block(case, rec: dict, pred_root: Path | None, out: Path, stem: str, tag: str) -> str:
    """Answer image (thumbnail) next to the reference image for an image subtrack."""
    role = REFERENCE_ROLES[rec["subtrack"]]
    cells = []
    art = (rec.get("artifact") or {}).get("path")
    src = pred_root / art if pred_root is not None and art else None
    name = f"{stem}__{tag}_answer.png"
    try:
        if src is None or not src.is_file():
            raise FileNotFoundError
        from orchard_eval.media import last_decodable_frame, read_image, sniff_format

        # video protocol: the answer is the video's last decodable frame, as the scorer reads it (App. D.1)
        is_video = sniff_format(src) in ("mp4", "webm", "avi", "gif")
        arr = last_decodable_frame(src)[0] if is_video else read_image(src)
        save_thumb(arr, out / "thumbs" / name)
        cells.append(_img(f"../thumbs/{name}", f"answer ({art}{', last frame' if is_video else ''})"))
    except Exception:  # noqa: BLE001 - missing or undecodable answer: say it
        cells.append(_missing(f"answer image {art or '(no artifact)'}"
                              + ("" if pred_root is not None else " (prediction dir unknown)")))
    ref_name = f"{stem}__ref_{role}.png"
    ref = None
    if case is not None:
        try:
            ref = case.image(role)
        except Exception:  # noqa: BLE001
            ref = None
    if ref is not None:
        if not (out / "thumbs" / ref_name).is_file():
            save_thumb(ref, out / "thumbs" / ref_name)
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


def centroid(mask: np.ndarray | None, shape) -> tuple[float, float] | None:
    """Mask centroid in GT-frame pixel units (answer masks rescaled to the GT frame size)."""
    if mask is None or not mask.any():
        return None
    ys, xs = np.nonzero(mask)
    sy, sx = shape[0] / mask.shape[0], shape[1] / mask.shape[1]
    return float(xs.mean() * sx), float(ys.mean() * sy)


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


def deduction_block(case, rec: dict, pred_root: Path | None, out: Path, stem: str, tag: str) -> str:
    """GT vs answer frames with mask outlines per timestamp, and the centroid trajectory plot."""
    if case is None:
        return '<div class="warn">missing: the case (dataset not on disk), no Deduction frames</div>'
    art = rec.get("artifact") or {}
    idx = art.get("pred_indices")
    if pred_root is None or not art.get("path") or not idx:
        return '<div class="warn">missing: answer video or its chosen frames (prediction dir unknown?)</div>'
    src = pred_root / art["path"]
    if not src.is_file():
        return f'<div class="warn">missing: answer video {esc(art["path"])}</div>'
    try:
        from orchard_eval.media import read_video_frames
        from orchard_eval.objective import answer_segmentations
        from orchard_eval.segment import get_segmenter

        frames_by_idx, _ = read_video_frames(src, idx)
        frames = [frames_by_idx.get(i) for i in idx]
        times = list(case.timestamps)[:len(frames)]
        segs = answer_segmentations(case, frames, get_segmenter("classical"), times)
    except Exception as exc:  # noqa: BLE001 - an undecodable answer still gets its page
        return f'<div class="warn">the Deduction answer could not be drawn: {esc(type(exc).__name__)}: {esc(exc)}</div>'
    cells, tracks, shape = [], {}, None
    for k, t in enumerate(times):
        gi = case.gt_index(t)
        gt_img = case.gt_frame(gi)
        shape = gt_img.shape
        gt_masks = case.gt_object_masks(gi)
        seg = segs[k] if k < len(segs) else None
        ans_masks = dict(getattr(seg, "masks", {}) or {})
        for oid in sorted(set(gt_masks) | set(ans_masks)):
            g, a = tracks.setdefault(oid, ([], []))
            g.append(centroid(gt_masks.get(oid), shape))
            a.append(centroid(ans_masks.get(oid), shape))
        gname, aname = f"{stem}__{tag}_t{k}_gt.png", f"{stem}__{tag}_t{k}_answer.png"
        save_thumb(draw_outlines(gt_img, gt_masks, gt_masks), out / "thumbs" / gname)
        if frames[k] is None:
            ans_cell = _missing(f"answer frame {idx[k]}")
        else:
            fr = frames[k]
            # GT outlines drawn on the answer frame after resizing them to its size
            gt_on_ans = {o: np.asarray(Image.fromarray(m.astype(np.uint8) * 255).resize(
                (fr.shape[1], fr.shape[0]), Image.NEAREST)) > 0 for o, m in gt_masks.items()}
            save_thumb(draw_outlines(fr, gt_on_ans, ans_masks), out / "thumbs" / aname)
            ans_cell = _img(f"../thumbs/{aname}", f"answer frame {idx[k]} at t={t:.2f} s")
        cells.append('<div class="pair">' + _img(f"../thumbs/{gname}", f"GT frame {gi} at t={t:.2f} s")
                     + ans_cell + "</div>")
    legend = ('<p class="legend">Outlines: GT masks cyan, answer masks (classical segmenter) magenta; '
              'the GT outline is also drawn on the answer frame.</p>')
    plot = trajectory_svg(tracks, shape, "image-plane centroid trajectory per object") if shape else ""
    return legend + '<div class="frames">' + "".join(cells) + "</div>" + plot
