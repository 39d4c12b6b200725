"""Rubric keys, judge protocol, fusion (E.1/E.3), rollout means (D.6) and aggregation (E.4)."""
import json

import pytest
from hypothesis import given, settings, strategies as st

from orchard_eval.aggregate import CaseScore, aggregate, case_scores_from
from orchard_eval.cases import SUBTRACKS
from orchard_eval.fusion import (JUDGED, OBJECTIVE_ONLY, ModeMixError, RolloutScore, fuse, fuse_deduction_keyframes,
                                 keyframe_criteria, rollout_mean)
from orchard_eval.judges import (JudgeParseError, JudgeRequest, Judge, NoneJudge, parse_judge_reply,
                                 validate_scores)
from orchard_eval.rubrics import RUBRICS, rubric_for

# the criterion keys of App. E.1.1, copied from the judge JSON templates
PAPER_KEYS = {
    "perception_text": "text_font_match text_style_match text_size_match text_color_match text_position_match "
                       "text_content_match text_readability axes_color_match axes_style_match axes_size_match "
                       "axes_position_match axes_angle_match velocity_color_match velocity_style_match "
                       "velocity_size_match velocity_position_match no_extra_annotations white_background",
    "perception_graphic": "white_background coord_axes velocity_arrows text_annotations objects_only_from_gt "
                          "object_completeness object_visual_match object_position_match",
    "formulation_text": "option_correct formula_variables_correct formula_constants_correct formula_operators_correct "
                        "substitution_all_replaced substitution_values_correct substitution_unreplaced_correct "
                        "substitution_constants_correct substitution_operators_correct format_3_lines "
                        "background_pure_white",
    "formulation_graphic": "annotations_removed object_position_match object_appearance_match "
                           "arrow_is_borderless_orange arrow_from_center arrow_direction_match "
                           "velocity_label_present_and_format velocity_value_match velocity_label_no_unit",
    "deduction_video": "gen_annotations_removed object_consistency visual_quality motion_smoothness physics_accuracy",
    "deduction_keyframe": "gen_annotations_removed object_consistency visual_quality object_position_match "
                          "physics_accuracy",
}


def all_ones(rubric, value=1.0):
    return {k: value for k in rubric.criteria}


@pytest.mark.parametrize("name", sorted(PAPER_KEYS))
def test_rubric_keys_match_the_paper(name):
    r = RUBRICS[name]
    assert list(r.criteria) == PAPER_KEYS[name].split()
    grouped = [k for g in r.groups for k in g.criteria]
    expected = set(r.criteria) - ({"object_position_match"} if name == "deduction_keyframe" else set())
    if name == "deduction_keyframe":
        expected |= {"motion_smoothness"}
    assert sorted(grouped) == sorted(expected) and len(grouped) == len(set(grouped))
    assert sum(g.weight for g in r.groups) == pytest.approx(1.0)


def test_group_weights_and_objective_placement():
    w = {n: [g.weight for g in RUBRICS[n].groups] for n in RUBRICS}
    assert w["perception_text"] == [0.5, 0.3, 0.2]
    assert w["perception_graphic"] == [0.1, 0.3, 0.3, 0.3]
    assert w["formulation_text"] == [0.2, 0.3, 0.4, 0.1]
    assert w["formulation_graphic"] == [0.1, 0.3, 0.3, 0.3]
    assert w["deduction_video"] == [0.2, 0.2, 0.6]
    obj = {n: {g.name: g.objective for g in RUBRICS[n].groups if g.objective} for n in RUBRICS}
    assert obj["perception_graphic"] == {"spatial": ("mask_iou",)}
    assert obj["formulation_graphic"] == {"object_match": ("mask_iou",)}
    assert obj["deduction_video"] == {"fidelity": ("psnr", "masked_psnr"),
                                      "physics": ("spatial_iou", "spatiotemporal_iou", "weighted_spatial_iou",
                                                  "velocity")}
    assert rubric_for("deduction", "image").name == "deduction_keyframe"


def test_fusion_numbers():
    r = rubric_for("formulation_text")
    s = all_ones(r, 0.0)
    s["option_correct"] = 1.0
    assert fuse(r, s).score == pytest.approx(0.2)
    # P-G: spatial group = mean(position match, IoU)
    pg = rubric_for("perception_graphic")
    s = all_ones(pg)
    s["object_position_match"] = 0.0
    res = fuse(pg, s, {"mask_iou": 0.5})
    assert res.groups["spatial"] == pytest.approx(0.25) and res.score == pytest.approx(0.7 + 0.3 * 0.25)
    # Deduction: eq. (9)-(12)
    dv = rubric_for("deduction")
    s = {"gen_annotations_removed": 1, "object_consistency": 0, "visual_quality": 1, "motion_smoothness": 1,
         "physics_accuracy": 0.5}
    obj = {"psnr": 0.5, "masked_psnr": 0.5, "spatial_iou": 1, "spatiotemporal_iou": 0.5,
           "weighted_spatial_iou": 0.5, "velocity": 0.0}
    exp = 0.2 * 0.5 + 0.2 * 0.75 + 0.6 * (0.5 + 1 + 0.5 + 0.5 + 0) / 5
    assert fuse(dv, s, obj).score == pytest.approx(exp)


def test_not_applicable_criteria_and_groups_renormalise():
    pt = rubric_for("perception_text")
    s = all_ones(pt, 0.5)
    for k in ("velocity_color_match", "velocity_style_match", "velocity_size_match", "velocity_position_match"):
        s[k] = -1
    assert fuse(pt, s).score == pytest.approx(0.5)
    # a whole group not applicable: paper renormalises, published P-T counts it 0
    s = all_ones(pt, 1.0)
    for k in ("text_position_match", "axes_position_match", "axes_angle_match", "velocity_position_match"):
        s[k] = -1
    assert fuse(pt, s).score == pytest.approx(1.0)
    assert fuse(pt, s).weights == {"content": pytest.approx(0.5 / 0.7), "style": pytest.approx(0.2 / 0.7)}
    assert fuse(pt, s, rule="published").score == pytest.approx(0.7)
    # keyframe protocol: velocity undefined -> leaves the physics group
    dv = rubric_for("deduction")
    j = {k: 1.0 for k in dv.criteria}
    assert fuse(dv, j, {"velocity": None, "psnr": 1, "masked_psnr": None}).score == pytest.approx(1.0)
    with pytest.raises(ValueError):
        fuse(dv, {**j, "visual_quality": 1.5})
    with pytest.raises(KeyError):
        fuse(dv, {"visual_quality": 1.0})
    with pytest.raises(KeyError):
        fuse(pt, s, {"psnr": 1.0})


def test_objective_only_mode():
    res = fuse("perception_graphic", None, {"mask_iou": 0.4})
    assert res.mode == OBJECTIVE_ONLY and res.score == pytest.approx(0.4) and res.weights == {"spatial": 1.0}
    assert fuse("perception_text", None).score is None
    ded = fuse("deduction", None, {"psnr": 0.5, "masked_psnr": 0.5, "spatial_iou": 1.0, "spatiotemporal_iou": 1.0,
                                   "weighted_spatial_iou": 1.0, "velocity": 1.0})
    assert ded.score == pytest.approx((0.2 * 0.5 + 0.6 * 1.0) / 0.8)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(set(RUBRICS) - {"deduction_keyframe"})), st.data())
def test_fusion_range(name, data):
    r = RUBRICS[name]
    val = st.one_of(st.floats(0, 1), st.just(-1.0))
    s = {k: data.draw(val) for k in r.criteria}
    obj = {k: data.draw(st.one_of(st.none(), st.floats(0, 1))) for k in r.objective}
    res = fuse(r, s, obj)
    assert res.score is None or 0.0 <= res.score <= 1.0
    if res.score is not None:
        assert sum(res.weights.values()) == pytest.approx(1.0)


def test_keyframe_judging():
    per_t = [{"gen_annotations_removed": 1, "object_consistency": 1, "visual_quality": 1, "object_position_match": 0.2,
              "physics_accuracy": -1},
             {"gen_annotations_removed": 0, "object_consistency": 1, "visual_quality": 1, "object_position_match": 0.4,
              "physics_accuracy": -1}]
    k = keyframe_criteria(per_t)
    assert k["motion_smoothness"] == pytest.approx(0.3) and k["gen_annotations_removed"] == 0.5
    assert k["physics_accuracy"] == -1 and "object_position_match" not in k
    res = fuse_deduction_keyframes(per_t, {"psnr": 1.0})
    assert res.rubric == "deduction_keyframe" and res.groups["physics"] is None


def test_judge_protocol_and_parsing():
    assert isinstance(NoneJudge(), Judge) and NoneJudge().score(None) is None
    r = rubric_for("formulation_graphic")
    doc = {k: 0.5 for k in r.criteria}
    doc["arrow_from_center"] = -1.0
    doc["feedback"] = "fine"
    res = parse_judge_reply("```json\n" + json.dumps(doc) + "\n```", r)
    assert res.scores["arrow_from_center"] == -1.0 and res.feedback == "fine"
    for bad in ("no json", "[1, 2]", json.dumps({**doc, "velocity_value_match": 1.2}),
                json.dumps({**doc, "velocity_value_match": "high"}), json.dumps({"annotations_removed": 1})):
        with pytest.raises(JudgeParseError):
            parse_judge_reply(bad, r)
    with pytest.raises(JudgeParseError):
        validate_scores({**doc, "annotations_removed": float("nan")}, r)
    JudgeRequest("c", "formulation_graphic", r, [])


# ------------------------------------------------------------------------------------------------
# Rollouts and aggregation
# ------------------------------------------------------------------------------------------------
def test_rollout_mean_counts_invalid_and_missing_as_zero(caplog):
    rs = [RolloutScore("c", "deduction", 0, JUDGED, 0.9),
          RolloutScore.invalid("c", "deduction", 1, JUDGED, "undecodable")]
    with caplog.at_level("WARNING", logger="orchard_eval"):
        out = rollout_mean("c", "deduction", rs, 3)
    assert out.score == pytest.approx(0.3) and len(out.invalid) == 2
    assert "undecodable" in caplog.text and "missing rollout" in caplog.text
    with pytest.raises(ModeMixError):
        rollout_mean("c", "deduction", [RolloutScore("c", "deduction", 0, JUDGED, 1.0),
                                        RolloutScore("c", "deduction", 1, OBJECTIVE_ONLY, 1.0)], 3)
    na = rollout_mean("c", "perception_text", [RolloutScore("c", "perception_text", r, OBJECTIVE_ONLY, None)
                                               for r in range(3)], 3)
    assert na.score is None


def _scores():
    # two Grav. sim cases, one Mom. real case; the Mom. case lacks nothing
    cases = {"G/1": ("UniversalGravitation", "sim"), "G/2": ("UniversalGravitation", "sim"),
             "M/1": ("ConservationOfMomentum", "real")}
    vals = {"G/1": 1.0, "G/2": 0.5, "M/1": 0.0}
    return [CaseScore(c, k, vals[c] if k != "deduction" else vals[c] / 2, p, s, JUDGED)
            for c, (p, s) in cases.items() for k in SUBTRACKS]


def test_aggregation_is_over_cases_not_cells():
    agg = aggregate(_scores())
    assert agg.all.per_subtrack["perception_text"] == pytest.approx(0.5)
    assert agg.all.per_subtrack["deduction"] == pytest.approx(0.25)
    assert agg.all.overall == pytest.approx((4 * 1.5 + 0.75) / 15)
    assert agg.pillars["UniversalGravitation"].overall == pytest.approx((4 * 1.5 + 0.75) / 10)
    assert agg.pillars["ConservationOfMomentum"].overall == 0.0 and agg.pillars["MultiLaw"].overall is None
    assert agg.sources["sim"].overall == agg.pillars["UniversalGravitation"].overall
    # the overall is not the mean of the pillar cells
    cells = [agg.pillars[p].overall for p in ("UniversalGravitation", "ConservationOfMomentum")]
    assert agg.all.overall != pytest.approx(sum(cells) / 2)
    row = agg.row()
    assert list(row) == ["P-T", "P-G", "F-T", "F-G", "Ded.", "Grav.", "Mom.", "N1", "Multi", "Sim.", "Real",
                         "Overall"]
    json.dumps(agg.to_dict())


def test_aggregation_guards():
    s = _scores()
    with pytest.raises(ModeMixError):
        aggregate(s[:-1] + [CaseScore("M/1", "deduction", 0.0, "ConservationOfMomentum", "real", OBJECTIVE_ONLY)])
    with pytest.raises(ValueError):
        aggregate(s + [s[0]])
    agg = aggregate(s[1:], expected_cases=["G/1", "G/2", "M/1", "N/9"])
    assert "G/1/perception_text" in agg.incomplete and "N/9/deduction" in agg.incomplete
    # objective-only tables leave out P-T and F-T instead of scoring them 0
    obj = [CaseScore("G/1", k, 0.5, "UniversalGravitation", "sim", OBJECTIVE_ONLY)
           for k in ("perception_graphic", "formulation_graphic", "deduction")]
    agg = aggregate(obj)
    assert agg.mode == OBJECTIVE_ONLY and agg.subtracks == ("perception_graphic", "formulation_graphic", "deduction")
    assert agg.row()["P-T"] is None and agg.all.overall == 0.5


def test_case_scores_from_results():
    class C:
        pillar, source = "MultiLaw", "real"

    res = [rollout_mean("x", "deduction", [RolloutScore("x", "deduction", r, JUDGED, 0.6) for r in range(3)], 3),
           rollout_mean("x", "perception_text", [RolloutScore("x", "perception_text", r, JUDGED, None)
                                                 for r in range(3)], 3)]
    cs = case_scores_from(res, {"x": C()})
    assert len(cs) == 1 and cs[0].score == pytest.approx(0.6) and cs[0].pillar == "MultiLaw"
