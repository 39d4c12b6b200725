"""Coefficient of restitution → MuJoCo contact damping, by calibration; the contact settings shared by
every MuJoCo model Orchard builds.

MuJoCo has no restitution parameter. A contact with negative ``solref = (-stiffness, -damping)`` is a
spring-damper acting on the penetration (as an acceleration, so independent of mass and size);
damping 0 rebounds with e ≈ 1. Because a contact can only push, the textbook damping-ratio formula
overshoots, so the map e → damping is measured: for each e on a grid (0.00 … 1.00, step 0.05) a
bisection on the damping finds the value whose mean rebound ratio over a fixed set of impacts equals e.

One impact: a sphere hits the ground plane with normal speed v_in under gravity (equivalent to a drop
from v_in²/2g) and e = v_out / v_in, with v_in the speed on the last step before the contact appears
and v_out the speed on the first step after it disappears. The impacts vary the speed (drops of 0.2 …
1.2 m) and the phase of the first contact within a time step, whose spread (about ±0.006 at this
timestep) is the engine's own uncertainty on e.

The table is stored in ``restitution_calibration.json`` with the MuJoCo version, timestep, stiffness
and solver settings it holds for; :func:`calibrate` regenerates it deterministically.

Why these settings (measured against the analytic ground truth, see tests/test_engine_fidelity.py)
-------------------------------------------------------------------------------------------------
* Stiffness. The analytic impacts are instantaneous; a soft contact lasts π/√k and lets a sphere sink
  v/√k into the surface, which delays every rebound (the rebounding body lags by about v_out·π/√k) and
  shortens the lever arm of friction during the impact. At the former 2·10⁵ s⁻² a steel ball landing at
  4.8 m/s sank 11 mm and lagged 19 mm. Much stiffer contacts (10⁷) make a sliding box's chatter
  (below) inaccurate: its acceleration on a 30° ramp came out 2–3 % too large. 2·10⁶ (contact ≈ 2.2 ms,
  2.6 mm sink at 5 m/s) keeps both within a few millimetres.
* Friction damping (``solreffriction``). In MuJoCo's elliptic soft cone the friction's reference
  acceleration is −b_f·v_t; with the default b_f = the normal damping (100–400 s⁻¹) a sphere's contact
  point had not stopped slipping when a 2 ms impact ended, so bounces kept far too much horizontal
  speed and too little spin (projectile cases: 1.61 m/s instead of the Coulomb-with-sticking 1.43 m/s).
  b_f must stop the slip well within one contact (b_f·π/√k ≫ 1), but the soft cone lifts a sliding
  contact by about μ·b_f·v_t (the convex model's known sliding artefact), which during an impact
  takes normal momentum away (e drops by up to 0.04 at 45° incidence with b_f = 5000 at k = 10⁷).
  FRICTION_DAMPING = 2000 s⁻¹ balances the two for rollers (b_f·π/√k ≈ 4.4). A body sliding on a flat
  face needs no spin to be set at an impact, and there the lift makes a fast-damped box rock (a steel
  cube sliding down a 30° oak ramp tilted by 3.9° with 2000): SLIDER_FRICTION_DAMPING = 300 s⁻¹
  (0.05°, and 0.3 mm along the slope after 1 s).
* ``ccd_tolerance``: a cylinder lying on a box (ramp slab, track segment) touches along a line; with
  MuJoCo's default 10⁻⁶ m the convex collider returned contact normals tilted by up to 49° at the
  micrometre penetrations of a resting contact, which acted as extra friction (a cylinder rolling with
  slip down a glass ramp ended 165 mm behind). 10⁻¹⁰ m gives exact normals.
* Tracks (sustained rolling inside a polygon of flat segments, never an impact in the analytic model)
  use TRACK_STIFFNESS with the damping of the same e scaled by √(k_track/k) (same damping ratio): a
  stiffer contact keeps the contact patch shorter than one segment and the micro-impacts at the
  segments' joints small (a steel ball looping at 4.5 m/s ended 238 mm behind with 1° segments at the
  former settings, and still lost 2.5 % of its energy per turn with 1° segments at k = 10⁷; with 0.25°
  segments at k = 2·10⁶ the patch spans several segments, whose contacts scrub: 88 mm).
* Step: 1/19200 s divides the frame interval of 24/25/30/48/50/60/… fps and keeps ω·dt ≤ 0.17 even for
  track contacts; damping up to 1/dt stays stable in MuJoCo's semi-implicit Euler step.
"""
from __future__ import annotations

import json
import math
import warnings
from functools import lru_cache
from pathlib import Path

import numpy as np

from . import gl as _gl

# Physics settings shared by every MuJoCo model Orchard builds (mujoco_scene.py reads them from here).
TIMESTEP = 1.0 / 19200.0  # s; divides the frame interval of 24/25/30/48/50/60/… fps exactly
STIFFNESS = 2.0e6  # 1/s², contact spring as an acceleration per metre of penetration
SOLIMP = (0.99, 0.99, 0.001, 0.5, 2.0)  # constant impedance: the contact law stays linear
CONE = "elliptic"
IMPRATIO = 10.0
INTEGRATOR = "Euler"
FRICTION_DAMPING = 2000.0  # 1/s, reference deceleration of tangential slip per m/s (solreffriction) of rollers
SLIDER_FRICTION_DAMPING = 300.0  # 1/s, the same for bodies that rest on a flat face (cubes, cones, upright cylinders)
CCD_TOLERANCE = 1e-10  # m, convex collision tolerance (exact normals at micrometre penetrations)
TRACK_STIFFNESS = 1.0e7  # 1/s², contacts with the running surface of a circular track

E_GRID = tuple(round(0.05 * i, 2) for i in range(21))
CALIBRATION_PATH = Path(__file__).with_name("restitution_calibration.json")

# Impacts averaged by the calibration: drop heights (m) and initial gaps (fractions of one step's travel).
_DROP_HEIGHTS = (0.2, 0.35, 0.5, 0.65, 0.8, 1.0, 1.2)
_PHASES = (0.0, 0.25, 0.5, 0.75)
_G = 9.81
_RADIUS = 0.05


def _drop_xml(damping: float, stiffness: float, timestep: float, g: float, radius: float, height: float) -> str:
    return f"""<mujoco model="restitution_drop">
  <option timestep="{timestep!r}" gravity="0 0 {-g!r}" cone="{CONE}" impratio="{IMPRATIO!r}" integrator="{INTEGRATOR}"
          ccd_tolerance="{CCD_TOLERANCE!r}"/>
  <worldbody>
    <geom name="ground" type="plane" size="5 5 0.1" contype="0" conaffinity="0"/>
    <body name="ball" pos="0 0 {radius + height!r}">
      <freejoint/>
      <geom name="ball" type="sphere" size="{radius!r}" contype="0" conaffinity="0"/>
      <inertial pos="0 0 0" mass="1" diaginertia="{0.4 * radius**2!r} {0.4 * radius**2!r} {0.4 * radius**2!r}"/>
    </body>
  </worldbody>
  <contact>
    <pair geom1="ground" geom2="ball" condim="3" friction="0.5 0.5 0.005 0.0001 0.0001"
          solref="{-stiffness!r} {-damping!r}" solimp="{' '.join(repr(float(x)) for x in SOLIMP)}"
          solreffriction="{-stiffness!r} {-FRICTION_DAMPING!r}"/>
  </contact>
</mujoco>"""


@lru_cache(maxsize=8)
def _drop_model(stiffness: float, timestep: float, g: float, radius: float):
    _gl.configure()
    import mujoco

    return mujoco.MjModel.from_xml_string(_drop_xml(0.0, stiffness, timestep, g, radius, 1.0))


def drop_test(damping: float, height: float = 0.5, *, stiffness: float = STIFFNESS, timestep: float = TIMESTEP,
              g: float = _G, radius: float = _RADIUS, start_gap: float | None = None) -> float:
    """Rebound ratio v_out / v_in of a sphere dropped on the ground plane.

    With ``start_gap=None`` the sphere is released from rest ``height`` above the ground (a real drop).
    Otherwise it starts ``start_gap`` metres above the ground already moving at the drop's impact
    speed sqrt(2 g height), which skips the fall (used by the calibration).
    """
    import mujoco

    model = _drop_model(float(stiffness), float(timestep), float(g), float(radius))
    model.pair_solref[0] = (-stiffness, -damping)
    data = mujoco.MjData(model)
    start = height if start_gap is None else start_gap
    data.qpos[2] = radius + start
    if start_gap is not None:
        data.qvel[2] = -math.sqrt(2.0 * g * height)
    v_in = None
    max_steps = int(math.ceil((math.sqrt(2.0 * max(start, 1e-9) / g) + 1.0) / timestep))
    for _ in range(max_steps):
        v_prev = float(data.qvel[2])
        mujoco.mj_step(model, data)
        if v_in is None:
            if data.ncon > 0:
                v_in = -v_prev
        elif data.ncon == 0:
            return float(data.qvel[2]) / v_in
    return 0.0 if v_in is not None else float("nan")  # never separated: perfectly inelastic


def _impacts(timestep: float, g: float) -> list[tuple[float, float]]:
    out = []
    for h in _DROP_HEIGHTS:
        step_travel = math.sqrt(2.0 * g * h) * timestep
        for p in _PHASES:
            out.append((h, 1e-4 + p * step_travel))
    return out


def mean_restitution(damping: float, *, stiffness: float = STIFFNESS, timestep: float = TIMESTEP,
                     g: float = _G) -> tuple[float, float]:
    """Mean and standard deviation of the rebound ratio over the calibration's impacts."""
    es = np.array([drop_test(damping, h, stiffness=stiffness, timestep=timestep, g=g, start_gap=gap)
                   for h, gap in _impacts(timestep, g)])
    return float(es.mean()), float(es.std())


def calibrate(path: str | Path | None = CALIBRATION_PATH, *, stiffness: float = STIFFNESS,
              timestep: float = TIMESTEP, iterations: int = 22) -> dict:
    """Recompute the e → damping table (deterministic) and write it to `path` (unless None)."""
    import mujoco

    d_max = 1.0 / timestep  # beyond ~2/dt the explicit damping term turns unstable
    entries = []
    for e in E_GRID:
        if e >= 1.0:
            damping = 0.0
        else:
            lo, hi = 0.0, d_max  # e(lo) > e > e(hi) while the target is reachable
            if mean_restitution(hi, stiffness=stiffness, timestep=timestep)[0] > e:
                damping = hi
            else:
                for _ in range(iterations):
                    mid = 0.5 * (lo + hi)
                    if mean_restitution(mid, stiffness=stiffness, timestep=timestep)[0] > e:
                        lo = mid
                    else:
                        hi = mid
                damping = hi if e == 0.0 else 0.5 * (lo + hi)
        mean, sd = mean_restitution(damping, stiffness=stiffness, timestep=timestep)
        entries.append({"e": e, "damping": round(damping, 6), "e_measured": round(mean, 5), "e_sd": round(sd, 5)})
    table = {
        "description": "MuJoCo contact damping (solref = [-stiffness, -damping]) giving a coefficient of restitution e; "
                       "mean rebound ratio over sphere-on-plane impacts (drops of 0.2-1.2 m, four contact phases each).",
        "mujoco_version": mujoco.__version__,
        "timestep": timestep,
        "stiffness": stiffness,
        "solimp": list(SOLIMP),
        "cone": CONE,
        "impratio": IMPRATIO,
        "integrator": INTEGRATOR,
        "friction_damping": FRICTION_DAMPING,
        "ccd_tolerance": CCD_TOLERANCE,
        "drop_heights": list(_DROP_HEIGHTS),
        "phases": list(_PHASES),
        "entries": entries,
    }
    if path is not None:
        Path(path).write_text(json.dumps(table, indent=1) + "\n", encoding="utf-8")
        load_calibration.cache_clear()
    return table


@lru_cache(maxsize=4)
def load_calibration(path: str | Path = CALIBRATION_PATH) -> dict:
    table = json.loads(Path(path).read_text(encoding="utf-8"))
    try:
        import mujoco

        if table["mujoco_version"] != mujoco.__version__:
            warnings.warn(f"restitution calibration was made with MuJoCo {table['mujoco_version']}, running "
                          f"{mujoco.__version__}; rerun orchard_build.engines.restitution.calibrate()", stacklevel=2)
    except ImportError:
        pass
    return table


def damping_for(e: float, *, timestep: float = TIMESTEP, stiffness: float = STIFFNESS) -> float:
    """Contact damping giving restitution e (linear interpolation in the calibration table)."""
    if not 0.0 <= e <= 1.0:
        raise ValueError(f"coefficient of restitution must lie in [0, 1], got {e}")
    table = load_calibration()
    if not (math.isclose(table["timestep"], timestep, rel_tol=1e-9) and math.isclose(table["stiffness"], stiffness)):
        raise ValueError(f"the restitution calibration holds for timestep {table['timestep']} s and stiffness "
                         f"{table['stiffness']}; got {timestep} / {stiffness}: recalibrate")
    es = np.array([row["e"] for row in table["entries"]])
    ds = np.array([row["damping"] for row in table["entries"]])
    return float(np.interp(e, es, ds))


def solref_for(e: float, stiffness: float = STIFFNESS) -> tuple[float, float]:
    """MuJoCo `solref` (negative, direct stiffness/damping form) for restitution e.

    At another stiffness than the calibrated one the damping is scaled by √(stiffness / STIFFNESS),
    which keeps the damping ratio (exact for the continuous spring-damper, approximate once the time
    step matters); only track contacts use this, and the analytic model has no impacts on tracks.
    """
    return (-float(stiffness), -damping_for(e) * math.sqrt(float(stiffness) / STIFFNESS))


def solref_friction(roller: bool = True) -> tuple[float, float]:
    """MuJoCo `solreffriction` of an object's contacts with supports: tangential slip decays at
    FRICTION_DAMPING for bodies that can roll (spheres, cylinders on their side), at
    SLIDER_FRICTION_DAMPING for bodies that rest on a flat face (the stiffness entry is unused by
    friction dimensions)."""
    return (-STIFFNESS, -(FRICTION_DAMPING if roller else SLIDER_FRICTION_DAMPING))
