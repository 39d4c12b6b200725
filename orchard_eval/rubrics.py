"""The judge rubrics of App. E.1.1 as data: criterion keys (exactly as the judge must return them),
criterion groups, group weights, and the objective metrics that join a group.

Rubric variants: one per non-Deduction subtrack; Deduction has a video-level rubric and a
keyframe-level rubric (image protocol), which shares four criteria and uses `object_position_match`
as the keyframe stand-in for `motion_smoothness`.
"""
from __future__ import annotations

from dataclasses import dataclass

# objective metric keys (orchard_eval.metrics)
MASK_IOU = "mask_iou"
PSNR = "psnr"
MASKED_PSNR = "masked_psnr"
SPATIAL_IOU = "spatial_iou"
SPATIOTEMPORAL_IOU = "spatiotemporal_iou"
WEIGHTED_SPATIAL_IOU = "weighted_spatial_iou"
VELOCITY = "velocity"
OBJECTIVE_KEYS = (MASK_IOU, PSNR, MASKED_PSNR, SPATIAL_IOU, SPATIOTEMPORAL_IOU, WEIGHTED_SPATIAL_IOU, VELOCITY)


@dataclass(frozen=True)
class Group:
    name: str
    weight: float
    criteria: tuple[str, ...]        # judge criterion keys
    objective: tuple[str, ...] = ()  # objective metric keys averaged into the same group


@dataclass(frozen=True)
class Rubric:
    name: str
    subtrack: str
    criteria: tuple[str, ...]        # every key the judge returns, in prompt order
    groups: tuple[Group, ...]

    @property
    def objective(self) -> tuple[str, ...]:
        return tuple(k for g in self.groups for k in g.objective)


PERCEPTION_TEXT = Rubric(
    "perception_text", "perception_text",
    ("text_font_match", "text_style_match", "text_size_match", "text_color_match", "text_position_match",
     "text_content_match", "text_readability", "axes_color_match", "axes_style_match", "axes_size_match",
     "axes_position_match", "axes_angle_match", "velocity_color_match", "velocity_style_match",
     "velocity_size_match", "velocity_position_match", "no_extra_annotations", "white_background"),
    (Group("content", 0.50, ("text_content_match", "text_readability", "no_extra_annotations")),
     Group("layout", 0.30, ("text_position_match", "axes_position_match", "axes_angle_match",
                            "velocity_position_match")),
     Group("style", 0.20, ("text_font_match", "text_style_match", "text_size_match", "text_color_match",
                           "axes_color_match", "axes_style_match", "axes_size_match", "velocity_color_match",
                           "velocity_style_match", "velocity_size_match", "white_background"))),
)

PERCEPTION_GRAPHIC = Rubric(
    "perception_graphic", "perception_graphic",
    ("white_background", "coord_axes", "velocity_arrows", "text_annotations", "objects_only_from_gt",
     "object_completeness", "object_visual_match", "object_position_match"),
    (Group("background", 0.10, ("white_background",)),
     Group("annotation_removal", 0.30, ("coord_axes", "velocity_arrows", "text_annotations")),
     Group("object_preservation", 0.30, ("objects_only_from_gt", "object_completeness", "object_visual_match")),
     Group("spatial", 0.30, ("object_position_match",), (MASK_IOU,))),
)

FORMULATION_TEXT = Rubric(
    "formulation_text", "formulation_text",
    ("option_correct", "formula_variables_correct", "formula_constants_correct", "formula_operators_correct",
     "substitution_all_replaced", "substitution_values_correct", "substitution_unreplaced_correct",
     "substitution_constants_correct", "substitution_operators_correct", "format_3_lines",
     "background_pure_white"),
    (Group("option", 0.20, ("option_correct",)),
     Group("formula", 0.30, ("formula_variables_correct", "formula_constants_correct", "formula_operators_correct")),
     Group("substitution", 0.40, ("substitution_all_replaced", "substitution_values_correct",
                                  "substitution_unreplaced_correct", "substitution_constants_correct",
                                  "substitution_operators_correct")),
     Group("presentation", 0.10, ("format_3_lines", "background_pure_white"))),
)

FORMULATION_GRAPHIC = Rubric(
    "formulation_graphic", "formulation_graphic",
    ("annotations_removed", "object_position_match", "object_appearance_match", "arrow_is_borderless_orange",
     "arrow_from_center", "arrow_direction_match", "velocity_label_present_and_format", "velocity_value_match",
     "velocity_label_no_unit"),
    (Group("annotation_removal", 0.10, ("annotations_removed",)),
     Group("object_match", 0.30, ("object_position_match", "object_appearance_match"), (MASK_IOU,)),
     Group("velocity_arrow", 0.30, ("arrow_is_borderless_orange", "arrow_from_center", "arrow_direction_match")),
     Group("velocity_text", 0.30, ("velocity_label_present_and_format", "velocity_value_match",
                                   "velocity_label_no_unit"))),
)

_DED_GROUPS = (
    Group("integrity", 0.20, ("gen_annotations_removed", "object_consistency")),
    Group("fidelity", 0.20, ("visual_quality", "motion_smoothness"), (PSNR, MASKED_PSNR)),
    Group("physics", 0.60, ("physics_accuracy",), (SPATIAL_IOU, SPATIOTEMPORAL_IOU, WEIGHTED_SPATIAL_IOU, VELOCITY)),
)

DEDUCTION_VIDEO = Rubric(
    "deduction_video", "deduction",
    ("gen_annotations_removed", "object_consistency", "visual_quality", "motion_smoothness", "physics_accuracy"),
    _DED_GROUPS,
)

# keyframe judge (image protocol): `object_position_match` replaces `motion_smoothness` after the
# per-timestamp scores are averaged (see fusion.keyframe_criteria)
DEDUCTION_KEYFRAME = Rubric(
    "deduction_keyframe", "deduction",
    ("gen_annotations_removed", "object_consistency", "visual_quality", "object_position_match", "physics_accuracy"),
    _DED_GROUPS,
)

RUBRICS = {r.name: r for r in (PERCEPTION_TEXT, PERCEPTION_GRAPHIC, FORMULATION_TEXT, FORMULATION_GRAPHIC,
                               DEDUCTION_VIDEO, DEDUCTION_KEYFRAME)}


def rubric_for(subtrack: str, protocol: str = "video") -> Rubric:
    """The judge rubric for a subtrack; Deduction depends on the protocol (video or image)."""
    if subtrack == "deduction":
        return DEDUCTION_KEYFRAME if protocol == "image" else DEDUCTION_VIDEO
    try:
        return RUBRICS[subtrack]
    except KeyError as exc:
        raise KeyError(f"unknown subtrack {subtrack!r}") from exc


def with_transitions(rubric: Rubric, key: str = "transition_f1") -> Rubric:
    """The Deduction rubric of a run that fuses the transition score (`--fuse-transitions`): the
    transition F1 joins the physics group as one more objective member, averaged like the IoUs and
    the velocity (so it weighs as much as any of them and never more than the group's 0.60). Other
    rubrics are returned unchanged."""
    if rubric.subtrack != "deduction":
        return rubric
    groups = tuple(Group(g.name, g.weight, g.criteria, g.objective + (key,)) if g.name == "physics" else g
                   for g in rubric.groups)
    return Rubric(rubric.name, rubric.subtrack, rubric.criteria, groups)
