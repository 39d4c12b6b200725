"""A fit far from where its rim shading was placed is refitted with the shading moved to it (shipped
case composition/000001, built and scored for real). The glass ball's colour blob takes in its
shadow and the answer's arrow, so the blob's centroid — where the fit starts and where the rim
shading was laid — sits 2.5–27 px from the ball; read with the shading beside its rim, the ball's
top looked like background and the fit sank 1.1–1.3 px into the shadow (F-G mask IoU 0.951,
Deduction spatial IoU 0.966)."""
from calibration_helpers import oracle_scorer

CASE = "MultiLaw/Composition/000001"


def test_rim_shading_follows_the_fit(tmp_path):
    _, scorer = oracle_scorer(tmp_path, "scenes/composition/000001.yaml")
    fg = scorer.score(CASE, "formulation_graphic", 0)
    ded = scorer.score(CASE, "deduction", 0)
    assert fg["valid"] and ded["valid"], (fg["error"], ded["error"])
    assert fg["metrics"]["mask_iou"] >= 0.97, fg["metrics"]
    m = ded["metrics"]
    assert min(m["spatial_iou"], m["spatiotemporal_iou"], m["weighted_spatial_iou"]) >= 0.98, m
