"""A body in front of a support of nearly its colour (shipped case circular_motion/000018, built and
scored for real): where the brass ball passes in front of its track's dark rail, its rim pixels differ
from the clean plate by ΔE 3–7, under the change threshold (≥ 7), and the silhouette, which claims
only changed pixels, left them out (Deduction spatial IoU 0.978). Faint changes more than a pixel
inside a fitted silhouette that nothing hides are the body's."""
import numpy as np
from calibration_helpers import deduction_ious, shipped_oracle_metrics
from drawn_scenes import BALL_CENTRE, CAM, H, W, ball_outline, sphere

from orchard_eval.segment import shape_prior as SP


def test_faint_pixels_inside_a_fitted_silhouette_are_claimed(tmp_path):
    m = shipped_oracle_metrics(tmp_path, "scenes/circular_motion/000018.yaml",
                               "UniversalGravitation/CircularMotion/000018", "deduction")["deduction"]
    assert deduction_ious(m) >= 0.98, m


def test_faint_pixels_count_only_inside_the_outline():
    """A ball whose bottom cap is drawn in the plate's colour plus a faint tint (as against a support
    of its colour): with `faint` the silhouette claims the cap's interior, never a pixel outside the
    outline."""
    cam, body, centre, h, w = CAM, sphere(), BALL_CENTRE, H, W
    sd, _ = ball_outline(body)
    ys = np.mgrid[0:h, 0:w][0]
    inside = sd >= 0
    plate = np.full((h, w, 3), 120, np.uint8)
    img = plate.copy()
    v = cam.project(centre[None])[0][1]
    radius = float(np.sqrt(inside.sum() / np.pi))
    upper = inside & (ys < v + 0.5 * radius)
    img[upper] = (200, 60, 40)
    img[inside & ~upper] = (124, 120, 118)          # faint: a few levels off the plate
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    faint = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 3
    args = dict(allowed=changed, ambiguous=np.zeros((h, w), bool), unobservable=None, time=None)
    plain, _, _ = SP.apply_shape_prior({"ball": changed}, {"ball": body}, cam, img, plate, **args)
    got, centres, notes = SP.apply_shape_prior({"ball": changed}, {"ball": body}, cam, img, plate, faint=faint,
                                               **args)
    assert "ball" in centres, notes
    cap = inside & ~upper
    # the cap's pixels look like the plate to the fit, which therefore sits a few tenths of a pixel high
    deep = cap & (sd > 2.0)
    assert deep.sum() > 10
    assert not plain["ball"][deep].any()
    assert got["ball"][deep].all(), (int((~got["ball"] & deep).sum()), int(deep.sum()))
    assert not (got["ball"] & ~inside).any()
