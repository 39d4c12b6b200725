"""Rigid shape prior for in-scene masks: where a case declares each object's primitive (shape and
size) and its camera, a segmented blob is explained by the object's own silhouette.

Why: a pixel rule cannot tell an object's unlit side from its support in shadow when both have the
same colour, and at 640×360 the rim pixels of a 30-px object (blended by anti-aliasing and H.264
4:2:0 chroma) decide a few per cent of its IoU. The silhouette of a known convex solid seen by a
known pinhole camera is exact, so once the object's position is *measured* on the frame the
ambiguous pixels can be decided by geometry instead of by colour.

What is measured and what is assumed:
* the position is fitted to the frame: the body centre moves on the object's GT motion plane (the
  depth a single view cannot give), and its two in-plane coordinates minimise a bounded robust cost
  (Geman–McClure) between the silhouette's coverage (a one-pixel ramp across the outline) and a
  per-pixel matting estimate against the clean plate (`luma_alpha`), by a simplex search from the
  blob's centroid; shadow-like pixels, answer-overlay pixels and other objects' pixels carry no
  weight, so occluders and cast shadows do not drag it. Where the caller knows the answer is
  softer than a sharp render (on white, `edge_blur`) the ramp is the edge of that blur
  (`edge_coverage`): against a one-pixel ramp a blurred rim pulls the outline toward the body's
  darker side;
* two look-alike objects whose blobs touch are fitted jointly to their union (coverage of the two
  silhouettes together) from several starting splits: colour cannot say where one ends;
* the attitude is chosen, not fitted: among the attitudes the case records for the object (at the
  frame's time and at t = 0) the one whose silhouette fits best;
* the prior only decides pixels the colour evidence leaves open: the template adds its pixels that
  are changed from the plate or shadow-like (never a pixel that shows the clean plate — an occluding
  support — or one claimed by a nearer object; where the body's expected colour is itself within
  noise of the plate, colour cannot tell and the template decides, `NO_EVIDENCE_CONTRAST`) and
  removes blob pixels in a 1-px ring just outside it
  (the blended rim); pixels of the blob farther outside stay where they show the body's colour read
  against the fitted silhouette's interior, so a deformed or enlarged object keeps them and a codec's
  smear does not. Where the body's look explains the frame (below), the body is as its look has
  it: its silhouette claims every pixel nothing hides (a codec flattens parts of a moving body into
  the plate's colours, a tone curve or a label brings parts of it near the plate's) and pixels
  beyond are a codec's ghost or noise. A fit whose silhouette disagrees with the blob
  (IoU < `MIN_FIT_IOU`) is used only where the blob covers it and what the blob holds beyond it
  is shown not to be the body (`_apply_in_roi`: unlike the body's colour, or in a video frame a
  ghost the look explains); elsewhere the blob stands;
* supports in front of a body (a ramp's near edge, a track's rail) are known from the case's scene
  depth (the condition frame's depth with the objects removed, `EvalCase.scene_depth`): a pixel where
  that scene lies nearer than the body's front surface at the fitted pose is hidden. Hidden pixels
  carry no weight in the fit (they show the support, which says nothing about where the body's outline
  is) and the silhouette does not claim them unless colour clearly shows the object there; the fit
  and the hidden set are iterated, since each depends on the other;
* where a GT frame shows the body (`appearance.Looks`), each fitted body is then moved to where its
  look explains the frame best (`appearance.place`): the matting cost bounds every pixel, so a
  codec's smear beside a body weighs like its outline, while a rendered comparison weighs each pixel
  by how much it differs; the silhouette's agreement with the blob is read again at the new place;
* how a body's rim looks is learned on the condition frame at the true pose (`LimbModel`): the rim's
  colour relative to the interior and how far the rendered rim lies off the geometric outline, per
  outline direction; the fit reads the rim against the one and places its coverage ramp by the other,
  while the fitted pose and the mask stay geometric (what the GT masks are).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import cv2
import numpy as np
from scipy.spatial import ConvexHull
from scipy.spatial.transform import Rotation
from scipy.optimize import minimize

from ..metrics import backproject_to_plane, camera_center, mask_centroid, project_points
from . import appearance
from .body_size import model_scale
from .matting import FIT_CHROMA_WEIGHT, nearest_inside, weighted_ycc

CIRCLE_POINTS = 64
MIN_FIT_IOU = 0.80       # below this agreement between silhouette and blob the prior is not applied
MIN_FIT_IOU_WHITE = 0.90 # the same on a white background, where the silhouette may claim every pixel
MIN_BLOB_PX = 20
SMEAR_PER_SIGMA = 2.0    # a blurred edge's colour reaches this many σ outside the outline
RIM_BODY_SHARE = 0.5     # a blob pixel just outside a silhouette on white stays where it is at least this much body
LOOK_EXPLAINS = 0.4      # a fit whose look explains this share of the frame's difference from the plate is kept
LOOK_EXPLAINS_IMAGE = 0.85  # ... in a single image, where an excess may be the body drawn otherwise, this share
GHOST_COVERS = 0.85      # ... where its blob covers this share of the silhouette's pixels that nothing hides
GHOST_BODY_COLOURED = 0.5  # ... or where less than this share of the blob beyond it shows the body's colour
GHOST_LOOK_FLOOR = 0.2   # ... and the look explains at least this share (the body is there)
GHOST_SPAN = 1.5         # a blob's body-coloured pixels over this many of the body's discs span more than it
GHOST_STARTS = 12        # ... and the look is placed again from at most this many places across them
PART_HELD = 0.5          # a body drawn in part: its lifted silhouette holds at least this share of its blob
MAX_BLOB_RATIO = 6.0     # a blob larger than this many silhouettes is not fitted
ATTITUDE_DEDUP_DEG = 0.5
LINEARISED_ROUNDS = 2   # searches on shifted signed-distance fields, each re-linearised where the last ended
RELINEARISE_PX = 1.0    # ... when the last one moved a body farther than this (pixels)
ROI_MIN_PAD = 12        # pixels around the blobs that the prior works on, at least
SEARCH_BAND_PX = 6      # pixels deeper than this inside the blob are left out of the search
GOOD_FIT_IOU = 0.98     # a refined start this good ends the search
FIT_CIRCLE_POINTS = 32  # points per circle while searching (a 0.5 % radius error, the same on every side)
FIT_REFINED_STARTS = 2  # starting configurations refined by the simplex search, per body
LIMB_OFF_LINE = 0.35    # distance from the object–plate blend line (× contrast) beyond which a pixel is no blend
LIMB_CHANGE = 0.35      # ... and its difference from the plate (× contrast) that makes it a limb
NO_EVIDENCE_CONTRAST = 6.0  # object–plate contrast (weighted YCbCr) below which a pixel's colour says nothing
NOISE_LEVEL = 3.0       # colour difference (luma levels) that video noise alone produces on the plate
OFF_LINE_NOISE = 2.0    # off-line distance (× noise level) beyond which a pixel that is not a limb says nothing
HUE_EVIDENCE = 0.06     # chromaticity difference from the plate that marks an object pixel where luma cannot
ROBUST_SCALE = 0.35     # residual (coverage fraction) beyond which a pixel counts as an outlier
LIMB_BINS = 16          # outline directions the limb shading model tells apart
LIMB_MIN_PIXELS = 4     # rim pixels a direction needs before its shading is trusted
RIM_BAND_PX = 2.5       # distance from the outline within which the rim colour correction applies
RIM_REFIT_PX = 1.5      # a fit that ends farther from its start is refitted once, the rim shading moved there
EDGE_SHIFT_MAX = 0.3    # largest rendered-rim offset (pixels) learned per direction (`LimbModel.edge_shift`)
OCCLUSION_TOL_PX = 0.3  # the scene hides a body where it is nearer than its front by this (pixels at its depth)
SINK_TOL_PX = 3.0       # a support's surface this far inside a body (pixels at its depth) is the body sinking into it
SINK_PX = 4             # ... on more pixels than this
LIFT_AGREEMENT = 0.02   # a sunk body refitted out of its support keeps that place where its agreement drops less
OCCLUSION_ROUNDS = 3    # fit ↔ hidden-pixel iterations at most
OCCLUSION_SETTLED_PX = 2  # ... stopped once the hidden set changes by no more pixels than this
SHADOW_SETTLED_PX = 8   # ... and the distrusted shadow pixels (a widened band: a few pixels move with the pose)


def quat_to_matrix(q) -> np.ndarray:
    """Unit quaternions (..., 4) as (w, x, y, z), the order of the case's states.npz → rotations
    (..., 3, 3), body → world."""
    q = np.asarray(q, dtype=np.float64)
    return Rotation.from_quat(q[..., [1, 2, 3, 0]].reshape(-1, 4)).as_matrix().reshape(q.shape[:-1] + (3, 3))


@dataclass
class BodyPrior:
    """One object's rigid model: primitive, size (metres), the plane its centre moves in, and the
    attitudes (body → world rotations) recorded for it as a function of time."""
    id: str
    shape: str
    size: dict[str, float]
    plane_point: np.ndarray
    plane_normal: np.ndarray
    attitude_times: np.ndarray | None = None       # (N,)
    attitudes: list[np.ndarray] = field(default_factory=list)   # each (N, 3, 3), one per recorded source

    def __post_init__(self):
        n = np.asarray(self.plane_normal, float)
        self.plane_normal = n / np.linalg.norm(n)
        a = np.array([1.0, 0.0, 0.0]) if abs(n[0]) < 0.9 else np.array([0.0, 1.0, 0.0])
        e1 = np.cross(self.plane_normal, a)
        self.e1 = e1 / np.linalg.norm(e1)
        self.e2 = np.cross(self.plane_normal, self.e1)
        self._local = body_points(self.shape, self.size)
        self._coarse = body_points(self.shape, self.size, FIT_CIRCLE_POINTS)
        self._faces: np.ndarray | None = None

    @property
    def reach(self) -> float:
        """Farthest distance (metres) of the solid's surface from its centre (its coarse hull's, a
        sphere's radius)."""
        if self.shape == "sphere":
            return float(self.size["radius"])
        return float(np.linalg.norm(self._coarse, axis=1).max())

    def scaled(self, factor: float) -> "BodyPrior":
        """The same body `factor` times as large (linear)."""
        return replace(self, size={k: factor * v for k, v in self.size.items()})

    @property
    def faces(self) -> np.ndarray:
        """Bounding planes (F, 4) of the solid in the body frame, rows (n, b) with n·x + b ≤ 0 inside
        (a cylinder's or cone's circles as `FIT_CIRCLE_POINTS`-gons). Not defined for spheres."""
        if self._faces is None:
            eq = ConvexHull(self._coarse).equations
            # a hull's facets are triangles: coplanar ones repeat a plane
            self._faces = np.unique(np.round(eq, 9), axis=0)
        return self._faces

    def depth_inside(self, points: np.ndarray) -> np.ndarray:
        """How deep (metres) each body-frame point (N, 3) lies inside the solid: its distance to the
        nearest face (exact inside a convex solid), negative outside."""
        if self.shape == "sphere":
            return float(self.size["radius"]) - np.linalg.norm(points, axis=1)
        return -(points @ self.faces[:, :3].T + self.faces[:, 3]).max(axis=1)

    def candidate_attitudes(self, time: float | None) -> list[np.ndarray]:
        if self.shape == "sphere" or self.attitude_times is None or not self.attitudes:
            return [np.eye(3)]
        out: list[np.ndarray] = []
        idx = [0]
        if time is not None:
            idx.append(self._attitude_index(time))
        for seq in self.attitudes:
            for i in idx:
                R = seq[min(i, len(seq) - 1)]
                if all(_angle_deg(R, S) > ATTITUDE_DEDUP_DEG for S in out):
                    out.append(R)
        return out or [np.eye(3)]

    def _attitude_index(self, time: float) -> int:
        return int(np.argmin(np.abs(self.attitude_times - time)))

    def attitude_at(self, time: float) -> np.ndarray:
        """The attitude recorded nearest `time` (the first recorded source's)."""
        if self.shape == "sphere" or self.attitude_times is None or not self.attitudes:
            return np.eye(3)
        seq = self.attitudes[0]
        return seq[min(self._attitude_index(time), len(seq) - 1)]


def _angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    c = (np.trace(a.T @ b) - 1.0) / 2.0
    return math.degrees(math.acos(max(-1.0, min(1.0, c))))


def body_points(shape: str, size: dict[str, float], circle_points: int = CIRCLE_POINTS) -> np.ndarray:
    """Points in the body frame whose convex hull has the solid's silhouette (spheres are handled
    exactly in `Camera.silhouette`). Conventions of `orchard_build.primitives`: symmetry axis +z,
    a cone's base at z = −h/4 and apex at +3h/4, a cube centred with edge `edge`."""
    if shape == "sphere":
        return np.zeros((1, 3))
    if shape == "cube":
        e = float(size["edge"]) / 2.0
        return np.array([[x, y, z] for x in (-e, e) for y in (-e, e) for z in (-e, e)])
    t = np.linspace(0.0, 2.0 * np.pi, circle_points, endpoint=False)
    r, h = float(size["radius"]), float(size["height"])
    ring = np.stack([r * np.cos(t), r * np.sin(t)], axis=1)
    if shape == "cylinder":
        return np.concatenate([np.c_[ring, np.full(t.size, -h / 2)], np.c_[ring, np.full(t.size, h / 2)]])
    if shape == "cone":
        return np.concatenate([np.c_[ring, np.full(t.size, -h / 4)], [[0.0, 0.0, 0.75 * h]]])
    raise ValueError(f"no silhouette model for shape {shape!r}")


class Camera:
    """Pinhole camera in the OpenCV convention (pixel (0, 0) is the top-left corner; the centre of
    pixel (i, j) is (i + ½, j + ½))."""

    def __init__(self, intrinsic: np.ndarray, extrinsic: np.ndarray):
        self.K = np.asarray(intrinsic, float)
        self.E = np.asarray(extrinsic, float)
        self.R, self.t = self.E[:, :3], self.E[:, 3]
        self.centre = camera_center(self.E)

    def project(self, X: np.ndarray) -> np.ndarray:
        return project_points(X, self.K, self.E)

    def depth(self, X: np.ndarray) -> float:
        return float((self.R @ X + self.t)[2])

    def crop(self, x0: int, y0: int) -> "Camera":
        """The same camera for the image cropped at column x0, row y0 (principal point moved)."""
        K = self.K.copy()
        K[0, 2] -= x0
        K[1, 2] -= y0
        return Camera(K, self.E)

    def place(self, body: "BodyPrior", uv, time: float | None) -> tuple[np.ndarray, np.ndarray] | None:
        """(centre, attitude) of the body seen at image position uv: on its motion plane, in the first
        attitude recorded for `time`; None where the ray misses the plane."""
        X = self.ray_plane(uv, body.plane_point, body.plane_normal)
        return None if X is None else (X, body.candidate_attitudes(time)[0])

    def ray_plane(self, uv, point, normal) -> np.ndarray | None:
        X = backproject_to_plane([uv], self.K, self.E, point, normal)[0]
        return X if np.all(np.isfinite(X)) else None

    def front_depth(self, body: BodyPrior, centre: np.ndarray, R: np.ndarray, us: np.ndarray, vs: np.ndarray
                    ) -> np.ndarray:
        """Depth (metres along the optical axis) where the ray through each image point (us, vs)
        first meets the body at this pose; +inf where it misses."""
        d = self.rays(us, vs)
        c = self.R @ centre + self.t
        out = np.full(d.shape[1], np.inf)
        if body.shape == "sphere":
            r = float(body.size["radius"])
            a, b = np.einsum("ij,ij->j", d, d), c @ d
            disc = b * b - a * (c @ c - r * r)
            ok = disc >= 0.0
            out[ok] = (b[ok] - np.sqrt(disc[ok])) / a[ok]
        else:
            # the bounding planes moved to camera coordinates; every ray starts at the camera centre
            normals = body.faces[:, :3] @ (self.R @ R).T
            offsets = body.faces[:, 3] - normals @ c
            near, far, crosses = slab_span(offsets[None, :], (normals @ d).T)
            ok = crosses & (near <= far) & np.isfinite(near)
            out[ok] = near[ok]
        out[out <= 0] = np.inf
        return out

    def unproject(self, us: np.ndarray, vs: np.ndarray, depth: np.ndarray) -> np.ndarray:
        """World points (N, 3) seen at image points (us, vs) at `depth` (metres along the optical axis)."""
        return (self.rays(us, vs) * np.asarray(depth, np.float64)[None, :] - self.t[:, None]).T @ self.R

    def rays(self, us: np.ndarray, vs: np.ndarray) -> np.ndarray:
        """Directions (3, N), camera coordinates, z-component 1, of the rays through image points (us, vs)."""
        return np.linalg.solve(self.K, np.stack([us, vs, np.ones_like(us)]).astype(np.float64))

    def silhouette(self, body: BodyPrior, centre: np.ndarray, R: np.ndarray, coarse: bool = False
                   ) -> np.ndarray | None:
        """Convex polygon (counter-clockwise in image coordinates, (M, 2)) of the body's outline."""
        if body.shape == "sphere":
            r = float(body.size["radius"])
            v = self.centre - centre
            d = float(np.linalg.norm(v))
            if d <= r * 1.0001:
                return None
            u = v / d
            q = centre + (r * r / d) * u
            rho = r * math.sqrt(1.0 - (r / d) ** 2)
            a = np.cross(u, [1.0, 0.0, 0.0] if abs(u[0]) < 0.9 else [0.0, 1.0, 0.0])
            a /= np.linalg.norm(a)
            b = np.cross(u, a)
            t = np.linspace(0.0, 2.0 * np.pi, FIT_CIRCLE_POINTS if coarse else CIRCLE_POINTS, endpoint=False)
            pts = q + rho * (np.cos(t)[:, None] * a + np.sin(t)[:, None] * b)
        else:
            pts = (body._coarse if coarse else body._local) @ R.T + centre
        if np.any((pts @ self.R.T + self.t)[:, 2] <= 1e-6):
            return None
        uv = self.project(pts).astype(np.float32)
        hull = cv2.convexHull(uv, clockwise=False).reshape(-1, 2).astype(np.float64)
        if hull.shape[0] < 3:
            return None
        # orient so that the interior lies to the left of each edge in (x right, y down) coordinates
        area = np.sum(hull[:, 0] * np.roll(hull[:, 1], -1) - np.roll(hull[:, 0], -1) * hull[:, 1])
        return hull if area > 0 else hull[::-1]


def slab_span(signed: np.ndarray, nd: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where rays cross a convex solid given by planes n·x + b ≤ 0 (slab test). `signed` (…, F):
    n·origin + b of each ray's origin (> 0 outside a plane); `nd` (…, F): n·direction. Returns the
    entry and exit ray parameters (near, far) and whether no plane parallel to the ray keeps it
    outside; a ray meets the solid where that holds and near <= far."""
    with np.errstate(divide="ignore", invalid="ignore"):
        s = -signed / nd
    near = np.where(nd < 0, s, -np.inf).max(axis=-1)
    far = np.where(nd > 0, s, np.inf).min(axis=-1)
    return near, far, ~((nd == 0) & (signed > 0)).any(axis=-1)


def _silhouette_window(camera: Camera, body: BodyPrior, centre: np.ndarray, R: np.ndarray, shape: tuple[int, int],
                       pad: int) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1): the pixels of a frame of `shape` around the body's coarse silhouette at this
    pose, `pad` pixels more each way (one more to the right and below: the outline's ceiling); None
    where it projects nowhere in the frame."""
    poly = camera.silhouette(body, centre, R, coarse=True)
    if poly is None:
        return None
    h, w = shape
    x0, y0 = max(int(np.floor(poly[:, 0].min())) - pad, 0), max(int(np.floor(poly[:, 1].min())) - pad, 0)
    x1, y1 = min(int(np.ceil(poly[:, 0].max())) + 1 + pad, w), min(int(np.ceil(poly[:, 1].max())) + 1 + pad, h)
    return None if x1 <= x0 or y1 <= y0 else (x0, y0, x1, y1)


def hidden_pixels(camera: Camera, body: BodyPrior, centre: np.ndarray, R: np.ndarray, scene_depth: np.ndarray
                  ) -> np.ndarray:
    """Pixels of the body's silhouette at this pose where the static scene (`scene_depth`, +inf where
    unknown) lies in front of the body's surface: a support that hides it there."""
    out = np.zeros(scene_depth.shape, bool)
    window = _silhouette_window(camera, body, centre, R, scene_depth.shape, 1)
    if window is None:
        return out
    x0, y0, x1, y1 = window
    zc = camera.depth(centre)
    scene = scene_depth[y0:y1, x0:x1]
    cand = scene < zc + body.reach          # nothing farther than the body's far side can hide it
    if not cand.any():
        return out
    ys, xs = np.nonzero(cand)
    front = camera.front_depth(body, centre, R, xs + x0 + 0.5, ys + y0 + 0.5)
    tol = OCCLUSION_TOL_PX * zc / camera.K[0, 0]
    hid = np.isfinite(front) & (scene[ys, xs] < front - tol)
    out[ys[hid] + y0, xs[hid] + x0] = True
    return out


def sunk_pixels(camera: Camera, body: BodyPrior, centre: np.ndarray, R: np.ndarray, scene_depth: np.ndarray
                ) -> int:
    """How many pixels of the body's silhouette at this pose see the static scene's surface inside
    the body, deeper than SINK_TOL_PX (at the body's depth) from its surface: the body sinks into a
    support there. A body resting on a support touches its surface and sinks nowhere; one placed
    lower than its support allows does, and the support then hides a part of it that no answer can
    have drawn hidden. Depth inside is measured to the body's nearest face, not along the pixel's
    ray: a ray that grazes a support (a track seen edge-on) runs far through a body only a pixel
    low."""
    window = _silhouette_window(camera, body, centre, R, scene_depth.shape, 0)
    if window is None:
        return 0
    x0, y0, x1, y1 = window
    zc = camera.depth(centre)
    reach = body.reach
    scene = scene_depth[y0:y1, x0:x1]
    cand = np.isfinite(scene) & (scene > zc - reach) & (scene < zc + reach)
    if not cand.any():
        return 0
    ys, xs = np.nonzero(cand)
    X = camera.unproject(xs + x0 + 0.5, ys + y0 + 0.5, scene[ys, xs])
    tol = SINK_TOL_PX * zc / camera.K[0, 0]
    return int(np.sum(body.depth_inside((X - centre) @ R) > tol))


def signed_distance(poly: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Signed distance (pixels, positive inside) of the points (xs, ys) to a convex polygon: the
    minimum over its edges of the distance to the edge's line (exact inside and near edges)."""
    return _nearest_edge(poly, xs, ys)[0]


def outline_field(poly: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(signed distance, angle in radians of the outward normal of the nearest edge) per point."""
    d, k, ex, ey = _nearest_edge(poly, xs, ys)
    return d, np.arctan2(-ex[k], ey[k])


def _nearest_edge(poly: np.ndarray, xs: np.ndarray, ys: np.ndarray):
    """Per point, the least signed distance to the polygon's edge lines and the first edge that has
    it, with the edges' vectors (ex, ey)."""
    a = poly
    b = np.roll(poly, -1, axis=0)
    ex, ey = b[:, 0] - a[:, 0], b[:, 1] - a[:, 1]
    ln = np.hypot(ex, ey)
    keep = ln > 1e-9
    a, ex, ey, ln = a[keep], ex[keep], ey[keep], ln[keep]
    # positive on the left of a→b with y pointing down means the interior for our orientation:
    # d = (ex·(y − ay) − ey·(x − ax)) / |e| = x·nx + y·ny + c per edge. One edge at a time, on
    # vectors that stay in cache: a (points × edges) array costs several times as much on the
    # memory bus, and a BLAS product would start threads in every worker of a parallel run
    nx, ny, c = -ey / ln, ex / ln, (ey * a[:, 0] - ex * a[:, 1]) / ln
    x, y = np.asarray(xs, np.float64), np.asarray(ys, np.float64)
    best = np.full(x.shape, np.inf)
    arg = np.zeros(x.shape, np.intp)
    d, dy = np.empty_like(best), np.empty_like(best)
    for e in range(nx.size):
        np.multiply(x, nx[e], out=d)
        np.multiply(y, ny[e], out=dy)
        d += dy
        d += c[e]
        closer = d < best
        best[closer] = d[closer]
        arg[closer] = e
    return best, arg, ex, ey


def silhouette_coverage(camera: "Camera", body: "BodyPrior", centre: np.ndarray, R: np.ndarray,
                        shape: tuple[int, int]) -> np.ndarray | None:
    """Each pixel's share covered by the body's silhouette at this pose (a one-pixel ramp across the
    outline, as the fit models it), over the whole frame; None where the body projects nowhere."""
    poly = camera.silhouette(body, centre, R)
    if poly is None:
        return None
    h, w = shape
    x0, x1 = max(int(np.floor(poly[:, 0].min())) - 1, 0), min(int(np.ceil(poly[:, 0].max())) + 2, w)
    y0, y1 = max(int(np.floor(poly[:, 1].min())) - 1, 0), min(int(np.ceil(poly[:, 1].max())) + 2, h)
    if x1 <= x0 or y1 <= y0:
        return None
    gy, gx = np.mgrid[y0:y1, x0:x1]
    sd = signed_distance(poly, gx.ravel() + 0.5, gy.ravel() + 0.5).reshape(y1 - y0, x1 - x0)
    out = np.zeros(shape, np.float32)
    out[y0:y1, x0:x1] = np.clip(0.5 + sd, 0.0, 1.0)
    return out


def rasterise(poly: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Pixels whose centre lies inside the convex polygon (what a renderer's instance mask holds):
    per pixel row, the span between the outline's two crossings of the row's centre line."""
    h, w = shape
    out = np.zeros(shape, bool)
    y0 = max(int(np.floor(poly[:, 1].min())) - 1, 0)
    y1 = min(int(np.ceil(poly[:, 1].max())) + 2, h)
    if y1 <= y0:
        return out
    yc = np.arange(y0, y1) + 0.5
    a, b = poly, np.roll(poly, -1, axis=0)
    lo_y, hi_y = np.minimum(a[:, 1], b[:, 1]), np.maximum(a[:, 1], b[:, 1])
    dy = b[:, 1] - a[:, 1]
    crosses = (yc[:, None] >= lo_y[None]) & (yc[:, None] <= hi_y[None]) & (np.abs(dy)[None] > 1e-12)
    with np.errstate(divide="ignore", invalid="ignore"):
        x = a[None, :, 0] + (yc[:, None] - a[None, :, 1]) * ((b[:, 0] - a[:, 0]) / dy)[None]
    left = np.where(crosses, x, np.inf).min(axis=1)
    right = np.where(crosses, x, -np.inf).max(axis=1)
    # columns j with left <= j + 0.5 <= right, every row at once
    ok = np.isfinite(left) & (right >= left)
    j0 = np.zeros(left.shape, np.int64)
    j1 = np.zeros(left.shape, np.int64)
    j0[ok] = np.maximum(np.ceil(left[ok] - 0.5), 0)
    j1[ok] = np.minimum(np.floor(right[ok] - 0.5) + 1, w)
    cols = np.arange(w)
    out[y0:y1] = (cols[None, :] >= j0[:, None]) & (cols[None, :] < j1[:, None])
    return out


@dataclass
class Fit:
    centre: np.ndarray          # world position of the body centre
    attitude: np.ndarray
    polygon: np.ndarray
    iou: float                  # agreement of the silhouette with the blob on the weighted pixels
    image_centre: tuple[float, float]
    body: "BodyPrior | None" = None   # the rigid model at the size the answer draws it, where a look found another
    explained: float = 0.0      # share of the frame's difference from the background its look explains
    lifted: bool = False        # fitted again out of a support it had sunk into (`_RoiFit.fit_visible`)


def _spread_starts(pixels: np.ndarray, radius: float) -> list[tuple[float, float]]:
    """Places across `pixels` about `radius` apart: the centres of the cells of a grid of that pitch
    that the pixels fill most (at least a quarter, GHOST_STARTS at most, fullest first); none where
    the pixels cover no more than about one body (GHOST_SPAN discs of that radius)."""
    if radius <= 0 or np.count_nonzero(pixels) <= GHOST_SPAN * math.pi * radius * radius:
        return []
    step = max(int(round(radius)), 1)
    cols = pixels.shape[1] // step + 1
    ys, xs = np.nonzero(pixels)
    cells = np.bincount((ys // step) * cols + xs // step)
    full = np.flatnonzero(cells >= 0.25 * step * step)
    full = full[np.argsort(-cells[full], kind="stable")][:GHOST_STARTS]
    return [((c % cols + 0.5) * step, (c // cols + 0.5) * step) for c in full.tolist()]


def blob_centroid(mask: np.ndarray) -> tuple[float, float]:
    """Image position (u, v) of a non-empty mask's centroid (pixel centres at +0.5)."""
    c = mask_centroid(mask)
    return (math.nan, math.nan) if c is None else c


def fit_body(camera: Camera, body: BodyPrior, blob: np.ndarray, evidence: np.ndarray, weight: np.ndarray,
             time: float | None) -> Fit | None:
    """Fit the body's in-plane position: the silhouette's coverage against `evidence` (per-pixel
    object fraction in [0, 1], `luma_alpha`), pixels weighted by `weight` (0 = no evidence:
    unobservable, ambiguous, another object's, hidden, too little contrast). `blob` (bool) is the
    colour segmentation, which starts the fit."""
    if int(blob.sum()) < MIN_BLOB_PX:
        return None
    fits = fit_bodies(camera, [body], [[blob_centroid(blob)]], blob, evidence,
                      weight, time)
    return None if fits is None else fits[0]


def fit_bodies(camera: Camera, bodies: list[BodyPrior], starts: list[list[tuple[float, float]]], blob: np.ndarray,
               evidence: np.ndarray, weight: np.ndarray, time: float | None,
               rims: list[LimbModel | None] | None = None, attitudes: list[np.ndarray] | None = None,
               smear_px: float = 0.0, edge_blur: float = 0.0) -> list[Fit] | None:
    """Jointly fit several bodies that together make up `blob` (look-alike objects that touch or
    overlap in the image): the modelled coverage is the union of their silhouettes. `starts`: the
    image positions to start from, one list (a position per body) per start; the start and the
    attitude combination with the lowest robust cost win. `Fit.iou` is the agreement of the union.
    `rims`: per body, its learned rim (`LimbModel.edge_shift`): the modelled coverage ramp of each
    outline direction sits where the rendered rim does; the fitted pose is the geometric one.
    `attitudes`: one attitude per body to fit with (a refit), instead of each body's candidates.
    `smear_px`: how far outside its outline the answer smears a body's colour (`SMEAR_PER_SIGMA` ×
    the answer's rim softness): those pixels say nothing against a fit and are left out of `Fit.iou`.
    `edge_blur`: the Gaussian σ (pixels) by which the answer is softer than a sharp render: the
    modelled coverage across each outline is that blur's edge instead of the one-pixel ramp (read
    against a blurred rim, the ramp pulls an outline toward the body's darker side)."""
    if int(blob.sum()) < MIN_BLOB_PX:
        return None
    h, w = blob.shape
    ys, xs = np.nonzero(blob)
    pad = 4
    x0, y0 = max(int(xs.min()) - pad, 0), max(int(ys.min()) - pad, 0)
    x1, y1 = min(int(xs.max()) + pad + 1, w), min(int(ys.max()) + pad + 1, h)
    if x1 - x0 < 3 or y1 - y0 < 3:
        return None
    gy, gx = np.mgrid[y0:y1, x0:x1]
    cx, cy = gx.ravel() + 0.5, gy.ravel() + 0.5
    target = evidence[y0:y1, x0:x1].ravel().astype(np.float64)
    wt = weight[y0:y1, x0:x1].ravel().astype(np.float64)
    sel = wt > 0
    if sel.sum() < MIN_BLOB_PX:
        return None
    # the search reads only the pixels with evidence, and not the blob's deep interior: any
    # silhouette the search can reach covers it, so it adds the same cost everywhere
    depth = cv2.distanceTransform(blob[y0:y1, x0:x1].astype(np.uint8), cv2.DIST_L2, 3).ravel()
    search = sel & (depth < SEARCH_BAND_PX)
    if search.sum() < MIN_BLOB_PX:
        search = sel
    fx, fy = cx[search], cy[search]
    target_s, wt_s = target[search], wt[search]
    trusted = sel & (wt >= 0.5)
    t_in = target >= 0.5
    if attitudes is not None:
        combos = [list(attitudes)]
    else:
        combos = [[]]
        for b in bodies:
            combos = [c + [R] for c in combos for R in b.candidate_attitudes(time)][:4]

    def robust(c):
        # Geman–McClure (bounded): a band of shadow or an occluder along one side of the outline
        # costs a constant, it does not drag the silhouette
        r2 = (wt_s * (c - target_s) / ROBUST_SCALE) ** 2
        return float(np.sum(r2 / (1.0 + r2)))

    # every (start, attitudes) pair is scored as it stands; the simplex search refines the best few
    trials = []
    for start in starts:
        X0s = [camera.ray_plane(uv, b.plane_point, b.plane_normal) for uv, b in zip(start, bodies)]
        if any(X is None for X in X0s):
            continue
        # parameters in pixels (metres per pixel at each body's depth): simplex steps and
        # tolerances are on the image scale
        scales = [max(float(np.linalg.norm(X - camera.centre)) / camera.K[0, 0], 1e-9) for X in X0s]
        for Rs in combos:
            c0 = _union_coverage(camera, bodies, X0s, Rs, fx, fy)
            if c0 is not None:
                trials.append((robust(c0), X0s, scales, Rs))
    trials.sort(key=lambda t: t[0])
    best: tuple[float, list[Fit]] | None = None
    h_win, w_win = y1 - y0, x1 - x0
    rows, cols = gy.ravel()[search] - y0, gx.ravel()[search] - x0      # searched pixels in the window
    for _, X0s, scales, Rs in trials[:FIT_REFINED_STARTS * len(bodies)]:
        Xs, fun = list(X0s), None
        for _round in range(LINEARISED_ROUNDS):
            # the silhouettes' signed-distance fields at the current positions, computed exactly once;
            # a small move of a body on its plane moves its outline in the image by J·p (the change of
            # its shape over a few pixels is far below a pixel), so the search samples shifted fields
            fields, jacs = [], []
            for i, (b, X, R, sc) in enumerate(zip(bodies, Xs, Rs, scales)):
                poly = camera.silhouette(b, X, R, coarse=True)
                if poly is None:
                    break
                rim = None if rims is None else rims[i]
                if rim is not None and rim.edge_shift is not None and np.any(rim.edge_shift):
                    sd, angle = outline_field(poly, cx, cy)
                    fields.append((sd + rim.shift(angle)).reshape(h_win, w_win))
                else:
                    fields.append(signed_distance(poly, cx, cy).reshape(h_win, w_win))
                u0 = camera.project(np.stack([X, X + sc * b.e1, X + sc * b.e2]))
                jacs.append(np.stack([u0[1] - u0[0], u0[2] - u0[0]], axis=1))   # d(u, v)/d(p1, p2)
            if len(fields) < len(bodies):
                break

            shifted = [ShiftedField(f, rows, cols) for f in fields]

            def cost(p, shifted=shifted, jacs=jacs):
                # coverage of the union across the outline nearest outside
                sd = None
                for i, (fld, J) in enumerate(zip(shifted, jacs)):
                    du, dv = J @ p[2 * i:2 * i + 2]
                    s_i = fld.at(du, dv)
                    sd = s_i if sd is None else np.maximum(sd, s_i, out=sd)
                return robust(edge_coverage(sd, edge_blur))

            n = 2 * len(bodies)
            simplex = np.vstack([np.zeros(n), np.eye(n)])
            sol = minimize(cost, np.zeros(n), method="Nelder-Mead",
                           options={"xatol": 0.02, "fatol": 1e-3, "maxfev": 100 * n, "initial_simplex": simplex})
            Xs = [X + sc * (sol.x[2 * i] * b.e1 + sol.x[2 * i + 1] * b.e2)
                  for i, (X, sc, b) in enumerate(zip(Xs, scales, bodies))]
            fun = float(sol.fun)
            if np.max(np.abs(sol.x)) < RELINEARISE_PX:
                break      # over a pixel of motion the outline's shape does not change measurably
        if fun is None:
            continue
        polys = [camera.silhouette(b, X, R) for b, X, R in zip(bodies, Xs, Rs)]
        if any(pg is None for pg in polys):
            continue
        iou = _agreement(polys, cx[trusted], cy[trusted], t_in[trusted], smear_px)
        if best is None or fun < best[0]:
            fits = []
            good = iou >= GOOD_FIT_IOU
            for X, R, pg in zip(Xs, Rs, polys):
                uc = camera.project(X[None])[0]
                fits.append(Fit(X, R, pg, iou, (float(uc[0]), float(uc[1]))))
            best = (fun, fits)
            if good:
                break      # a start that already explains the blob: the others cannot do much better
    return None if best is None else best[1]


def edge_coverage(sd: np.ndarray, blur: float) -> np.ndarray:
    """A pixel's share inside an outline at signed distance `sd` (pixels, positive inside): a sharp
    render's one-pixel ramp, or for `blur` > 0 the edge a Gaussian blur of that σ makes (the
    logistic approximation of the normal CDF, within 1 % of it)."""
    if blur <= 0.0:
        return np.minimum(np.maximum(sd + 0.5, 0.0), 1.0)
    return 1.0 / (1.0 + np.exp(sd * (-1.702 / blur)))


def _agreement(polys: list[np.ndarray], cx: np.ndarray, cy: np.ndarray, object_like: np.ndarray,
               smear_px: float) -> float:
    """IoU of the silhouettes' union with the pixels read as the object, over the trusted pixels
    centred at (cx, cy) only (the outline is measured where the evidence is); pixels the answer's
    smear reaches outside an outline are left out. Exact distances are taken only in a band around
    the union's outline; farther in or out, a pixel is inside exactly where the rasterised union
    has it, and no smear reaches it."""
    if not cx.size:
        return 0.0
    px, py = (cx - 0.5).astype(np.int64), (cy - 0.5).astype(np.int64)
    x0, y0 = int(px.min()), int(py.min())
    shape = (int(py.max()) - y0 + 1, int(px.max()) - x0 + 1)
    union = np.zeros(shape, np.uint8)
    for pg in polys:
        union |= rasterise(pg - np.array([x0, y0], float), shape)
    reach = int(math.ceil(smear_px)) + 2
    k = np.ones((2 * reach + 1, 2 * reach + 1), np.uint8)
    band = ((cv2.dilate(union, k) > 0) & ~(cv2.erode(union, k, borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0)
            )[py - y0, px - x0]
    inside = union[py - y0, px - x0] > 0
    keep = np.ones(cx.size, bool)
    if band.any():
        sd = np.max([signed_distance(pg, cx[band], cy[band]) for pg in polys], axis=0)
        inside[band] = sd >= 0
        if smear_px > 0:
            keep[band] = ~((sd < 0) & (sd > -smear_px))
    return float((inside & object_like & keep).sum()) / max(float(((inside | object_like) & keep).sum()), 1.0)


def blob_agreement(polys: list[np.ndarray], blob: np.ndarray, evidence: np.ndarray, weight: np.ndarray,
                   smear_px: float = 0.0) -> float:
    """`Fit.iou` of silhouettes placed elsewhere than the fit put them: over the blob's window (4 px
    around it), the trusted pixels (weight ≥ ½) read as object (evidence ≥ ½) against the union."""
    h, w = blob.shape
    ys, xs = np.nonzero(blob)
    if not ys.size:
        return 0.0
    y0, y1 = max(int(ys.min()) - 4, 0), min(int(ys.max()) + 5, h)
    x0, x1 = max(int(xs.min()) - 4, 0), min(int(xs.max()) + 5, w)
    wt = weight[y0:y1, x0:x1]
    ty, tx = np.nonzero(wt >= 0.5)
    if not ty.size:
        return 0.0
    return _agreement(polys, tx + x0 + 0.5, ty + y0 + 0.5, evidence[y0:y1, x0:x1][ty, tx] >= 0.5, smear_px)


class ShiftedField:
    """A field sampled at fixed integer pixels (rows, cols) moved by (−dv, −du), bilinearly, edges
    replicated — `scipy.ndimage.map_coordinates(order=1, mode="nearest")` for a shift shared by
    every pixel: its four taps and weights are the same for all, so four gathers on a copy padded
    by replicated edges do it (the simplex search samples tens of shifts per fit)."""

    PAD = 16

    def __init__(self, field: np.ndarray, rows: np.ndarray, cols: np.ndarray):
        self.field, self.rows, self.cols = field, rows, cols
        self.padded = np.pad(field, self.PAD, mode="edge").ravel()
        self.stride = field.shape[1] + 2 * self.PAD
        self.base = (rows + self.PAD) * self.stride + cols + self.PAD

    def at(self, du: float, dv: float) -> np.ndarray:
        y, x = -float(dv), -float(du)
        iy, ix = math.floor(y), math.floor(x)
        ay, ax = y - iy, x - ix
        if max(abs(iy), abs(iy + 1), abs(ix), abs(ix + 1)) <= self.PAD:
            flat, i00 = self.padded, self.base + (iy * self.stride + ix)
            i10 = i00 + self.stride
            i01, i11 = i00 + 1, i10 + 1
        else:    # a shift beyond the padding: clamp the indices instead
            h, w = self.field.shape
            flat = self.field.ravel()
            r0, r1 = np.clip(self.rows + iy, 0, h - 1) * w, np.clip(self.rows + iy + 1, 0, h - 1) * w
            c0, c1 = np.clip(self.cols + ix, 0, w - 1), np.clip(self.cols + ix + 1, 0, w - 1)
            i00, i01, i10, i11 = r0 + c0, r0 + c1, r1 + c0, r1 + c1
        top = (1.0 - ax) * flat[i00] + ax * flat[i01]
        bottom = (1.0 - ax) * flat[i10] + ax * flat[i11]
        return (1.0 - ay) * top + ay * bottom


def _union_coverage(camera: Camera, bodies: list[BodyPrior], Xs, Rs, cx: np.ndarray, cy: np.ndarray
                    ) -> np.ndarray | None:
    """Coverage of the pixels centred at (cx, cy) by the union of the bodies' silhouettes: a linear
    ramp of one pixel across each outline (outlines drawn with `FIT_CIRCLE_POINTS` per circle)."""
    out = np.zeros(cx.size)
    for b, X, R in zip(bodies, Xs, Rs):
        poly = camera.silhouette(b, X, R, coarse=True)
        if poly is None:
            return None
        out = np.maximum(out, np.clip(0.5 + signed_distance(poly, cx, cy), 0.0, 1.0))
    return out


@dataclass
class LimbModel:
    """How an object's outline differs in colour from its interior, by outline direction: shading
    changes towards a limb (a lit face darkens at grazing light, a sphere's rim falls off), so the
    colour two pixels inside — what `luma_alpha` takes for the object — is not the colour that blends
    with the background at the rim, and the fit would lean towards the side where they differ less.
    Learned on the condition frame, where the body's pose and mask are known; lighting is static.
    `delta[k]`: rim colour minus interior colour (weighted YCbCr) for directions in bin k (NaN where
    unknown)."""
    delta: np.ndarray     # (LIMB_BINS, 3)
    # (LIMB_BINS,) pixels by which the rim as rendered lies outside (+) the geometric outline, per
    # direction, as the fit's coverage model reads it (0 where unknown): a lit sliver of a top face
    # thinner than a pixel, a dark contact edge — what the colour correction cannot express
    edge_shift: np.ndarray | None = None

    def correction(self, angles: np.ndarray) -> np.ndarray:
        return self.delta[_limb_bin(angles)]

    def rim_shift(self, sd: np.ndarray, angles: np.ndarray) -> np.ndarray:
        """`luma_alpha`'s `rim_shift` for points at signed distance `sd` from the outline, whose
        nearest edge faces `angles`: the rim correction within RIM_BAND_PX of the outline, NaN
        elsewhere (shape sd.shape + (3,))."""
        out = np.full(np.shape(sd) + (3,), np.nan, np.float32)
        near = np.abs(sd) < RIM_BAND_PX
        out[near] = self.correction(angles[near])
        return out

    def shift(self, angles: np.ndarray) -> np.ndarray:
        if self.edge_shift is None:
            return np.zeros(np.shape(angles))
        return self.edge_shift[_limb_bin(angles)]


def _limb_bin(angles: np.ndarray) -> np.ndarray:
    return np.floor((np.asarray(angles) + np.pi) / (2 * np.pi) * LIMB_BINS).astype(int) % LIMB_BINS


def learn_limb_model(camera: Camera, body: BodyPrior, centre: np.ndarray, R: np.ndarray, image: np.ndarray,
                     plate: np.ndarray, usable: np.ndarray, colour: LimbModel | None = None,
                     offsets: bool = True) -> LimbModel | None:
    """Learn a `LimbModel` from a frame where the body's pose is known (the condition frame):
    rim pixels (exact coverage from the silhouette, 4×4 samples per pixel) solved for the object
    colour that blends with the plate, α·o + (1 − α)·b, per outline direction, against the colour
    two pixels inside; then the rim offsets (`_learn_edge_shift`). `usable`: pixels that show only
    this body and the plate (no other object, no shadow, nothing hidden). `colour`: a rim colour
    model to keep (then only the rim offsets are learned here, read with that colour model);
    `offsets` False: the rim colours only."""
    poly = camera.silhouette(body, centre, R)
    if poly is None:
        return None
    h, w = image.shape[:2]
    x0, y0 = max(int(np.floor(poly[:, 0].min())) - 3, 0), max(int(np.floor(poly[:, 1].min())) - 3, 0)
    x1, y1 = min(int(np.ceil(poly[:, 0].max())) + 4, w), min(int(np.ceil(poly[:, 1].max())) + 4, h)
    if x1 - x0 < 8 or y1 - y0 < 8:
        return None
    crop = (slice(y0, y1), slice(x0, x1))
    inside = rasterise(poly, (h, w))[crop]
    sd, angle = _outline_band(poly, inside, x0, y0)
    delta = colour.delta if colour is not None else \
        _learn_rim_colours(poly, image[crop], plate[crop], usable[crop], inside, sd, angle, x0, y0)
    if delta is None or not np.isfinite(delta).any():
        return None
    model = LimbModel(delta)
    if offsets:
        model.edge_shift = _learn_edge_shift(model, image[crop], plate[crop], usable[crop], inside, sd, angle)
    return model


def _outline_band(poly: np.ndarray, inside: np.ndarray, x0: int, y0: int, reach: int = 3
                  ) -> tuple[np.ndarray, np.ndarray]:
    """`outline_field` on a crop (origin x0, y0) whose pixel centres inside the convex `poly` are
    `inside`, computed only within `reach` pixels of the outline: deeper pixels get ±(reach + 1)
    (inside +) and angle 0 — every use of the field here reads the outline's first few pixels, and
    the whole crop cost as much as the rest of the learning."""
    k = np.ones((2 * reach + 1,) * 2, np.uint8)
    u8 = inside.astype(np.uint8)
    deep = cv2.erode(u8, k, borderType=cv2.BORDER_CONSTANT, borderValue=0) > 0   # beyond the crop: not inside
    band = (cv2.dilate(u8, k) > 0) & ~deep
    sd = np.where(inside, reach + 1.0, -(reach + 1.0))
    angle = np.zeros(inside.shape)
    ys, xs = np.nonzero(band)
    sd[ys, xs], angle[ys, xs] = outline_field(poly, xs + x0 + 0.5, ys + y0 + 0.5)
    return sd, angle


def _learn_rim_colours(poly: np.ndarray, image: np.ndarray, plate: np.ndarray, usable: np.ndarray,
                       inside: np.ndarray, sd: np.ndarray, angle: np.ndarray, x0: int, y0: int) -> np.ndarray | None:
    """`LimbModel.delta` on a crop (origin x0, y0) of the frame, whose pixels lie at signed distance
    `sd` from the outline `poly` with nearest edges facing `angle`: per outline direction, the median
    rim colour minus the colour two pixels inside; None with too few usable rim pixels."""
    rim = (sd > -0.75) & (sd < 1.5) & usable
    ry, rx = np.nonzero(rim)
    if ry.size < LIMB_MIN_PIXELS:
        return None
    cover = np.zeros(ry.size)
    offs = (np.arange(4) + 0.5) / 4
    for dy in offs:
        for dx in offs:
            cover += signed_distance(poly, rx + x0 + dx, ry + y0 + dy) >= 0
    cover /= 16.0
    ok = cover >= 0.5
    ry, rx, cover = ry[ok], rx[ok], cover[ok]
    inner = cv2.erode(inside.astype(np.uint8), np.ones((3, 3), np.uint8), iterations=2)
    if not inner.any() or ry.size < LIMB_MIN_PIXELS:
        return None
    ny, nx = nearest_inside(inner)
    c = weighted_ycc(image, FIT_CHROMA_WEIGHT)
    b = weighted_ycc(plate, FIT_CHROMA_WEIGHT)
    rim_colour = b[ry, rx] + (c[ry, rx] - b[ry, rx]) / cover[:, None]
    diff = rim_colour - c[ny[ry, rx], nx[ry, rx]]
    k = _limb_bin(angle[ry, rx])
    delta = np.full((LIMB_BINS, 3), np.nan)
    for j in range(LIMB_BINS):
        sel = k == j
        if sel.sum() >= LIMB_MIN_PIXELS:
            delta[j] = np.median(diff[sel], axis=0)
    return delta


def _learn_edge_shift(model: LimbModel, image: np.ndarray, plate: np.ndarray, usable: np.ndarray,
                      inside: np.ndarray, sd: np.ndarray, angle: np.ndarray) -> np.ndarray:
    """Per outline direction, the offset δ (pixels, |δ| ≤ EDGE_SHIFT_MAX) that makes the fit's
    coverage model clip(0.5 + sd + δ, 0, 1) best explain the evidence `luma_alpha` reads (rim colour
    corrected by `model`) at the true pose: on the condition frame the fit's residual bias is seen
    directly, the ramp of rim pixels on one side sitting further out or in than the geometry says.
    `sd`, `angle`: the crop's pixels' signed distance from the true outline and its nearest edge's
    direction."""
    alpha, weight = luma_alpha(image, plate, inside, rim_shift=model.rim_shift(sd, angle))
    rim = (np.abs(sd) < 1.5) & usable & (weight > 0)
    out = np.zeros(LIMB_BINS)
    k = _limb_bin(angle[rim])
    s_rim, a_rim, w_rim = sd[rim], alpha[rim], weight[rim]
    grid = np.arange(-EDGE_SHIFT_MAX, EDGE_SHIFT_MAX + 1e-9, 0.05)
    for j in range(LIMB_BINS):
        sel = k == j
        if sel.sum() < 2 * LIMB_MIN_PIXELS:
            continue
        cost = [float(np.sum(w_rim[sel] * (np.clip(0.5 + s_rim[sel] + d, 0.0, 1.0) - a_rim[sel]) ** 2)) for d in grid]
        out[j] = grid[int(np.argmin(cost))]
    return out


def luma_alpha(image: np.ndarray, plate: np.ndarray, blob: np.ndarray, min_contrast: float = NO_EVIDENCE_CONTRAST,
               image_ycc: np.ndarray | None = None, plate_ycc: np.ndarray | None = None,
               rim_shift: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-pixel object fraction α: the pixel as a blend α·o + (1 − α)·b of the plate b and the
    object colour o of the nearest pixel well inside `blob` (a pixel that is no such blend but far
    from the plate is a shaded limb: α = 1); colours in luma and chroma with chroma at
    `FIT_CHROMA_WEIGHT` (H.264 4:2:0 keeps luma at full resolution, its chroma bleeds a pixel or two
    past an edge, but a lit rim can differ from the background in hue alone). Returns (α clipped to [0, 1], weight in [0, 1] growing with the contrast |o − b|).
    `image_ycc`, `plate_ycc`: the two already converted (`weighted_ycc`), when the caller has them.
    `rim_shift` (H, W, 3): added to the interior colour where finite — the rim's shading relative to
    the interior (`LimbModel`), so that a rim pixel is read against the colour that blends there."""
    c = weighted_ycc(image, FIT_CHROMA_WEIGHT) if image_ycc is None else image_ycc
    b = weighted_ycc(plate, FIT_CHROMA_WEIGHT) if plate_ycc is None else plate_ycc
    inner = _interior(blob)
    ny, nx = nearest_inside(inner)
    o = c[ny, nx]
    if rim_shift is not None:
        o = o + np.nan_to_num(rim_shift, nan=0.0).astype(np.float32)
    ob = o - b
    dc = c - b

    def dot(u, v):   # per-pixel dot product of the three channels
        return u[..., 0] * v[..., 0] + u[..., 1] * v[..., 1] + u[..., 2] * v[..., 2]

    den = dot(ob, ob)
    contrast = np.sqrt(den)
    # a rim pixel is a blend α·o + (1 − α)·b: α by projection onto o − b
    alpha = dot(dc, ob) / np.maximum(den, 1e-6)
    # a pixel far off that blend line and well away from the plate is no blend of the two: a limb
    # that shading makes darker than the interior (spheres, glass) — wholly the object
    change2 = dot(dc, dc)
    off = np.sqrt(np.maximum(change2 - alpha ** 2 * den, 0.0))
    change = np.sqrt(change2)
    limb = (off > LIMB_OFF_LINE * contrast) & (change > LIMB_CHANGE * contrast) & (change > 4.0 * NOISE_LEVEL)
    alpha = np.where(limb, 1.0, alpha)
    weight = np.clip((contrast - min_contrast) / (3.0 * min_contrast), 0.0, 1.0)
    # off the line, not far enough to be sure: neither a blend nor the plate — no evidence
    weight[~limb & (alpha < 0.5) & (off > OFF_LINE_NOISE * NOISE_LEVEL)] = 0.0
    alpha = np.clip(alpha, 0.0, 1.0)
    alpha[inner > 0] = 1.0
    weight[inner > 0] = 1.0
    return alpha.astype(np.float32), weight.astype(np.float32)


def _interior(blob: np.ndarray) -> np.ndarray:
    """The blob two pixels in (less where it is thinner), where an object's own colour is read: a blob
    one or two pixels too large (H.264 ringing, a penumbra) must not lend its rim colour to the object."""
    inner = blob.astype(np.uint8)
    for _ in range(2):
        thinner = cv2.erode(inner, np.ones((3, 3), np.uint8))
        if not thinner.any():
            break
        inner = thinner
    return inner


def _planes(image: np.ndarray, offset: float) -> list[np.ndarray]:
    """The three colour planes of an (H, W, 3) image in float32, plus `offset` (per-plane ufuncs
    on contiguous planes: several times faster than reductions over the last axis)."""
    return [image[..., k].astype(np.float32) + np.float32(offset) for k in range(3)]


def chroma_distance(image: np.ndarray, plate: np.ndarray) -> np.ndarray:
    """Largest difference of chromaticity (r, g, b)/(r + g + b) between frame and plate."""
    f, p = _planes(image, 4.0), _planes(plate, 4.0)
    fs, ps = f[0] + f[1] + f[2], p[0] + p[1] + p[2]
    out = np.abs(f[0] / fs - p[0] / ps)
    for k in (1, 2):
        np.maximum(out, np.abs(f[k] / fs - p[k] / ps), out=out)
    return out


def darkened_plate(image: np.ndarray, plate: np.ndarray, tol: float = 0.035, deep_tol: float = 0.12,
                   chroma: np.ndarray | None = None) -> np.ndarray:
    """Pixels that are the plate made darker with its hue kept (chromaticity within `tol`, growing to
    `deep_tol` for a deep shadow: a saturated plate channel clipped at 255 and H.264 chroma noise on
    dark pixels both shift the hue): cast shadows on any surface, whatever their attenuation — and an
    object's unlit side where it has the plate's colour. The fit does not trust them either way."""
    chroma = chroma_distance(image, plate) if chroma is None else chroma
    f, p = _planes(image, 0.0), _planes(plate, 0.0)
    ratio = (f[0] + f[1] + f[2] + 12.0) / (p[0] + p[1] + p[2] + 12.0)
    return (ratio > 0.1) & (ratio < 0.95) & (chroma < tol + (deep_tol - tol) * np.clip(1.0 - ratio, 0.0, 1.0))


def _split_starts(a: np.ndarray, b: np.ndarray, union: np.ndarray, radii: tuple[float, float] | None = None
                  ) -> list[list[tuple[float, float]]]:
    """Starting image positions for two bodies in one blob: their own blobs' centroids, the centroids
    of the union's halves across each of its principal axes, and, given each body's image radius,
    each body tucked into one end of the union along its main axis (a small body against a large
    one: the colour split and the halves put the small one's start on the large one)."""
    starts = [[blob_centroid(a), blob_centroid(b)]]
    ys, xs = np.nonzero(union)
    pts = np.stack([xs, ys], axis=1).astype(np.float64) + 0.5
    c = pts.mean(axis=0)
    _, _, vt = np.linalg.svd(pts - c, full_matrices=False)
    for axis in vt:
        proj = (pts - c) @ axis
        lo, hi = pts[proj < 0], pts[proj >= 0]
        if len(lo) and len(hi):
            p, q = tuple(lo.mean(axis=0)), tuple(hi.mean(axis=0))
            starts += [[p, q], [q, p]]
    if radii is not None:
        axis = vt[0]
        proj = (pts - c) @ axis
        across = (pts - c) @ np.array([-axis[1], axis[0]])

        def tucked(r: float, low_end: bool) -> tuple[float, float]:
            end = proj.min() + r if low_end else proj.max() - r
            slab = (proj < proj.min() + 2 * r) if low_end else (proj > proj.max() - 2 * r)
            side = float(across[slab].mean()) if slab.any() else 0.0
            x, y = c + end * axis + side * np.array([-axis[1], axis[0]])
            return float(x), float(y)

        ra, rb = radii
        starts += [[tucked(ra, True), tucked(rb, False)], [tucked(ra, False), tucked(rb, True)]]
    return starts


def _silhouette_area(camera: Camera, body: BodyPrior, uv, time: float | None) -> float | None:
    """Image area (pixels) of the body's silhouette placed at image position uv."""
    pose = camera.place(body, uv, time)
    poly = None if pose is None else camera.silhouette(body, *pose, coarse=True)
    if poly is None:
        return None
    x, y = poly[:, 0], poly[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def _merge_overlapping(boxes: list[list[int]]) -> list[list[int]]:
    """Boxes [y0, y1, x0, x1] with every overlapping pair replaced by their bounding box, until none
    overlap (a merged box may reach a third)."""
    def overlap(a, b):
        return a[0] < b[1] and b[0] < a[1] and a[2] < b[3] and b[2] < a[3]

    boxes = [list(b) for b in boxes]
    i = 0
    while i < len(boxes):
        j = next((j for j in range(i + 1, len(boxes)) if overlap(boxes[i], boxes[j])), None)
        if j is None:
            i += 1
            continue
        a, b = boxes[i], boxes.pop(j)
        boxes[i] = [min(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), max(a[3], b[3])]
        i = 0
    return boxes


def apply_shape_prior(masks: dict[str, np.ndarray], bodies: dict[str, BodyPrior], camera: Camera,
                      image: np.ndarray, plate: np.ndarray,
                      allowed: np.ndarray, ambiguous: np.ndarray, unobservable: np.ndarray | None,
                      time: float | None, alike: list[list[str]] | None = None, min_iou: float = MIN_FIT_IOU,
                      keep_rims: bool = False, scene_depth: np.ndarray | None = None,
                      limbs: dict[str, LimbModel] | None = None, shadows=None, faint: np.ndarray | None = None,
                      softness: float = 0.0, looks=None, size_scales: dict | None = None, edge_blur: float = 0.0
                      ) -> tuple[dict[str, np.ndarray], dict[str, tuple[float, float]], list[str]]:
    """Refine per-object masks with their rigid silhouettes (see the module docstring).

    `allowed`: pixels the silhouette may claim (changed from the plate, or shadow-like; everything on
    a white background). `ambiguous`: pixels whose colour evidence is not trusted in the fit (shadow-
    like pixels outside the blobs). `alike`: groups of objects that look the same; two of them whose
    blobs touch are fitted jointly to their union (a colour rule cannot say where one ends), from
    several starting splits. `keep_rims`: the mask is the whole silhouette plus the blob's pixels
    within one pixel outside its outline that are at least half body (`RIM_BODY_SHARE`); blob pixels
    farther out are dropped (on a white background, where nothing occludes and colour places rims
    well, but shading at a limb can bias the fit by a pixel). `scene_depth`: the static scene's
    depth (see `EvalCase.scene_depth`), which tells the pixels a support hides. `limbs`: per object, its rim shading (`LimbModel`). `shadows`:
    where the bodies' cast shadows fall (`segment.shadows.CastShadows`); with it, shadow-like pixels
    are distrusted only there, and a body's unlit side elsewhere is evidence again. `faint`: pixels
    that differ from the plate by more than its noise though less than a change: a silhouette claims
    them where they lie more than a pixel inside its outline and nothing hides the body (a dark body
    passing in front of a dark support). `softness`: the Gaussian σ (px) by which the answer smears
    a body's colour across its outline (`conditioning.rim_softness`): blob pixels that close outside
    a fitted outline are its smear, neither evidence against the fit nor part of the mask.
    `edge_blur`: the Gaussian σ (px) by which the answer is softer than a sharp render, fitted as
    that blur's edge (`fit_bodies`). Returns (masks, image centres of the fitted bodies, notes).

    Works on the region around the blobs only (a crop with the camera's principal point moved), so
    its cost follows the objects' size, not the frame's."""
    shape = next(iter(masks.values())).shape if masks else None
    if shape is None:
        return masks, {}, []
    # one region per group of nearby blobs (two bodies far apart would make one large crop, and
    # every step below costs by area); a margin of half a blob's extent: a silhouette may reach past
    # a blob that lost its unlit half
    boxes = []
    notes: list[str] = []
    for oid, m in masks.items():
        if oid not in bodies or not m.any():
            continue
        expected = _silhouette_area(camera, bodies[oid], blob_centroid(m), time)
        if expected is not None and m.sum() > MAX_BLOB_RATIO * max(expected, MIN_BLOB_PX):
            # a blob many times the body's size is no view of the body (a changed background, a
            # frame of noise): nothing to fit, and a fit over it would cost by its area
            notes.append(f"{oid}: blob {int(m.sum())} px against a {expected:.0f}-px silhouette; shape prior not applied")
            continue
        ys, xs = np.nonzero(m)
        pad = max(ROI_MIN_PAD, int(0.5 * max(ys.max() - ys.min(), xs.max() - xs.min())) + 4)
        boxes.append([max(int(ys.min()) - pad, 0), min(int(ys.max()) + pad + 1, shape[0]),
                      max(int(xs.min()) - pad, 0), min(int(xs.max()) + pad + 1, shape[1])])
    if not boxes:
        return masks, {}, notes
    boxes = _merge_overlapping(boxes)
    out = {k: m.copy() for k, m in masks.items()}
    centres: dict[str, tuple[float, float]] = {}
    for y0, y1, x0, x1 in boxes:
        roi = (slice(y0, y1), slice(x0, x1))
        sub, sub_centres, sub_notes = _apply_in_roi(
            {k: m[roi] for k, m in out.items()}, bodies, camera.crop(x0, y0), image[roi], plate[roi], allowed[roi],
            ambiguous[roi], None if unobservable is None else unobservable[roi], time, alike, min_iou, keep_rims,
            None if scene_depth is None else scene_depth[roi], limbs, None if shadows is None else shadows.crop(*roi),
            None if faint is None else faint[roi], softness,
            None if looks is None else
            (lambda oid, uv, x0=x0, y0=y0: looks.near(oid, (uv[0] + x0, uv[1] + y0), time)), size_scales, edge_blur)
        for k in out:
            out[k][roi] = sub[k]
        centres.update({k: (u + x0, v + y0) for k, (u, v) in sub_centres.items()})
        notes.extend(sub_notes)
    return out, centres, notes


class _RoiFit:
    """One region of a frame that the shape prior works on (`apply_shape_prior`), with what every
    step there reads: the colour evidence, what supports hide, where cast shadows fall, where to
    start and how to fit."""

    def __init__(self, masks, bodies, camera, image, plate, ambiguous, unobservable, time, scene_depth, limbs,
                 shadows, smear_px: float = 0.0, edge_blur: float = 0.0):
        self.bodies, self.camera, self.image, self.plate = bodies, camera, image, plate
        self.smear_px, self.edge_blur = smear_px, edge_blur
        self.unobservable, self.time, self.scene_depth = unobservable, time, scene_depth
        self.limbs, self.shadows = limbs, shadows
        self.shape = shape = next(iter(masks.values())).shape
        self.taken_all = np.zeros(shape, bool)
        for m in masks.values():
            self.taken_all |= m
        self.hue = chroma_distance(image, plate)
        dark = darkened_plate(image, plate, chroma=self.hue)
        self.image_ycc, self.plate_ycc = weighted_ycc(image, FIT_CHROMA_WEIGHT), weighted_ycc(plate, FIT_CHROMA_WEIGHT)
        self.shadow_like = ambiguous | dark             # the object's dark side or a cast shadow
        # without a shadow model every shadow-like pixel is distrusted; with one, only those where the
        # bodies' shadows fall (recomputed with the poses in `fit_visible`)
        self.unsure = self.shadow_like if shadows is None else np.zeros(shape, bool)
        # ground behind a condition-frame body that is still there is not seen, so it shows no shadow
        self.still_covered = None if shadows is None else shadows.still_covered(image)
        self.base_poses: dict[str, tuple] = {}
        if shadows is not None:
            for oid, m in masks.items():
                b = bodies.get(oid)
                if b is None or int(m.sum()) < MIN_BLOB_PX:
                    continue
                pose = camera.place(b, blob_centroid(m), time)
                if pose is not None:
                    self.base_poses[oid] = (b, *pose)

    def shadow_zone(self, poses: dict[str, tuple]) -> np.ndarray:
        """The shadow-like pixels to distrust with the bodies at these poses: only those where the
        bodies' shadows fall (the camera sees a body, not the shadow behind it), widened by 2 px for
        the penumbra and a pose a pixel off. A body's unlit side elsewhere is evidence again."""
        if self.shadows is None or not poses:
            return self.unsure
        seen = np.zeros(self.shape, bool)
        for b, X, R in poses.values():
            poly = self.camera.silhouette(b, X, R, coarse=True)
            if poly is not None:
                seen |= rasterise(poly, self.shape)
        # only shadow-like pixels near the bodies or in a blob matter (the fit reads those)
        near = ((cv2.dilate(seen.astype(np.uint8), np.ones((15, 15), np.uint8)) > 0) | self.taken_all) & ~seen
        cand = cv2.dilate((self.shadow_like & near).astype(np.uint8), np.ones((5, 5), np.uint8)) > 0
        # inside a silhouette the camera sees the body, not ground; its outermost pixel ring, within the
        # candidates' 2-px widening, is tested all the same (the pose may be a pixel off)
        core = cv2.erode(seen.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
        cast = self.shadows.pixels(list(poses.values()), where=cand & ~core & ~self.still_covered)
        return self.shadow_like & (cv2.dilate(cast.astype(np.uint8), np.ones((5, 5), np.uint8)) > 0)

    def rim_shift(self, starts: list[tuple[str, tuple[float, float]]]) -> np.ndarray | None:
        """The learned rim shading (`LimbModel`) of each body around its outline at its start."""
        out = None
        for oid, uv in starts:
            model = (self.limbs or {}).get(oid)
            b = self.bodies[oid]
            pose = None if model is None else self.camera.place(b, uv, self.time)
            poly = None if pose is None else self.camera.silhouette(b, *pose, coarse=True)
            if poly is None:
                continue
            px0, py0 = max(int(poly[:, 0].min()) - 3, 0), max(int(poly[:, 1].min()) - 3, 0)
            px1, py1 = min(int(poly[:, 0].max()) + 4, self.shape[1]), min(int(poly[:, 1].max()) + 4, self.shape[0])
            if px1 <= px0 or py1 <= py0:
                continue
            gy, gx = np.mgrid[py0:py1, px0:px1]
            sd, angle = outline_field(poly, gx.ravel() + 0.5, gy.ravel() + 0.5)
            if out is None:
                out = np.full(self.shape + (3,), np.nan, np.float32)
            near_rim = np.abs(sd) < RIM_BAND_PX
            sub = out[py0:py1, px0:px1].reshape(-1, 3)
            sub[near_rim] = model.rim_shift(sd, angle)[near_rim]
            out[py0:py1, px0:px1] = sub.reshape(py1 - py0, px1 - px0, 3)
        return out

    def expected_colour(self, oid: str, fit: "Fit", blob: np.ndarray, ys: np.ndarray, xs: np.ndarray
                        ) -> np.ndarray:
        """At the pixels (ys, xs), the body's expected colour (weighted YCbCr): the colour seen
        nearest inside its colour blob `blob` — not inside the fitted outline, where a part a
        generated body lacks would show the plate and vouch for itself — with the rim shading at the
        fitted outline."""
        ny, nx = nearest_inside(_interior(blob))
        o = self.image_ycc[ny[ys, xs], nx[ys, xs]]
        model = (self.limbs or {}).get(oid)
        if model is not None and ys.size:
            sd, angle = outline_field(fit.polygon, xs + 0.5, ys + 0.5)
            o = o + np.nan_to_num(model.rim_shift(sd, angle), nan=0.0)
        return o

    def expected_contrast(self, oid: str, fit: "Fit", blob: np.ndarray, ys: np.ndarray, xs: np.ndarray
                          ) -> np.ndarray:
        """At the pixels (ys, xs), how far the body's expected colour (`expected_colour`) lies from
        the plate."""
        return _norm(self.expected_colour(oid, fit, blob, ys, xs) - self.plate_ycc[ys, xs])

    def follow_rims(self, ids: list[str], blob: np.ndarray, fs: list[Fit] | None,
                    starts: list[tuple[float, float]], distrusted: np.ndarray, keep: np.ndarray
                    ) -> tuple[list[Fit] | None, np.ndarray]:
        """The rim shading was laid at the fits' starts; where a fit ended farther than RIM_REFIT_PX
        from its start (a blob's centroid pulled off by a shadow or an overlay) the shading lies beside
        the rim the fit found: read the evidence again around the fitted outlines and fit once more
        from there (the pixels `fit_visible` found hidden or in shadow, `distrusted`, stay out).
        Returns the fits and the evidence's `keep` (both unchanged without a refit, and the first
        fits where the refit fails)."""
        if fs is None or not self.limbs or not any(
                i in self.limbs and float(np.hypot(*(np.asarray(f.image_centre) - np.asarray(s)))) > RIM_REFIT_PX
                for i, f, s in zip(ids, fs, starts)):
            return fs, keep
        alpha, weight, keep_now = self.evidence(blob, blob, [(i, f.image_centre) for i, f in zip(ids, fs)])
        weight[distrusted] = 0.0
        again = fit_bodies(self.camera, [self.bodies[i] for i in ids], [[f.image_centre for f in fs]], blob, alpha,
                           weight, self.time, [self.limbs.get(i) for i in ids], [f.attitude for f in fs],
                           smear_px=self.smear_px, edge_blur=self.edge_blur)
        if again is None:
            return fs, keep_now
        return [replace(a, lifted=f.lifted) for a, f in zip(again, fs)], keep_now

    def placed_by_look(self, oid: str, fit: "Fit", sprite: "appearance.Sprite", own: np.ndarray,
                       hidden: np.ndarray, softness: float, size_scale: float) -> "Fit | None":
        """The fit moved to where the body's look (`appearance.place`: the sprite, at the depth of the
        fitted place and the size the answer draws the body, over the plate) explains the frame best;
        None where it cannot say. Other objects' blobs (`own`: this one's), the pixels a support hides
        and drawn layers carry no weight."""
        b = self.bodies[oid]
        weight = np.ones(self.shape, np.float32)
        weight[self.taken_all & ~own] = 0.0
        weight[hidden] = 0.0
        if self.unobservable is not None:
            weight[self.unobservable] = 0.0
        scale = (size_scale or 1.0) * sprite.depth / max(self.camera.depth(fit.centre), 1e-9)
        if size_scale is not None:
            # (a video frame: a codec's ghost of the body may have pulled the silhouette fit farther
            # off than the search reaches, which then goes on from where it stopped)
            p = appearance.place(sprite, self.image_ycc, self.plate_ycc, weight, fit.image_centre, scale, softness,
                                 recentre=appearance.EDGE_RESTARTS)
        else:
            p = appearance.place_and_size(sprite, self.image_ycc, self.plate_ycc, weight, fit.image_centre, scale,
                                          softness)
        if p is None:
            return None
        X = self.camera.ray_plane(p.uv, b.plane_point, b.plane_normal)
        if X is None:
            return None
        if p.size != 1.0:
            b = b.scaled(model_scale(self.camera, b, X, fit.attitude, p.size))
        poly = self.camera.silhouette(b, X, fit.attitude)
        if poly is None:
            return None
        return Fit(X, fit.attitude, poly, fit.iou, p.uv, body=b if p.size != 1.0 else None, explained=p.explained,
                   lifted=fit.lifted)

    def _object_like(self, alpha: np.ndarray, weight: np.ndarray, win=(slice(None), slice(None))) -> np.ndarray:
        """Pixels (of the window `win`) that read as the object: on luma evidence (or, where luma cannot
        tell, on hue), never when they look like the plate in shadow."""
        return (((alpha >= 0.5) & (weight >= 0.5)) | ((weight < 0.5) & (self.hue[win] >= HUE_EVIDENCE))) \
            & ~self.unsure[win]

    def evidence(self, blob: np.ndarray, own: np.ndarray, starts: list[tuple[str, tuple[float, float]]] = ()):
        alpha, weight = luma_alpha(self.image, self.plate, blob, image_ycc=self.image_ycc, plate_ycc=self.plate_ycc,
                                   rim_shift=self.rim_shift(starts) if self.limbs else None)
        keep = self._object_like(alpha, weight)
        weight[self.unsure] = 0.0
        weight[self.taken_all & ~own] = 0.0        # another object's pixels say nothing about this one
        if self.unobservable is not None:
            weight[self.unobservable] = 0.0
        return alpha, weight, keep

    def body_coloured(self, oid: str, fit: "Fit", template: np.ndarray, pixels: np.ndarray) -> np.ndarray:
        """Of `pixels` (outside a fitted outline), those that show the body's colour read against the
        fitted silhouette's own interior (`_object_like`, as `evidence` keeps blob pixels); worked out on
        the window around the silhouette and those pixels only."""
        if not pixels.any() or not template.any():
            return np.zeros_like(pixels)
        ys, xs = np.nonzero(pixels | template)
        win = (slice(max(int(ys.min()) - 2, 0), int(ys.max()) + 3), slice(max(int(xs.min()) - 2, 0), int(xs.max()) + 3))
        shift = self.rim_shift([(oid, fit.image_centre)]) if self.limbs else None
        alpha, weight = luma_alpha(self.image[win], self.plate[win], template[win], image_ycc=self.image_ycc[win],
                                   plate_ycc=self.plate_ycc[win], rim_shift=None if shift is None else shift[win])
        keep = self._object_like(alpha, weight, win)
        out = np.zeros_like(pixels)
        out[win] = pixels[win] & keep
        return out

    def sinks(self, oid: str, f: Fit) -> bool:
        """Whether the fitted body sinks into the static scene (`sunk_pixels`) on more than SINK_PX pixels."""
        return self.scene_depth is not None and sunk_pixels(
            self.camera, f.body or self.bodies[oid], f.centre, f.attitude, self.scene_depth) > SINK_PX

    def lifted(self, oid: str, f: Fit) -> tuple[float, float]:
        """An image start for body `oid` that does not sink into the scene: its fitted centre raised
        (world up, +z, within its motion plane) in steps of a quarter of its extent, as far as
        needed (two extents at most)."""
        body = f.body or self.bodies[oid]
        up = np.array([0.0, 0.0, 1.0]) - body.plane_normal[2] * body.plane_normal
        if float(np.linalg.norm(up)) < 1e-6:
            return f.image_centre
        up /= np.linalg.norm(up)
        reach = body.reach
        X = np.asarray(f.centre, float)
        for k in range(1, 9):
            X = np.asarray(f.centre, float) + 0.25 * k * reach * up
            if sunk_pixels(self.camera, body, X, f.attitude, self.scene_depth) <= SINK_PX:
                break
        uv = self.camera.project(X[None])[0]
        return float(uv[0]), float(uv[1])

    def hidden_at(self, ids: list[str], fs: list[Fit] | None, starts: list[tuple[float, float]] | None) -> np.ndarray:
        """Pixels the scene hides of these bodies, at fitted poses or at image start positions."""
        out = np.zeros(self.shape, bool)
        if self.scene_depth is None:
            return out
        for b, X, R in self.poses_of(ids, fs, starts, others=False).values():
            out |= hidden_pixels(self.camera, b, X, R, self.scene_depth)
        return out

    def visible_start(self, oid: str, blob: np.ndarray) -> tuple[float, float]:
        """Where to start a body that a support may hide: the image position whose visible silhouette
        (the part the scene does not hide) has the blob's centroid. The blob's own centroid sits off
        the body's centre by the hidden part, and a fit started there can settle with the silhouette
        beside the occluder instead of behind it."""
        target = np.array(blob_centroid(blob))
        uv = target.copy()
        if self.scene_depth is None:
            return float(uv[0]), float(uv[1])
        b = self.bodies[oid]
        for _step in range(4):
            pose = self.camera.place(b, tuple(uv), self.time)
            poly = None if pose is None else self.camera.silhouette(b, *pose, coarse=True)
            if poly is None:
                break
            hid = hidden_pixels(self.camera, b, *pose, self.scene_depth)
            if _step == 0 and not hid.any():
                break          # nothing hides the body here: the blob's centroid is the start
            seen = rasterise(poly, self.shape) & ~hid
            if seen.sum() < MIN_BLOB_PX:
                break
            vy, vx = np.nonzero(seen)
            shift = target - (np.array([vx.mean(), vy.mean()]) + 0.5)
            uv = uv + shift
            if float(np.hypot(*shift)) < 0.25:
                break
        return float(uv[0]), float(uv[1])

    def image_radius(self, oid: str, blob: np.ndarray) -> float:
        """Radius of the disc with the body's silhouette area, placed at its blob's centroid."""
        area = _silhouette_area(self.camera, self.bodies[oid], blob_centroid(blob), self.time)
        return float(np.sqrt((blob.sum() if area is None else area) / np.pi))

    def poses_of(self, ids: list[str], fs: list[Fit] | None, starts: list[tuple[float, float]] | None,
                 others: bool = True) -> dict[str, tuple]:
        """(body, centre, attitude) of these bodies, fitted or placed at their image starts, and with
        `others` every other body where its blob puts it."""
        poses = dict(self.base_poses) if others else {}
        for i, oid in enumerate(ids):
            b = self.bodies[oid]
            pose = (fs[i].centre, fs[i].attitude) if fs is not None else self.camera.place(b, starts[i], self.time)
            if pose is not None:
                poses[oid] = (b, *pose)
        return poses

    def fit_visible(self, ids: list[str], blob: np.ndarray, alpha: np.ndarray, weight: np.ndarray,
                    starts: list[list[tuple[float, float]]]) -> tuple[list[Fit] | None, np.ndarray, np.ndarray]:
        """Fit; find what the scene hides of the fitted bodies and where their shadows fall; refit
        without those pixels, until both settle. Returns the fits, the hidden pixels and the
        distrusted shadow-like pixels."""
        hidden = self.hidden_at(ids, None, starts[0])
        zone = self.shadow_zone(self.poses_of(ids, None, starts[0]))
        zone_at = np.array(starts[0], float)       # where the bodies were when `zone` was found
        window = (weight > 0) & (cv2.dilate(blob.astype(np.uint8), np.ones((9, 9), np.uint8)) > 0)
        fs = None
        rounds = OCCLUSION_ROUNDS if self.scene_depth is not None or self.shadows is not None else 1
        sunk, kept = False, None
        left = rounds
        while left > 0:
            left -= 1
            w = weight.copy()
            w[hidden | zone] = 0.0
            fs = fit_bodies(self.camera, [self.bodies[i] for i in ids], starts, blob, alpha, w, self.time,
                            None if not self.limbs else [self.limbs.get(i) for i in ids], smear_px=self.smear_px,
                            edge_blur=self.edge_blur)
            if fs is None or rounds == 1:
                break
            sinking = [] if sunk else [self.sinks(i, f) for i, f in zip(ids, fs)]
            if any(sinking):
                # a body sunk into a support: the support "hides" what the blob lacks of it (a body
                # partly drawn). No body can be there: fitted again, once, from a place lifted out
                # of the scene, with what the scene hides there
                sunk, left = True, left + 1
                kept = (fs, hidden, zone)
                starts = [[self.lifted(i, f) if down else f.image_centre for i, f, down in zip(ids, fs, sinking)]]
                hidden = self.hidden_at(ids, None, starts[0])
                continue
            now = self.hidden_at(ids, fs, None)
            now_zone = zone
            fitted_at = np.array([f.image_centre for f in fs])
            if self.shadows is not None and np.max(np.hypot(*(fitted_at - zone_at).T)) > 1.0:
                # the zone is widened by 2 px: a body that moved less keeps it
                now_zone, zone_at = self.shadow_zone(self.poses_of(ids, fs, starts[0])), fitted_at
            # only a change the fit can see (a weighted pixel in its window) calls for a refit
            settled = (int((now ^ hidden).sum()) <= OCCLUSION_SETTLED_PX
                       and int(((now_zone ^ zone) & window).sum()) <= SHADOW_SETTLED_PX)
            hidden, zone = now, now_zone
            if settled:
                break
            starts = [[f.image_centre for f in fs]]
        if sunk:
            if fs is None or min(f.iou for f in fs) < min(f.iou for f in kept[0]) - LIFT_AGREEMENT \
                    or any(self.sinks(i, f) for i, f in zip(ids, fs)):
                # the blob holds the body where the scene's surface cuts it (a model that draws
                # it so): the first fit stands
                return kept
            fs = [replace(f, lifted=True) for f in fs]
        return fs, hidden, zone


def _held_share(poly: np.ndarray, blob: np.ndarray) -> float:
    """Share of the blob's pixels that the silhouette, grown by its blended rim (1 px), holds."""
    n = int(blob.sum())
    if n == 0:
        return 0.0
    inside = cv2.dilate(rasterise(poly, blob.shape).astype(np.uint8), np.ones((3, 3), np.uint8)) > 0
    return int((blob & inside).sum()) / n


def _covered_share(poly: np.ndarray, blob: np.ndarray, hidden: np.ndarray, unobservable: np.ndarray | None
                   ) -> float:
    """Share of the silhouette's pixels that nothing hides (no support, no drawn layer) inside `blob`."""
    seen = rasterise(poly, blob.shape) & ~hidden
    if unobservable is not None:
        seen &= ~unobservable
    n = int(seen.sum())
    return 1.0 if n == 0 else float((seen & blob).sum()) / n


def _beyond_unlike_body(roi: "_RoiFit", oid: str, fit: Fit, blob: np.ndarray) -> bool:
    """Whether fewer than GHOST_BODY_COLOURED of the blob's pixels beyond the fitted silhouette and
    its one-pixel blended rim show the body's colour (`_RoiFit.body_coloured`)."""
    template = rasterise(fit.polygon, blob.shape)
    beyond = blob & ~(cv2.dilate(template.astype(np.uint8), np.ones((3, 3), np.uint8)) > 0)
    n = int(beyond.sum())
    return n > 0 and int(roi.body_coloured(oid, fit, template, beyond).sum()) < GHOST_BODY_COLOURED * n


def _apply_in_roi(masks, bodies, camera, image, plate, allowed, ambiguous, unobservable, time, alike, min_iou,
                  keep_rims, scene_depth, limbs, shadows, faint=None, softness: float = 0.0, look=None,
                  size_scales=None, edge_blur: float = 0.0):
    smear = SMEAR_PER_SIGMA * softness
    video = size_scales is not None      # a video's frame (its sizes read on frame 0), not a single image
    roi = _RoiFit(masks, bodies, camera, image, plate, ambiguous, unobservable, time, scene_depth, limbs, shadows,
                  smear, edge_blur)
    shape = roi.shape
    notes: list[str] = []
    fits: dict[str, Fit] = {}
    strong: dict[str, np.ndarray] = {}
    joint: set[str] = set()
    hidden: dict[str, np.ndarray] = {}
    trimmed: dict[str, np.ndarray] = {}             # bodies partly drawn: their blob trimmed

    def by_look(oid: str, f: Fit, own: np.ndarray, hid: np.ndarray) -> tuple[Fit | None, np.ndarray]:
        """`f` moved where the body's look places it (None where it cannot say), and the pixels the
        scene hides of the body there."""
        sprite = None if look is None else look(oid, f.image_centre)
        moved = None if sprite is None else roi.placed_by_look(
            oid, f, sprite, own, hid, softness, None if size_scales is None else size_scales.get(oid, 1.0))
        if moved is not None and scene_depth is not None:
            hid = hidden_pixels(camera, moved.body or bodies[oid], moved.centre, moved.attitude, scene_depth)
        return moved, hid

    for group in alike or ():
        ids = [i for i in group if i in bodies and masks.get(i) is not None and masks[i].any()]
        if len(ids) != 2:
            continue
        a, b = ids
        union = masks[a] | masks[b]
        touching = (cv2.dilate(masks[a].astype(np.uint8), np.ones((3, 3), np.uint8)) > 0) & masks[b]
        if not touching.any():
            continue
        radii = (roi.image_radius(a, masks[a]), roi.image_radius(b, masks[b]))
        splits = _split_starts(masks[a], masks[b], union, radii)
        alpha, weight, keep = roi.evidence(union, union, list(zip((a, b), splits[0])))
        fs, hid, zone = roi.fit_visible([a, b], union, alpha, weight, splits)
        fs, keep = roi.follow_rims([a, b], union, fs, splits[0], hid | zone, keep)
        if fs is None or fs[0].iou < min_iou:
            notes.append(f"{a}, {b}: rigid silhouettes disagree with their joint blob; shape prior not applied")
            continue
        for k, (oid, f) in enumerate(zip((a, b), fs)):
            # each placed by its look as a lone body is, the other one's fitted silhouette carrying
            # no weight (which of the joint blob's pixels are whose is what the fit decided)
            moved, h = by_look(oid, f, union & ~rasterise(fs[1 - k].polygon, shape), hid)
            fits[oid], strong[oid], hidden[oid] = f if moved is None else replace(moved, iou=f.iou), keep & ~zone, h
            joint.add(oid)
    for oid, m in masks.items():
        body = bodies.get(oid)
        if body is None or int(m.sum()) < MIN_BLOB_PX or oid in joint:
            continue
        start = roi.visible_start(oid, m)
        alpha, weight, keep = roi.evidence(m, m, [(oid, start)])
        fs, hid, zone = roi.fit_visible([oid], m, alpha, weight, [[start]])
        fs, keep = roi.follow_rims([oid], m, fs, [start], hid | zone, keep)
        strong[oid] = keep & ~zone
        if fs is None:
            continue
        f = fs[0]
        moved, hid_there = by_look(oid, f, m, hid)
        g = f if moved is None else moved
        if f.lifted and _covered_share(g.polygon, m | allowed, hid_there, unobservable) < GHOST_COVERS \
                and _held_share(g.polygon, m) >= PART_HELD:
            # a body that fits its blob only sunk into a support, and where it can rest shows the
            # plate on much of its silhouette, is partly drawn: what it shows is its blob within the
            # lifted fit's silhouette (placed by its look) and its blended rim, where that silhouette
            # holds most of the blob (else the fit found no body in it at all); no fitted centre is
            # reported for it, so its mask's centroid says where it is. Pixels that differ from the
            # plate are drawn, even where the colour gate left them out of the blob (an answer that
            # recolours the body)
            trimmed[oid] = m & (cv2.dilate(rasterise(g.polygon, shape).astype(np.uint8), np.ones((3, 3), np.uint8)) > 0)
            continue
        # the silhouette's agreement with the blob is read again where the look places it, with the
        # weights the fit had
        w = weight.copy()
        w[hid | zone] = 0.0
        if moved is not None:
            f, hid = replace(moved, iou=blob_agreement([moved.polygon], m, alpha, w, smear)), hid_there
        body_coloured = m & strong[oid]
        # a body lifted out of a support was refitted agreeing with its blob up to LIFT_AGREEMENT less
        # than where it sank (the blob's pixels the support's surface holds): it is held to that less
        need = min_iou - LIFT_AGREEMENT if f.lifted else min_iou
        if video and f.iou < need and int(body_coloured.sum()) >= MIN_BLOB_PX:
            # a codec's ghost pulls the blob's centroid, and the fit and look started there, off the
            # body along its track: the look is placed again from the centroid of the blob's pixels
            # that show the body's colour and, where those span more than the body (a trail of
            # ghosts), from places across them a body's radius apart; the place that explains most
            # of the frame is kept
            for start in [blob_centroid(body_coloured)] + _spread_starts(body_coloured, roi.image_radius(oid, m)):
                again, hid_again = by_look(oid, replace(f, image_centre=start), m, hid)
                if again is not None and (moved is None or again.explained > moved.explained):
                    moved = again
                    f, hid = replace(again, iou=blob_agreement([again.polygon], m, alpha, w, smear)), hid_again
        if f.iou < need:
            # a blob wider than the body its look places may hold more than the body: none of its
            # pixels outside the silhouette are then kept. A ghost adds pixels to the blob, it does
            # not take the body's away: a blob that leaves much of the placed silhouette uncovered
            # (part of the body gone, or drawn smaller) stands. Beyond that, the blob's excess is no
            # part of the body where it mostly does not show the body's colour (a codec's smear of
            # shadow and plate, a JPEG's blocks, a faint trail: no body drawn larger looks like
            # that) while the look explains some of the frame (a look that explains next to nothing
            # places no body: a stain the blob holds instead of it would pass the colour test
            # trivially), or where the look explains the frame: in a video frame some of it (a codec's
            # ghost of the body where it was, inter-frame prediction left uncorrected), in an image,
            # which has no earlier frame and where a body-coloured excess may be the body drawn
            # otherwise, nearly all of it (the look placed at its own best size leaves no room for a
            # body drawn otherwise: the excess is a codec's blended rim and a label's leftovers)
            if moved is None or _covered_share(moved.polygon, m, hid, unobservable) < GHOST_COVERS \
                    or (moved.explained < (LOOK_EXPLAINS if video else LOOK_EXPLAINS_IMAGE)
                        and (moved.explained < GHOST_LOOK_FLOOR or not _beyond_unlike_body(roi, oid, moved, m))):
                notes.append(f"{oid}: rigid silhouette disagrees with the segmented blob (IoU {f.iou:.2f}); "
                             "shape prior not applied")
                continue
            strong[oid] = np.zeros_like(strong[oid])
        fits[oid], hidden[oid] = f, hid
    if not fits:
        return {**masks, **trimmed}, {}, notes
    out = {**masks, **trimmed}
    templates = {oid: rasterise(f.polygon, shape) for oid, f in fits.items()}
    ring_k = np.ones((3, 3), np.uint8)
    # the blended rim: one pixel, or as far as the answer smears a body's colour outward
    reach = max(1, int(math.ceil(smear)))
    near_k = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * reach + 1, 2 * reach + 1)) if reach > 1 else ring_k
    near = {oid: cv2.dilate(t.astype(np.uint8), near_k) > 0 for oid, t in templates.items()}
    for oid, f in fits.items():
        others = np.zeros(shape, bool)
        for k, n in near.items():
            if k != oid:
                others |= n
        # a hidden pixel is the body's only where colour clearly shows the object (the fitted pose
        # may be a pixel off where a support meets it)
        visible = ~hidden[oid] | (masks[oid] & strong[oid])
        if keep_rims:
            # the blob's pixels just outside the outline that are more body than background stay
            # (their centres lie inside the body's outline: a limb shaded unlike the interior biases
            # the fit by part of a pixel on one side); a blend of less than half is the outline's
            # blended rim, however wide a blur makes it
            ring = masks[oid] & near[oid] & ~templates[oid]
            rim = ring & (luma_alpha(image, plate, masks[oid])[0] >= RIM_BODY_SHARE) if ring.any() else False
            out[oid] = (templates[oid] & allowed & ~others & visible) | rim
        else:
            # a body its rigid look explains (placed by look, `LOOK_EXPLAINS`) is as its look has it
            as_looked = f.explained >= LOOK_EXPLAINS
            claim = allowed
            if as_looked:
                # its silhouette is the body wherever nothing hides it, also where a codec flattened
                # part of it into the plate's colours or a tone curve or a label brought it near them
                claim = allowed | (templates[oid] & ~hidden[oid])
            elif faint is not None:   # more than a pixel inside the outline, where nothing hides the body
                claim = allowed | (faint & ~hidden[oid] & (cv2.erode(templates[oid].astype(np.uint8), ring_k) > 0))
            # where the body's expected colour is as close to the plate as noise, no change could
            # show it: colour says nothing there, and the fitted silhouette decides (a grey steel
            # edge against a grey wall)
            ys, xs = np.nonzero(templates[oid] & ~claim & ~hidden[oid])
            if ys.size:
                blind = roi.expected_contrast(oid, f, masks[oid], ys, xs) < NO_EVIDENCE_CONTRAST
                claim = claim.copy()
                claim[ys[blind], xs[blind]] = True
            # blob pixels beyond the blended rim stay where they show the body's colour read against
            # the fitted silhouette's own interior: an enlarged or deformed body keeps them, a codec's
            # smear (the body's colour bled into the plate, which the blob's interior already holds) not.
            # A body as its look has it has none (an enlarged one is sized by its look): body-coloured
            # pixels beyond are a codec's ghost of where it was, or noise
            beyond = False
            if not as_looked:
                beyond = roi.body_coloured(oid, f, templates[oid], masks[oid] & ~near[oid] & ~others & strong[oid])
            out[oid] = (templates[oid] & claim & visible) | beyond
    # where silhouettes overlap, the body whose surface is nearer along the pixel's ray is the one
    # seen (not the one with the nearer centre: a small cube in front of a large one's side)
    ids = list(fits)
    cover = np.stack([templates[oid] & out[oid] for oid in ids])
    owner = np.full(shape, -1)
    owner[cover.any(axis=0)] = cover.argmax(axis=0)[cover.any(axis=0)]
    contested = cover.sum(axis=0) > 1
    if contested.any():
        ys, xs = np.nonzero(contested)
        depth = np.full((len(ids), ys.size), np.inf)
        for i, oid in enumerate(ids):
            f = fits[oid]
            on = cover[i, ys, xs]
            d = camera.front_depth(f.body or bodies[oid], f.centre, f.attitude, xs[on] + 0.5, ys[on] + 0.5)
            # a ray through a pixel centre inside the drawn outline may graze past the solid itself
            depth[i, on] = np.where(np.isfinite(d), d, camera.depth(f.centre))
        owner[ys, xs] = depth.argmin(axis=0)
    for i, oid in enumerate(ids):
        out[oid] = out[oid] & ((owner == -1) | (owner == i))
    for oid in out:
        if oid not in fits:
            out[oid] = out[oid] & (owner == -1)
    # what is left of a body drawn only in part is no longer that rigid body: where it is, its mask's
    # centroid says (`Segmentation.positions`), not the centre of a whole body fitted over it
    partly = {oid for i, oid in enumerate(ids)
              if _drawn_in_part(roi, oid, fits[oid], templates[oid] & ((owner == -1) | (owner == i)), out[oid],
                                masks[oid], hidden[oid], unobservable)}
    return out, {oid: f.image_centre for oid, f in fits.items() if oid not in partly}, notes


def _drawn_in_part(roi: "_RoiFit", oid: str, fit: Fit, silhouette: np.ndarray, mask: np.ndarray, blob: np.ndarray,
                   hidden: np.ndarray, unobservable: np.ndarray | None) -> bool:
    """Whether the answer drew the fitted body only in part: more than 1 − GHOST_COVERS of the
    `silhouette`'s pixels that nothing hides (no support, no drawn layer) lie outside its `mask` and
    show the plate — their colour nearer the plate's than the body's expected colour
    (`_RoiFit.expected_colour`, read from its colour `blob`), which stands out from the plate there.
    A mask that missed part of a body drawn in a colour near the ground's leaves pixels nearer the
    body's colour; where that colour is as close to the plate as noise, nothing can tell."""
    seen = silhouette & ~hidden
    if unobservable is not None:
        seen &= ~unobservable
    n = int(seen.sum())
    ys, xs = np.nonzero(seen & ~mask)
    if n == 0 or ys.size <= (1.0 - GHOST_COVERS) * n:
        return False
    body = roi.expected_colour(oid, fit, blob, ys, xs)
    img, plate = roi.image_ycc[ys, xs], roi.plate_ycc[ys, xs]
    shows_plate = (_norm(body - plate) >= NO_EVIDENCE_CONTRAST) & (_norm(img - plate) < _norm(img - body))
    return int(shows_plate.sum()) > (1.0 - GHOST_COVERS) * n


def _norm(d: np.ndarray) -> np.ndarray:
    return np.sqrt((d * d).sum(axis=1))
