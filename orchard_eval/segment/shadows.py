"""Where the objects' cast shadows fall: a light direction measured on the condition frame, and the
scene pixels a body at a given pose puts in shadow.

Why: next to a body on (or near) the ground its own shadow touches its unlit side, and both look like
"the plate made darker". The shape prior then has to distrust both, so the outline on that side has
no evidence and the fit drifts by a pixel or more. Knowing where the shadow *is* lets the fit trust
the unlit side again.

What is measured and what is assumed:
* the scene is lit by one distant (directional) light that casts the objects' shadows — the
  renderer's sun; ambient and head lights cast none;
* the scene's surfaces are the condition frame's depth with the objects removed
  (`EvalCase.scene_depth`), back-projected through the case camera;
* the light direction is fitted on the condition frame, where every body's pose is known: the
  direction whose predicted shadows best overlap the observed ones (pixels away from the objects
  that are the plate made darker). No observed shadow, no model.
"""
from __future__ import annotations

import math

import cv2

import numpy as np

from ..metrics import backproject_to_plane
from .photometry import channel_difference
from .shape_prior import BodyPrior, Camera, darkened_plate, slab_span

MIN_SHADOW_PX = 20        # observed shadow pixels the light fit needs
COARSE_STEP_DEG = 10.0    # grid of the first search over directions (then 2.5° and 0.625° around the best)
MIN_LIGHT_IOU = 0.5       # a light whose shadows overlap the observed ones less is not used
UNCHANGED_SUM = 24        # |frame − condition frame| summed over RGB up to which a pixel shows the same thing


def scene_points(camera: Camera, depth: np.ndarray) -> np.ndarray:
    """World coordinates (H, W, 3) of the surface seen at each pixel centre (`depth` in metres along
    the optical axis); NaN where the depth is not finite."""
    ys, xs = np.mgrid[0:depth.shape[0], 0:depth.shape[1]]
    return pixel_points(camera, xs, ys, depth)


def pixel_points(camera: Camera, xs: np.ndarray, ys: np.ndarray, depth: np.ndarray) -> np.ndarray:
    """`scene_points` at the pixels (xs, ys) only (arrays of one shape, with their depths)."""
    K = camera.K
    x_cam = (xs + 0.5 - K[0, 2]) / K[0, 0] * depth
    y_cam = (ys + 0.5 - K[1, 2]) / K[1, 1] * depth
    cam = np.stack([x_cam, y_cam, depth], axis=-1).astype(np.float64) - camera.t
    pts = np.einsum("...i,ij->...j", cam, camera.R)          # R^T (x_cam - t), per pixel
    pts[~np.isfinite(depth)] = np.nan
    return pts


def fill_object_holes(camera: Camera, depth: np.ndarray, objects: np.ndarray, ring_px: int = 6,
                      max_rms_m: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """`depth` with the pixels of `objects` (bool; where the condition frame's bodies hid the scene,
    so the scene depth has no value) filled by the plane through the surface around each of them,
    and the `scene_points` of the filled depth.

    Why: a body that moves away uncovers ground it stood on in the condition frame, and its shadow
    later falls there; without a surface at those pixels no shadow could be predicted on them. The
    ground (or ramp) behind a primitive solid is locally flat: a plane fitted to a ring of known
    surface around the hole is what is behind it. A hole whose ring is not flat within `max_rms_m`
    (or has too few known points: a body against the sky) stays unknown."""
    out = depth.copy()
    surface = scene_points(camera, depth)
    n, labels = cv2.connectedComponents(objects.astype(np.uint8), connectivity=8)
    if n <= 1:
        return out, surface
    kernel = np.ones((2 * ring_px + 1, 2 * ring_px + 1), np.uint8)
    known = np.isfinite(depth) & ~objects
    filled = []
    for k in range(1, n):
        hole = labels == k
        ring = (cv2.dilate(hole.astype(np.uint8), kernel) > 0) & known
        if int(ring.sum()) < 20:
            continue
        P = surface[ring]
        keep = np.ones(len(P), bool)
        for _round in range(3):       # drop what is off the plane (another surface's edge in the ring)
            c = P[keep].mean(axis=0)
            normal = np.linalg.svd(P[keep] - c, full_matrices=False)[2][-1]
            r = np.abs((P - c) @ normal)
            keep = r <= max(3.0 * float(np.median(r[keep])), 1e-4)
            if keep.sum() < 10:
                break
        if keep.sum() < 10 or float(np.sqrt(np.mean(r[keep] ** 2))) > max_rms_m or keep.mean() < 0.6:
            continue
        hy, hx = np.nonzero(hole)
        X = backproject_to_plane(np.stack([hx + 0.5, hy + 0.5], axis=1), camera.K, camera.E, c, normal)
        z = X @ camera.R[2] + camera.t[2]          # depth along the optical axis; NaN where the ray misses
        ok = np.isfinite(z)
        out[hy[ok], hx[ok]] = z[ok]
        filled.append((hy[ok], hx[ok]))
    # the ring points were read above from the unfilled surface: the filled pixels get theirs after
    for hy, hx in filled:
        surface[hy, hx] = pixel_points(camera, hx, hy, out[hy, hx])
    return out, surface


def direction(azimuth_deg: float, elevation_deg: float) -> np.ndarray:
    """Unit vector the light travels along (downwards for a positive elevation), world z up."""
    az, el = math.radians(azimuth_deg), math.radians(elevation_deg)
    return np.array([math.cos(el) * math.cos(az), math.cos(el) * math.sin(az), -math.sin(el)])


class Occluder:
    """One body at one pose against a fixed set of scene points: what does not depend on the light
    (offsets from the body, distances to its planes) is computed once, so that many directions can be
    tried cheaply (`fit_light`)."""

    def __init__(self, body: BodyPrior, centre: np.ndarray, R: np.ndarray, points: np.ndarray):
        self.ok = np.all(np.isfinite(points), axis=1)
        p = points[self.ok] - centre
        self.sphere = body.shape == "sphere"
        if self.sphere:
            self.r2 = float(body.size["radius"]) ** 2
            self.p = p
            self.pp = p[:, 0] * p[:, 0] + p[:, 1] * p[:, 1] + p[:, 2] * p[:, 2]
        else:
            self.normals = body.faces[:, :3] @ R.T                     # (F, 3) in world axes
            n = self.normals
            # (N, F): signed distance to each bounding plane, > 0 outside
            self.signed = (p[:, 0:1] * n[None, :, 0] + p[:, 1:2] * n[None, :, 1] + p[:, 2:3] * n[None, :, 2]
                           + body.faces[None, :, 3])

    def blocks(self, towards: np.ndarray) -> np.ndarray:
        """Whether the ray from each point along `towards` (unit) passes through the body."""
        out = np.zeros(self.ok.shape[0], bool)
        if self.sphere:
            p = self.p
            along = p[:, 0] * towards[0] + p[:, 1] * towards[1] + p[:, 2] * towards[2]
            # the ray meets the sphere ahead of the point (a point inside it counts too)
            out[self.ok] = (self.pp - along * along <= self.r2) & ((along <= 0.0) | (self.pp <= self.r2))
            return out
        near, far, crosses = slab_span(self.signed, (self.normals @ towards)[None, :])
        out[self.ok] = crosses & (np.maximum(near, 0.0) <= far)     # ahead of the point only
        return out


def body_blocks(body: BodyPrior, centre: np.ndarray, R: np.ndarray, points: np.ndarray, towards: np.ndarray
                ) -> np.ndarray:
    """Whether the ray from each point (N, 3) along `towards` (unit, 3) passes through the body."""
    return Occluder(body, centre, R, points).blocks(towards)


def shadow_pixels(bodies: list[tuple[BodyPrior, np.ndarray, np.ndarray]], points: np.ndarray, light: np.ndarray
                  ) -> np.ndarray:
    """Pixels (of `points`' grid) whose surface point the bodies (body, centre, attitude) put in
    shadow under the light travelling along `light`."""
    flat = points.reshape(-1, 3)
    out = np.zeros(flat.shape[0], bool)
    for body, X, R in bodies:
        out |= body_blocks(body, X, R, flat, -light)
    return out.reshape(points.shape[:2])


def fit_light(bodies: list[tuple[BodyPrior, np.ndarray, np.ndarray]], points: np.ndarray, observed: np.ndarray,
              region: np.ndarray) -> tuple[np.ndarray, float] | None:
    """The light direction whose predicted shadows best match `observed` (bool, the condition frame's
    shadow pixels) within `region` (bool: pixels that may hold a shadow, i.e. not an object).
    Returns (direction, IoU of predicted and observed) or None when nothing is observed."""
    if observed[region].sum() < MIN_SHADOW_PX:
        return None
    # a direction whose shadows miss the observed ones scores low whatever else they cover, so only
    # the pixels around the observed shadows are compared
    around = cv2.dilate((observed & region).astype(np.uint8), np.ones((31, 31), np.uint8)) > 0
    ys, xs = np.nonzero(around & region)
    pts, obs = points[ys, xs], observed[ys, xs]
    ok = np.all(np.isfinite(pts), axis=1)
    pts, obs = pts[ok], obs[ok]

    occluders = {k: [Occluder(b, X, R, pts[::k]) for b, X, R in bodies] for k in (1, 2, 4)}

    def score(az: float, el: float, stride: int = 1) -> float:
        towards = -direction(az, el)
        pred = np.zeros(pts[::stride].shape[0], bool)
        for occ in occluders[stride]:
            pred |= occ.blocks(towards)
        o = obs[::stride]
        union = (pred | o).sum()
        return float((pred & o).sum()) / float(union) if union else 0.0

    # coarse grid, then two refinements around the best (a shadow far below its body moves by many
    # pixels per degree)
    cands = [(az, el) for az in np.arange(0.0, 360.0, COARSE_STEP_DEG) for el in np.arange(15.0, 90.0, COARSE_STEP_DEG)]
    best = max((score(az, el, 4), az, el) for az, el in cands)
    for span, step, stride in ((COARSE_STEP_DEG, 2.5, 2), (2.5, 0.625, 1)):
        _, az0, el0 = best
        best = max((score(az, el, stride), az, el)
                   for az in np.arange(az0 - span, az0 + span + 1e-9, step)
                   for el in np.arange(max(el0 - span, 5.0), min(el0 + span, 89.9) + 1e-9, step))
    iou, az, el = best
    return direction(az, el), iou


class CastShadows:
    """The objects' cast shadows in one case: the fitted light and the scene's depth. The shape prior
    asks it where bodies at given poses put their shadows (`pixels`), on a crop (`crop`) whose surface
    points are computed when first needed."""

    def __init__(self, light: np.ndarray, camera: Camera, scene_depth: np.ndarray, agreement: float,
                 filled: np.ndarray | None = None, frame0: np.ndarray | None = None,
                 points: np.ndarray | None = None):
        self.light = np.asarray(light, float)
        self.camera = camera
        self.depth = scene_depth
        self.agreement = agreement      # IoU of predicted and observed shadows on the condition frame
        # where the depth was filled in behind the condition frame's bodies, and that frame's colours
        self.filled = filled
        self.frame0 = frame0
        self._points = points           # `scene_points` of the depth, when the caller has them

    @property
    def shape(self) -> tuple[int, int]:
        return self.depth.shape

    @property
    def points(self) -> np.ndarray:
        if self._points is None:
            self._points = scene_points(self.camera, self.depth)
        return self._points

    def crop(self, rows: slice, cols: slice) -> "CastShadows":
        return CastShadows(self.light, self.camera.crop(cols.start or 0, rows.start or 0), self.depth[rows, cols],
                           self.agreement, None if self.filled is None else self.filled[rows, cols],
                           None if self.frame0 is None else self.frame0[rows, cols],
                           None if self._points is None else self._points[rows, cols])

    def still_covered(self, image: np.ndarray) -> np.ndarray:
        """Filled-in pixels where `image` still shows what the condition frame showed there (the body
        that stood there has not left): no surface of the scene is seen at them, so no shadow."""
        if self.filled is None or self.frame0 is None or image.shape != self.frame0.shape:
            return np.zeros(self.depth.shape, bool)
        same = channel_difference(image, self.frame0, total=True) <= UNCHANGED_SUM
        return self.filled & same

    def pixels(self, poses: list[tuple[BodyPrior, np.ndarray, np.ndarray]], where: np.ndarray | None = None
               ) -> np.ndarray:
        """Pixels the bodies at these poses put in shadow; only those in `where` (bool) are tested."""
        if where is None:
            return shadow_pixels(poses, self.points, self.light)
        out = np.zeros(self.depth.shape, bool)
        ys, xs = np.nonzero(where)
        if ys.size:
            out[ys, xs] = shadow_pixels(poses, self.points[ys, xs][None], self.light)[0]
        return out


def cast_shadows(camera: Camera, bodies: dict[str, BodyPrior], poses0: dict[str, np.ndarray],
                 frame0: np.ndarray, masks0: dict[str, np.ndarray], plate: np.ndarray, scene_depth: np.ndarray
                 ) -> CastShadows | None:
    """Fit the light on the condition frame (`poses0`: each body's centre at t = 0) and return the
    case's `CastShadows`, or None when the frame shows no shadow or the best light explains it
    poorly."""
    objects = np.zeros(plate.shape[:2], bool)
    for m in masks0.values():
        objects |= m
    near = cv2.dilate(objects.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
    changed = channel_difference(frame0, plate, total=True) > 24
    observed = darkened_plate(frame0, plate) & changed & ~near
    poses = [(b, poses0[k], b.candidate_attitudes(0.0)[0]) for k, b in bodies.items() if k in poses0]
    # the surface behind the condition frame's bodies, where their shadows may fall once they move
    holes = objects & ~np.isfinite(scene_depth)
    filled_depth, points = fill_object_holes(camera, scene_depth, holes)
    fit = fit_light(poses, points, observed, ~near) if poses else None
    if fit is None or fit[1] < MIN_LIGHT_IOU:
        return None
    return CastShadows(fit[0], camera, filled_depth, fit[1], holes & np.isfinite(filled_depth), frame0, points)
