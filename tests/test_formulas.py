"""Formula bank: four candidates per law, deterministic letters, physics-true answer key, schema."""
from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from orchard_build import formulas as fb
from orchard_build.config import resolve_config
from orchard_build.materials import load_materials
from orchard_build.schemas import iter_errors

try:  # the mechanics solver's type; a structural stand-in until it lands
    from orchard_build.mechanics.types import LawStep
except ImportError:  # pragma: no cover - depends on the checkout
    @dataclass(frozen=True)
    class LawStep:  # type: ignore[no-redef]
        law: str
        variant: str
        objects: tuple[str, ...]
        t_start: float
        t_end: float
        parameters: dict[str, Any] = field(default_factory=dict)

ROOT = Path(__file__).resolve().parents[1]
MATS = load_materials(ROOT / "scenes" / "materials.yaml")
CAMERA = {"position": [0.0, -4.0, 1.0], "look_at": [0.0, 0.0, 0.5], "fov_deg": 40, "resolution": [640, 360]}
G = 9.81


def make_config(task: str, objects: list[dict], supports: dict | None = None, seed: int = 7, g: float = G,
                ground: str = "concrete"):
    raw: dict[str, Any] = {
        "schema_version": 1, "task": task, "case_number": 0, "seed": seed, "environment": {"g": g},
        "ground": {"material": ground}, "objects": objects, "camera": CAMERA,
        "timing": {"fps": 24, "duration": 2.0, "target_time": 1.0},
    }
    if supports:
        raw["supports"] = supports
    return resolve_config(raw, "t.yaml", MATS)


def ramp(angle: float, material: str = "oak", foot_z: float = 0.0) -> dict:
    return {"ramps": [{"id": "ramp", "material": material, "angle_deg": angle, "length": 2.0, "width": 0.5,
                       "foot": [1.0, 0.0, foot_z]}]}


def sphere(id_: str, material: str, placement: dict, radius: float = 0.1, annotate=("mass",)) -> dict:
    return {"id": id_, "shape": "sphere", "size": {"radius": radius}, "material": material,
            "placement": placement, "annotate": list(annotate)}


def cube(id_: str, material: str, placement: dict, edge: float = 0.1, annotate=("mass",)) -> dict:
    return {"id": id_, "shape": "cube", "size": {"edge": edge}, "material": material,
            "placement": placement, "annotate": list(annotate)}


TRACK = {"tracks": [{"id": "loop", "material": "steel", "radius": 1.0, "center": [0.0, 0.0, 1.0],
                     "arc_deg": [-90, 90], "width": 0.3}]}
SLICK_TRACK = {"tracks": [{"id": "loop", "material": "air_table", "radius": 1.0, "center": [0.0, 0.0, 1.0],
                           "arc_deg": [-90, 90], "width": 0.3}]}


def _cases() -> dict[str, tuple[Any, list]]:
    c: dict[str, tuple[Any, list]] = {}
    c["free_fall/drop"] = (
        make_config("free_fall", [sphere("ball", "rubber", {"free": {"position": [0, 0, 2.0]}})]),
        [LawStep("free_fall", "drop", ("ball",), 0.0, 0.6, {})])
    c["free_fall/thrown"] = (
        make_config("free_fall", [sphere("ball", "rubber", {"free": {"position": [0, 0, 1.5],
                                                                      "linear_velocity": [0, 0, 3.0]}},
                                         annotate=("mass", "v0"))]),
        [LawStep("free_fall", "thrown", ("ball",), 0.0, 0.9, {})])
    c["projectile_motion/launch"] = (
        make_config("projectile_motion", [sphere("ball", "rubber", {"free": {"position": [0, 0, 1.0],
                                                                             "linear_velocity": [3.0, 0, 2.5]}},
                                                 annotate=("v0",))]),
        [LawStep("projectile_motion", "launch", ("ball",), 0.0, 0.8, {})])
    c["inclined_plane/static"] = (
        make_config("inclined_plane", [cube("block", "rubber", {"ramp": {"ramp": "ramp", "distance_from_top": 0.3}})],
                    ramp(20)),
        [LawStep("inclined_plane", "static", ("block",), 0.0, 2.0, {})])
    c["inclined_plane/slide"] = (
        make_config("inclined_plane", [cube("cube", "steel", {"ramp": {"ramp": "ramp", "distance_from_top": 0.15}},
                                            annotate=("mass", "friction"))], ramp(30)),
        [LawStep("inclined_plane", "slide", ("cube",), 0.0, 1.0, {})])
    c["inclined_plane/slide_uphill"] = (
        make_config("inclined_plane", [cube("cube", "steel", {"ramp": {"ramp": "ramp", "distance_from_top": 1.5,
                                                                       "speed": -2.0}}, annotate=("mass", "v0"))],
                    ramp(30)),
        [LawStep("inclined_plane", "slide", ("cube",), 0.0, 0.3, {})])
    c["inclined_plane/roll"] = (
        make_config("inclined_plane", [sphere("ball", "rubber", {"ramp": {"ramp": "ramp", "distance_from_top": 0.2}})],
                    ramp(30)),
        [LawStep("inclined_plane", "roll", ("ball",), 0.0, 1.0, {})])
    c["inclined_plane/roll_slip"] = (
        make_config("inclined_plane", [sphere("ball", "abs_plastic", {"ramp": {"ramp": "ramp", "distance_from_top": 0.2}})],
                    ramp(60, material="steel")),
        [LawStep("inclined_plane", "roll_slip", ("ball",), 0.0, 0.5, {})])
    c["circular_motion/roll"] = (
        make_config("circular_motion", [sphere("ball", "steel", {"track": {"track": "loop", "angle_deg": 60}},
                                               annotate=("mass", "speed"))], TRACK),
        [LawStep("circular_motion", "roll", ("ball",), 0.0, 2.0, {})])
    c["circular_motion/slide"] = (
        make_config("circular_motion", [sphere("ball", "air_table", {"track": {"track": "loop", "angle_deg": -45,
                                                                               "speed": 1.0}})], SLICK_TRACK),
        [LawStep("circular_motion", "slide", ("ball",), 0.0, 2.0, {})])
    two = [sphere("a", "steel", {"surface": {"xy": [0, 0], "velocity": [2.0, 0]}}, annotate=("mass", "v0")),
           sphere("b", "glass", {"surface": {"xy": [1.0, 0], "velocity": [-0.5, 0]}}, annotate=("mass", "v0"))]
    for law in fb.COLLISION_LAWS:
        cfg = make_config(law, [dict(o) for o in two])
        if law == "inelastic_collision":
            two[0]["annotate"] = ["mass", "v0", "restitution"]
            cfg = make_config(law, [dict(o) for o in two])
        # impact after a uniform approach: the pre-impact velocities are the annotated initial ones
        c[f"{law}/head_on"] = (cfg, [LawStep(law, "head_on", ("a", "b"), 0.4, 0.4,
                                             {"u1": [2.0, 0.0, 0.0], "u2": [-0.5, 0.0, 0.0]})])
        n = [math.cos(0.5), math.sin(0.5), 0.0]
        params = {"n": n, "u1": [2.0, 0.0, 0.0], "u2": [-0.5, 0.3, 0.0]}
        if law == "perfectly_inelastic_collision":
            params = {**params, "v1": [0.9, 0.2, 0.0], "v2": [0.9, 0.2, 0.0]}  # merged bodies
        c[f"{law}/oblique"] = (cfg, [LawStep(law, "oblique", ("a", "b"), 0.4, 0.4, params)])
    c["at_rest/surface"] = (
        make_config("at_rest", [cube("block", "oak", {"surface": {"xy": [0, 0]}})]),
        [LawStep("at_rest", "surface", ("block",), 0.0, 2.0, {})])
    c["at_rest/ramp"] = (
        make_config("at_rest", [cube("block", "rubber", {"ramp": {"ramp": "ramp", "distance_from_top": 0.5}})], ramp(15)),
        [LawStep("at_rest", "ramp", ("block",), 0.0, 2.0, {})])
    c["uniform_linear_motion/slide"] = (
        make_config("uniform_linear_motion", [cube("puck", "air_table", {"surface": {"xy": [0, 0], "velocity": [1.5, 0]}},
                                                   annotate=("mass", "v0"))], ground="air_table"),
        [LawStep("uniform_linear_motion", "slide", ("puck",), 0.0, 2.0, {})])
    c["uniform_linear_motion/roll"] = (
        make_config("uniform_linear_motion", [sphere("ball", "rubber", {"surface": {"xy": [0, 0], "velocity": [1.2, 0]}},
                                                     annotate=("mass", "v0"))]),
        [LawStep("uniform_linear_motion", "roll", ("ball",), 0.0, 2.0, {})])
    c["bounce/elastic"] = (
        make_config("composition", [sphere("ball", "elastic_polymer", {"free": {"position": [0, 0, 1.1]}})],
                    ground="air_table"),
        [LawStep("bounce", "elastic", ("ball",), 0.0, 0.0, {})])
    c["bounce/inelastic"] = (
        make_config("composition", [sphere("ball", "rubber", {"free": {"position": [0, 0, 1.1]}},
                                           annotate=("mass", "restitution"))]),
        [LawStep("bounce", "inelastic", ("ball",), 0.0, 0.0, {})])
    c["surface_friction/slide"] = (
        make_config("composition", [cube("block", "steel", {"surface": {"xy": [0, 0], "velocity": [3.0, 0]}},
                                              annotate=("mass", "v0"))]),
        [LawStep("surface_friction", "slide", ("block",), 0.0, 0.5, {})])
    c["surface_friction/roll_slip"] = (
        make_config("composition", [sphere("ball", "rubber", {"free": {"position": [0, 0, 0.1],
                                                                            "linear_velocity": [3.0, 0, 0]}},
                                                annotate=("mass", "v0"))]),
        [LawStep("surface_friction", "roll_slip", ("ball",), 0.0, 0.3, {})])
    c["surface_friction/roll_slip_overspin"] = (
        make_config("composition", [sphere("ball", "rubber", {"free": {"position": [0, 0, 0.1],
                                                                            "linear_velocity": [1.0, 0, 0],
                                                                            "angular_velocity": [0, 40.0, 0]}})]),
        [LawStep("surface_friction", "roll_slip", ("ball",), 0.0, 0.1, {})])
    return c


CASES = _cases()
INFOS = {k: fb.build_formula_info(cfg, steps) for k, (cfg, steps) in CASES.items()}


def values(info: dict, **free: float) -> dict[str, float]:
    out = {r["name"]: r["value"] for r in info["symbol_table"] if r["value"] is not None}
    out.update(free)
    return out


def by_kind(info: dict, kind: str) -> dict:
    (c,) = [c for c in info["candidates"] if c["kind"] == kind]
    return c


def test_catalogue_covers_every_law_and_variant():
    seen = {(s.law, s.variant) for _, steps in CASES.values() for s in steps}
    want = {(law, v) for law, vs in fb.LAW_VARIANTS.items() for v in vs}
    assert want <= seen


@pytest.mark.parametrize("key", sorted(CASES))
def test_four_distinct_candidates_one_of_each_kind(key):
    info = INFOS[key]
    cands = info["candidates"]
    assert [c["letter"] for c in cands] == list("ABCD")
    assert sorted(c["kind"] for c in cands) == sorted(fb.KINDS)
    assert len({c["display"] for c in cands}) == 4
    assert len({c["sympy"] for c in cands}) == 4
    assert sum(c["kind"] == "correct" for c in cands) == 1
    correct = by_kind(info, "correct")
    assert info["correct_letter"] == correct["letter"]
    assert info["correct_formula"] == correct["display"]
    assert info["correct_sympy"] == correct["sympy"]
    assert info["choices"] == [f"{c['letter']}. {c['display']}" for c in cands]
    assert by_kind(info, "fabricated")["law"] is None
    for kind in ("correct", "confusing", "unrelated"):
        assert by_kind(info, kind)["law"]
    # no template placeholder leaks into the text the model reads
    for text in [*info["choices"], info["substituted"]["display"]]:
        assert "{" not in text and "}" not in text


@pytest.mark.parametrize("key", sorted(CASES))
def test_output_validates_against_schema_and_is_json(key):
    info = INFOS[key]
    assert list(iter_errors(info, "formula_info.schema.json")) == []
    assert json.loads(json.dumps(info, ensure_ascii=False)) == info


def test_schema_rejects_unknown_fields_and_bad_letters():
    info = json.loads(json.dumps(INFOS["inclined_plane/slide"]))
    assert list(iter_errors({**info, "extra": 1}, "formula_info.schema.json"))
    assert list(iter_errors({**info, "correct_letter": "E"}, "formula_info.schema.json"))
    bad = json.loads(json.dumps(info))
    bad["candidates"][0]["kind"] = "distractor"
    assert list(iter_errors(bad, "formula_info.schema.json"))


@pytest.mark.parametrize("key", sorted(CASES))
def test_every_sympy_string_parses(key):
    info = INFOS[key]
    for s in [c["sympy"] for c in info["candidates"]] + [info["correct_sympy"], info["substituted"]["sympy"]]:
        eq = fb.parse_formula(s)
        assert isinstance(eq, sympy.Equality)
        system = fb.parse_system(s)
        assert all(isinstance(e, sympy.Equality) for e in system)
        if len(system) > 1:
            assert isinstance(eq.lhs, sympy.Tuple) and len(eq.lhs) == len(system)


def test_parse_formula_single_and_system():
    eq = fb.parse_formula("Eq(y(t), h + v_0*t - g*t**2/2)")
    t, h, v0, g = sympy.symbols("t h v_0 g")
    assert eq.lhs == sympy.Function("y")(t)
    assert sympy.simplify(eq.rhs - (h + v0 * t - g * t**2 / 2)) == 0
    sys_eq = fb.parse_formula("Eq(x(t), v_0*t); Eq(omega, v_0/r)")
    assert len(sys_eq.lhs) == 2
    with pytest.raises(ValueError):
        fb.parse_formula("a + b")
    assert fb.formulas_equivalent("Eq(a, g*(sin(theta) - mu*cos(theta)))", "Eq(a, g*sin(theta) - g*mu*cos(theta))")
    assert not fb.formulas_equivalent("Eq(a, g*(sin(theta) - mu*cos(theta)))", "Eq(a, g*(sin(theta) + mu*cos(theta)))")


def test_same_config_gives_identical_output():
    cfg, steps = CASES["inelastic_collision/oblique"]
    a = fb.build_formula_info(cfg, steps)
    b = fb.build_formula_info(cfg, list(steps))
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@pytest.mark.parametrize("key", ["inclined_plane/roll", "perfectly_elastic_collision/head_on", "composition"])
def test_letter_is_the_seeded_permutation_and_reaches_all_four(key):
    cfg, steps = CASES[key] if key != "composition" else COMPOSITION
    letters = set()
    for seed in range(40):
        info = fb.build_formula_info(replace(cfg, seed=seed), steps)
        expected = "ABCD"[int(np.random.default_rng(seed).permutation(4)[0])]
        assert info["correct_letter"] == expected
        letters.add(info["correct_letter"])
        again = fb.build_formula_info(replace(cfg, seed=seed), steps)
        assert again == info
    assert letters == set("ABCD")


# ---------------------------------------------------------------------------------------------
# The correct formula reproduces the physics, computed here independently from the config
# ---------------------------------------------------------------------------------------------
def correct_values(key: str, **free: float) -> dict[str, float]:
    info = INFOS[key]
    return fb.evaluate_formula(info["correct_sympy"], values(info, **free))


def substituted_values(key: str, **free: float) -> dict[str, float]:
    info = INFOS[key]
    return fb.evaluate_formula(info["substituted"]["sympy"], values(info, **free))


def close(a: float, b: float, rel: float = 1e-9) -> bool:
    return math.isclose(a, b, rel_tol=rel, abs_tol=1e-9)


def test_slide_acceleration_matches_kinetic_friction_law():
    cfg, _ = CASES["inclined_plane/slide"]
    th = math.radians(30)
    mu_k = math.sqrt(MATS["steel"].dynamic_friction * MATS["oak"].dynamic_friction)
    a = G * (math.sin(th) - mu_k * math.cos(th))
    assert close(correct_values("inclined_plane/slide")["a"], a)
    # the printed numbers (two decimals: μ off by at most 0.005) give the same acceleration to that precision
    assert abs(substituted_values("inclined_plane/slide")["a"] - a) <= G * 0.005 * math.cos(th) + 1e-9
    sub = INFOS["inclined_plane/slide"]["substituted"]
    assert sub["values"] == {"g": 9.81, "mu": round(mu_k, 2), "theta": 30.0}
    assert sub["display"] == f"a = 9.81·(sin(30°) − {mu_k:.2f}·cos(30°))"


def test_uphill_slide_uses_plus_sign_and_downhill_law_is_the_confusing_one():
    info = INFOS["inclined_plane/slide_uphill"]
    th = math.radians(30)
    mu_k = math.sqrt(MATS["steel"].dynamic_friction * MATS["oak"].dynamic_friction)
    assert close(correct_values("inclined_plane/slide_uphill")["a"], G * (math.sin(th) + mu_k * math.cos(th)))
    assert "−" in by_kind(info, "confusing")["display"]


def test_roll_and_roll_slip_and_static():
    th = math.radians(30)
    assert close(correct_values("inclined_plane/roll")["a"], G * math.sin(th) / (1 + 2 / 5))
    th = math.radians(60)
    mu_k = math.sqrt(MATS["abs_plastic"].dynamic_friction * MATS["steel"].dynamic_friction)
    rs = correct_values("inclined_plane/roll_slip")
    assert close(rs["a"], G * (math.sin(th) - mu_k * math.cos(th)))
    assert close(rs["epsilon"], mu_k * G * math.cos(th) / (0.4 * 0.1))
    cfg, _ = CASES["inclined_plane/static"]
    m = cfg.obj("block").mass
    st_ = correct_values("inclined_plane/static")
    assert close(st_["f_s"], m * G * math.sin(math.radians(20)))
    assert close(st_["F_N"], m * G * math.cos(math.radians(20)))
    rest = correct_values("at_rest/ramp")
    assert close(rest["f_s"], CASES["at_rest/ramp"][0].obj("block").mass * G * math.sin(math.radians(15)))
    flat = correct_values("at_rest/surface")
    assert close(flat["F_N"], CASES["at_rest/surface"][0].obj("block").mass * G) and flat["a"] == 0


def test_free_falling_cube_falls_back_to_constant_velocity_distractor():
    cfg = make_config("free_fall", [cube("box", "oak", {"free": {"position": [0, 0, 2.0]}})])
    info = fb.build_formula_info(cfg, [LawStep("free_fall", "drop", ("box",), 0.0, 0.5, {})])
    assert by_kind(info, "confusing")["display"] == "y(t) = h + v_0·t"
    assert by_kind(INFOS["free_fall/drop"], "confusing")["display"] == "y(t) = h − (1/2)·g·t²/(1 + k)"


def test_free_fall_and_projectile_positions():
    t = 0.37
    assert close(correct_values("free_fall/drop", t=t)["y(t)"], 2.0 - 0.5 * G * t * t)
    assert close(correct_values("free_fall/thrown", t=t)["y(t)"], 1.5 + 3.0 * t - 0.5 * G * t * t)
    p = correct_values("projectile_motion/launch", t=t)
    assert close(p["x(t)"], 3.0 * t)
    assert close(p["y(t)"], 1.0 + 2.5 * t - 0.5 * G * t * t)


def test_circular_track_energy():
    R, r, k = 1.0, 0.1, 0.4
    phi0 = math.radians(60)
    v2 = 2 * G * (R - r) * (1 - math.cos(phi0)) / (1 + k)  # speed at the lowest point, released at rest
    assert close(correct_values("circular_motion/roll", phi=0.0)["v**2"], v2)
    phi0 = math.radians(-45)
    v2 = 1.0 + 2 * G * (R - r) * (1 - math.cos(phi0))
    assert close(correct_values("circular_motion/slide", phi=0.0)["v**2"], v2)


def post_impact(m1: float, m2: float, u1: float, u2: float, e: float) -> tuple[float, float]:
    """Independent solve of momentum conservation and Newton's restitution law."""
    A = np.array([[m1, m2], [-1.0, 1.0]])
    b = np.array([m1 * u1 + m2 * u2, -e * (u2 - u1)])
    v1, v2 = np.linalg.solve(A, b)
    return float(v1), float(v2)


@pytest.mark.parametrize("law,e", [("perfectly_elastic_collision", 1.0), ("perfectly_inelastic_collision", 0.0),
                                   ("inelastic_collision", None)])
def test_head_on_collision_yields_post_impact_velocities(law, e):
    cfg, _ = CASES[f"{law}/head_on"]
    m1, m2 = cfg.obj("a").mass, cfg.obj("b").mass
    if e is None:
        e = MATS.pair("steel", "glass").restitution
    v1, v2 = post_impact(m1, m2, 2.0, -0.5, e)
    got = correct_values(f"{law}/head_on")
    assert close(got["v_1"], v1) and close(got["v_2"], v2)
    momentum_before = m1 * 2.0 + m2 * -0.5
    assert close(m1 * got["v_1"] + m2 * got["v_2"], momentum_before)


@pytest.mark.parametrize("law", fb.COLLISION_LAWS)
def test_oblique_collision_components(law):
    cfg, steps = CASES[f"{law}/oblique"]
    p = steps[0].parameters
    n = np.array(p["n"])
    u1, u2 = np.array(p["u1"]), np.array(p["u2"])
    m1, m2 = cfg.obj("a").mass, cfg.obj("b").mass
    e = {"perfectly_elastic_collision": 1.0, "perfectly_inelastic_collision": 0.0}.get(
        law, MATS.pair("steel", "glass").restitution)
    v1n, v2n = post_impact(m1, m2, float(u1 @ n), float(u2 @ n), e)
    got = correct_values(f"{law}/oblique")
    assert close(got["v_1n"], v1n) and close(got["v_2n"], v2n)
    vals = values(INFOS[f"{law}/oblique"])
    if law == "perfectly_inelastic_collision":  # merged: one common tangential velocity
        common = (m1 * vals["u_1t"] + m2 * vals["u_2t"]) / (m1 + m2)
        assert close(got["v_1t"], common) and close(got["v_2t"], common)
    else:
        assert close(got["v_1t"], vals["u_1t"]) and close(got["v_2t"], vals["u_2t"])
    # the normal/tangent split reproduces the pre-impact vectors
    tang = np.cross([0, 0, 1.0], n)
    assert close(abs(vals["u_1t"]), abs(float(u1 @ tang)))


def test_bounce_and_surface_laws():
    u = -math.sqrt(2 * G * (1.1 - 0.1))
    assert close(correct_values("bounce/elastic")["v"], -u)
    e = MATS.pair("rubber", "concrete").restitution
    assert close(correct_values("bounce/inelastic")["v"], -e * u)
    t = 0.2
    mu_k = MATS.pair("steel", "concrete").dynamic_friction
    assert close(correct_values("surface_friction/slide", t=t)["v(t)"], 3.0 - mu_k * G * t)
    mu_k = MATS.pair("rubber", "concrete").dynamic_friction
    rs = correct_values("surface_friction/roll_slip", t=t)
    assert close(rs["v(t)"], 3.0 - mu_k * G * t)
    assert close(rs["omega(t)"], mu_k * G * t / (0.4 * 0.1))
    over = correct_values("surface_friction/roll_slip_overspin", t=0.05)
    assert close(over["v(t)"], 1.0 + mu_k * G * 0.05)
    assert close(over["omega(t)"], 40.0 - mu_k * G * 0.05 / (0.4 * 0.1))
    assert close(correct_values("uniform_linear_motion/slide", t=t)["x(t)"], 1.5 * t)
    roll = correct_values("uniform_linear_motion/roll", t=t)
    assert close(roll["x(t)"], 1.2 * t) and close(roll["omega"], 1.2 / 0.1)


# ---------------------------------------------------------------------------------------------
# Distractors
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(CASES))
def test_confusing_candidate_gives_a_different_number(key):
    info = INFOS[key]
    vals = values(info, t=0.3, phi=0.0 if "circular" in key else 0.0)
    good = fb.evaluate_formula(info["correct_sympy"], vals)
    bad = fb.evaluate_formula(by_kind(info, "confusing")["sympy"], vals)
    common = set(good) & set(bad)
    assert common, "the confusing law must state the same quantity"
    assert any(not math.isclose(good[k], bad[k], rel_tol=1e-6, abs_tol=1e-9) for k in common)
    assert not fb.formulas_equivalent(info["correct_sympy"], by_kind(info, "confusing")["sympy"])


@pytest.mark.parametrize("key", sorted(CASES))
def test_confusing_shares_annotated_symbols_and_unrelated_is_another_family(key):
    info = INFOS[key]
    correct, confusing, unrelated = (set(by_kind(info, k)["symbols"]) for k in ("correct", "confusing", "unrelated"))
    annotated = set(info["annotated_symbols"])
    assert (confusing & correct) - {"t"}
    # the real law a model would pick by symbol matching: it uses the annotated symbols of the answer.
    # Exceptions: the elastic law (no e) for an inelastic bounce; rolling at v_0 for an overspinning
    # ball whose v_0 is not annotated.
    if correct & annotated and key not in ("bounce/inelastic", "surface_friction/roll_slip_overspin"):
        assert confusing & annotated & correct
    assert by_kind(info, "unrelated")["law"] not in (s.law for s in CASES[key][1])


def test_frictionless_slide_never_gets_an_indistinguishable_distractor():
    cfg = make_config("inclined_plane", [cube("puck", "air_table", {"ramp": {"ramp": "ramp", "distance_from_top": 0.2}})],
                      ramp(25, material="air_table"))
    info = fb.build_formula_info(cfg, [LawStep("inclined_plane", "slide", ("puck",), 0.0, 1.0, {})])
    assert values(info)["mu"] == 0.0
    assert by_kind(info, "confusing")["display"] == "a = g"  # a cube cannot roll, μ = 0 makes ± identical
    vals = values(info)
    assert fb.evaluate_formula(by_kind(info, "confusing")["sympy"], vals)["a"] != pytest.approx(
        fb.evaluate_formula(info["correct_sympy"], vals)["a"])


# ---------------------------------------------------------------------------------------------
# Substitution
# ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(CASES))
def test_substitution_replaces_annotated_symbols_only(key):
    info = INFOS[key]
    sub = info["substituted"]
    table = {r["name"]: r for r in info["symbol_table"]}
    correct_syms = set().union(*(e.free_symbols for e in fb.parse_system(info["correct_sympy"])))
    sub_syms = set().union(*(e.free_symbols for e in fb.parse_system(sub["sympy"])))
    replaced = {sympy.Symbol(n) for n in sub["values"]}
    assert sub_syms == correct_syms - replaced
    for n, v in sub["values"].items():
        assert table[n]["annotated"], n
        text = (f"{v:.0f}°" if table[n]["angle"] else fb.format_value(v)).replace("-", "−")
        assert text in sub["display"], (n, text, sub["display"])
    # every annotated symbol of the correct formula is substituted; every other one is kept by name
    for s in correct_syms:
        row = table.get(s.name)
        if row and row["annotated"] and row["value"] is not None:
            assert s.name in sub["values"]
        elif s.name not in ("t", "phi"):
            assert row is None or not row["annotated"] or row["value"] is None
    assert "g" in info["annotated_symbols"]


def test_annotation_rules():
    assert "theta" in INFOS["inclined_plane/roll"]["annotated_symbols"]  # a ramp is present
    assert "mu" in INFOS["inclined_plane/roll"]["annotated_symbols"]  # labelled on the ramp, not in the law
    assert "mu" not in INFOS["inclined_plane/roll"]["substituted"]["values"]
    roll_mu = {r["name"]: r["value"] for r in INFOS["inclined_plane/roll"]["symbol_table"]}["mu"]
    assert roll_mu == MATS.pair("rubber", "oak").dynamic_friction  # a moving body: kinetic
    static_mu = {r["name"]: r["value"] for r in INFOS["inclined_plane/static"]["symbol_table"]}["mu"]
    assert static_mu == MATS.pair("rubber", "oak").static_friction  # held: static
    assert "mu" in INFOS["inclined_plane/slide"]["annotated_symbols"]
    assert "mu" in INFOS["surface_friction/slide"]["annotated_symbols"]
    assert "mu" not in INFOS["at_rest/surface"]["annotated_symbols"]
    assert {"m_1", "m_2", "u_1", "u_2"} <= set(INFOS["perfectly_elastic_collision/head_on"]["annotated_symbols"])
    assert "e" in INFOS["inelastic_collision/head_on"]["annotated_symbols"]
    assert "e" not in INFOS["perfectly_elastic_collision/head_on"]["annotated_symbols"]
    assert "e" in INFOS["bounce/inelastic"]["annotated_symbols"]
    sub = INFOS["free_fall/thrown"]["substituted"]
    assert sub["display"] == "y(t) = h + 3.00·t − (1/2)·9.81·t²"
    assert sub["sympy"] == "Eq(y(t), h + 3.00*t - 9.81*t**2/2)"
    # unannotated v_0 (speed not annotated) stays a symbol
    assert "v_0" in INFOS["circular_motion/slide"]["substituted"]["display"]
    assert "v_0" not in INFOS["circular_motion/roll"]["substituted"]["display"]


def test_negative_values_are_parenthesised():
    cfg = make_config("free_fall", [sphere("ball", "rubber", {"free": {"position": [0, 0, 3.0],
                                                                        "linear_velocity": [0, 0, -2.0]}},
                                           annotate=("v0",))])
    info = fb.build_formula_info(cfg, [LawStep("free_fall", "thrown", ("ball",), 0.0, 0.5, {})])
    assert info["substituted"]["display"] == "y(t) = h + (−2.00)·t − (1/2)·9.81·t²"
    assert info["substituted"]["sympy"] == "Eq(y(t), h + (-2.00)*t - 9.81*t**2/2)"


def test_format_value_matches_the_infographic():
    assert fb.format_value(9.81) == "9.81"
    assert fb.format_value(7.850000001) == "7.85"
    assert fb.format_value(0.0) == "0"
    assert fb.format_value(-0.001) == "0"
    assert fb.format_value(-2) == "-2.00"
    assert fb.format_angle(math.radians(30.0000001)) == "30"
    try:
        from orchard_build import overlay
    except ImportError:  # pragma: no cover - the infographic module is optional here
        return
    for x in (9.81, 0.0, 0.004, 7.85, 32.876, -0.5):
        assert fb.format_value(x) == overlay.format_value(x)


# ---------------------------------------------------------------------------------------------
# Multi-law compositions
# ---------------------------------------------------------------------------------------------
COMPOSITION = (
    make_config("composition", [cube("cube", "steel", {"ramp": {"ramp": "ramp", "distance_from_top": 0.2}},
                                     annotate=("mass", "friction"))], ramp(35, foot_z=0.5), seed=11),
    [LawStep("inclined_plane", "slide", ("cube",), 0.0, 1.0, {}),
     LawStep("projectile_motion", "launch", ("cube",), 1.0, 1.3, {"v0_vec": [2.0, 0.0, -1.4], "h0": 0.55})],
)


def test_composition_chains_stage_laws_and_swaps_one_stage_per_distractor():
    cfg, steps = COMPOSITION
    info = fb.build_formula_info(cfg, steps)
    assert list(iter_errors(info, "formula_info.schema.json")) == []
    correct = by_kind(info, "correct")
    assert correct["law"] == "composition"
    assert [s["template"] for s in correct["stages"]] == ["inclined_plane.slide", "projectile_motion.launch"]
    assert correct["display"] == ("a = g·(sinθ − μ·cosθ); "
                                  "x(t) = v_B·cosα_B·t, y(t) = h_B + v_B·sinα_B·t − (1/2)·g·t²")
    for kind in ("confusing", "unrelated", "fabricated"):
        cand = by_kind(info, kind)
        differing = [i for i, (a, b) in enumerate(zip(correct["stages"], cand["stages"])) if a != b]
        assert len(differing) == 1, kind
        assert len(cand["display"].split("; ")) == 2
    # handed-over state keeps a stage-lettered symbol and is never substituted
    sub = info["substituted"]
    assert "v_B" in sub["display"] and "h_B" in sub["display"]
    assert set(sub["values"]) == {"g", "mu", "theta"}
    table = {r["name"]: r for r in info["symbol_table"]}
    assert math.isclose(table["v_B"]["value"], math.hypot(2.0, 1.4))
    assert not table["v_B"]["annotated"]
    vals = values(info, t=0.1)
    got = fb.evaluate_formula(info["correct_sympy"], vals)
    assert math.isclose(got["y(t)"], 0.55 - 1.4 * 0.1 - 0.5 * G * 0.01)


def test_second_surface_with_other_friction_gets_its_own_symbol():
    cfg = make_config("composition", [cube("cube", "steel", {"ramp": {"ramp": "ramp", "distance_from_top": 0.2}},
                                           annotate=("mass",))], ramp(35), seed=5)
    steps = [LawStep("inclined_plane", "slide", ("cube",), 0.0, 1.0, {}),
             LawStep("surface_friction", "slide", ("cube",), 1.0, 1.5, {"v0": 2.5})]
    info = fb.build_formula_info(cfg, steps)
    correct = by_kind(info, "correct")["display"]
    assert correct == "a = g·(sinθ − μ·cosθ); v(t) = v_B − μ_B·g·t"
    vals = {r["name"]: r["value"] for r in info["symbol_table"]}
    assert math.isclose(vals["mu_B"], MATS.pair("steel", "concrete").dynamic_friction)
    assert set(info["substituted"]["values"]) == {"g", "mu", "mu_B", "theta"}


# ---------------------------------------------------------------------------------------------
# Templates: display text and sympy form name the same symbols
# ---------------------------------------------------------------------------------------------
def _all_templates() -> list[fb.Template]:
    out = [v for v in vars(fb).values() if isinstance(v, fb.Template)]
    for lib in (fb.COLL_HEAD_ON, fb.COLL_OBLIQUE):
        out += list(lib.values())
    return out


BINDABLE = {"g", "m", "theta", "mu", "k", "r", "v_0", "h", "alpha", "R", "phi_0", "m_1", "m_2", "e", "u_1", "u_2",
            "u_1n", "u_2n", "u_1t", "u_2t", "u", "x_0", "omega_0"}


@pytest.mark.parametrize("template", _all_templates(), ids=lambda t: t.key)
def test_template_display_and_sympy_agree(template):
    placeholders = set()
    for eq in template.equations:
        placeholders |= set(re.findall(r"\{([A-Za-z_0-9]+)\}", eq.display))
    syms = set()
    for eq in fb.parse_system("; ".join(e.sympy for e in template.equations)):
        syms |= {s.name for s in eq.free_symbols}
    assert placeholders <= syms
    if not template.fixed:
        assert syms & BINDABLE == placeholders
    rendered = ", ".join(fb._render_display(e.display) for e in template.equations if e.display)
    for name in syms - {"t", "phi"}:
        assert fb.display_name(name) in rendered


def test_unknown_law_or_variant_is_rejected():
    cfg, _ = CASES["inclined_plane/slide"]

    @dataclass
    class Step:
        law: str
        variant: str
        objects: tuple = ("cube",)
        t_start: float = 0.0
        t_end: float = 1.0
        parameters: dict = field(default_factory=dict)

    with pytest.raises(ValueError):
        fb.build_formula_info(cfg, [Step("levitation", "x")])
    with pytest.raises(ValueError):
        fb.build_formula_info(cfg, [Step("inclined_plane", "hover")])
    with pytest.raises(ValueError):
        fb.build_formula_info(cfg, [])


@settings(max_examples=25, deadline=None)
@given(angle=st.floats(min_value=5, max_value=80),
       ramp_mat=st.sampled_from(["oak", "steel", "concrete", "glass", "painted_wood"]),
       body_mat=st.sampled_from(["steel", "brass", "ceramic", "abs_plastic"]),
       seed=st.integers(min_value=0, max_value=10_000))
def test_slide_law_property(angle, ramp_mat, body_mat, seed):
    cfg = make_config("inclined_plane", [cube("c", body_mat, {"ramp": {"ramp": "ramp", "distance_from_top": 0.2}})],
                      ramp(angle, material=ramp_mat), seed=seed)
    info = fb.build_formula_info(cfg, [LawStep("inclined_plane", "slide", ("c",), 0.0, 1.0, {})])
    th = math.radians(angle)
    mu_k = MATS.pair(body_mat, ramp_mat).dynamic_friction
    assert math.isclose(fb.evaluate_formula(info["correct_sympy"], values(info))["a"],
                        G * (math.sin(th) - mu_k * math.cos(th)), rel_tol=1e-9, abs_tol=1e-9)
    assert list(iter_errors(info, "formula_info.schema.json")) == []
    assert info["correct_letter"] == "ABCD"[int(np.random.default_rng(seed).permutation(4)[0])]


# ---------------------------------------------------------------------------------------------
# Which steps a question covers
# ---------------------------------------------------------------------------------------------
def test_single_law_task_asks_for_its_own_law_only():
    cfg, _ = CASES["perfectly_elastic_collision/head_on"]
    steps = [LawStep("uniform_linear_motion", "roll", ("a",), 0.0, 0.4, {}),
             LawStep("at_rest", "surface", ("b",), 0.0, 0.4, {}),
             LawStep("perfectly_elastic_collision", "head_on", ("a", "b"), 0.4, 0.4,
                     {"u1": [2.0, 0.0, 0.0], "u2": [-0.5, 0.0, 0.0]}),
             LawStep("uniform_linear_motion", "roll", ("a", "b"), 0.4, 2.0, {})]
    info = fb.build_formula_info(cfg, steps)
    assert info["scope"] == "task_law"
    assert [(s["law"], s["variant"]) for s in info["laws"]] == [("perfectly_elastic_collision", "head_on")]
    assert info == INFOS["perfectly_elastic_collision/head_on"] | {"laws": info["laws"]}
    chain, scope = fb.select_steps(COMPOSITION[0], COMPOSITION[1])
    assert scope == "chain" and len(chain) == 2


def test_pre_impact_velocity_changed_since_start_is_not_an_annotation():
    cfg, _ = CASES["inelastic_collision/head_on"]
    step = LawStep("inelastic_collision", "head_on", ("a", "b"), 0.4, 0.4,
                   {"u1": [1.7, 0.0, 0.0], "u2": [-0.5, 0.0, 0.0]})  # body a was braked on the way
    info = fb.build_formula_info(cfg, [step])
    assert "u_1" not in info["substituted"]["values"] and "u_2" in info["substituted"]["values"]
    assert "u_1" in info["substituted"]["display"]


# ---------------------------------------------------------------------------------------------
# Against the analytic solver (when it is present in the checkout)
# ---------------------------------------------------------------------------------------------
def _solver_cases():
    try:
        from orchard_build.config import load_config
        from orchard_build.errors import OrchardError
        from orchard_build.mechanics.solver import solve
    except ImportError:  # pragma: no cover - depends on the checkout
        return []
    out = []
    for path in sorted((ROOT / "scenes").glob("*/*.yaml")):
        try:
            cfg = load_config(path)
            out.append((path.parent.name + "/" + path.stem, cfg, solve(cfg).law_steps()))
        except OrchardError:
            continue
    return out


SOLVED = _solver_cases()


@pytest.mark.skipif(not SOLVED, reason="no solvable scene configs / solver in this checkout")
@pytest.mark.parametrize("name,cfg,steps", SOLVED, ids=[c[0] for c in SOLVED])
def test_solver_law_steps_give_a_valid_question_matching_the_solver(name, cfg, steps):
    info = fb.build_formula_info(cfg, steps)
    assert list(iter_errors(info, "formula_info.schema.json")) == []
    assert len({c["display"] for c in info["candidates"]}) == 4
    used, scope = fb.select_steps(cfg, steps)
    assert info["scope"] == scope
    if scope != "task_law":
        # the chain names each (law, variant) once, in order of first occurrence
        first_seen = list(dict.fromkeys((s.law, s.variant) for s in steps))
        assert [(l["law"], l["variant"]) for l in info["laws"]] == first_seen
        return
    got = fb.evaluate_formula(info["correct_sympy"], values(info, t=0.0, phi=0.0))
    p = used[0].parameters
    law = used[0].law
    if law == "inclined_plane" and "a_signed" in p:
        assert close(got["a"], p["a_signed"])
    elif law == "inclined_plane" and "a" in p and used[0].variant in ("roll", "roll_slip"):
        assert close(got["a"], p["a"])
    elif law in fb.COLLISION_LAWS:
        n = np.asarray(p["n"], float)
        sfx = "" if used[0].variant == "head_on" else "n"
        assert close(got[f"v_1{sfx}"], float(np.dot(p["v1"], n)))
        assert close(got[f"v_2{sfx}"], float(np.dot(p["v2"], n)))
    elif law == "free_fall" or law == "projectile_motion":
        assert close(got["y(t)"], p["h0"])  # t = 0: the stage starts at its own height
