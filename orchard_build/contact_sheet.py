"""Contact sheets: one PNG per task showing, for each case, the inputs, a mid-video frame and the
four reference images, so a person can check a whole task at a glance."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

from .io import read_json
from .overlay import font
from .video import decode_mp4, write_png

COLUMNS = (("first frame", "first_frame"), ("annotated", "annotated_first_frame"), ("video @ T/2", None),
           ("video @ T", None), ("P-T ref", "ref_perception_text"), ("P-G ref", "ref_perception_graphic"),
           ("F-T ref", "ref_formulation_text"), ("F-G ref", "ref_formulation_graphic"))


def _thumb(img: np.ndarray, width: int) -> Image.Image:
    im = Image.fromarray(img[..., :3].astype(np.uint8))
    return im.resize((width, round(im.height * width / im.width)), Image.Resampling.LANCZOS)


def task_sheet(dataset: Path, task: str, thumb_width: int = 320, per_task: int = 6) -> np.ndarray | None:
    index = read_json(dataset / "dataset.json")
    cases = [c for c in index["cases"] if c.get("task") == task][:per_task]
    if not cases:
        return None
    rows = []
    for entry in cases:
        case = dataset / entry["path"]
        doc = read_json(case / "case.json")
        art = doc["artifacts"]
        if "video" not in art:
            continue
        frames, _ = decode_mp4(case / art["video"])
        cells = []
        for title, role in COLUMNS:
            if role is None:
                img = frames[len(frames) // 2] if title.endswith("T/2") else frames[-1]
            else:
                img = np.asarray(Image.open(case / art[role]).convert("RGB"))
            cells.append(_thumb(img, thumb_width))
        rows.append((doc["case_id"], doc.get("description", ""), cells))
    if not rows:
        return None
    th = rows[0][2][0].height
    header, caption = 26, 22
    W = thumb_width * len(COLUMNS)
    H = header + len(rows) * (th + caption)
    sheet = Image.new("RGB", (W, H), (255, 255, 255))
    d = ImageDraw.Draw(sheet)
    for k, (title, _) in enumerate(COLUMNS):
        d.text((k * thumb_width + 6, 5), title, fill=(0, 0, 0), font=font(15, True))
    y = header
    for case_id, desc, cells in rows:
        d.text((6, y + 3), f"{case_id} — {desc}", fill=(40, 40, 40), font=font(13))
        y += caption
        for k, cell in enumerate(cells):
            sheet.paste(cell, (k * thumb_width, y))
            d.rectangle([k * thumb_width, y, (k + 1) * thumb_width - 1, y + th - 1], outline=(200, 200, 200))
        y += th
    return np.asarray(sheet)


def write_sheets(dataset: Path, out: Path, per_task: int = 6, thumb_width: int = 320) -> list[Path]:
    index = read_json(dataset / "dataset.json")
    written = []
    for task in sorted({c.get("task") for c in index["cases"]}):
        sheet = task_sheet(dataset, task, thumb_width, per_task)
        if sheet is not None:
            path = out / f"{task}.png"
            write_png(path, sheet)
            written.append(path)
    return written
