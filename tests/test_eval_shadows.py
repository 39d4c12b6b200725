"""Cast shadows (orchard_eval/segment/shadows.py): scene points from depth, the shadow a body puts on
the scene, and the light direction recovered from the shadows of a frame with known poses."""
import cv2
import numpy as np
import pytest

from orchard_eval import metrics as M
from orchard_eval.segment import shadows as SH
from orchard_eval.segment import shape_prior as SP

W, H = 320, 240
K = np.array([[300.0, 0.0, 160.0], [0.0, 300.0, 120.0], [0.0, 0.0, 1.0]])
# camera at (0, -2, 0.5) looking along +y (world z up), tilted 20 degrees down
tilt = np.radians(20.0)
R_cam = np.array([[1.0, 0.0, 0.0],
                  [0.0, -np.sin(tilt), -np.cos(tilt)],
                  [0.0, np.cos(tilt), -np.sin(tilt)]])
C = np.array([0.0, -2.0, 0.5])
E = np.hstack([R_cam, (-R_cam @ C)[:, None]])
CAM = SP.Camera(K, E)


def _floor_depth():
    """Depth (along the optical axis) of the floor z = 0 at every pixel centre; +inf above the horizon."""
    ys, xs = np.mgrid[0:H, 0:W]
    d_cam = np.stack([(xs + 0.5 - K[0, 2]) / K[0, 0], (ys + 0.5 - K[1, 2]) / K[1, 1], np.ones((H, W))], -1)
    d_world = d_cam @ R_cam                     # R^T d per pixel
    s = -C[2] / d_world[..., 2]                 # ray parameter where z = 0 (d_cam has z = 1: s is the depth)
    return np.where(s > 0, s, np.inf).astype(np.float32)


def test_scene_points_lie_on_the_surface_and_project_back():
    depth = _floor_depth()
    pts = SH.scene_points(CAM, depth)
    ok = np.isfinite(depth)
    assert ok.mean() > 0.3 and np.isnan(pts[~ok]).all()
    assert np.abs(pts[ok][:, 2]).max() < 1e-6      # float32 depth
    ys, xs = np.nonzero(ok)
    uv = CAM.project(pts[ys[::97], xs[::97]])
    assert np.abs(uv - np.stack([xs[::97] + 0.5, ys[::97] + 0.5], 1)).max() < 1e-6


def test_a_ball_shadow_and_the_light_recovered_from_it():
    ball = SP.BodyPrior("ball", "sphere", {"radius": 0.08}, np.zeros(3), np.array([0.0, 1.0, 0.0]))
    cube = SP.BodyPrior("box", "cube", {"edge": 0.12}, np.zeros(3), np.array([0.0, 1.0, 0.0]))
    poses = [(ball, np.array([-0.15, 0.4, 0.2]), np.eye(3)), (cube, np.array([0.2, 0.3, 0.06]), np.eye(3))]
    depth = _floor_depth()
    pts = SH.scene_points(CAM, depth)
    light = SH.direction(65.0, 55.0)
    cast = SH.shadow_pixels(poses, pts, light)
    # the ball's shadow on the floor is where its centre's projection along the light lands
    X = poses[0][1]
    foot = X + light * (X[2] / -light[2])
    u, v = CAM.project(foot[None])[0]
    assert cast[int(v), int(u)]
    seen = np.zeros((H, W), bool)
    for b, Xb, R in poses:
        seen |= SP.rasterise(CAM.silhouette(b, Xb, R), (H, W))
    observed = cast & ~seen
    assert observed.sum() > 50
    got = SH.fit_light(poses, pts, observed, ~seen)
    assert got is not None
    direction, agreement = got
    assert np.degrees(np.arccos(np.clip(direction @ light, -1, 1))) < 1.5
    assert agreement > 0.9
    assert M.iou(SH.shadow_pixels(poses, pts, direction) & ~seen, observed) > 0.9
    # no shadow observed: no light
    assert SH.fit_light(poses, pts, np.zeros((H, W), bool), ~seen) is None


def _resting_ball_scene(centre, radius, light, ss=4):
    """A ball resting on a grey floor under a sun: its lit side a pale colour close to the floor's,
    its unlit side and its cast shadow both the floor at 45 % (exactly what a shadow test cannot tell
    apart). Anti-aliased by ss × ss samples per pixel."""
    floor = np.array([150.0, 150.0, 150.0])
    lit = np.array([200.0, 170.0, 140.0])
    ys, xs = np.mgrid[0:H * ss, 0:W * ss]
    d_cam = np.stack([((xs + 0.5) / ss - K[0, 2]) / K[0, 0], ((ys + 0.5) / ss - K[1, 2]) / K[1, 1],
                      np.ones(xs.shape)], -1).reshape(-1, 3)
    d = d_cam @ R_cam
    oc = C - centre
    b = d @ oc
    a = np.einsum("ij,ij->i", d, d)
    disc = b * b - a * (oc @ oc - radius ** 2)
    hit = disc >= 0
    s_hit = (-b - np.sqrt(np.where(hit, disc, 0))) / a
    normal = (C + s_hit[:, None] * d - centre) / radius
    sunny = normal @ -light > 0.0
    s_floor = -C[2] / d[:, 2]
    floor_pts = C + s_floor[:, None] * d
    # the plane it moves in: through its centre, facing the camera's horizontal direction
    ball = SP.BodyPrior("ball", "sphere", {"radius": radius}, centre, np.array([0.0, 1.0, 0.0]))
    shaded = SH.body_blocks(ball, centre, np.eye(3), floor_pts, -light) & (s_floor > 0)
    colour = np.where(shaded[:, None], 0.45 * floor, floor)
    colour = np.where(hit[:, None], np.where(sunny[:, None], lit, 0.45 * floor), colour)
    img = colour.reshape(H, ss, W, ss, 3).mean(axis=(1, 3))
    plate = np.broadcast_to(floor, (H, W, 3))
    return np.clip(np.round(img), 0, 255).astype(np.uint8), plate.astype(np.uint8), ball


@pytest.mark.parametrize("azimuth, elevation, centre", [(60.0, 40.0, (0.0213, 0.35, 0.09)),
                                                        (120.0, 35.0, (0.05, 0.2, 0.09)),
                                                        (30.0, 50.0, (-0.1, 0.4, 0.09))])
def test_a_known_shadow_keeps_the_fit_subpixel(azimuth, elevation, centre):
    """The ball's own shadow touches it; with the light known the fit reads the unlit side as
    evidence (outside the shadow), without it the fit has the lit side only. Both must stay within a
    tenth of a pixel on this clean render; the model must not cost accuracy."""
    light = SH.direction(azimuth, elevation)
    centre = np.array(centre)
    img, plate, ball = _resting_ball_scene(centre, 0.09, light)
    depth = _floor_depth()
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    dark = SP.darkened_plate(img, plate)
    blob = changed & ~dark             # colour evidence: the lit side (the rest looks like shadow)
    truth = CAM.project(centre[None])[0]
    silhouette = SP.rasterise(CAM.silhouette(ball, centre, np.eye(3)), (H, W))
    errs = {}
    for name, model in (("without", None), ("with", SH.CastShadows(light, CAM, depth, 1.0))):
        masks, centres, notes = SP.apply_shape_prior(
            {"ball": blob}, {"ball": ball}, CAM, img, plate, allowed=changed, ambiguous=dark & ~blob,
            unobservable=None, time=None, scene_depth=depth, shadows=model)
        assert "ball" in centres, notes
        errs[name] = float(np.linalg.norm(np.array(centres["ball"]) - truth))
        assert M.iou(masks["ball"], silhouette) >= 0.99
    assert errs["with"] < 0.1 and errs["with"] <= errs["without"] + 0.01, errs


@pytest.mark.parametrize("azimuth, elevation, centre", [(60.0, 40.0, (0.0213, 0.35, 0.09)),
                                                        (90.0, 30.0, (0.0, 0.3, 0.09))])
def test_a_blob_that_took_in_its_shadow_does_not_pull_the_fit(azimuth, elevation, centre):
    """The colour blob has swallowed the shadow next to the ball (everything changed within 3 px of
    it): the pixels the silhouette would cover a pixel too far into the shadow are still tested for
    shadow, so the fit stays on the ball."""
    light = SH.direction(azimuth, elevation)
    centre = np.array(centre)
    img, plate, ball = _resting_ball_scene(centre, 0.09, light)
    depth = _floor_depth()
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    silhouette = SP.rasterise(CAM.silhouette(ball, centre, np.eye(3)), (H, W))
    blob = changed & (cv2.dilate(silhouette.astype(np.uint8), np.ones((7, 7), np.uint8)) > 0)
    assert (blob & ~silhouette).sum() > 30
    masks, centres, notes = SP.apply_shape_prior(
        {"ball": blob}, {"ball": ball}, CAM, img, plate, allowed=changed,
        ambiguous=SP.darkened_plate(img, plate) & ~blob, unobservable=None, time=None, scene_depth=depth,
        shadows=SH.CastShadows(light, CAM, depth, 1.0))
    assert np.linalg.norm(np.array(centres["ball"]) - CAM.project(centre[None])[0]) < 0.1, notes
    assert M.iou(masks["ball"], silhouette) >= 0.98


def test_object_holes_in_the_scene_depth_are_filled_with_the_surface_around_them():
    # the condition frame's bodies leave holes in the scene depth (the ground they stand on is not
    # seen); the fill puts the floor back there, so a body that moves away can shadow it
    depth = _floor_depth()
    ball = SP.BodyPrior("ball", "sphere", {"radius": 0.08}, np.zeros(3), np.array([0.0, 1.0, 0.0]))
    seen = SP.rasterise(CAM.silhouette(ball, np.array([0.1, 0.5, 0.08]), np.eye(3)), (H, W))
    # a second "object" up against the sky: no surface around it to fill from
    sky = np.zeros((H, W), bool)
    sky[2:8, 150:160] = True
    assert np.isinf(depth[sky]).all() and seen.sum() > 200
    holed = np.where(seen, np.inf, depth).astype(np.float32)
    filled, points = SH.fill_object_holes(CAM, holed, seen | sky)
    assert np.allclose(filled[seen], depth[seen], rtol=1e-4)
    assert np.isinf(filled[sky]).all()
    assert np.array_equal(filled[~seen], holed[~seen])
    # a shadow now lands on the uncovered floor
    moved = [(ball, np.array([0.1, 0.8, 0.08]), np.eye(3))]     # rolled 0.3 m away from the camera
    light = SH.direction(-90.0, 40.0)                   # towards the camera: the shadow falls back to it
    assert np.allclose(points, SH.scene_points(CAM, filled), equal_nan=True)   # the points come with the fill
    on_hole = SH.shadow_pixels(moved, points, light) & seen
    assert on_hole.sum() > 50
    assert not (SH.shadow_pixels(moved, SH.scene_points(CAM, holed), light) & seen).any()
    # while the body still stands on its hole, the camera sees it there, not the floor: no shadow
    frame0 = np.full((H, W, 3), 150, np.uint8)
    frame0[seen] = (40, 160, 90)
    cs = SH.CastShadows(light, CAM, filled, 0.9, seen, frame0)
    assert np.array_equal(cs.still_covered(frame0), seen)
    moved_away = frame0.copy()
    moved_away[seen] = (70, 70, 70)                      # the floor in the moved body's shadow
    assert not cs.still_covered(moved_away).any()
    assert not cs.crop(slice(0, 100), slice(0, 200)).still_covered(moved_away[:100, :200]).any()
