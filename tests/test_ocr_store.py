"""The OCR readings kept on disk: a second process (here: a cleared memo and an engine that would
fail) reads them back instead of running the engine; a torn entry is read again, never trusted."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("rapidocr")

from orchard_eval.judging import ocr as OCR  # noqa: E402


def _text_image():
    from PIL import Image, ImageDraw, ImageFont

    from orchard_build.overlay import FONT_DIR

    im = Image.new("RGB", (240, 60), "white")
    ImageDraw.Draw(im).text((10, 15), "m = 3.90 kg", fill=(20, 20, 20), font=ImageFont.truetype(str(FONT_DIR / "DejaVuSans.ttf"), 22))
    return np.asarray(im)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.setattr(OCR, "_memo", type(OCR._memo)())
    OCR.use_store(tmp_path / "ocr")
    yield tmp_path / "ocr"
    OCR.use_store(None)


def test_readings_are_read_back_from_the_store(store, monkeypatch):
    img = _text_image()
    first = OCR.read_text(img, scale=2.0)
    assert first and "3.90" in first[0].text
    files = list(store.glob("*/*.json"))
    assert len(files) == 1
    OCR._memo.clear()

    def no_engine():
        raise AssertionError("the engine ran although the reading was stored")

    monkeypatch.setattr(OCR, "engine", no_engine)
    assert OCR.read_text(img, scale=2.0) == first
    with pytest.raises(AssertionError):   # another scale is another reading
        OCR.read_text(img, scale=1.0)


def test_a_torn_entry_is_read_again(store):
    img = _text_image()
    first = OCR.read_text(img)
    (entry,) = store.glob("*/*.json")
    entry.write_text('{"boxes": [["m = 3', encoding="utf-8")
    OCR._memo.clear()
    assert OCR.read_text(img) == first
    assert entry.read_text(encoding="utf-8").startswith('{"boxes": [["m = 3.90')


def test_the_programmatic_judge_puts_its_store_under_the_cache_dir(tmp_path, monkeypatch):
    from orchard_eval.judging.programmatic import ProgrammaticJudge

    try:
        ProgrammaticJudge(cache_dir=str(tmp_path))
        assert OCR._store == tmp_path / "ocr"
        ProgrammaticJudge(cache_dir="off")
        assert OCR._store is None
        monkeypatch.setenv("ORCHARD_CACHE_DIR", str(tmp_path / "c"))
        ProgrammaticJudge()
        assert OCR._store == tmp_path / "c" / "ocr"
    finally:
        OCR.use_store(None)
