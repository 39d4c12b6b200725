"""The rigid shape prior (orchard_eval/segment/shape_prior.py): exact silhouettes, sub-pixel position
fits, the rule that only ambiguous pixels are decided by geometry, and look-alike objects matched
without trusting their labels."""
from dataclasses import replace

import numpy as np
import pytest
from drawn_scenes import CAM, E, H, K, W, sphere

from orchard_eval import metrics as M
from orchard_eval.segment import shape_prior as SP



def _ray_cast_sphere(centre, radius):
    """Pixels whose centre ray meets the sphere (what a renderer's instance mask holds)."""
    ys, xs = np.mgrid[0:H, 0:W]
    d_cam = np.stack([(xs + 0.5 - K[0, 2]) / K[0, 0], (ys + 0.5 - K[1, 2]) / K[1, 1], np.ones_like(xs, float)], -1)
    d = d_cam @ E[:, :3]          # camera → world directions (rows times R = R^T applied)
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    oc = CAM.centre - centre
    b = d @ oc
    c = oc @ oc - radius ** 2
    return b * b - c >= 0


def _coverage(centre, radius, ss=8):
    """Anti-aliased coverage of the sphere (ss × ss samples per pixel)."""
    ys, xs = np.mgrid[0:H * ss, 0:W * ss]
    d_cam = np.stack([((xs + 0.5) / ss - K[0, 2]) / K[0, 0], ((ys + 0.5) / ss - K[1, 2]) / K[1, 1],
                      np.ones_like(xs, float)], -1)
    d = d_cam @ E[:, :3]
    d /= np.linalg.norm(d, axis=-1, keepdims=True)
    oc = CAM.centre - centre
    b = d @ oc
    hit = (b * b - (oc @ oc - radius ** 2)) >= 0
    return hit.reshape(H, ss, W, ss).mean(axis=(1, 3))


@pytest.mark.parametrize("centre", [(0.0, 0.0, 0.5), (0.31, 0.05, 0.77), (-0.42, -0.1, 0.2)])
def test_sphere_silhouette_matches_ray_casting(centre):
    centre = np.array(centre)
    tpl = SP.rasterise(CAM.silhouette(sphere(), centre, np.eye(3)), (H, W))
    truth = _ray_cast_sphere(centre, 0.08)
    assert M.iou(tpl, truth) >= 0.995


def test_cube_silhouette_is_the_hull_of_its_corners():
    body = SP.BodyPrior("box", "cube", {"edge": 0.2}, np.zeros(3), np.array([0.0, 1.0, 0.0]))
    poly = CAM.silhouette(body, np.array([0.0, 0.0, 0.5]), np.eye(3))
    # a cube facing the camera: its front face projects to a square, the back face inside it... plus
    # the perspective side faces; the hull spans the front face's corners at least
    front = CAM.project(np.array([[-0.1, -0.1, 0.4], [0.1, -0.1, 0.6]]))
    assert poly[:, 0].min() <= front[0, 0] + 1e-6 and poly[:, 0].max() >= front[1, 0] - 1e-6
    assert SP.rasterise(poly, (H, W)).sum() > 0.9 * (front[1, 0] - front[0, 0]) ** 2


def test_fit_recovers_a_subpixel_position():
    body = sphere()
    truth = np.array([0.1234, 0.0, 0.5432])
    cover = _coverage(truth, 0.08)
    blob = cover >= 0.5
    fit = SP.fit_body(CAM, body, blob, cover.astype(np.float32), np.ones((H, W), np.float32), None)
    assert fit is not None and fit.iou > 0.98
    err_px = np.linalg.norm(np.array(fit.image_centre) - CAM.project(truth[None])[0])
    assert err_px < 0.05, err_px


def _scene(centre, radius=0.08):
    """A grey plate and a red ball whose lower half is as dark as the plate in shadow."""
    plate = np.full((H, W, 3), 180, np.uint8)
    cover = _coverage(centre, radius)
    ball = np.zeros((H, W, 3), np.float32)
    ball[...] = (200, 40, 30)
    v = CAM.project(centre[None])[0][1]
    ys = np.arange(H)[:, None]
    dark = (ys > v)[..., None] & np.ones((1, W, 1), bool)
    shadow = np.where(dark, plate.astype(np.float32) * 0.45, ball)    # unlit side = plate in shadow
    img = cover[..., None] * shadow + (1 - cover[..., None]) * plate
    return np.clip(np.round(img), 0, 255).astype(np.uint8), plate, cover >= 0.5


def test_prior_recovers_the_side_that_looks_like_shadow():
    centre = np.array([0.05, 0.0, 0.5])
    img, plate, truth = _scene(centre)
    # colour evidence alone: the lit (upper) half only
    v = CAM.project(centre[None])[0][1]
    blob = truth & (np.arange(H)[:, None] <= v)
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    darkened = SP.darkened_plate(img, plate)
    masks, centres, notes = SP.apply_shape_prior({"ball": blob}, {"ball": sphere()}, CAM, img, plate,
                                                 allowed=changed, ambiguous=darkened, unobservable=None,
                                                 time=None)
    assert M.iou(blob, truth) < 0.7
    assert M.iou(masks["ball"], truth) >= 0.98, notes
    assert np.linalg.norm(np.array(centres["ball"]) - CAM.project(centre[None])[0]) < 0.5


def test_prior_leaves_a_blob_that_is_not_the_body():
    img, plate, truth = _scene(np.array([0.0, 0.0, 0.5]))
    blob = np.zeros((H, W), bool)
    blob[100:112, 60:200] = True          # a long bar: not a ball of that size
    changed = np.ones((H, W), bool)
    masks, centres, notes = SP.apply_shape_prior({"ball": blob}, {"ball": sphere()}, CAM, img, plate,
                                                 allowed=changed, ambiguous=np.zeros((H, W), bool),
                                                 unobservable=None, time=None)
    assert np.array_equal(masks["ball"], blob) and not centres
    assert any("not applied" in n for n in notes)


def test_prior_never_claims_pixels_that_show_the_plate():
    centre = np.array([0.0, 0.0, 0.5])
    img, plate, truth = _scene(centre)
    img[: int(CAM.project(centre[None])[0][1]) - 5] = plate[: int(CAM.project(centre[None])[0][1]) - 5]
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    masks, _, _ = SP.apply_shape_prior({"ball": truth & changed}, {"ball": sphere()}, CAM, img, plate,
                                       allowed=changed, ambiguous=np.zeros((H, W), bool), unobservable=None,
                                       time=None)
    assert not (masks["ball"] & ~changed).any()


def test_lookalike_objects_are_matched_without_their_labels():
    a = np.zeros((20, 40), bool)
    a[5:15, 2:12] = True
    b = np.zeros((20, 40), bool)
    b[5:15, 25:35] = True
    swapped = {"a": b, "b": a}
    gt = {"a": a, "b": b}
    assert M.object_mask_iou(swapped, gt).value == 0.0
    assert M.object_mask_iou(swapped, gt, alike=[["a", "b"]]).value == 1.0


def test_a_small_lookalike_touching_a_large_one_is_fitted_at_its_own_end():
    # a colour split down the middle of the joint blob puts the small ball's start on the large
    # one; the fit then settles with the small silhouette hidden inside the large one's. The start
    # with each body tucked into one end of the blob finds both.
    small, big = np.array([-0.1, 0.0, 0.04]), np.array([0.04, 0.0, 0.10])
    cs, cb = _coverage(small, 0.04), _coverage(big, 0.10)
    cover = np.maximum(cs, cb)
    plate = np.full((H, W, 3), 180, np.uint8)
    img = np.clip(np.round(cover[..., None] * np.array([200.0, 40.0, 30.0]) + (1 - cover[..., None]) * plate),
                  0, 255).astype(np.uint8)
    union = cover >= 0.5
    left = union & (np.arange(W)[None, :] < np.nonzero(union)[1].mean())
    bodies = {"a": SP.BodyPrior("a", "sphere", {"radius": 0.04}, np.zeros(3), np.array([0.0, 1.0, 0.0])),
              "b": SP.BodyPrior("b", "sphere", {"radius": 0.10}, np.zeros(3), np.array([0.0, 1.0, 0.0]))}
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    masks, centres, notes = SP.apply_shape_prior({"a": left, "b": union & ~left}, bodies, CAM, img, plate,
                                                 allowed=changed, ambiguous=np.zeros((H, W), bool),
                                                 unobservable=None, time=None, alike=[["a", "b"]])
    for oid, X, cov in (("a", small, cs), ("b", big, cb)):
        assert np.linalg.norm(np.array(centres[oid]) - CAM.project(X[None])[0]) < 0.3, (oid, centres, notes)
        assert M.iou(masks[oid], cov >= 0.5) > 0.98


# --- supports in front of a body, rim shading -------------------------------------------------------
def _inside(body, centre, R, pts):
    local = (pts - centre) @ R
    if body.shape == "sphere":
        return np.linalg.norm(local, axis=-1) <= body.size["radius"]
    return np.abs(local).max(axis=-1) <= body.size["edge"] / 2


@pytest.mark.parametrize("shape", ["sphere", "cube"])
def test_front_depth_matches_ray_marching(shape):
    size = {"radius": 0.08} if shape == "sphere" else {"edge": 0.15}
    body = SP.BodyPrior("b", shape, size, np.zeros(3), np.array([0.0, 1.0, 0.0]))
    centre = np.array([0.05, 0.1, 0.45])
    R = SP.quat_to_matrix(np.array([0.9, 0.2, 0.3, 0.25]) / np.linalg.norm([0.9, 0.2, 0.3, 0.25]))
    uv = CAM.project(centre[None])[0]
    us = uv[0] + np.linspace(-30, 30, 41)
    vs = np.full_like(us, uv[1] + 3.0)
    got = CAM.front_depth(body, centre, R, us, vs)
    # march each pixel ray in 0.2 mm depth steps; the first depth inside the body
    z = np.arange(1.5, 3.0, 2e-4)
    rays = np.linalg.solve(K, np.stack([us, vs, np.ones_like(us)]))          # camera frame, z = 1
    for j in range(us.size):
        pts_cam = z[:, None] * rays[:, j][None]
        pts = (pts_cam - E[:, 3]) @ E[:, :3]                                    # camera → world
        hit = np.nonzero(_inside(body, centre, R, pts))[0]
        if hit.size == 0:
            assert np.isinf(got[j])
        else:
            assert abs(got[j] - z[hit[0]]) < 5e-4, (j, got[j], z[hit[0]])
    assert np.isfinite(got).sum() > 10 and np.isinf(got).sum() > 2


def _bar_scene(centre, radius=0.08, bar_from=None):
    """A ball on the plane y = 0 behind a brown bar on y = -0.3 that covers every row below
    `bar_from`: the plate shows the bar (a support), the frame the ball above it. Returns (frame,
    plate, scene depth, the ball's visible pixels)."""
    plate = np.full((H, W, 3), 170, np.uint8)
    plate[bar_from:] = (110, 70, 40)
    cover = _coverage(centre, radius)
    ball = np.array([60, 90, 210], np.float32)
    img = cover[..., None] * ball + (1 - cover[..., None]) * plate.astype(np.float32)
    img[bar_from:] = plate[bar_from:]
    depth = np.full((H, W), 20.0, np.float32)
    depth[bar_from:] = 1.7                     # camera at y = -2: the bar's plane is 1.7 m away
    visible = _ray_cast_sphere(centre, radius)     # what a renderer's instance mask holds
    visible[bar_from:] = False
    return np.clip(np.round(img), 0, 255).astype(np.uint8), plate, depth, visible


def test_a_support_in_front_hides_pixels_and_the_fit_sees_past_it():
    centre = np.array([0.0432, 0.0, 0.5123])
    v = CAM.project(centre[None])[0][1]
    img, plate, depth, visible = _bar_scene(centre, bar_from=int(v + 3))
    body = sphere()
    hidden = SP.hidden_pixels(CAM, body, centre, np.eye(3), depth)
    assert hidden.any() and not (hidden & visible).any()
    assert M.iou(hidden, _ray_cast_sphere(centre, 0.08) & (depth < 5)) >= 0.99
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    args = dict(allowed=changed, ambiguous=np.zeros((H, W), bool), unobservable=None, time=None)
    masks, centres, notes = SP.apply_shape_prior({"ball": changed}, {"ball": body}, CAM, img, plate,
                                                 scene_depth=depth, **args)
    err = np.linalg.norm(np.array(centres["ball"]) - CAM.project(centre[None])[0])
    assert err < 0.15, (err, notes)
    assert M.iou(masks["ball"], visible) >= 0.98
    # without the scene's depth the fit sits beside the bar, not behind it
    _, blind, notes = SP.apply_shape_prior({"ball": changed}, {"ball": body}, CAM, img, plate, **args)
    assert "ball" not in blind or np.linalg.norm(np.array(blind["ball"]) - CAM.project(centre[None])[0]) > 1.0


def test_a_support_touching_the_body_in_front_hides_it_where_it_is_nearer_by_half_a_pixel():
    # a rail the body rests against (a ball in a circular track): near the contact the rail's
    # surface lies only a fraction of a pixel's worth of depth in front of the body's, and hides it
    centre = np.array([0.0432, 0.0, 0.5123])
    body = sphere()
    ys, xs = np.mgrid[0:H, 0:W]
    front = CAM.front_depth(body, centre, np.eye(3), xs.ravel() + 0.5, ys.ravel() + 0.5).reshape(H, W)
    v = CAM.project(centre[None])[0][1]
    px = CAM.depth(centre) / CAM.K[0, 0]                  # metres of depth per pixel at the body
    rail = np.isfinite(front) & (ys > v)
    depth = np.full((H, W), np.inf, np.float32)
    depth[rail] = front[rail] - 0.5 * px
    hidden = SP.hidden_pixels(CAM, body, centre, np.eye(3), depth)
    assert hidden[rail].mean() >= 0.95 and not hidden[~rail].any()
    # a surface right at the body's (within a tenth of a pixel) is the body's own contact: not hidden
    depth[rail] = front[rail] - 0.1 * px
    assert SP.hidden_pixels(CAM, body, centre, np.eye(3), depth)[rail].mean() <= 0.05


def _shaded_rim_scene(centre, radius=0.08, ss=4):
    """A blue ball on grey whose left rim (the outer 1.5 px) is darker than its interior."""
    plate = np.full((H, W, 3), 160, np.uint8)
    body = sphere(radius)
    poly = CAM.silhouette(body, centre, np.eye(3))
    u = CAM.project(centre[None])[0][0]
    ys, xs = np.mgrid[0:H * ss, 0:W * ss]
    sx, sy = (xs.ravel() + 0.5) / ss, (ys.ravel() + 0.5) / ss
    sd = SP.signed_distance(poly, sx, sy)
    colour = np.where(((sd < 1.5) & (sx < u))[:, None], [[20, 30, 90]], [[60, 90, 220]]).astype(np.float32)
    out = np.where((sd >= 0)[:, None], colour, plate.reshape(-1, 3)[(sy.astype(int)) * W + sx.astype(int)])
    img = out.reshape(H, ss, W, ss, 3).mean(axis=(1, 3))
    return np.clip(np.round(img), 0, 255).astype(np.uint8), plate


def _raised_rim_scene(centre, raise_px=0.35):
    """A red ball whose rendered outline lies `raise_px` further out on its upper half than its
    geometry says (a lit sliver thinner than a pixel): the upper half drawn from a ball that high."""
    plate = np.full((H, W, 3), 180, np.uint8)
    lift = raise_px * (centre[1] + 2.0) / K[1, 1]                # metres per pixel at the ball's depth
    v = CAM.project(centre[None])[0][1]
    upper = (np.arange(H)[:, None] < v) & np.ones((1, W), bool)
    cover = np.where(upper, _coverage(centre + [0.0, 0.0, lift], 0.08), _coverage(centre, 0.08))
    img = cover[..., None] * np.array([200.0, 40.0, 30.0]) + (1 - cover[..., None]) * plate
    return np.clip(np.round(img), 0, 255).astype(np.uint8), plate


@pytest.mark.parametrize("kind", ["shading", "offset"])
def test_rim_model_learned_on_one_frame_removes_the_fit_bias_on_another(kind):
    # shading: the rim's colour differs from the interior's (`LimbModel.delta`); offset: the rendered
    # rim lies outside the geometric outline on one side (`LimbModel.edge_shift`)
    scene, bound = (_shaded_rim_scene, 0.1) if kind == "shading" else (_raised_rim_scene, 0.06)
    body = sphere()
    first, second = np.array([-0.1, 0.0, 0.55]), np.array([0.1234, 0.0, 0.4321])
    img0, plate = scene(first)
    model = SP.learn_limb_model(CAM, body, first, np.eye(3), img0, plate, np.ones((H, W), bool))
    assert model is not None
    if kind == "shading":
        assert np.isfinite(model.delta).sum() >= 3 * 12
    else:   # the upper directions learn the outward offset, the lower ones none
        assert model.edge_shift.max() >= 0.25 and model.edge_shift.min() > -0.1
    img, _ = scene(second)
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    truth = CAM.project(second[None])[0]
    errs = {}
    for name, limbs in (("plain", None), ("learned", {"ball": model})):
        _, centres, _ = SP.apply_shape_prior({"ball": changed}, {"ball": body}, CAM, img, plate, allowed=changed,
                                             ambiguous=np.zeros((H, W), bool), unobservable=None, time=None,
                                             limbs=limbs)
        errs[name] = float(np.linalg.norm(np.array(centres["ball"]) - truth))
    assert errs["learned"] < bound and errs["plain"] > 2 * errs["learned"], errs


def test_overlapping_silhouettes_go_to_the_surface_nearer_along_each_ray():
    """Two look-alike cubes stuck side by side (a perfectly inelastic pair), seen from above and to the
    left: the big one's centre is the nearer (it is higher), yet the small one covers part of the big
    one's side. Each pixel belongs to the body whose surface the ray meets first."""
    cam_pos = np.array([-0.3, -0.8, 2.0])
    look = np.array([0.1, 0.3, 0.08]) - cam_pos
    fwd = look / np.linalg.norm(look)
    right = np.cross(fwd, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    down = np.cross(fwd, right)
    Rc = np.stack([right, down, fwd])
    cam = SP.Camera(K, np.hstack([Rc, (-Rc @ cam_pos)[:, None]]))
    normal = np.array([0.0, 1.0, 0.0])
    big = SP.BodyPrior("big", "cube", {"edge": 0.18}, np.array([0.19, 0.3, 0.09]), normal)
    small = SP.BodyPrior("small", "cube", {"edge": 0.1}, np.array([0.05, 0.3, 0.05]), normal)
    poses = {"big": big.plane_point, "small": small.plane_point}
    assert cam.depth(poses["big"]) < cam.depth(poses["small"])        # centre order says: big in front
    ys, xs = np.mgrid[0:H, 0:W]
    depth = np.stack([cam.front_depth(b, poses[b.id], np.eye(3), xs.ravel() + 0.5, ys.ravel() + 0.5)
                      for b in (big, small)]).reshape(2, H, W)
    seen = np.isfinite(depth).any(axis=0)
    truth = {"big": seen & (depth[0] <= depth[1]), "small": seen & (depth[1] < depth[0])}
    overlap = np.isfinite(depth).all(axis=0)
    assert (overlap & truth["small"]).sum() > 20                      # the small cube hides part of the big one
    plate = np.full((H, W, 3), 200, np.uint8)
    img = plate.copy()
    img[seen] = (90, 160, 80)
    changed = seen.copy()
    # colour cannot split them: each gets a rough half of the union
    split = xs < np.mean(xs[truth["small"]]) + 4
    masks = {"big": seen & ~split, "small": seen & split}
    out, centres, notes = SP.apply_shape_prior(masks, {"big": big, "small": small}, cam, img, plate,
                                               allowed=changed, ambiguous=np.zeros((H, W), bool),
                                               unobservable=None, time=None, alike=[["big", "small"]])
    assert set(centres) == {"big", "small"}, notes
    for k in ("big", "small"):
        assert M.iou(out[k], truth[k]) >= 0.97, (k, M.iou(out[k], truth[k]))


def _lit_ball(centre, radius):
    plate = np.full((H, W, 3), 180, np.uint8)
    cover = _coverage(centre, radius)[..., None]
    img = cover * np.array([200.0, 40.0, 30.0]) + (1 - cover) * plate
    return np.clip(np.round(img), 0, 255).astype(np.uint8), plate, cover[..., 0] >= 0.5


def _prior(img, plate, blob):
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    masks, _, notes = SP.apply_shape_prior({"ball": blob}, {"ball": sphere()}, CAM, img, plate, allowed=changed,
                                           ambiguous=np.zeros((H, W), bool), unobservable=None, time=None)
    return masks["ball"], notes


def test_a_codec_smear_beyond_the_outline_is_no_part_of_the_body():
    centre = np.array([0.02, 0.0, 0.5])
    img, plate, truth = _lit_ball(centre, 0.08)
    # the body's colour bled 2–5 px into the plate on one side (what a lossy codec leaves): the
    # segmented blob holds it, and its interior two pixels in then lends the smear its own colour
    outside = __import__("cv2").distanceTransform((~truth).astype(np.uint8), 2, 3)
    u, v = CAM.project(centre[None])[0]
    band = ((outside > 0) & (outside <= 4) & (np.arange(W)[None, :] > u)
            & (np.abs(np.arange(H)[:, None] + 0.5 - v) <= 8))
    img[band] = np.round(0.45 * np.array([200.0, 40.0, 30.0]) + 0.55 * plate[band]).astype(np.uint8)
    mask, notes = _prior(img, plate, truth | band)
    assert M.iou(mask, truth) >= 0.97, notes
    assert not (mask & band & (outside > 2)).any()


def test_a_body_drawn_larger_than_the_case_keeps_its_own_pixels():
    img, plate, big = _lit_ball(np.array([0.02, 0.0, 0.5]), 0.088)      # 1.1 × the case's radius
    _, _, case_size = _lit_ball(np.array([0.02, 0.0, 0.5]), 0.08)
    mask, notes = _prior(img, plate, big)
    assert not any("not applied" in n for n in notes)                  # the prior is used …
    # … and the blob's solid pixels beyond the case's silhouette stay (the blended ring just outside
    # it goes: a 1.3-px excess keeps about half of its pixels)
    assert M.iou(mask, big) >= M.iou(case_size, big) + 0.04


class _OneLook:
    """`appearance.Looks` for one body: the same sprite wherever the body is asked about."""

    def __init__(self, sprite):
        self.sprite = sprite

    def near(self, oid, uv, t):
        return self.sprite


def _ghosted_ball(strength: float = 0.4):
    """A lit ball, and beside it the codec's ghost of where it was: the ball at `strength` (40 %) a
    radius back, which a blob of changed pixels holds as much as the ball itself."""
    from orchard_eval.segment.appearance import make_sprite
    from orchard_eval.segment.matting import weighted_ycc

    centre, before = np.array([0.03, 0.0, 0.5]), np.array([-0.05, 0.0, 0.5])
    img, plate, truth = _lit_ball(centre, 0.08)
    ghost, _, was = _lit_ball(before, 0.08)
    trail = was & ~truth
    img[trail] = np.round((1.0 - strength) * img[trail] + strength * ghost[trail]).astype(np.uint8)
    ycc = lambda a: weighted_ycc(a, SP.FIT_CHROMA_WEIGHT)
    clean, _, _ = _lit_ball(centre, 0.08)
    look = make_sprite(ycc(clean), ycc(plate), _coverage(centre, 0.08).astype(np.float32),
                       tuple(CAM.project(centre[None])[0]), CAM.depth(centre))
    return img, plate, truth, truth | trail, _OneLook(look)


@pytest.mark.parametrize("video,strength", [(True, 0.4), (False, 0.4), (False, 0.8)])
def test_a_codec_ghost_beside_the_body_is_no_part_of_it(video, strength):
    img, plate, truth, blob, looks = _ghosted_ball(strength)
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    assert M.iou(blob, truth) < SP.MIN_FIT_IOU
    masks, centres, notes = SP.apply_shape_prior(
        {"ball": blob}, {"ball": sphere()}, CAM, img, plate, allowed=changed, ambiguous=np.zeros((H, W), bool),
        unobservable=None, time=None, looks=looks, size_scales={"ball": 1.0} if video else None)
    if video:
        # the look places the body where it is and explains the frame: the silhouette is kept, the ghost not
        assert M.iou(masks["ball"], truth) >= 0.97, notes
    elif strength < 0.5:
        # a trail that does not show the body's colour (40 % of it over the plate: a codec's or a
        # motion blur's) is no part of the body in an image either: the silhouette is kept, placed
        # and sized by the look, which the trail pulls a little
        assert M.iou(masks["ball"], truth) >= max(0.85, M.iou(blob, truth) + 0.2), notes
    else:
        # in a single image a blob whose pixels beyond the silhouette show the body's colour may be
        # the body drawn otherwise (no earlier frame left a ghost there): it stands
        assert np.array_equal(masks["ball"], blob) and any("not applied" in n for n in notes)


@pytest.mark.parametrize("needs", [SP.LOOK_EXPLAINS_IMAGE, 1.01])
def test_an_images_blended_rim_and_a_labels_leftovers_are_no_part_of_the_body(monkeypatch, needs):
    # a JPEG answer: the body's colour blended 40 % into a 2-px ring all round it, and a leftover of a
    # label in the body's colour a couple of radii away, both in the body's blob, which the silhouette
    # then agrees with less than MIN_FIT_IOU. Both pixels show the body's colour, so the colour test
    # alone keeps the blob (in an image such an excess may be the body drawn otherwise); but the look,
    # placed at its own best size, explains nearly all of the frame's difference from the plate: no
    # room is left for a body drawn otherwise, and the silhouette stands
    monkeypatch.setattr(SP, "LOOK_EXPLAINS_IMAGE", needs)
    img, plate, truth, _, looks = _ghosted_ball(strength=0.0)
    body = np.array([200.0, 40.0, 30.0])
    outside = __import__("cv2").distanceTransform((~truth).astype(np.uint8), 2, 3)
    ring = (outside > 0) & (outside <= 2)
    img[ring] = np.round(0.4 * body + 0.6 * plate[ring]).astype(np.uint8)
    u, v = CAM.project(np.array([[0.03, 0.0, 0.5]]))[0]
    r = float(np.sqrt(truth.sum() / np.pi))
    yy, xx = np.mgrid[0:H, 0:W] + 0.5
    label = (np.abs(xx - (u + 2.2 * r)) <= 4) & (np.abs(yy - (v + 1.5 * r)) <= 10)
    img[label] = np.round(0.8 * body + 0.2 * plate[label]).astype(np.uint8)
    blob = truth | ring | label
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    masks, _, notes = SP.apply_shape_prior(
        {"ball": blob}, {"ball": sphere()}, CAM, img, plate, allowed=changed, ambiguous=np.zeros((H, W), bool),
        unobservable=None, time=None, looks=looks, size_scales=None)
    if needs <= 1.0:
        assert M.iou(masks["ball"], truth) >= 0.9 > M.iou(blob, truth) + 0.2, notes
    else:
        assert np.array_equal(masks["ball"], blob) and any("not applied" in n for n in notes)


@pytest.mark.parametrize("floor", [SP.GHOST_LOOK_FLOOR, -np.inf])
def test_a_stain_where_the_body_should_be_is_no_ghost(monkeypatch, floor):
    # the body is not drawn; a mottled stain in no colour of the body's lies where it was expected,
    # larger than it. The stain covers the silhouette and nothing of it shows the body's colour, which
    # the colour test alone would take for a smear around the body; but the body's look explains
    # nothing there, so no body is placed and the blob stands (without that floor the silhouette
    # would be claimed on a frame that shows no body)
    monkeypatch.setattr(SP, "GHOST_LOOK_FLOOR", floor)
    img, plate, truth, _, looks = _ghosted_ball(strength=0.0)
    u, v = CAM.project(np.array([[0.03, 0.0, 0.5]]))[0]
    r = float(np.sqrt(truth.sum() / np.pi))
    stain = np.hypot(np.arange(W)[None, :] + 0.5 - u, np.arange(H)[:, None] + 0.5 - v) <= 1.8 * r
    rng = np.random.default_rng(0)
    img[stain] = np.clip(np.array([170.0, 175.0, 150.0]) + rng.normal(0, 20, (int(stain.sum()), 3)), 0, 255)
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    masks, _, notes = SP.apply_shape_prior(
        {"ball": stain}, {"ball": sphere()}, CAM, img, plate, allowed=changed, ambiguous=np.zeros((H, W), bool),
        unobservable=None, time=None, looks=looks, size_scales={"ball": 1.0})
    if floor > 0:
        assert np.array_equal(masks["ball"], stain) and any("not applied" in n for n in notes)
    else:
        assert not np.array_equal(masks["ball"], stain)


@pytest.mark.parametrize("ghost_covers", [SP.GHOST_COVERS, 0.0])
def test_a_body_partly_gone_is_no_codec_ghost(monkeypatch, ghost_covers):
    # the ball's upper half shows the plate (gone from the answer), beside it a ghost of where it was:
    # the look explains the frame, but the blob leaves much of the placed silhouette uncovered, which
    # no codec ghost does (a ghost adds pixels). The blob stands; without the coverage test the whole
    # silhouette would be claimed, the part that is gone included
    monkeypatch.setattr(SP, "GHOST_COVERS", ghost_covers)
    img, plate, truth, blob, looks = _ghosted_ball(strength=0.6)
    v = CAM.project(np.array([[0.03, 0.0, 0.5]]))[0][1]
    gone = truth & (np.arange(H)[:, None] + 0.5 < v)           # the upper half
    img[gone], blob = plate[gone], blob & ~gone
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    masks, _, notes = SP.apply_shape_prior(
        {"ball": blob}, {"ball": sphere()}, CAM, img, plate, allowed=changed, ambiguous=np.zeros((H, W), bool),
        unobservable=None, time=None, looks=looks, size_scales={"ball": 1.0})
    if ghost_covers:
        assert np.array_equal(masks["ball"], blob) and any("not applied" in n for n in notes)
    else:
        assert (masks["ball"] & gone).sum() > 0.25 * gone.sum(), notes


@pytest.mark.parametrize("video", [True, False])
def test_a_codec_smear_larger_than_the_body_is_no_part_of_it(video):
    # a heavily lossy codec's smear along the body's track: a band of plate warmed a sixth of the way
    # towards the body's colour, three radii long behind the ball and joined to it in one blob. The
    # blob's centroid lies in the smear, and the fit and the look started there settle in it (the
    # look explains little of the frame there). Placed again from the blob's pixels that show the
    # body's colour, the look finds the ball; in a video frame the silhouette is kept and the smear
    # goes. In a single image the blob stands
    img, plate, truth, _, looks = _ghosted_ball(strength=0.0)
    u, v = CAM.project(np.array([[0.03, 0.0, 0.5]]))[0]
    r = float(np.sqrt(truth.sum() / np.pi))
    xs, ys = np.arange(W)[None, :] + 0.5, np.arange(H)[:, None] + 0.5
    smear = (xs < u) & (xs > u - 4.0 * r) & (np.abs(ys - v) < 0.8 * r) & ~truth
    img[smear] = (200, 170, 150)
    blob = truth | smear
    assert smear.sum() > truth.sum() and M.iou(blob, truth) < SP.MIN_FIT_IOU
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    masks, _, notes = SP.apply_shape_prior(
        {"ball": blob}, {"ball": sphere()}, CAM, img, plate, allowed=changed, ambiguous=np.zeros((H, W), bool),
        unobservable=None, time=None, looks=looks, size_scales={"ball": 1.0} if video else None)
    if video:
        outside = __import__("cv2").distanceTransform((~truth).astype(np.uint8), 2, 3)
        assert M.iou(masks["ball"], truth) >= 0.85 and not (masks["ball"] & (outside > 2)).any(), notes
    else:
        assert np.array_equal(masks["ball"], blob) and any("not applied" in n for n in notes)


@pytest.mark.parametrize("spread", [True, False])
def test_a_trail_of_ghosts_in_the_bodys_colour_is_no_part_of_it(monkeypatch, spread):
    # a heavily lossy codec leaves the body's own colour in blocks along its track: a trail nearly
    # the body's colour, three radii long behind the ball and joined to it in one blob twice its
    # size. The centroid of the blob's body-coloured pixels lies in the trail, farther from the ball
    # than a look's search reaches; placed from places across those pixels a radius apart, the look
    # finds the ball at the trail's head (without them the blob stands)
    if not spread:
        monkeypatch.setattr(SP, "_spread_starts", lambda pixels, radius: [])
    img, plate, truth, _, looks = _ghosted_ball(strength=0.0)
    u, v = CAM.project(np.array([[0.03, 0.0, 0.5]]))[0]
    r = float(np.sqrt(truth.sum() / np.pi))
    xs, ys = np.arange(W)[None, :] + 0.5, np.arange(H)[:, None] + 0.5
    trail = (xs < u) & (xs > u - 4.0 * r) & (np.abs(ys - v) < 0.7 * r) & ~truth
    img[trail] = np.round(0.8 * np.array([200.0, 40.0, 30.0]) + 0.2 * plate[trail]).astype(np.uint8)
    blob = truth | trail
    assert trail.sum() > truth.sum() and M.iou(blob, truth) < SP.MIN_FIT_IOU
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    masks, centres, notes = SP.apply_shape_prior(
        {"ball": blob}, {"ball": sphere()}, CAM, img, plate, allowed=changed, ambiguous=np.zeros((H, W), bool),
        unobservable=None, time=None, looks=looks, size_scales={"ball": 1.0})
    if spread:
        assert M.iou(masks["ball"], truth) >= 0.95 and "ball" in centres, notes
    else:
        assert np.array_equal(masks["ball"], blob) and any("not applied" in n for n in notes)


@pytest.mark.parametrize("with_look,video", [(True, True), (True, False), (False, True)])
def test_a_ghost_joined_to_a_body_its_look_explains_is_no_part_of_it(with_look, video):
    # a fainter ghost a few pixels back, joined to the body: the blob agrees with the fit, so the fit
    # is used, and the ghost's body-coloured pixels beyond the rim are what an enlarged or deformed
    # body would add. Where the body's look explains the frame (a video frame or an image: there the
    # look also reads the size), the body is as its look has it and they go; with no look they stay
    from orchard_eval.segment.appearance import make_sprite
    from orchard_eval.segment.matting import weighted_ycc

    centre, before = np.array([0.03, 0.0, 0.5]), np.array([-0.02, 0.0, 0.5])
    img, plate, truth = _lit_ball(centre, 0.08)
    ghost, _, was = _lit_ball(before, 0.08)
    v = CAM.project(centre[None])[0][1]
    trail = was & ~truth & (np.abs(np.arange(H)[:, None] + 0.5 - v) <= 6)     # the rows a codec block left
    img[trail] = np.round(0.3 * img[trail] + 0.7 * ghost[trail]).astype(np.uint8)
    outside = __import__("cv2").distanceTransform((~truth).astype(np.uint8), 2, 3)
    assert (trail & (outside > 3)).sum() > 30
    ycc = lambda a: weighted_ycc(a, SP.FIT_CHROMA_WEIGHT)
    look = make_sprite(ycc(_lit_ball(centre, 0.08)[0]), ycc(plate), _coverage(centre, 0.08).astype(np.float32),
                       tuple(CAM.project(centre[None])[0]), CAM.depth(centre))
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    assert M.iou(truth | trail, truth) >= SP.MIN_FIT_IOU
    masks, _, notes = SP.apply_shape_prior(
        {"ball": truth | trail}, {"ball": sphere()}, CAM, img, plate, allowed=changed,
        ambiguous=np.zeros((H, W), bool), unobservable=None, time=None,
        looks=_OneLook(look) if with_look else None, size_scales={"ball": 1.0} if video else None)
    kept = (masks["ball"] & trail & (outside > 3)).sum()
    if with_look:
        assert kept == 0 and M.iou(masks["ball"], truth) >= 0.97, notes
    else:
        assert kept > 0


def test_touching_lookalikes_in_an_image_are_each_sized_by_their_look():
    # two look-alike balls touching in a single image, the left one drawn 1.1 × the case's size: the
    # joint fit places both at the case's size; each is then placed and sized by its look, with the
    # other's fitted silhouette carrying no weight
    from orchard_eval.segment.appearance import make_sprite
    from orchard_eval.segment.matting import weighted_ycc

    r, k = 0.08, 1.1
    left, right = np.array([-0.06, 0.0, 0.5]), np.array([-0.06 + r * (k + 1.0), 0.0, 0.5])
    cl, cr = _coverage(left, k * r), _coverage(right, r)
    plate = np.full((H, W, 3), 180, np.uint8)
    colour = np.array([200.0, 40.0, 30.0])
    img = np.clip(np.round(np.maximum(cl, cr)[..., None] * colour + (1 - np.maximum(cl, cr)[..., None]) * plate),
                  0, 255).astype(np.uint8)
    union = (cl >= 0.5) | (cr >= 0.5)
    split = union & (np.arange(W)[None, :] < CAM.project(np.array([[-0.06 + k * r, 0.0, 0.5]]))[0][0])
    ycc = lambda a: weighted_ycc(a, SP.FIT_CHROMA_WEIGHT)
    look = _OneLook(make_sprite(ycc(np.clip(np.round(_coverage(left, r)[..., None] * colour
                                                     + (1 - _coverage(left, r)[..., None]) * plate), 0, 255)
                                            .astype(np.uint8)), ycc(plate), _coverage(left, r).astype(np.float32),
                                tuple(CAM.project(left[None])[0]), CAM.depth(left)))
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    bodies = {"a": sphere(r), "b": sphere(r)}
    masks, centres, notes = SP.apply_shape_prior({"a": split, "b": union & ~split}, bodies, CAM, img, plate,
                                                 allowed=changed, ambiguous=np.zeros((H, W), bool),
                                                 unobservable=None, time=None, alike=[["a", "b"]], looks=look)
    # look-alikes carry no identity: the masks are compared left to right
    got = sorted((masks["a"], masks["b"]), key=lambda m: np.nonzero(m)[1].mean())
    assert M.iou(got[0], cl >= 0.5) > 0.97, notes
    assert M.iou(got[1], cr >= 0.5) > 0.97, notes


def _floor_depth(z0):
    """Depth map of a horizontal floor at height z0 below this camera (at z = 0.5, looking along +y)."""
    v = np.arange(H)[:, None] + 0.5 - K[1, 2]
    with np.errstate(divide="ignore"):
        d = np.where(v > 0, (0.5 - z0) * K[1, 1] / v, np.inf)
    return np.broadcast_to(d, (H, W)).astype(np.float32).copy()


def test_a_body_resting_on_a_support_sinks_nowhere_and_one_placed_lower_does():
    body, z0 = sphere(), 0.3
    depth = _floor_depth(z0)
    resting = np.array([0.0213, 0.0, z0 + 0.08])
    assert SP.sunk_pixels(CAM, body, resting, np.eye(3), depth) == 0
    sunk = resting - np.array([0.0, 0.0, 0.04])
    assert SP.sunk_pixels(CAM, body, sunk, np.eye(3), depth) > SP.SINK_PX


def test_a_body_a_pixel_low_on_a_support_seen_edge_on_does_not_sink():
    # this camera sees the floor under the ball at about 6 degrees: the rays through the ball's lower
    # rim run a long way inside a ball only a pixel or two low. Sinking is how deep the support lies
    # inside the body, not how far a ray runs through it
    body, z0 = sphere(), 0.3
    depth = _floor_depth(z0)
    px = 2.0 / K[0, 0]                      # one pixel at the ball's depth, in metres
    resting = np.array([0.0213, 0.0, z0 + 0.08])
    assert SP.sunk_pixels(CAM, body, resting - np.array([0.0, 0.0, 1.5 * px]), np.eye(3), depth) == 0
    assert SP.sunk_pixels(CAM, body, resting - np.array([0.0, 0.0, 5.0 * px]), np.eye(3), depth) > SP.SINK_PX
    cube = SP.BodyPrior("box", "cube", {"edge": 0.16}, np.zeros(3), np.array([0.0, 1.0, 0.0]))
    assert SP.sunk_pixels(CAM, cube, resting - np.array([0.0, 0.0, 1.5 * px]), np.eye(3), depth) == 0
    assert SP.sunk_pixels(CAM, cube, resting - np.array([0.0, 0.0, 5.0 * px]), np.eye(3), depth) > SP.SINK_PX


def test_a_body_half_drawn_on_its_support_is_placed_where_it_rests_not_sunk_into_it():
    # a ball resting on a floor whose upper half the answer does not draw (the plate shown there):
    # the floor could hide a ball placed lower, whose top would then be this blob; a ball cannot
    # sink into its floor, so its mask is what the answer shows where it rests, and — what is left
    # of it being no whole ball — its position is that mask's centroid, not a whole ball's centre
    body, z0 = sphere(), 0.3
    depth = _floor_depth(z0)
    centre = np.array([0.0213, 0.0, z0 + 0.08])
    plate = np.full((H, W, 3), 200, np.uint8)
    plate[int(K[1, 2]):] = (120, 130, 110)              # the floor below the horizon
    cover = _coverage(centre, 0.08)
    v = CAM.project(centre[None])[0][1]
    cover[np.arange(H) + 0.5 < v] = 0.0                 # the upper half vanished
    img = cover[..., None] * np.array([200.0, 40.0, 30.0]) + (1 - cover[..., None]) * plate
    img = np.clip(np.round(img), 0, 255).astype(np.uint8)
    shown = cover >= 0.5
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    masks, centres, notes = SP.apply_shape_prior(
        {"ball": changed}, {"ball": body}, CAM, img, plate, allowed=changed, ambiguous=np.zeros((H, W), bool),
        unobservable=None, time=None, scene_depth=depth)
    assert "ball" not in centres, (centres, notes)
    assert M.iou(masks["ball"], shown) >= 0.9
    err = np.linalg.norm(np.array(M.mask_centroid(masks["ball"])) - np.array(M.mask_centroid(shown)))
    assert err < 0.5, (err, notes)


def test_a_lifted_fit_that_holds_none_of_its_blob_does_not_empty_it(monkeypatch):
    # the half-drawn ball of the test above, but its fit lifted out of the floor lands far from the
    # blob (as on a large box an answer drew smaller, whose fit ran off and agrees with nothing): a
    # silhouette that holds none of the blob says nothing of which part the answer drew, so the
    # blob stands instead of being trimmed to that silhouette (which left no pixel)
    body, z0 = sphere(), 0.3
    depth = _floor_depth(z0)
    centre = np.array([0.0213, 0.0, z0 + 0.08])
    plate = np.full((H, W, 3), 200, np.uint8)
    plate[int(K[1, 2]):] = (120, 130, 110)
    cover = _coverage(centre, 0.08)
    v = CAM.project(centre[None])[0][1]
    cover[np.arange(H) + 0.5 < v] = 0.0
    img = cover[..., None] * np.array([200.0, 40.0, 30.0]) + (1 - cover[..., None]) * plate
    img = np.clip(np.round(img), 0, 255).astype(np.uint8)
    shown = cover >= 0.5
    changed = np.abs(img.astype(int) - plate.astype(int)).sum(axis=2) > 12
    fit_visible = SP._RoiFit.fit_visible

    def run_off(self, ids, blob, *args, **kwargs):
        fs, hidden, zone = fit_visible(self, ids, blob, *args, **kwargs)
        if fs is not None:
            away = np.array([30.0, 0.0])
            fs = [replace(f, polygon=f.polygon + away, image_centre=tuple(np.asarray(f.image_centre) + away),
                          iou=0.0) for f in fs]
        return fs, hidden, zone

    monkeypatch.setattr(SP._RoiFit, "fit_visible", run_off)
    masks, centres, notes = SP.apply_shape_prior(
        {"ball": changed}, {"ball": body}, CAM, img, plate, allowed=changed, ambiguous=np.zeros((H, W), bool),
        unobservable=None, time=None, scene_depth=depth)
    assert M.iou(masks["ball"], shown) >= 0.9, notes
    assert any("disagrees" in n for n in notes), notes


def test_a_whole_body_its_mask_misses_in_part_keeps_its_fitted_centre():
    # a ball drawn whole, its top quarter in a colour so near the plate's that the change test left
    # it out of the blob: those pixels are nearer the ball's colour than the plate's, so the ball is
    # not one drawn in part, and its place is its fitted centre (half a body's centroid would be
    # pixels off)
    centre = np.array([0.02, 0.0, 0.5])
    plate = np.full((H, W, 3), 200, np.uint8)
    cover = _coverage(centre, 0.08)
    img = cover[..., None] * np.array([150.0, 60.0, 50.0]) + (1 - cover[..., None]) * plate
    img = np.clip(np.round(img), 0, 255).astype(np.uint8)
    truth = cover >= 0.5
    ys = np.nonzero(truth)[0]
    top = truth & (np.arange(H)[:, None] < ys.min() + 0.3 * (ys.max() - ys.min()))
    blob = truth & ~top
    masks, centres, notes = SP.apply_shape_prior(
        {"ball": blob}, {"ball": sphere()}, CAM, img, plate, allowed=blob, ambiguous=np.zeros((H, W), bool),
        unobservable=None, time=None)
    assert "ball" in centres, notes
    assert np.linalg.norm(np.array(centres["ball"]) - CAM.project(centre[None])[0]) < 0.5


def test_on_white_a_blurred_rim_less_than_half_body_is_no_part_of_the_mask():
    # a ball on white whose left half is dark and right half nearly white, blurred (σ 1.2 px, a soft
    # answer): the colour blob holds the dark side's blended rim, a pixel or two beyond the outline,
    # but not the pale side's, so it fills only part of the ring around the silhouette. The rim
    # pixels kept are those at least half body — their centres inside the drawn outline —, which a
    # symmetric blur leaves where the outline is; the blend beyond goes
    import cv2

    centre = np.array([0.02, 0.0, 0.5])
    cover = _coverage(centre, 0.08)
    truth = cover >= 0.5
    u = CAM.project(centre[None])[0][0]
    colour = np.where((np.arange(W)[None, :, None] + 0.5) < u, np.array([90.0, 20.0, 20.0]), np.array([250.0, 242.0, 240.0]))
    white = np.full((H, W, 3), 255.0)
    img = cover[..., None] * colour + (1 - cover[..., None]) * white
    img = np.clip(np.round(cv2.GaussianBlur(img, (0, 0), 1.2)), 0, 255).astype(np.uint8)
    blob = np.abs(img.astype(int) - 255).sum(axis=2) > 30
    ring = blob & ~truth
    assert ring.sum() > 0.02 * truth.sum()      # the blob reaches past the outline on the dark side
    everything = np.ones((H, W), bool)
    masks, _, notes = SP.apply_shape_prior(
        {"ball": blob}, {"ball": sphere()}, CAM, img, np.full_like(img, 255), allowed=everything,
        ambiguous=~everything, unobservable=None, time=None, min_iou=SP.MIN_FIT_IOU_WHITE, keep_rims=True)
    beyond = masks["ball"] & ~truth
    assert beyond.sum() <= 0.25 * ring.sum(), (int(beyond.sum()), int(ring.sum()), notes)
    assert M.iou(masks["ball"], truth) >= 0.94     # keeping the blob's whole ring: 0.88


def test_the_edge_model_is_a_ramp_when_sharp_and_a_gaussian_edge_when_blurred():
    from scipy.special import ndtr

    sd = np.linspace(-4, 4, 161)
    assert np.array_equal(SP.edge_coverage(sd, 0.0), np.clip(0.5 + sd, 0, 1))
    for s in (0.6, 1.2, 2.0):
        assert np.max(np.abs(SP.edge_coverage(sd, s) - ndtr(sd / s))) < 0.01


@pytest.mark.parametrize("right, sigma", [((235.0, 215.0, 205.0), 2.0), ((200.0, 120.0, 100.0), 1.2)])
def test_a_blurred_body_is_fitted_with_the_answers_blur(right, sigma):
    # a ball dark on its left and lighter on its right, on white, blurred: read against a one-pixel
    # ramp the blurred rim pulls the fitted outline toward the dark side; the edge of the answer's
    # own blur places it nearer where it is
    import cv2

    centre = np.array([0.02, 0.0, 0.5])
    cover = _coverage(centre, 0.08)
    u = CAM.project(centre[None])[0][0]
    colour = np.where((np.arange(W)[None, :, None] + 0.5) < u, np.array([60.0, 20.0, 20.0]), np.array(right))
    white = np.full((H, W, 3), 255.0)
    img = np.clip(np.round(cv2.GaussianBlur(cover[..., None] * colour + (1 - cover[..., None]) * white, (0, 0), sigma)),
                  0, 255).astype(np.uint8)
    plate = np.full_like(img, 255)
    blob = np.abs(img.astype(int) - 255).sum(axis=2) > 30
    alpha, weight = SP.luma_alpha(img, plate, blob)
    truth = CAM.project(centre[None])[0]
    err = {}
    for b in (0.0, sigma):
        fits = SP.fit_bodies(CAM, [sphere()], [[SP.blob_centroid(blob)]], blob, alpha, weight, None, edge_blur=b)
        err[b] = float(np.hypot(*(np.asarray(fits[0].image_centre) - truth)))
    assert err[sigma] < 0.3 and err[sigma] < 0.5 * err[0.0], err
