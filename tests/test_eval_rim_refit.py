"""A fit far from where its rim shading was placed is refitted with the shading moved to it (shipped
case composition/000001, built and scored for real). The glass ball's colour blob takes in its
shadow and the answer's arrow, so the blob's centroid — where the fit starts and where the rim
shading was laid — sits 2.5–27 px from the ball; read with the shading beside its rim, the ball's
top looked like background and the fit sank 1.1–1.3 px into the shadow (F-G mask IoU 0.951,
Deduction spatial IoU 0.966)."""
from calibration_helpers import deduction_ious, shipped_oracle_metrics


def test_rim_shading_follows_the_fit(tmp_path):
    m = shipped_oracle_metrics(tmp_path, "scenes/composition/000001.yaml", "MultiLaw/Composition/000001",
                               "formulation_graphic", "deduction")
    assert m["formulation_graphic"]["mask_iou"] >= 0.97, m
    assert deduction_ious(m["deduction"]) >= 0.98, m
