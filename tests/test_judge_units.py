"""Unit tests of the judging helpers: formula normalisation and equivalence, reply parsing policy,
prompt templates (exact criterion keys), the agreement statistics, the cache."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from orchard_eval.judges import JudgeParseError
from orchard_eval.judging import mathtext as MT
from orchard_eval.judging.agreement import agreement, format_table, pearson, spearman
from orchard_eval.judging.cache import JudgeCache, cache_key
from orchard_eval.judging.prompts import PROMPT_DIR, PromptError, load_prompts, parse_prompt
from orchard_eval.judging.replies import parse_reply
from orchard_eval.rubrics import RUBRICS

VOCAB = MT.Vocab.build(displays=[("theta", "θ"), ("mu", "μ"), ("g", "g"), ("a", "a"), ("m_1", "m_1"),
                                 ("m_2", "m_2"), ("u_1", "u_1"), ("u_2", "u_2"), ("v_1", "v_1"), ("v_2", "v_2"),
                                 ("v_0", "v_0"), ("h", "h"), ("k", "k"), ("k_s", "k_s"), ("F", "F"), ("x", "x")])


@pytest.mark.parametrize("text", [
    "a = g·(sinθ − μ·cosθ)", "a = g·(sinθ - μ·cosθ)", "a=g(sin0-ucos0)", "a = g·(sin θ − µ·cos θ)",
    "A = G(sinθ - μcosθ)", "a = g*(sin(theta) - mu*cos(theta))", "g·(sinθ − μ·cosθ) = a",
])
def test_ocr_variants_are_equivalent(text):
    want = MT.parse("a = g·(sinθ − μ·cosθ)", VOCAB)
    assert MT.system_match(MT.parse(text, VOCAB), want) == 1.0


@pytest.mark.parametrize("text", ["a = g·(sinθ + μ·cosθ)", "a = g·(sin²θ − μ·cosθ)", "F = −k_s·x", "a = g·sinθ"])
def test_distractors_are_not_equivalent(text):
    want = MT.parse("a = g·(sinθ − μ·cosθ)", VOCAB)
    assert MT.system_match(MT.parse(text, VOCAB), want) == 0.0


def test_powers_halves_subscripts_degrees_systems():
    want = MT.parse("y(t) = h + v_0·t − (1/2)·g·t²", VOCAB)
    for t in ["y(t) = h + v0·t - (1/2)·g·t2", "y = h + v_0t − ½gt²", "y(t)=h+vo·t-(1/2)g·t²"]:
        assert MT.system_match(MT.parse(t, VOCAB), want) == 1.0, t
    sub = MT.parse("a = 9.81·(sin(30°) − 0.42·cos(30°))", VOCAB)
    assert MT.system_match(MT.parse("a = 9.81(sin(30o) - 0.42cos(30o))", VOCAB), sub) == 1.0
    assert sorted(sub.numbers()) == [0.42, 9.81, 30.0, 30.0]
    sysw = MT.parse("v_1 = ((m_1 − m_2)·u_1 + 2·m_2·u_2)/(m_1 + m_2), v_2 = ((m_2 − m_1)·u_2 + 2·m_1·u_1)/(m_1 + m_2)", VOCAB)
    assert len(sysw.equations) == 2
    ocr = "v1 = ((m1 - m2)u1 + 2m2u2)/(m1 + m2), v2 = ((m2 - m1)u2 + 2m1u1)/(m1 + m2)"
    assert MT.system_match(MT.parse(ocr, VOCAB), sysw) == 1.0
    half = MT.parse("v_1 = ((m_1 − m_2)·u_1 + 2·m_2·u_2)/(m_1 + m_2)", VOCAB)
    assert MT.system_match(half, sysw) == 0.5
    chained = MT.parse("v_1 = v_2 = (m_1·u_1 + m_2·u_2)/(m_1 + m_2)", VOCAB)
    assert len(chained.equations) == 2


def test_garbage_does_not_raise():
    for t in ["", "=", "((((", "a = ", "sin", "x = 1/0", "£$%"]:
        p = MT.parse(t, VOCAB)
        assert isinstance(p.ok, bool)


def test_number_scores():
    assert MT.multiset_f1([9.81, 0.42], [9.81, 0.42]) == 1.0
    assert MT.multiset_f1([9.8, 0.42], [9.81, 0.42]) == pytest.approx(0.5)
    assert MT.recall([2.0, 1.0], [1.0, 2.0]) == 1.0
    assert MT.sequence_similarity(["=", "+"], ["=", "-"]) == 0.5


# -- replies -------------------------------------------------------------------------------------
def test_reply_policy_clamps_slop_rejects_rescaling():
    R = RUBRICS["deduction_video"]
    base = {k: 0.5 for k in R.criteria}
    r, _ = parse_reply(json.dumps(dict(base, visual_quality=1.03, physics_accuracy=-0.02)), R)
    assert r.scores["visual_quality"] == 1.0 and r.scores["physics_accuracy"] == 0.0
    r, _ = parse_reply(json.dumps(dict(base, visual_quality=None, physics_accuracy="n/a")), R)
    assert r.scores["visual_quality"] == -1.0 and r.scores["physics_accuracy"] == -1.0
    r, _ = parse_reply(json.dumps(dict(base, visual_quality=True, physics_accuracy="0.25")), R)
    assert r.scores["visual_quality"] == 1.0 and r.scores["physics_accuracy"] == 0.25
    for bad in (7, 85, -0.5, "high"):
        with pytest.raises(JudgeParseError):
            parse_reply(json.dumps(dict(base, visual_quality=bad)), R)
    r, notes = parse_reply("```json\n" + json.dumps(base)[:-1] + ",}\n```", R)
    assert r.scores["visual_quality"] == 0.5 and notes


# -- prompts -------------------------------------------------------------------------------------
def test_every_rubric_has_a_prompt_asking_for_exactly_its_keys():
    ps = load_prompts()
    assert set(ps.prompts) == set(RUBRICS)
    for name, rp in ps.prompts.items():
        keys = set(__import__("re").findall(r'"([a-z0-9_]+)": <number>', rp.template))
        assert keys == set(RUBRICS[name].criteria), name
        assert '"feedback"' in rp.template


def test_prompt_validation():
    import yaml

    doc = yaml.safe_load((PROMPT_DIR / "perception_graphic.yaml").read_text())
    parse_prompt(doc)
    with pytest.raises(PromptError, match="criterion keys"):
        parse_prompt(dict(doc, template=doc["template"].replace('"coord_axes"', '"axes"')))
    with pytest.raises(PromptError, match="placeholders"):
        parse_prompt(dict(doc, template=doc["template"] + " ${secret_thing}"))
    with pytest.raises(PromptError, match="unknown rubric"):
        parse_prompt(dict(doc, rubric="nope"))


def test_rendering_fills_placeholders():
    rp = load_prompts()["deduction_keyframe"]
    from orchard_eval.judging.prompts import prompt_values

    assert "t = 0.50 s" in rp.render(prompt_values({"time_point": 0.5}))


# -- cache ---------------------------------------------------------------------------------------
def test_cache_roundtrip_and_corruption(tmp_path):
    c = JudgeCache(tmp_path)
    k = cache_key({"model": "m", "text": "hello"})
    assert c.get(k) is None
    c.put(k, {"scores": {"a": 0.5}})
    assert c.get(k)["scores"] == {"a": 0.5}
    c.path(k).write_text("{torn")
    assert c.get(k) is None
    with pytest.raises(ValueError):
        c.path("../../etc/passwd")


# -- agreement -----------------------------------------------------------------------------------
def _write(dir_, recs):
    dir_.mkdir(parents=True, exist_ok=True)
    (dir_ / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs) + '{"torn')


def test_agreement_table14_form(tmp_path):
    rng = np.random.default_rng(0)
    A, B = [], []
    for mi, model in enumerate(["m1", "m2", "m3", "m4", "m5"]):
        for st in ("perception_text", "deduction"):
            for c in range(4):
                for r in range(3):
                    s = 0.15 * mi + rng.uniform(0, 0.1)
                    base = {"case_id": f"P/T/{c:06d}", "subtrack": st, "rollout": r, "model": model}
                    A.append(dict(base, score=s))
                    B.append(dict(base, score=min(1.0, 0.9 * s + 0.05)))
    A.append({"case_id": "x", "subtrack": "deduction", "rollout": 0, "model": "m1", "score": None})
    _write(tmp_path / "a", A)
    _write(tmp_path / "b", B)
    res = agreement(tmp_path / "a", tmp_path / "b")
    assert res["n_paired"] == 5 * 2 * 4 * 3
    assert res["overall"]["model"]["pearson"] == pytest.approx(1.0) and res["overall"]["model"]["spearman"] == pytest.approx(1.0)
    assert res["subtracks"]["deduction"]["model"]["n_models"] == 5
    assert res["overall"]["response"]["pearson"] > 0.99
    assert "Overall model average" in format_table(res)


def test_correlations_edge_cases():
    assert pearson([1, 2], [1, 2]) is None
    assert pearson([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2, 2, 3], [1, 2, 2, 3]) == pytest.approx(1.0)
    assert math.isclose(pearson([1, 2, 3], [2, 4, 6]), 1.0)


# -- schemas -------------------------------------------------------------------------------------
def _validator(name):
    from pathlib import Path

    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource

    d = Path(__file__).resolve().parent.parent / "schemas"
    reg = Registry()
    for f in d.glob("eval_judge_*.schema.json"):
        doc = json.loads(f.read_text())
        reg = reg.with_resource(doc["$id"], Resource.from_contents(doc))
        reg = reg.with_resource(f.name, Resource.from_contents(doc))
    return Draft202012Validator(json.loads((d / name).read_text()), registry=reg)


def test_prompt_files_and_cache_entries_follow_their_schemas(tmp_path):
    import yaml

    v = _validator("eval_judge_prompt.schema.json")
    for f in PROMPT_DIR.glob("*.yaml"):
        assert not list(v.iter_errors(yaml.safe_load(f.read_text()))), f
    c = JudgeCache(tmp_path)
    k = cache_key({"x": 1})
    c.put(k, {"judge": "openai", "model": "m", "base_url": "", "rubric": "perception_text", "prompt_version": "1.0.0",
              "scores": {"a": 0.5, "b": -1.0}, "feedback": "", "repairs": [], "reply": "{}"})
    doc = json.loads(c.path(k).read_text())
    assert not list(_validator("eval_judge_cache_entry.schema.json").iter_errors(doc))
    rv = _validator("eval_judge_result.schema.json")
    assert not list(rv.iter_errors({"scores": {"a": 1.0, "b": -1}}))
    assert list(rv.iter_errors({"scores": {"a": 1.5}}))


def test_agreement_reads_folders_of_runs_and_cli(tmp_path, capsys):
    from orchard_eval.cli import main

    for judge, scale in (("a", 1.0), ("b", 0.8)):
        for mi, model in enumerate(["m1", "m2", "m3"]):
            recs = [{"case_id": f"P/T/{c:06d}", "subtrack": "deduction", "rollout": 0, "model": model,
                     "score": scale * (0.2 * mi + 0.01 * c)} for c in range(5)]
            _write(tmp_path / judge / model, recs)
    res = agreement(tmp_path / "a", tmp_path / "b")
    assert res["n_paired"] == 15 and res["overall"]["model"]["pearson"] == pytest.approx(1.0)
    assert main(["agreement", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    assert "Overall model average" in capsys.readouterr().out


def test_product_dot_read_as_period_is_a_product():
    want = MT.parse("v_1 = 2·9.81·h", VOCAB)
    assert MT.system_match(MT.parse("v_1 = 2.9.81·h", VOCAB), want) == 1.0
    assert MT.system_match(MT.parse("v_1 = 2.g·h", VOCAB), MT.parse("v_1 = 2·g·h", VOCAB)) == 1.0


def test_element_scores_are_per_equation_and_exact():
    want = MT.parse("v_1 = (m_1 - m_2)·u_1/(m_1 + m_2), v_2 = 2·m_1·u_1/(m_1 + m_2)", VOCAB)
    # one equation right, the other with a wrong structure (swapped difference): half credit + not all right
    got = MT.parse("v_1 = (m_2 - m_1)·u_1/(m_1 + m_2), v_2 = 2·m_1·u_1/(m_1 + m_2)", VOCAB)
    v, c, o = MT.element_scores(got, want, VOCAB)
    assert (v, c, o) == (1.0, 1.0, 0.25)
    # another law altogether: symbols and operators wrong; the equation it pairs with (v_1, no number)
    # has the right constants (none), the unpaired v_2 counts as wrong
    assert MT.element_scores(MT.parse("F = k·x", VOCAB), want, VOCAB) == (0.0, 0.25, 0.0)


def test_numbers_are_quantities_not_glyphs():
    from orchard_eval.judging import ocr as OCR

    assert OCR.numbers("g = 9.81 m/s²") == [9.81]
    assert OCR.numbers("v0 = 2,5 m/s, m_1 = 3") == [2.5, 3.0]
    assert OCR.numbers_kept("m = 17.00 kg", "m=17.00kg") == 1.0
    assert OCR.numbers_kept("m = 17.00 kg", "m = 12.00 kg") == 0.0      # one glyph, a wrong quantity
    assert OCR.numbers_kept("θ = 35°", "θ = 35°, extra 4") == 1.0
    assert OCR.numbers_kept("x", "anything") == 1.0


def test_wrapped_rows_join_into_logical_lines():
    from orchard_eval.judging.ocr import TextBox, logical_lines

    rows = [TextBox("D", 1.0, (300, 80, 320, 100)),
            TextBox("v_1 = a + b,", 1.0, (100, 120, 500, 140)),
            TextBox("v_2 = c", 1.0, (200, 143, 400, 163)),
            TextBox("v_1 = 1 + 2,", 1.0, (100, 190, 500, 210)),
            TextBox("v_2 = 3", 1.0, (200, 213, 400, 233))]
    out = logical_lines(rows)
    assert [l.text for l in out] == ["D", "v_1 = a + b, v_2 = c", "v_1 = 1 + 2, v_2 = 3"]
    # a row ending without a separator, or far below, starts a new line
    assert len(logical_lines([rows[1], TextBox("v_2 = c", 1.0, (200, 300, 400, 320))])) == 2


def test_remnant_by_parts_is_not_fooled_by_many_removed_parts():
    from orchard_eval.judging.measure import remnant_by_parts

    bg = np.full((40, 200, 3), 255, np.uint8)
    ann = bg.copy()
    parts = []
    for k in range(4):
        ann[10:20, 10 + 45 * k:40 + 45 * k] = 0
        m = np.zeros(bg.shape[:2], bool)
        m[8:22, 8 + 45 * k:42 + 45 * k] = True
        parts.append(m)
    clean = remnant_by_parts(bg, bg, ann, parts)
    one_left = bg.copy()
    one_left[10:20, 10:40] = 0
    assert clean == 1.0
    assert remnant_by_parts(one_left, bg, ann, parts) <= 0.4


def test_unknown_letters_parse_as_unknown_symbols():
    p = MT.parse("v_1 = ü·ı + ǳ", VOCAB)      # OCR can return any letter; nothing raises
    assert MT.system_match(p, MT.parse("v_1 = a", VOCAB)) == 0.0


def test_two_periods_in_a_number_resolved_by_the_expected_numbers():
    assert MT.resolve_dots("F_N = 1.63.9.81, a = 0", [1.63, 9.81, 0.0]) == "F_N = 1.63*9.81, a = 0"
    assert MT.resolve_dots("v = 2.9.81", [2.0, 9.81]) == "v = 2*9.81"
    assert MT.resolve_dots("x = 3.25", [1.0]) == "x = 3.25"


def _ocr_threads_in_child(q):
    from orchard_eval.judging import ocr

    q.put(ocr._thread_params())


def test_ocr_runs_one_thread_per_pool_worker_and_honours_the_override(monkeypatch):
    import multiprocessing as mp

    from orchard_eval.judging import ocr

    monkeypatch.delenv("ORCHARD_OCR_THREADS", raising=False)
    assert ocr._thread_params() == {}                      # the driver: onnxruntime's default (every core)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_ocr_threads_in_child, args=(q,))
    p.start()
    got = q.get(timeout=60)
    p.join()
    assert got["EngineConfig.onnxruntime.intra_op_num_threads"] == 1
    monkeypatch.setenv("ORCHARD_OCR_THREADS", "3")
    assert ocr._thread_params()["EngineConfig.onnxruntime.intra_op_num_threads"] == 3


def test_a_ratio_within_the_measurements_own_noise_scores_full():
    from orchard_eval.judging import measure as ME

    assert ME.log_ratio_score(15, 16, 1.5, within=1 + 1 / 15) == 1.0
    assert ME.log_ratio_score(15, 16, 1.5) < 0.9                   # without the allowance it costs
    # beyond the allowance the score still reaches 0 where it did
    assert ME.log_ratio_score(1.6, 1.0, 1.6, within=1.1) == pytest.approx(0.0, abs=1e-9)
    assert ME.log_ratio_score(1.3, 1.0, 1.6) < ME.log_ratio_score(1.3, 1.0, 1.6, within=1.1) < 1.0


def test_a_pale_shaft_joins_its_arrow_head_but_another_colour_does_not():
    from orchard_eval.judging import measure as ME

    head = np.zeros((20, 40), bool)
    head[8:13, 30:35] = True
    shaft = np.zeros_like(head)
    shaft[10, 5:30] = True
    other = np.zeros_like(head)
    other[2:8, 33] = True                    # touches the head, but is not in `allowed`
    grown = ME.grown_through(head, head | shaft)
    assert grown[10, 5] and grown[10, 29] and not grown[2, 33]
    assert ME.grown_through(head, shaft).sum() == head.sum()      # nothing allowed touches: the seed


def test_an_answer_line_is_measured_over_the_references_extent_moved_onto_it():
    from orchard_eval.judging.programmatic import _measured_box

    ref = (10.0, 20.0, 130.0, 54.0)          # the reference's box takes in the label's frame
    tight = (14.5, 25.5, 126.5, 49.5)        # a re-coded answer's detector box falls inside it
    assert _measured_box(tight, ref) == pytest.approx((10.5, 20.5, 130.5, 54.5))
    larger = (0.0, 10.0, 200.0, 70.0)         # text drawn larger than the reference's is kept whole
    assert _measured_box(larger, ref) == pytest.approx(larger)


def test_a_case_holds_still_only_when_no_object_moves_in_the_image():
    from types import SimpleNamespace

    from orchard_eval.judge_fidelity.bench import STILL_PX, holds_still

    def case(drift_px):
        times = np.linspace(0.0, 2.0, 9)
        return SimpleNamespace(
            object_tracks=lambda: SimpleNamespace(times=times),
            image_centres=lambda t: {"a": (100.0, 50.0), "b": (200.0 + drift_px * t / 2.0, 80.0)})

    assert holds_still(case(0.0)) and holds_still(case(0.5 * STILL_PX))
    assert not holds_still(case(3 * STILL_PX))
    assert not holds_still(SimpleNamespace(object_tracks=lambda: None))


def test_a_short_arrows_head_is_found_where_other_arrows_meet_its_tail():
    """Axes drawn from one origin: a short axis's head is half its length, and a blurred junction
    with the other axes widens its tail end; the head is still the end that is wider than the shaft."""
    import cv2

    from orchard_eval.judging import measure as ME

    img = np.full((60, 60, 3), 255, np.uint8)
    mask = np.zeros((60, 60), np.uint8)
    cv2.line(mask, (10, 30), (18, 30), 1, 2)                          # shaft
    cv2.fillPoly(mask, [np.array([[18, 26], [26, 30], [18, 34]])], 1)  # head: half the length
    cv2.circle(mask, (12, 30), 3, 1, -1)                               # the junction by the tail
    shape = ME.arrow_shape(mask.astype(bool), img)
    assert shape is not None and shape.direction[0] > 0.95, shape.direction
    flipped = ME.arrow_shape(mask[:, ::-1].astype(bool), img)
    assert flipped.direction[0] < -0.95


def test_a_speed_label_read_without_its_equals_sign_keeps_its_value():
    from orchard_eval.judging import programmatic as P

    assert P.SPEED_LABEL.match("v 0.93") is None                     # not the asked format
    assert P.UNSIGNED_LABEL.match("v 0.93").group(1) == "0.93"       # but the value is read
    assert P._label_rank("v 0.93") == P._label_rank("v = 0.93") == 2 > P._label_rank("0.93")
    assert P.UNSIGNED_LABEL.match("v0.93") is None and P.UNSIGNED_LABEL.match("vel 3") is None
