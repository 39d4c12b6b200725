"""The drawn test scene the shape-prior tests share (test_eval_shape_prior.py, test_eval_faint_pixels.py,
test_eval_blind_pixels.py): a 320×240 pinhole camera at (0, −2, 0.5) looking along +y (world z up),
and a ball on the plane facing it."""
import numpy as np

from orchard_eval.segment import shape_prior as SP

W, H = 320, 240
K = np.array([[300.0, 0.0, 160.0], [0.0, 300.0, 120.0], [0.0, 0.0, 1.0]])
# OpenCV x = world x, y = −world z, z = world y
E = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.0, -1.0, 0.5], [0.0, 1.0, 0.0, 2.0]])
CAM = SP.Camera(K, E)
BALL_CENTRE = np.array([0.0213, 0.0, 0.5117])    # off the pixel grid in both directions


def sphere(radius=0.08, plane_normal=(0.0, 1.0, 0.0)) -> SP.BodyPrior:
    return SP.BodyPrior("ball", "sphere", {"radius": radius}, np.zeros(3), np.array(plane_normal))


def ball_outline(body: SP.BodyPrior, centre=BALL_CENTRE) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel of the frame, the signed distance from the ball's outline (inside +) and the direction
    its nearest edge faces (`shape_prior.outline_field`)."""
    poly = CAM.silhouette(body, centre, np.eye(3))
    ys, xs = np.mgrid[0:H, 0:W]
    sd, angle = SP.outline_field(poly, xs.ravel() + 0.5, ys.ravel() + 0.5)
    return sd.reshape(H, W), angle.reshape(H, W)
