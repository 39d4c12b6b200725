"""Closed-form motion primitives of the hybrid analytic solver.

Two kinds of motion cover every mode:

* `PolyMotion`: constant linear acceleration (position quadratic in time) and constant angular
  acceleration (angular velocity linear in time). Orientation is closed form whenever the spin and the
  angular acceleration share a fixed axis (every mode except a roller whose slip is not parallel to its
  spin-induced contact velocity, which happens after an oblique impact on rough ground). In that one case
  the orientation — and only the orientation; position, velocity and spin stay closed form — is obtained
  by a 4th-order Magnus integrator at steps of at most `MAGNUS_STEP` seconds (error far below 1e-9 rad).
* `TrackMotion`: a body on the inside of a vertical circle; the angle is parametrised with Jacobi
  elliptic functions (libration m < 1, rotation m > 1 through the reciprocal-modulus transformation,
  separatrix m = 1 with hyperbolic functions).
"""
from __future__ import annotations

import math

import numpy as np
from scipy.special import ellipj, ellipk, ellipkinc

from .types import BodyState

MAGNUS_STEP = 2.0e-4


# ---------------------------------------------------------------------------------------------
# Quaternions (w, x, y, z); world-frame rotation vectors act by left multiplication.
# ---------------------------------------------------------------------------------------------
def qmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([
        w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2,
        w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
        w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2,
        w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2,
    ])


def qexp(rotvec: np.ndarray) -> np.ndarray:
    """Unit quaternion of the rotation by |rotvec| about rotvec."""
    ang = float(np.linalg.norm(rotvec))
    if ang < 1e-300:
        return np.array([1.0, 0.0, 0.0, 0.0])
    h = 0.5 * ang
    return np.concatenate([[math.cos(h)], math.sin(h) * np.asarray(rotvec) / ang])


def qnorm(q: np.ndarray) -> np.ndarray:
    q = q / np.linalg.norm(q)
    return q if q[0] >= 0 else -q


def qmat(q: np.ndarray) -> np.ndarray:
    """Rotation matrix (body → world) of a unit quaternion."""
    w, x, y, z = q
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ])


# ---------------------------------------------------------------------------------------------
class PolyMotion:
    """r(t) = r0 + v0 τ + ½ a τ², ω(t) = ω0 + α τ, τ = t − t0."""

    kind = "poly"

    def __init__(self, t0: float, r0, v0, acc, q0, w0, alpha=None):
        self.t0 = float(t0)
        self.r0 = np.array(r0, float)
        self.v0 = np.array(v0, float)
        self.acc = np.array(acc, float)
        self.q0 = qnorm(np.array(q0, float))
        self.w0 = np.array(w0, float)
        self.alpha = np.zeros(3) if alpha is None else np.array(alpha, float)
        na, nw = np.linalg.norm(self.alpha), np.linalg.norm(self.w0)
        self.coaxial = na == 0.0 or nw == 0.0 or np.linalg.norm(np.cross(self.w0, self.alpha)) <= 1e-12 * na * nw
        self._nodes: list[np.ndarray] | None = None

    def position(self, tau: float) -> np.ndarray:
        return self.r0 + self.v0 * tau + 0.5 * self.acc * tau * tau

    def velocity(self, tau: float) -> np.ndarray:
        return self.v0 + self.acc * tau

    def spin(self, tau: float) -> np.ndarray:
        return self.w0 + self.alpha * tau

    def _omega(self, tau: float) -> np.ndarray:
        return self.w0 + self.alpha * tau

    def _magnus_step(self, q: np.ndarray, t: float, h: float) -> np.ndarray:
        c = math.sqrt(3.0) / 6.0
        w1, w2 = self._omega(t + (0.5 - c) * h), self._omega(t + (0.5 + c) * h)
        om = 0.5 * h * (w1 + w2) + (math.sqrt(3.0) / 12.0) * h * h * np.cross(w2, w1)
        return qmul(qexp(om), q)

    def orientation(self, tau: float) -> np.ndarray:
        if self.coaxial:
            na = np.linalg.norm(self.alpha)
            if na == 0.0:
                return qnorm(qmul(qexp(self.w0 * tau), self.q0))
            axis = self.alpha / na
            ang = float(np.dot(self.w0, axis)) * tau + 0.5 * na * tau * tau
            return qnorm(qmul(qexp(axis * ang), self.q0))
        # Non-coaxial spin: Magnus integration from the nearest stored node.
        if self._nodes is None:
            self._nodes = [self.q0]
        idx = int(tau // MAGNUS_STEP)
        while len(self._nodes) <= idx:
            j = len(self._nodes) - 1
            self._nodes.append(self._magnus_step(self._nodes[j], j * MAGNUS_STEP, MAGNUS_STEP))
        idx = max(0, min(idx, len(self._nodes) - 1))
        q = self._nodes[idx]
        rem = tau - idx * MAGNUS_STEP
        if rem > 0:
            q = self._magnus_step(q, idx * MAGNUS_STEP, rem)
        return qnorm(q)

    def state(self, t: float) -> BodyState:
        tau = t - self.t0
        return BodyState(self.position(tau), self.orientation(tau), self.velocity(tau), self.spin(tau))


# ---------------------------------------------------------------------------------------------
class TrackMotion:
    """COM on a vertical circle of radius rho about `center`, angle φ from the lowest point.

    Energy: (ρφ')² = v0² + 2 g' ρ (cos φ − cos φ0), g' = g / (1 + k). With ω² = g'/ρ and
    m = φ0'²/(4ω²) + sin²(φ0/2):
      m < 1  libration   sin(φ/2) = √m sn(ω t + u0 | m),            φ' = 2√m ω cn
      m > 1  rotation    φ = 2 σ am(√m ω t + u0 | 1/m),              φ' = 2 σ √m ω dn
      m = 1  separatrix  sin(σφ/2) = tanh(ω t + u0),                 φ' = 2 σ ω sech
    """

    kind = "track"

    def __init__(self, t0, center, direction, rho, r_roll, k, phi0, phidot0, g, q0, w0, rolling: bool):
        self.t0 = float(t0)
        self.center = np.array(center, float)
        self.direction = np.array(direction, float)
        self.lateral = np.cross(np.array([0.0, 0.0, 1.0]), self.direction)
        self.rho, self.r_roll, self.k = float(rho), float(r_roll), float(k)
        self.phi0, self.phidot0, self.g = float(phi0), float(phidot0), float(g)
        self.q0 = qnorm(np.array(q0, float))
        self.w0 = np.array(w0, float)
        self.rolling = rolling
        self.gp = self.g / (1.0 + self.k)
        self.om = math.sqrt(self.gp / self.rho)
        m = self.phidot0 ** 2 / (4.0 * self.om ** 2) + math.sin(self.phi0 / 2.0) ** 2
        self.m = m
        self.sigma = 1.0 if self.phidot0 >= 0 else -1.0
        if abs(m - 1.0) <= 1e-13:
            self.regime = "separatrix"
            self.m = 1.0
            s = max(-1.0 + 1e-16, min(1.0 - 1e-16, self.sigma * math.sin(self.phi0 / 2.0)))
            self.u0 = math.atanh(s)
        elif m < 1.0:
            self.regime = "libration"
            self.K = float(ellipk(m))
            s = max(-1.0, min(1.0, math.sin(self.phi0 / 2.0) / math.sqrt(m)))
            ua = float(ellipkinc(math.asin(s), m))
            self.u0 = ua if self.phidot0 >= 0 else 2.0 * self.K - ua
            if self.phidot0 == 0.0:  # at a turning point: head back toward the bottom
                self.u0 = self.K if self.phi0 > 0 else -self.K
            self.amplitude = 2.0 * math.asin(min(1.0, math.sqrt(m)))
        else:
            self.regime = "rotation"
            self.mu = 1.0 / m
            self.u0 = float(ellipkinc(self.sigma * self.phi0 / 2.0, self.mu))

    # ---- angle -------------------------------------------------------------------------------
    def angle(self, tau: float) -> tuple[float, float]:
        """(φ, φ') at τ = t − t0 (φ unwrapped and continuous)."""
        if self.regime == "libration":
            sn, cn, dn, _ = ellipj(self.om * tau + self.u0, self.m)
            rm = math.sqrt(self.m)
            return 2.0 * math.asin(max(-1.0, min(1.0, rm * sn))), 2.0 * rm * self.om * cn
        if self.regime == "rotation":
            rm = math.sqrt(self.m)
            sn, cn, dn, ph = ellipj(rm * self.om * tau + self.u0, self.mu)
            return self.sigma * 2.0 * ph, self.sigma * 2.0 * rm * self.om * dn
        u = self.om * tau + self.u0
        return self.sigma * 2.0 * math.asin(math.tanh(u)), self.sigma * 2.0 * self.om / math.cosh(u)

    def time_to_angle(self, target: float, after: float = 0.0) -> float:
        """First τ > `after` at which φ(τ) equals `target` (mod 2π for rotation); inf if never."""
        tiny = 1e-12
        if self.regime == "libration":
            rm = math.sqrt(self.m)
            s = math.sin(target / 2.0) / rm
            if abs(s) > 1.0 + 1e-12 or abs(target) > math.pi:
                return math.inf
            s = max(-1.0, min(1.0, s))
            ua = float(ellipkinc(math.asin(s), self.m))
            period = 4.0 * self.K
            best = math.inf
            ustart = self.u0 + self.om * after
            for base in (ua, 2.0 * self.K - ua):
                n = math.floor((ustart - base) / period)
                for j in range(n, n + 3):
                    u = base + j * period
                    if u > ustart + tiny * max(1.0, abs(u)):
                        best = min(best, (u - self.u0) / self.om)
            return best
        phi_a, _ = self.angle(after)
        if self.regime == "rotation":
            two_pi = 2.0 * math.pi
            d = (self.sigma * (target - phi_a)) % two_pi
            if d <= 1e-12:
                d += two_pi
            phi_t = phi_a + self.sigma * d
            u = float(ellipkinc(self.sigma * phi_t / 2.0, self.mu))
            return (u - self.u0) / (math.sqrt(self.m) * self.om)
        # separatrix: φ monotone in (−π, π)
        if abs(target) >= math.pi or self.sigma * (target - phi_a) <= 1e-12:
            return math.inf
        u = math.atanh(self.sigma * math.sin(target / 2.0))
        return (u - self.u0) / self.om

    # ---- state -------------------------------------------------------------------------------
    def radial(self, phi: float) -> np.ndarray:
        return math.sin(phi) * self.direction - math.cos(phi) * np.array([0.0, 0.0, 1.0])

    def tangent(self, phi: float) -> np.ndarray:
        return math.cos(phi) * self.direction + math.sin(phi) * np.array([0.0, 0.0, 1.0])

    def state(self, t: float) -> BodyState:
        tau = t - self.t0
        phi, phid = self.angle(tau)
        pos = self.center + self.rho * self.radial(phi)
        vel = self.rho * phid * self.tangent(phi)
        if self.rolling:
            w = (self.rho * phid / self.r_roll) * self.lateral
            q = qmul(qexp(self.lateral * (self.rho / self.r_roll) * (phi - self.phi0)), self.q0)
        else:
            w = self.w0.copy()
            q = qmul(qexp(self.w0 * tau), self.q0)
        return BodyState(pos, qnorm(q), vel, w)
