"""Formula bank: the four-way Formulation-Text question of a case (``formula_info.json``).

``build_formula_info(config, steps)`` turns a resolved case config and the chain of law steps the
mechanics solver found (``LawStep``: law, variant, objects, t_start, t_end, parameters) into four
candidate formulas (answer-key construction of the Apple-π appendix, B.4):

* ``correct``    – the law that governs this case in this variant;
* ``confusing``  – a real law that uses the same annotated symbols but does not govern the case
  (e.g. the sliding law for a rolling body, the sticking law for an elastic collision). It is picked
  from an ordered list of alternatives, taking the first one whose value at the case's numbers
  differs from the correct one, so the distractor is never numerically indistinguishable;
* ``unrelated``  – a real law from another mechanics family (spring, pendulum, momentum, centripetal);
* ``fabricated`` – a formula that looks like a law but is not one (wrong power, trig or dimension).

Which steps are asked about (``select_steps``): a single-law task (free fall, inclined plane, a
collision, …) asks for its own law — the first step of the task's law — even when the solver also
reports incidental stages (the approach before an impact, a bounce after a fall). A composition asks
for the whole chain: the correct candidate lists the governing law of every stage in order; each
distractor is the same chain with exactly one stage swapped for that stage's distractor of the same
kind (the stage is drawn with the case's random generator, preferring stages that are not at rest or
in uniform motion).

Letter positions come from ``numpy.random.default_rng(config.seed).permutation(4)``: the same config
always yields the same letters, byte for byte.

Formula notation
----------------
Every formula is stored twice:

``display``  Unicode text as it is printed for the model, e.g. ``y(t) = h + v_0·t − (1/2)·g·t²``.
             Equations of one stage are joined by ``", "``, stages of a chain by ``"; "``.
``sympy``    Machine-readable text: one or more ``Eq(lhs, rhs)`` terms joined by ``"; "`` (a system is
             a flat list of equations, in the same order as in ``display``). Time-dependent
             quantities are undefined functions of ``t`` (``y(t)``); everything else is a plain
             symbol named as in the table below. ``parse_formula`` reads it back: one equation gives
             that ``sympy.Eq``; a system gives ``Eq(Tuple(lhs…), Tuple(rhs…))``; ``parse_system``
             gives the list of equations.

The substituted form (the model's third answer line) replaces every *annotated* symbol — one shown
on the annotated first frame — by the number printed there and keeps every other symbol. Annotated
are: ``g`` always; for each object the quantities in ``ObjectSpec.annotate`` (mass → m,
restitution → e, v0/speed → v_0 (or u_1, u_2 for the objects of a collision) when the stage starts
from the configured initial state or the velocity is still the initial one, friction → μ); θ
whenever the case has a ramp; μ of the contact wherever the infographic labels it (a body on a ramp,
a body moving on a surface, an object annotated with friction): the static coefficient while the
body is held, the kinetic one otherwise (as ``orchard_build.overlay`` prints it). Numbers are printed exactly
as the infographic prints them (``orchard_build.overlay``): two decimals (``g = 9.81``), ``0`` for
zero, angles in whole degrees (``sin(30°)``, written ``30*pi/180`` in the sympy form). Velocities are
substituted with their sign along the formula's axis (``(−2.00)`` for a downward throw); the
infographic's arrow gives that direction.

Symbol table (sympy name → display: meaning)
--------------------------------------------
``g`` → g: gravitational acceleration magnitude (m/s²).
``t`` → t: time since the start of the stage (s); each stage of a chain has its own clock.
``h`` → h: initial height of the centre of mass above the surface below it (m).
``y(t)`` → y(t): height of the centre of mass above that surface.
``x(t)``, ``x_0`` → x(t), x_0: position along the horizontal direction of motion; x_0 = 0 at the
    start of the stage (projectiles: horizontal distance from the launch point).
``v_0`` → v_0: initial velocity of the stage, signed along the stage's positive axis (upward for a
    vertical throw, down the slope on a ramp, toward increasing φ on a track, along the motion on a
    surface); a projectile's v_0 is the launch speed.
``alpha`` → α: launch angle above the horizontal.
``v(t)``, ``v`` → v(t), v: velocity along the motion (on a track ``v`` is the speed at angle φ; in a
    bounce ``v`` is the vertical velocity just after the impact).
``a`` → a: acceleration along the positive axis (down the slope on a ramp).
``theta`` → θ: ramp inclination.  ``mu`` → μ: friction coefficient of the contact (static while the
    body is held at rest, kinetic otherwise).
``m`` → m: mass of the moving body.  ``k`` → k = I/(m r²) about the rolling axis.  ``r`` → r:
    rolling radius of the body.
``f_s`` → f_s: static friction force.  ``F_N`` → F_N: normal force.
``epsilon`` → ε: angular acceleration.  ``omega``/``omega(t)`` → ω, ω(t): angular velocity (positive
    in the sense of forward rolling);  ``omega_0`` → ω_0: its initial value.
``R`` → R: radius of the track's running surface;  ``phi`` → φ: angular position of the contact
    point measured from the track's lowest point;  ``phi_0`` → φ_0: its initial value.
``m_1``, ``m_2`` → masses of the first and second colliding body (order of ``LawStep.objects``).
``u_1``, ``u_2`` → pre-impact velocities along the line of centres n (the impact normal of the step;
    the formulas hold for either orientation of n).
``v_1``, ``v_2`` → post-impact velocities along n.
``u_1n``…``v_2t`` → oblique impacts: components along n (``…n``) and along the common tangent
    (``…t``).
``e`` → e: coefficient of restitution of the contact.
``u`` → u: vertical velocity just before a ground impact (upward positive, so u < 0).
Distractor-only symbols: ``T`` period, ``L`` pendulum length, ``F`` force, ``k_s`` spring stiffness,
``F_c`` centripetal force.

In a chain, initial-condition symbols of stage B, C, … carry the stage letter (v_0 → v_B, h → h_B,
x_0 → x_B, α → α_B, φ_0 → φ_B, ω_0 → ω_B): they are state handed over from the previous stage, not
annotations. A parameter whose value differs from an earlier stage's (a second ramp angle, the
floor's μ after the ramp's μ) gets the stage letter too (θ_B, μ_B).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

import numpy as np
import sympy
from sympy.parsing.sympy_parser import parse_expr

from .mechanics.types import LAW_VARIANTS  # the law vocabulary the solver reports

FORMULA_BANK_VERSION = "1.0.0"
LETTERS = "ABCD"
KINDS = ("correct", "confusing", "unrelated", "fabricated")

COLLISION_LAWS = ("perfectly_elastic_collision", "perfectly_inelastic_collision", "inelastic_collision")

_Z = np.array([0.0, 0.0, 1.0])


# ---------------------------------------------------------------------------------------------
# Symbols
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SymbolInfo:
    name: str  # sympy name
    display: str
    meaning: str
    angle: bool = False  # value in radians, printed in degrees


def _sym(name: str, display: str, meaning: str, angle: bool = False) -> SymbolInfo:
    return SymbolInfo(name, display, meaning, angle)


SYMBOLS: dict[str, SymbolInfo] = {s.name: s for s in (
    _sym("g", "g", "gravitational acceleration magnitude (m/s²)"),
    _sym("t", "t", "time since the start of the stage (s)"),
    _sym("h", "h", "initial height of the centre of mass above the surface below it (m)"),
    _sym("y", "y", "height of the centre of mass above that surface (m)"),
    _sym("x", "x", "position along the horizontal direction of motion (m)"),
    _sym("x_0", "x_0", "initial position along the direction of motion, 0 at the start of the stage (m)"),
    _sym("v_0", "v_0", "initial velocity of the stage along its positive axis (m/s)"),
    _sym("alpha", "α", "launch angle above the horizontal", angle=True),
    _sym("v", "v", "velocity along the motion (m/s)"),
    _sym("a", "a", "acceleration along the positive axis (m/s²)"),
    _sym("theta", "θ", "ramp inclination", angle=True),
    _sym("mu", "μ", "friction coefficient of the contact"),
    _sym("m", "m", "mass of the moving body (kg)"),
    _sym("k", "k", "I/(m r²) about the rolling axis"),
    _sym("r", "r", "rolling radius of the body (m)"),
    _sym("f_s", "f_s", "static friction force (N)"),
    _sym("F_N", "F_N", "normal force (N)"),
    _sym("epsilon", "ε", "angular acceleration (rad/s²)"),
    _sym("omega", "ω", "angular velocity, positive for forward rolling (rad/s)"),
    _sym("omega_0", "ω_0", "initial angular velocity, positive for forward rolling (rad/s)"),
    _sym("R", "R", "radius of the track's running surface (m)"),
    _sym("phi", "φ", "angular position on the track from its lowest point", angle=True),
    _sym("phi_0", "φ_0", "initial angular position on the track", angle=True),
    _sym("m_1", "m_1", "mass of the first colliding body (kg)"),
    _sym("m_2", "m_2", "mass of the second colliding body (kg)"),
    _sym("u_1", "u_1", "pre-impact velocity of body 1 along the line of centres n (m/s)"),
    _sym("u_2", "u_2", "pre-impact velocity of body 2 along the line of centres (m/s)"),
    _sym("v_1", "v_1", "post-impact velocity of body 1 along the line of centres (m/s)"),
    _sym("v_2", "v_2", "post-impact velocity of body 2 along the line of centres (m/s)"),
    _sym("u_1n", "u_1n", "pre-impact normal velocity of body 1 (m/s)"),
    _sym("u_2n", "u_2n", "pre-impact normal velocity of body 2 (m/s)"),
    _sym("u_1t", "u_1t", "pre-impact tangential velocity of body 1 (m/s)"),
    _sym("u_2t", "u_2t", "pre-impact tangential velocity of body 2 (m/s)"),
    _sym("v_1n", "v_1n", "post-impact normal velocity of body 1 (m/s)"),
    _sym("v_2n", "v_2n", "post-impact normal velocity of body 2 (m/s)"),
    _sym("v_1t", "v_1t", "post-impact tangential velocity of body 1 (m/s)"),
    _sym("v_2t", "v_2t", "post-impact tangential velocity of body 2 (m/s)"),
    _sym("e", "e", "coefficient of restitution of the contact"),
    _sym("u", "u", "vertical velocity just before the ground impact, upward positive (m/s)"),
    _sym("T", "T", "period (s)"),
    _sym("L", "L", "pendulum length (m)"),
    _sym("F", "F", "force (N)"),
    _sym("k_s", "k_s", "spring stiffness (N/m)"),
    _sym("F_c", "F_c", "centripetal force (N)"),
)}

# Names written as functions of t in some formulas: left to sympy's auto-symbol so that ``v(t)``
# and a plain ``v`` can live in one system.
FUNCTION_NAMES = frozenset({"x", "y", "v", "omega"})
FREE_VARIABLES = frozenset({"t", "phi"})
# Symbols that describe the state at the start of a stage; later stages get the stage letter.
INITIAL_CONDITION_SYMBOLS = frozenset({"v_0", "h", "x_0", "alpha", "phi_0", "omega_0"})
_LOCALS: dict[str, Any] = {n: sympy.Symbol(n) for n in SYMBOLS if n not in FUNCTION_NAMES}
_LOCALS.update({"Eq": sympy.Eq, "sqrt": sympy.sqrt, "sin": sympy.sin, "cos": sympy.cos,
                "tan": sympy.tan, "pi": sympy.pi})


def renamed(name: str, letter: str) -> str:
    """Stage-letter variant of a symbol name: v_0 → v_B, h → h_B, theta → theta_B, m_1 → m_1B."""
    if name.endswith("_0"):
        return name[:-2] + "_" + letter
    if "_" in name:
        return name + letter
    return name + "_" + letter


def display_name(name: str) -> str:
    """Display text of a (possibly stage-lettered) sympy symbol name."""
    if name in SYMBOLS:
        return SYMBOLS[name].display
    m = re.fullmatch(r"([A-Za-z]+(?:_[0-9a-z]+)?)(?:_)?([A-Z])", name)
    if m:
        base, letter = m.groups()
        if base + "_0" in SYMBOLS:
            return SYMBOLS[base + "_0"].display[:-1] + letter
        if base in SYMBOLS:
            d = SYMBOLS[base].display
            return d + letter if "_" in d else d + "_" + letter
    return name


def _base_info(name: str) -> SymbolInfo | None:
    if name in SYMBOLS:
        return SYMBOLS[name]
    m = re.fullmatch(r"([A-Za-z]+(?:_[0-9a-z]+)?)(?:_)?([A-Z])", name)
    if m:
        base = m.group(1)
        return SYMBOLS.get(base + "_0") or SYMBOLS.get(base)
    return None


def is_angle(name: str) -> bool:
    info = _base_info(name)
    return bool(info and info.angle)


# ---------------------------------------------------------------------------------------------
# Parsing and evaluation helpers
# ---------------------------------------------------------------------------------------------
def _split_statements(s: str) -> list[str]:
    parts = [p.strip() for p in s.split(";")]
    if not parts or any(not p for p in parts):
        raise ValueError(f"empty equation in formula {s!r}")
    return parts


def parse_system(s: str) -> list[sympy.Equality]:
    """Parse a stored sympy form (``Eq(lhs, rhs)`` terms joined by ``; ``) into its equations."""
    out = []
    for part in _split_statements(s):
        expr = parse_expr(part, local_dict=dict(_LOCALS))
        if not isinstance(expr, sympy.Equality):
            raise ValueError(f"not an equation: {part!r}")
        out.append(expr)
    return out


def parse_formula(s: str) -> sympy.Equality:
    """Parse a stored sympy form into one ``sympy.Eq``.

    A single equation is returned as is; a system ``Eq(a, …); Eq(b, …)`` is returned as
    ``Eq(Tuple(a, b), Tuple(…, …))`` (unevaluated), so ``.lhs``/``.rhs`` line up component-wise.
    """
    eqs = parse_system(s)
    if len(eqs) == 1:
        return eqs[0]
    return sympy.Eq(sympy.Tuple(*(e.lhs for e in eqs)), sympy.Tuple(*(e.rhs for e in eqs)), evaluate=False)


def _subs_map(values: Mapping[str, float]) -> dict[Any, Any]:
    return {sympy.Symbol(k): sympy.Float(v) for k, v in values.items() if v is not None}


def evaluate_formula(s: str, values: Mapping[str, float]) -> dict[str, float]:
    """Value of every equation's right-hand side, keyed by the left-hand side's text.

    ``values`` maps sympy symbol names to numbers (angles in radians, ``t``/``phi`` included when the
    formula uses them). Raises ValueError when a right-hand side does not evaluate to a real number.
    """
    subs = _subs_map(values)
    out: dict[str, float] = {}
    for eq in parse_system(s):
        val = sympy.N(eq.rhs.subs(subs))
        if not val.is_number or val.has(sympy.I) or not val.is_real:
            raise ValueError(f"{eq.rhs} does not evaluate to a real number with the given values")
        out[str(eq.lhs)] = float(val)
    return out


def formulas_equivalent(a: str, b: str) -> bool:
    """True when two sympy forms state the same equations (same left sides, equal right sides)."""
    ea, eb = parse_system(a), parse_system(b)
    if len(ea) != len(eb):
        return False
    da = {str(e.lhs): e.rhs for e in ea}
    db = {str(e.lhs): e.rhs for e in eb}
    if set(da) != set(db):
        return False
    return all(sympy.simplify(da[k] - db[k]) == 0 for k in da)


def format_value(x: float) -> str:
    """Number as printed on the infographic (orchard_build.overlay): two decimals, "0" for zero."""
    s = f"{float(x):.2f}"
    return "0" if float(s) == 0 else s


# ---------------------------------------------------------------------------------------------
# Formula templates
# ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Equation:
    """One equation. ``display`` marks substitutable symbols as ``{name}``; ``sympy`` is plain sympy."""
    display: str
    sympy: str


@dataclass(frozen=True)
class Template:
    key: str
    law: str | None  # law of the vocabulary, a named law outside it (distractors), None if fabricated
    variant: str | None
    equations: tuple[Equation, ...]
    note: str
    fixed: bool = False  # symbols keep their meaning from a foreign law: never renamed

    def renamed(self, mapping: Mapping[str, str]) -> Template:
        if self.fixed or not mapping:
            return self
        eqs = tuple(Equation(_rename_display(e.display, mapping), _rename_sympy(e.sympy, mapping))
                    for e in self.equations)
        return replace(self, equations=eqs)


_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_IDENT = re.compile(r"(?<![A-Za-z0-9_.])([A-Za-z_][A-Za-z0-9_]*)(?![A-Za-z0-9_])")


def _rename_display(text: str, mapping: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: "{" + mapping.get(m.group(1), m.group(1)) + "}", text)


def _rename_sympy(text: str, mapping: Mapping[str, str]) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1)
        after = text[m.end():m.end() + 1]
        if after == "(":  # a function call, never a symbol
            return name
        return mapping.get(name, name)
    return _IDENT.sub(sub, text)


def _T(key: str, law: str | None, variant: str | None, note: str, *pairs: tuple[str, str],
       fixed: bool = False) -> Template:
    return Template(key, law, variant, tuple(Equation(d, s) for d, s in pairs), note, fixed)


# -- free fall ---------------------------------------------------------------------------------
FF_DROP = _T("free_fall.drop", "free_fall", "drop", "release from rest: y falls with (1/2)·g·t²",
             ("y(t) = {h} − (1/2)·{g}·t²", "Eq(y(t), h - g*t**2/2)"))
FF_THROWN = _T("free_fall.thrown", "free_fall", "thrown", "vertical throw with initial velocity v_0",
               ("y(t) = {h} + {v_0}·t − (1/2)·{g}·t²", "Eq(y(t), h + v_0*t - g*t**2/2)"))
FF_NO_GRAVITY = _T("uniform_linear_motion.vertical", "uniform_linear_motion", None,
                   "constant-velocity motion: ignores gravity",
                   ("y(t) = {h} + {v_0}·t", "Eq(y(t), h + v_0*t)"))
FF_DROP_ROLLING = _T("inclined_plane.roll_vertical", "inclined_plane", "roll",
                     "rolling-constraint acceleration g/(1 + k) (a yo-yo unwinding): nothing constrains a free body",
                     ("y(t) = {h} − (1/2)·{g}·t²/(1 + {k})", "Eq(y(t), h - g*t**2/(2*(1 + k)))"))
FF_THROWN_ROLLING = _T("inclined_plane.roll_vertical_thrown", "inclined_plane", "roll",
                       "rolling-constraint acceleration g/(1 + k) (a yo-yo unwinding): nothing constrains a free body",
                       ("y(t) = {h} + {v_0}·t − (1/2)·{g}·t²/(1 + {k})", "Eq(y(t), h + v_0*t - g*t**2/(2*(1 + k)))"))
FF_DROP_FAB = _T("fabricated.free_fall.drop", None, None, "g squared and t linear: not a law",
                 ("y(t) = {h} − (1/2)·{g}²·t", "Eq(y(t), h - g**2*t/2)"))
FF_THROWN_FAB = _T("fabricated.free_fall.thrown", None, None, "powers of t swapped: not a law",
                   ("y(t) = {h} + {v_0}·t² − (1/2)·{g}·t", "Eq(y(t), h + v_0*t**2 - g*t/2)"))

# -- projectile ----------------------------------------------------------------------------------
PROJ = _T("projectile_motion.launch", "projectile_motion", "launch", "launch at angle α with speed v_0",
          ("x(t) = {v_0}·cos{alpha}·t", "Eq(x(t), v_0*cos(alpha)*t)"),
          ("y(t) = {h} + {v_0}·sin{alpha}·t − (1/2)·{g}·t²", "Eq(y(t), h + v_0*sin(alpha)*t - g*t**2/2)"))
PROJ_HORIZONTAL = _T("projectile_motion.horizontal", "projectile_motion", None,
                     "horizontal-launch trajectory: holds only for α = 0",
                     ("x(t) = {v_0}·t", "Eq(x(t), v_0*t)"),
                     ("y(t) = {h} − (1/2)·{g}·t²", "Eq(y(t), h - g*t**2/2)"))
PROJ_NO_GRAVITY = _T("uniform_linear_motion.launch", "uniform_linear_motion", None,
                     "straight-line motion at the launch velocity: ignores gravity",
                     ("x(t) = {v_0}·cos{alpha}·t", "Eq(x(t), v_0*cos(alpha)*t)"),
                     ("y(t) = {h} + {v_0}·sin{alpha}·t", "Eq(y(t), h + v_0*sin(alpha)*t)"))
PROJ_FAB = _T("fabricated.projectile_motion", None, None, "t squared in x, tan and linear g·t in y: not a law",
              ("x(t) = {v_0}·cos{alpha}·t²", "Eq(x(t), v_0*cos(alpha)*t**2)"),
              ("y(t) = {h} + {v_0}·tan{alpha}·t − (1/2)·{g}·t", "Eq(y(t), h + v_0*tan(alpha)*t - g*t/2)"))

# -- inclined plane ----------------------------------------------------------------------------
INCL_STATIC = _T("inclined_plane.static", "inclined_plane", "static",
                 "held by static friction: friction balances the slope component of the weight",
                 ("f_s = {m}·{g}·sin{theta}", "Eq(f_s, m*g*sin(theta))"),
                 ("F_N = {m}·{g}·cos{theta}", "Eq(F_N, m*g*cos(theta))"))
INCL_LIMIT = _T("inclined_plane.coulomb", "inclined_plane", "slide",
                "Coulomb friction μ·F_N of a sliding body: not the friction of a body at rest",
                ("f_s = {mu}·{m}·{g}·cos{theta}", "Eq(f_s, mu*m*g*cos(theta))"),
                ("F_N = {m}·{g}·cos{theta}", "Eq(F_N, m*g*cos(theta))"))
FLAT_REST_FORCES = _T("at_rest.flat_forces", "at_rest", "surface", "rest on level ground: no friction, F_N = m·g",
                      ("f_s = 0", "Eq(f_s, 0)"), ("F_N = {m}·{g}", "Eq(F_N, m*g)"))
INCL_STATIC_FAB = _T("fabricated.inclined_plane.static", None, None, "sin and tan misplaced: not a law",
                     ("f_s = {mu}·{m}·{g}·sin{theta}", "Eq(f_s, mu*m*g*sin(theta))"),
                     ("F_N = {m}·{g}·tan{theta}", "Eq(F_N, m*g*tan(theta))"))
INCL_SLIDE_DOWN = _T("inclined_plane.slide", "inclined_plane", "slide",
                     "sliding down: kinetic friction opposes the motion",
                     ("a = {g}·(sin{theta} − {mu}·cos{theta})", "Eq(a, g*(sin(theta) - mu*cos(theta)))"))
INCL_SLIDE_UP = _T("inclined_plane.slide_uphill", "inclined_plane", "slide",
                   "sliding up (a measured down the slope): friction and gravity both point down",
                   ("a = {g}·(sin{theta} + {mu}·cos{theta})", "Eq(a, g*(sin(theta) + mu*cos(theta)))"))
INCL_ROLL = _T("inclined_plane.roll", "inclined_plane", "roll", "rolling without slipping",
               ("a = {g}·sin{theta}/(1 + {k})", "Eq(a, g*sin(theta)/(1 + k))"))
INCL_FRICTIONLESS = _T("inclined_plane.frictionless", "inclined_plane", "slide", "frictionless slide",
                       ("a = {g}·sin{theta}", "Eq(a, g*sin(theta))"))
FREE_FALL_ACCEL = _T("free_fall.acceleration", "free_fall", "drop", "free-fall acceleration: ignores the ramp",
                     ("a = {g}", "Eq(a, g)"))
INCL_SLIDE_DOWN_FAB = _T("fabricated.inclined_plane.slide", None, None, "sin squared: not a law",
                         ("a = {g}·(sin²{theta} − {mu}·cos{theta})", "Eq(a, g*(sin(theta)**2 - mu*cos(theta)))"))
INCL_SLIDE_UP_FAB = _T("fabricated.inclined_plane.slide_uphill", None, None, "sin squared: not a law",
                       ("a = {g}·(sin²{theta} + {mu}·cos{theta})", "Eq(a, g*(sin(theta)**2 + mu*cos(theta)))"))
INCL_ROLL_FAB = _T("fabricated.inclined_plane.roll", None, None, "(1 + k) squared: not a law",
                   ("a = {g}·sin{theta}/(1 + {k})²", "Eq(a, g*sin(theta)/(1 + k)**2)"))
INCL_ROLL_SLIP = _T("inclined_plane.roll_slip", "inclined_plane", "roll_slip",
                    "rolling with slip: kinetic friction drives the spin-up",
                    ("a = {g}·(sin{theta} − {mu}·cos{theta})", "Eq(a, g*(sin(theta) - mu*cos(theta)))"),
                    ("ε = {mu}·{g}·cos{theta}/({k}·{r})", "Eq(epsilon, mu*g*cos(theta)/(k*r))"))
INCL_ROLL_PURE = _T("inclined_plane.roll_with_spin", "inclined_plane", "roll",
                    "rolling without slipping: needs more friction than this contact has",
                    ("a = {g}·sin{theta}/(1 + {k})", "Eq(a, g*sin(theta)/(1 + k))"),
                    ("ε = {g}·sin{theta}/((1 + {k})·{r})", "Eq(epsilon, g*sin(theta)/((1 + k)*r))"))
INCL_ROLL_SLIP_FAB = _T("fabricated.inclined_plane.roll_slip", None, None, "r in the numerator, sin for cos: not a law",
                        ("a = {g}·(sin{theta} − {mu}·cos{theta})/(1 + {k})",
                         "Eq(a, g*(sin(theta) - mu*cos(theta))/(1 + k))"),
                        ("ε = {mu}·{g}·{r}·sin{theta}/{k}", "Eq(epsilon, mu*g*r*sin(theta)/k)"))

# -- circular track ----------------------------------------------------------------------------
CIRC_ROLL = _T("circular_motion.roll", "circular_motion", "roll",
               "energy along the track for a body rolling without slipping (centre on radius R − r)",
               ("v² = {v_0}² + 2·{g}·({R} − {r})·(cosφ − cos{phi_0})/(1 + {k})",
                "Eq(v**2, v_0**2 + 2*g*(R - r)*(cos(phi) - cos(phi_0))/(1 + k))"))
CIRC_SLIDE = _T("circular_motion.slide", "circular_motion", "slide",
                "energy along a frictionless track for a sliding body",
                ("v² = {v_0}² + 2·{g}·({R} − {r})·(cosφ − cos{phi_0})",
                 "Eq(v**2, v_0**2 + 2*g*(R - r)*(cos(phi) - cos(phi_0)))"))
CIRC_TOP = _T("circular_motion.loop_top", "circular_motion", None,
              "minimum speed at the top of a loop (m·g = m·v²/(R − r)): a condition, not the motion",
              ("v² = {g}·({R} − {r})", "Eq(v**2, g*(R - r))"))
CIRC_ROLL_FAB = _T("fabricated.circular_motion.roll", None, None, "v_0 not squared, sin for cos, (1 + k) multiplies",
                   ("v² = {v_0} + 2·{g}·({R} − {r})·(sinφ − sin{phi_0})·(1 + {k})",
                    "Eq(v**2, v_0 + 2*g*(R - r)*(sin(phi) - sin(phi_0))*(1 + k))"))
CIRC_SLIDE_FAB = _T("fabricated.circular_motion.slide", None, None, "v_0 not squared, sin for cos",
                    ("v² = {v_0} + 2·{g}·({R} − {r})·(sinφ − sin{phi_0})",
                     "Eq(v**2, v_0 + 2*g*(R - r)*(sin(phi) - sin(phi_0)))"))


# -- collisions ----------------------------------------------------------------------------------
def _collision_templates(sfx: str) -> dict[str, Template]:
    """Collision laws on the components along n ('' for head-on, 'n' for oblique)."""
    u1, u2, v1, v2 = f"u_1{sfx}", f"u_2{sfx}", f"v_1{sfx}", f"v_2{sfx}"
    mom = f"{{m_1}}·{{{u1}}} + {{m_2}}·{{{u2}}}"
    mom_s = f"m_1*{u1} + m_2*{u2}"
    variant = "oblique" if sfx else "head_on"
    where = " along n" if sfx else ""
    return {
        "elastic": _T(f"perfectly_elastic_collision.{variant}", "perfectly_elastic_collision", variant,
                      f"momentum and kinetic energy conserved (e = 1){where}",
                      (f"{v1} = (({{m_1}} − {{m_2}})·{{{u1}}} + 2·{{m_2}}·{{{u2}}})/({{m_1}} + {{m_2}})",
                       f"Eq({v1}, ((m_1 - m_2)*{u1} + 2*m_2*{u2})/(m_1 + m_2))"),
                      (f"{v2} = (({{m_2}} − {{m_1}})·{{{u2}}} + 2·{{m_1}}·{{{u1}}})/({{m_1}} + {{m_2}})",
                       f"Eq({v2}, ((m_2 - m_1)*{u2} + 2*m_1*{u1})/(m_1 + m_2))")),
        "stick": _T(f"perfectly_inelastic_collision.{variant}", "perfectly_inelastic_collision", variant,
                    f"momentum conserved, bodies share one velocity (e = 0){where}",
                    (f"{v1} = {v2} = ({mom})/({{m_1}} + {{m_2}})", f"Eq({v1}, ({mom_s})/(m_1 + m_2))"),
                    ("", f"Eq({v2}, ({mom_s})/(m_1 + m_2))")),
        "general": _T(f"inelastic_collision.{variant}", "inelastic_collision", variant,
                      f"momentum conserved, relative velocity reversed and scaled by e{where}",
                      (f"{v1} = ({mom} − {{m_2}}·{{e}}·({{{u1}}} − {{{u2}}}))/({{m_1}} + {{m_2}})",
                       f"Eq({v1}, ({mom_s} - m_2*e*({u1} - {u2}))/(m_1 + m_2))"),
                      (f"{v2} = ({mom} + {{m_1}}·{{e}}·({{{u1}}} − {{{u2}}}))/({{m_1}} + {{m_2}})",
                       f"Eq({v2}, ({mom_s} + m_1*e*({u1} - {u2}))/(m_1 + m_2))")),
        "elastic_fab": _T(f"fabricated.perfectly_elastic_collision.{variant}", None, None,
                          "divides by m_1·m_2 and crosses the velocities: not a law",
                          (f"{v1} = ({{m_1}}·{{{u2}}} + {{m_2}}·{{{u1}}})/({{m_1}}·{{m_2}})",
                           f"Eq({v1}, (m_1*{u2} + m_2*{u1})/(m_1*m_2))"),
                          (f"{v2} = ({{m_1}}·{{{u1}}} − {{m_2}}·{{{u2}}})/({{m_1}}·{{m_2}})",
                           f"Eq({v2}, (m_1*{u1} - m_2*{u2})/(m_1*m_2))")),
        "stick_fab": _T(f"fabricated.perfectly_inelastic_collision.{variant}", None, None,
                        "squares the velocities: not a law",
                        (f"{v1} = {v2} = ({{m_1}}·{{{u1}}}² + {{m_2}}·{{{u2}}}²)/({{m_1}} + {{m_2}})",
                         f"Eq({v1}, (m_1*{u1}**2 + m_2*{u2}**2)/(m_1 + m_2))"),
                        ("", f"Eq({v2}, (m_1*{u1}**2 + m_2*{u2}**2)/(m_1 + m_2))")),
        "general_fab": _T(f"fabricated.inelastic_collision.{variant}", None, None,
                          "divides by e and squares it: not a law",
                          (f"{v1} = ({mom})/({{e}}·({{m_1}} + {{m_2}}))", f"Eq({v1}, ({mom_s})/(e*(m_1 + m_2)))"),
                          (f"{v2} = {{e}}²·({{m_1}}·{{{u1}}} − {{m_2}}·{{{u2}}})/({{m_1}} + {{m_2}})",
                           f"Eq({v2}, e**2*(m_1*{u1} - m_2*{u2})/(m_1 + m_2))")),
    }


COLL_HEAD_ON = _collision_templates("")
COLL_OBLIQUE = _collision_templates("n")
TANGENT_KEPT = (Equation("v_1t = {u_1t}", "Eq(v_1t, u_1t)"), Equation("v_2t = {u_2t}", "Eq(v_2t, u_2t)"))
TANGENT_MERGED = (Equation("v_1t = v_2t = ({m_1}·{u_1t} + {m_2}·{u_2t})/({m_1} + {m_2})",
                           "Eq(v_1t, (m_1*u_1t + m_2*u_2t)/(m_1 + m_2))"),
                  Equation("", "Eq(v_2t, (m_1*u_1t + m_2*u_2t)/(m_1 + m_2))"))

# -- at rest -------------------------------------------------------------------------------------
REST_FLAT = _T("at_rest.surface", "at_rest", "surface", "no net force: F_N balances the weight, no acceleration",
               ("F_N = {m}·{g}", "Eq(F_N, m*g)"), ("a = 0", "Eq(a, 0)"))
REST_FLAT_SLIDING = _T("surface_friction.deceleration", "surface_friction", "slide",
                       "deceleration of a body sliding on the floor: this body does not slide",
                       ("F_N = {m}·{g}", "Eq(F_N, m*g)"), ("a = −{mu}·{g}", "Eq(a, -mu*g)"))
REST_FLAT_FALLING = _T("free_fall.unsupported", "free_fall", "drop", "unsupported body: this body is supported",
                       ("F_N = 0", "Eq(F_N, 0)"), ("a = −{g}", "Eq(a, -g)"))
REST_FLAT_FAB = _T("fabricated.at_rest.surface", None, None, "g squared, g/m: not a law",
                   ("F_N = {m}·{g}²", "Eq(F_N, m*g**2)"), ("a = {g}/{m}", "Eq(a, g/m)"))
REST_RAMP = replace(INCL_STATIC, key="at_rest.ramp", law="at_rest", variant="ramp")

# -- uniform linear motion -------------------------------------------------------------------
UNI_SLIDE = _T("uniform_linear_motion.slide", "uniform_linear_motion", "slide", "no net force: constant velocity",
               ("x(t) = {x_0} + {v_0}·t", "Eq(x(t), x_0 + v_0*t)"))
UNI_WITH_FRICTION = _T("surface_friction.position", "surface_friction", "slide",
                       "position of a body braked by kinetic friction",
                       ("x(t) = {x_0} + {v_0}·t − (1/2)·{mu}·{g}·t²", "Eq(x(t), x_0 + v_0*t - mu*g*t**2/2)"))
UNI_WITH_GRAVITY = _T("free_fall.thrown_horizontal", "free_fall", "thrown",
                      "vertical-throw law: gravity does not act along this motion",
                      ("x(t) = {x_0} + {v_0}·t − (1/2)·{g}·t²", "Eq(x(t), x_0 + v_0*t - g*t**2/2)"))
UNI_SLIDE_FAB = _T("fabricated.uniform_linear_motion.slide", None, None, "v_0 squared: not a law",
                   ("x(t) = {x_0} + {v_0}²·t", "Eq(x(t), x_0 + v_0**2*t)"))
UNI_ROLL = _T("uniform_linear_motion.roll", "uniform_linear_motion", "roll",
              "no net force: constant velocity, rolling constraint ω = v_0/r",
              ("x(t) = {x_0} + {v_0}·t", "Eq(x(t), x_0 + v_0*t)"), ("ω = {v_0}/{r}", "Eq(omega, v_0/r)"))
UNI_ROLL_NO_SPIN = _T("uniform_linear_motion.slide_no_spin", "uniform_linear_motion", "slide",
                      "frictionless slide without spin: this body rolls",
                      ("x(t) = {x_0} + {v_0}·t", "Eq(x(t), x_0 + v_0*t)"), ("ω = 0", "Eq(omega, 0)"))
UNI_ROLL_BRAKED = _T("surface_friction.position_rolling", "surface_friction", "slide",
                     "kinetic-friction braking: a rolling body is not braked by sliding friction",
                     ("x(t) = {x_0} + {v_0}·t − (1/2)·{mu}·{g}·t²", "Eq(x(t), x_0 + v_0*t - mu*g*t**2/2)"),
                     ("ω = {v_0}/{r}", "Eq(omega, v_0/r)"))
UNI_ROLL_FAB = _T("fabricated.uniform_linear_motion.roll", None, None, "r multiplies instead of divides",
                  ("x(t) = {x_0} + {v_0}·{r}·t", "Eq(x(t), x_0 + v_0*r*t)"), ("ω = {v_0}·{r}", "Eq(omega, v_0*r)"))

# -- bounce --------------------------------------------------------------------------------------
BOUNCE_ELASTIC = _T("bounce.elastic", "bounce", "elastic", "elastic ground impact: vertical velocity reversed",
                    ("v = −{u}", "Eq(v, -u)"))
BOUNCE_STICK = _T("bounce.stick", "perfectly_inelastic_collision", None, "perfectly inelastic impact (e = 0)",
                  ("v = 0", "Eq(v, 0)"))
BOUNCE_INELASTIC = _T("bounce.inelastic", "bounce", "inelastic", "ground impact with restitution e",
                      ("v = −{e}·{u}", "Eq(v, -e*u)"))
BOUNCE_ELASTIC_FAB = _T("fabricated.bounce.elastic", None, None, "multiplies by g: not a law",
                        ("v = −{g}·{u}", "Eq(v, -g*u)"))
BOUNCE_INELASTIC_FAB = _T("fabricated.bounce.inelastic", None, None, "e squared on a velocity: not a law",
                          ("v = −{e}²·{u}", "Eq(v, -e**2*u)"))

# -- surface friction ----------------------------------------------------------------------------
SF_SLIDE = _T("surface_friction.slide", "surface_friction", "slide", "kinetic friction decelerates at μ·g",
              ("v(t) = {v_0} − {mu}·{g}·t", "Eq(v(t), v_0 - mu*g*t)"))
SF_VERTICAL = _T("free_fall.thrown_velocity", "free_fall", "thrown", "vertical-throw velocity: gravity does not brake this motion",
                 ("v(t) = {v_0} − {g}·t", "Eq(v(t), v_0 - g*t)"))
SF_UNIFORM = _T("uniform_linear_motion.velocity", "uniform_linear_motion", "slide", "constant velocity: ignores friction",
                ("v(t) = {v_0}", "Eq(v(t), v_0)"))
SF_SLIDE_FAB = _T("fabricated.surface_friction.slide", None, None, "t squared in a velocity: not a law",
                  ("v(t) = {v_0} − {mu}·{g}·t²", "Eq(v(t), v_0 - mu*g*t**2)"))
SF_ROLL_SLIP = _T("surface_friction.roll_slip", "surface_friction", "roll_slip",
                  "skidding: friction slows the centre and spins the body up",
                  ("v(t) = {v_0} − {mu}·{g}·t", "Eq(v(t), v_0 - mu*g*t)"),
                  ("ω(t) = {omega_0} + {mu}·{g}·t/({k}·{r})", "Eq(omega(t), omega_0 + mu*g*t/(k*r))"))
SF_ROLL_SLIP_OVERSPIN = _T("surface_friction.roll_slip_overspin", "surface_friction", "roll_slip",
                           "overspinning: friction speeds the centre up and slows the spin",
                           ("v(t) = {v_0} + {mu}·{g}·t", "Eq(v(t), v_0 + mu*g*t)"),
                           ("ω(t) = {omega_0} − {mu}·{g}·t/({k}·{r})", "Eq(omega(t), omega_0 - mu*g*t/(k*r))"))
SF_RS_ROLLING = _T("uniform_linear_motion.rolling", "uniform_linear_motion", "roll",
                   "rolling without slipping at constant speed: this body slips",
                   ("v(t) = {v_0}", "Eq(v(t), v_0)"), ("ω(t) = {v_0}/{r}", "Eq(omega(t), v_0/r)"))
SF_RS_NO_TORQUE = _T("surface_friction.slide_no_spin", "surface_friction", "slide",
                     "sliding deceleration with a constant spin: ignores the friction torque",
                     ("v(t) = {v_0} − {mu}·{g}·t", "Eq(v(t), v_0 - mu*g*t)"), ("ω(t) = {omega_0}", "Eq(omega(t), omega_0)"))
SF_ROLL_SLIP_FAB = _T("fabricated.surface_friction.roll_slip", None, None, "k and r misplaced: not a law",
                      ("v(t) = {v_0} − {mu}·{g}·t/{k}", "Eq(v(t), v_0 - mu*g*t/k)"),
                      ("ω(t) = {omega_0} + {mu}·{g}·{r}·t", "Eq(omega(t), omega_0 + mu*g*r*t)"))

# -- unrelated laws (other mechanics families) -------------------------------------------------
U_MOMENTUM = _T("unrelated.momentum", "linear_momentum_conservation", None, "two-body momentum balance",
                ("m_1·u_1 + m_2·u_2 = m_1·v_1 + m_2·v_2", "Eq(m_1*u_1 + m_2*u_2, m_1*v_1 + m_2*v_2)"), fixed=True)
U_HOOKE = _T("unrelated.hooke", "hooke_spring_force", None, "spring force", ("F = −k_s·x", "Eq(F, -k_s*x)"), fixed=True)
U_PENDULUM = _T("unrelated.pendulum", "simple_pendulum_period", None, "small-angle pendulum period",
                ("T = 2π·√(L/g)", "Eq(T, 2*pi*sqrt(L/g))"), fixed=True)
U_CENTRIPETAL = _T("unrelated.centripetal", "centripetal_force", None, "centripetal force on a circular path",
                   ("F_c = m·v²/R", "Eq(F_c, m*v**2/R)"), fixed=True)
UNRELATED_PREFERENCE: dict[str, tuple[Template, ...]] = {
    "free_fall": (U_MOMENTUM, U_HOOKE),
    "projectile_motion": (U_MOMENTUM, U_HOOKE),
    "inclined_plane": (U_HOOKE, U_MOMENTUM),
    "circular_motion": (U_MOMENTUM, U_HOOKE),
    "perfectly_elastic_collision": (U_PENDULUM, U_HOOKE),
    "perfectly_inelastic_collision": (U_PENDULUM, U_HOOKE),
    "inelastic_collision": (U_PENDULUM, U_HOOKE),
    "at_rest": (U_HOOKE, U_MOMENTUM),
    "uniform_linear_motion": (U_PENDULUM, U_MOMENTUM),
    "bounce": (U_PENDULUM, U_HOOKE),
    "surface_friction": (U_HOOKE, U_MOMENTUM),
}
# A chain that contains one of these laws must not use the unrelated law as "unrelated".
_UNRELATED_FAMILY_CONFLICT = {
    "unrelated.momentum": set(COLLISION_LAWS) | {"bounce"},
    "unrelated.centripetal": {"circular_motion"},
    "unrelated.hooke": set(),
    "unrelated.pendulum": set(),
}


# ---------------------------------------------------------------------------------------------
# Case values
# ---------------------------------------------------------------------------------------------
@dataclass
class Binding:
    value: float | None
    annotated: bool
    source: str


@dataclass
class _StageCtx:
    index: int
    letter: str
    law: str
    variant: str
    objects: tuple[str, ...]
    t_start: float
    t_end: float
    bindings: dict[str, Binding] = field(default_factory=dict)
    flags: dict[str, Any] = field(default_factory=dict)
    free: dict[str, float] = field(default_factory=dict)  # evaluation point of t, φ
    rename: dict[str, str] = field(default_factory=dict)
    correct: Template | None = None
    confusing: Template | None = None
    confusing_differs: bool = False
    unrelated: Template | None = None
    fabricated: Template | None = None

    def values(self) -> dict[str, float]:
        out = {n: b.value for n, b in self.bindings.items() if b.value is not None}
        out.update(self.free)
        return out


def _vec(x: Any) -> np.ndarray | None:
    if x is None:
        return None
    a = np.asarray(x, dtype=float).ravel()
    return a if a.size in (2, 3) else None


def _scalar(x: Any) -> float | None:
    if x is None:
        return None
    if isinstance(x, (int, float, np.floating, np.integer)) and not isinstance(x, bool):
        return float(x)
    return None


def _unit(v: np.ndarray) -> np.ndarray | None:
    n = float(np.linalg.norm(v))
    return v / n if n > 1e-12 else None


def _pad3(v: np.ndarray) -> np.ndarray:
    return np.array([v[0], v[1], 0.0]) if v.size == 2 else v


class _Binder:
    """Collects the value, annotation status and provenance of every symbol a stage may use."""

    def __init__(self, config: Any, step: Any, index: int):
        self.c, self.step, self.index = config, step, index
        self.p: dict[str, Any] = dict(getattr(step, "parameters", None) or {})
        ids = [o.id for o in config.objects]
        self.objs = [o for o in (getattr(step, "objects", ()) or ()) if o in ids]
        if not self.objs:
            self.objs = ids[:1]
        self.obj = config.obj(self.objs[0])
        # the step starts from the configured initial state: config values stand in for missing parameters
        self.at_start = float(getattr(step, "t_start", 0.0) or 0.0) <= 1e-9
        self.b: dict[str, Binding] = {}

    # -- helpers --
    def put(self, name: str, value: float | None, annotated: bool, source: str) -> None:
        self.b[name] = Binding(None if value is None else float(value), bool(annotated), source)

    def param(self, *keys: str) -> tuple[Any, str] | tuple[None, None]:
        for k in keys:
            if k in self.p and self.p[k] is not None:
                return self.p[k], f"step.parameters.{k}"
        return None, None

    def mass(self, obj) -> tuple[float, str]:
        pm = self.p.get("m")
        if isinstance(pm, Mapping) and obj.id in pm:
            return float(pm[obj.id]), f"step.parameters.m[{obj.id}]"
        if _scalar(pm) is not None and len(self.objs) == 1:
            return float(pm), "step.parameters.m"
        return float(obj.mass), f"objects[{obj.id}].mass (density × volume)"

    def ramp(self):
        if self.obj.support and any(r.id == self.obj.support for r in self.c.ramps):
            return self.c.ramp(self.obj.support)
        return self.c.ramps[0] if self.c.ramps else None

    def track(self):
        if self.obj.support and any(t.id == self.obj.support for t in self.c.tracks):
            return self.c.track(self.obj.support)
        return self.c.tracks[0] if self.c.tracks else None

    def surface_material(self) -> tuple[str, str]:
        law = self.step.law
        if law in ("inclined_plane",) or (law == "at_rest" and self.step.variant == "ramp"):
            r = self.ramp()
            if r is not None:
                return r.material, f"ramp {r.id}"
        if law == "circular_motion":
            t = self.track()
            if t is not None:
                return t.material, f"track {t.id}"
        if self.at_start and self.obj.support and any(p.id == self.obj.support for p in self.c.platforms):
            return self.c.platform(self.obj.support).material, f"platform {self.obj.support}"
        return self.c.ground_material, "ground"

    def annotates(self, obj, *what: str) -> bool:
        return any(w in obj.annotate for w in what)

    def has_ramp(self) -> bool:
        return bool(self.c.ramps)

    # -- common symbols --
    def g(self) -> None:
        v, src = self.param("g")
        self.put("g", v if v is not None else self.c.g, True, src or "environment.g")

    def m(self) -> None:
        val, src = self.mass(self.obj)
        self.put("m", val, self.annotates(self.obj, "mass"), src)

    def theta(self) -> None:
        v, src = self.param("theta")
        r = self.ramp()
        if v is None and r is not None:
            v, src = r.angle, f"supports.ramps[{r.id}].angle_deg"
        if v is not None:
            self.put("theta", v, self.has_ramp(), src)

    def mu(self, static: bool, labelled: bool) -> None:
        keys = ("mu_s", "mu") if static else ("mu_k", "mu")
        v, src = self.param(*keys)
        if v is None:
            mat, where = self.surface_material()
            pair = self.c.materials.pair(self.obj.material, mat)
            v = pair.static_friction if static else pair.dynamic_friction
            src = f"pair({self.obj.material}, {mat} [{where}]).{'static' if static else 'dynamic'}_friction"
        self.put("mu", v, labelled or self.annotates(self.obj, "friction"), src)

    def rolling(self) -> None:
        prim = self.obj.primitive
        rolls = prim.rolls(self.obj.rest_pose)
        k, ksrc = self.param("k")
        if _scalar(k) is not None and k <= 0.0:  # the solver's marker for "not rolling"
            k = None
        if k is None and rolls:
            k, ksrc = prim.rolling_inertia_ratio(), f"objects[{self.obj.id}] shape {prim.shape}: I/(m r²)"
        if k is not None:
            self.put("k", k, False, ksrc)
        r, rsrc = self.param("r")
        if r is None and rolls:
            r, rsrc = prim.rolling_radius(), f"objects[{self.obj.id}].size.radius"
        if r is not None:
            self.put("r", r, False, rsrc)

    def v0_annotated(self, obj=None, velocity: Any = None) -> bool:
        """The infographic's v0 label is this stage's initial velocity: at the start, or unchanged since."""
        obj = obj or self.obj
        if not self.annotates(obj, "v0", "speed"):
            return False
        if self.at_start:
            return True
        v = _vec(velocity)
        return v is not None and bool(np.allclose(_pad3(v), obj.linear_velocity, rtol=1e-9, atol=1e-12))

    def initial_velocity(self) -> np.ndarray | None:
        v = _vec(self.p.get("v0_vec"))
        if v is not None:
            return _pad3(v)
        if self.at_start:
            return np.asarray(self.obj.linear_velocity, float)
        return None

    # -- per law --
    def bind(self) -> tuple[dict[str, Binding], dict[str, Any]]:
        law, var = self.step.law, self.step.variant
        flags: dict[str, Any] = {}
        self.g()
        if law not in COLLISION_LAWS:
            self.m()
        if law == "free_fall":
            self.rolling()
            self._height()
            vec = self.initial_velocity()
            if vec is not None:
                v, src = float(vec[2]), ("step.parameters.v0_vec.z" if "v0_vec" in self.p
                                         else f"objects[{self.obj.id}].linear_velocity.z")
            else:
                v, src = self.param("v0")  # a bare number is taken as the upward component
            if var == "drop" and v is None:
                v, src = 0.0, "released from rest"
            self.put("v_0", v, self.v0_annotated(), src or "unknown")
        elif law == "projectile_motion":
            self._height()
            vec = self.initial_velocity()
            v, src = self.param("v0")
            if vec is not None:
                horiz = float(np.hypot(vec[0], vec[1]))
                alpha = math.atan2(float(vec[2]), horiz)
                if _scalar(v) is None:
                    v, src = float(np.linalg.norm(vec)), "|initial velocity|"
                self.put("alpha", alpha, False, "direction of the initial velocity")
            else:
                self.put("alpha", _scalar(self.p.get("alpha")), False, "step.parameters.alpha")
            self.put("v_0", _scalar(v), self.v0_annotated(), src or "unknown")
        elif law == "inclined_plane" or (law == "at_rest" and var == "ramp"):
            self.theta()
            # the infographic labels the ramp's μ whenever a body sits on it: static while it is held
            self.mu(static=var == "static" or law == "at_rest", labelled=True)
            self.rolling()
            v0 = self._slope_speed()
            if v0 is not None:
                self.put("v_0", v0[0], self.v0_annotated(), v0[1])
            flags["uphill"] = var == "slide" and v0 is not None and v0[0] < -1e-12
        elif law == "circular_motion":
            self.rolling()
            tr = self.track()
            R, src = self.param("R_track")
            if R is None and tr is not None:
                R, src = tr.radius, f"supports.tracks[{tr.id}].radius"
            if R is None and _scalar(self.p.get("R")) is not None and "r" in self.b:
                R, src = float(self.p["R"]) + self.b["r"].value, "step.parameters.R (centre path) + r"
            self.put("R", R, False, src or "unknown")
            if "r" not in self.b:
                self.put("r", self.obj.primitive.support_distance(self.obj.rest_pose), False,
                         f"objects[{self.obj.id}] distance from centre to contact")
            phi0, psrc = self.param("phi0", "phi_0")
            if phi0 is None and self.at_start and self.obj.placement == "track":
                phi0, psrc = math.radians(float(self.obj.placement_params["angle_deg"])), "placement.track.angle_deg"
            self.put("phi_0", phi0, False, psrc or "unknown")
            v, vsrc = self.param("v0")
            if _scalar(v) is None and self.at_start and self.obj.placement == "track":
                v, vsrc = float(self.obj.placement_params.get("speed", 0.0)), "placement.track.speed"
            self.put("v_0", _scalar(v), self.v0_annotated(), vsrc or "unknown")
            self.mu(static=False, labelled=False)
        elif law in COLLISION_LAWS:
            self._collision(law, var, flags)
        elif law == "at_rest":
            self.mu(static=True, labelled=False)
        elif law in ("uniform_linear_motion", "surface_friction"):
            self.put("x_0", 0.0, False, "convention: measured from the start of the stage")
            v = self._surface_speed()
            self.put("v_0", v[0] if v else None, self.v0_annotated(), v[1] if v else "unknown")
            # a moving body on a surface: the infographic labels the floor's kinetic μ
            self.mu(static=False, labelled=True)
            self.rolling()
            if law == "surface_friction" and var == "roll_slip":
                w, wsrc = self.param("omega0", "omega_0")
                if _scalar(w) is None and self.at_start:
                    vel = np.asarray(self.obj.linear_velocity, float)
                    d = _unit(np.array([vel[0], vel[1], 0.0]))
                    if d is not None:
                        w = float(np.dot(self.obj.angular_velocity, np.cross(_Z, d)))
                        wsrc = f"objects[{self.obj.id}].angular_velocity about the rolling axis"
                self.put("omega_0", _scalar(w), False, wsrc or "unknown")
                if v and self.b["omega_0"].value is not None and "r" in self.b:
                    flags["overspin"] = self.b["omega_0"].value * self.b["r"].value > v[0] + 1e-12
        elif law == "bounce":
            self._bounce()
        return self.b, flags

    def _height(self) -> None:
        h, src = self.param("h0", "h")
        if _scalar(h) is None and self.at_start:
            pos = np.asarray(self.obj.position, float)
            below = [p.top_z for p in self.c.platforms if p.contains_xy(pos) and p.top_z <= pos[2]]
            h = float(pos[2] - max(below, default=0.0))
            src = f"objects[{self.obj.id}].position.z above the surface below"
        self.put("h", _scalar(h), False, src or "unknown")

    def _slope_speed(self) -> tuple[float, str] | None:
        vec = _vec(self.p.get("v0_vec"))
        r = self.ramp()
        if vec is not None and r is not None:
            return float(np.dot(_pad3(vec), r.slope_down)), "step.parameters.v0_vec along the slope"
        v, src = self.param("v0")
        if _scalar(v) is not None:
            return float(v), src
        if self.at_start:
            if self.obj.placement == "ramp":
                return float(self.obj.placement_params.get("speed", 0.0)), "placement.ramp.speed"
            if r is not None:
                return float(np.dot(self.obj.linear_velocity, r.slope_down)), "initial velocity along the slope"
        return None

    def _surface_speed(self) -> tuple[float, str] | None:
        vec = self.initial_velocity()
        if vec is not None:
            return float(np.hypot(vec[0], vec[1])), ("|step.parameters.v0_vec|" if "v0_vec" in self.p
                                                     else "|horizontal initial velocity|")
        v, src = self.param("v0")
        if _scalar(v) is not None:
            return float(v), src
        return None

    def _bounce(self) -> None:
        other = self.c.ground_material
        e, src = self.param("e")
        if e is None:
            e = self.c.materials.pair(self.obj.material, other).restitution
            src = f"pair({self.obj.material}, {other}).restitution"
        self.put("e", e, self.annotates(self.obj, "restitution"), src)
        u, usrc = self.param("u", "u1")
        if u is not None and _scalar(u) is None:
            vec = _vec(u)
            u = None if vec is None else float(_pad3(vec)[2])
        if u is None and self.at_start:
            vz = float(self.obj.linear_velocity[2])
            drop = float(self.obj.position[2]) - self.obj.primitive.support_distance(self.obj.rest_pose)
            u, usrc = -math.sqrt(max(vz * vz + 2.0 * self.c.g * max(drop, 0.0), 0.0)), "fall to the ground from the start"
        self.put("u", _scalar(u), False, usrc or "unknown")

    def _collision(self, law: str, var: str, flags: dict[str, Any]) -> None:
        ids = self.objs[:2]
        if len(ids) < 2:
            others = [o.id for o in self.c.objects if o.id not in ids]
            ids = ids + others[:2 - len(ids)]
        o1, o2 = (self.c.obj(i) for i in ids[:2])
        for name, o in (("m_1", o1), ("m_2", o2)):
            val, src = self.mass(o)
            self.put(name, val, self.annotates(o, "mass"), src)
        e, esrc = self.param("e")
        if e is None:
            e = self.c.materials.pair(o1.material, o2.material).restitution
            esrc = f"pair({o1.material}, {o2.material}).restitution"
        if law == "perfectly_elastic_collision" and _scalar(self.p.get("e")) is None:
            e, esrc = 1.0, "perfectly elastic: e = 1"
        elif law == "perfectly_inelastic_collision" and _scalar(self.p.get("e")) is None:
            e, esrc = 0.0, "perfectly inelastic: e = 0"
        self.put("e", e, self.annotates(o1, "restitution") or self.annotates(o2, "restitution"), esrc)
        n = _vec(self.p.get("n"))
        n = _unit(_pad3(n)) if n is not None else _unit(np.asarray(o2.position, float) - np.asarray(o1.position, float))
        if n is None:
            n = np.array([1.0, 0.0, 0.0])

        def pre(key: str, obj) -> tuple[np.ndarray | float | None, str]:
            v = self.p.get(key)
            if v is not None:
                return (_scalar(v) if _scalar(v) is not None else _pad3(_vec(v))), f"step.parameters.{key}"
            if self.at_start:
                return np.asarray(obj.linear_velocity, float), f"objects[{obj.id}].linear_velocity"
            return None, "unknown"

        (u1, s1), (u2, s2) = pre("u1", o1), pre("u2", o2)
        ann1 = self.v0_annotated(o1, u1 if np.ndim(u1) == 1 else None)
        ann2 = self.v0_annotated(o2, u2 if np.ndim(u2) == 1 else None)

        def comp(u, axis):
            if u is None:
                return None
            return float(u) if np.ndim(u) == 0 else float(np.dot(u, axis))

        if var == "head_on":
            self.put("u_1", comp(u1, n), ann1, s1 + " along n")
            self.put("u_2", comp(u2, n), ann2, s2 + " along n")
            return
        # oblique: split into the normal n and one common tangent
        tang = None
        if u1 is not None and u2 is not None and np.ndim(u1) == 1 and np.ndim(u2) == 1:
            rel = u1 - u2
            tang = _unit(rel - np.dot(rel, n) * n)
            if tang is None:
                tang = _unit(u1 - np.dot(u1, n) * n)
        if tang is None:
            tang = _unit(np.cross(_Z, n)) if _unit(np.cross(_Z, n)) is not None else np.array([0.0, 1.0, 0.0])
        self.put("u_1n", comp(u1, n), False, s1 + " along n")
        self.put("u_2n", comp(u2, n), False, s2 + " along n")
        self.put("u_1t", comp(u1, tang) if np.ndim(u1) == 1 else None, False, s1 + " along the tangent")
        self.put("u_2t", comp(u2, tang) if np.ndim(u2) == 1 else None, False, s2 + " along the tangent")
        v1, v2 = _vec(self.p.get("v1")), _vec(self.p.get("v2"))
        flags["merged"] = bool(law == "perfectly_inelastic_collision" and v1 is not None and v2 is not None
                               and np.allclose(_pad3(v1), _pad3(v2), atol=1e-9))


# ---------------------------------------------------------------------------------------------
# Candidate selection per law
# ---------------------------------------------------------------------------------------------
def _with_tangent(t: Template, tangent: tuple[Equation, ...]) -> Template:
    return replace(t, equations=t.equations + tangent)


def _candidates(ctx: _StageCtx) -> tuple[Template, tuple[Template, ...], Template]:
    """(correct, confusing alternatives in order of preference, fabricated) for one stage."""
    law, var, f = ctx.law, ctx.variant, ctx.flags
    if law == "free_fall":
        if var == "drop":
            return FF_DROP, (FF_DROP_ROLLING, FF_NO_GRAVITY), FF_DROP_FAB
        return FF_THROWN, (FF_THROWN_ROLLING, FF_NO_GRAVITY), FF_THROWN_FAB
    if law == "projectile_motion":
        return PROJ, (PROJ_HORIZONTAL, PROJ_NO_GRAVITY), PROJ_FAB
    if law == "inclined_plane":
        if var == "static":
            return INCL_STATIC, (INCL_LIMIT, FLAT_REST_FORCES), INCL_STATIC_FAB
        if var == "slide":
            if f.get("uphill"):
                return INCL_SLIDE_UP, (INCL_SLIDE_DOWN, FREE_FALL_ACCEL), INCL_SLIDE_UP_FAB
            return INCL_SLIDE_DOWN, (INCL_ROLL, INCL_SLIDE_UP, FREE_FALL_ACCEL), INCL_SLIDE_DOWN_FAB
        if var == "roll":
            return INCL_ROLL, (INCL_SLIDE_DOWN, INCL_FRICTIONLESS, FREE_FALL_ACCEL), INCL_ROLL_FAB
        return INCL_ROLL_SLIP, (INCL_ROLL_PURE,), INCL_ROLL_SLIP_FAB
    if law == "circular_motion":
        if var == "roll":
            return CIRC_ROLL, (CIRC_SLIDE, CIRC_TOP), CIRC_ROLL_FAB
        return CIRC_SLIDE, (CIRC_ROLL, CIRC_TOP), CIRC_SLIDE_FAB
    if law in COLLISION_LAWS:
        lib = COLL_HEAD_ON if var == "head_on" else COLL_OBLIQUE
        key = {"perfectly_elastic_collision": "elastic", "perfectly_inelastic_collision": "stick",
               "inelastic_collision": "general"}[law]
        others = {"elastic": ("stick", "general"), "stick": ("elastic", "general"), "general": ("elastic", "stick")}[key]
        correct, confusing, fab = lib[key], tuple(lib[o] for o in others), lib[key + "_fab"]
        if key == "elastic":  # the general-e law with e = 1 is the elastic law itself
            confusing = (lib["stick"],)
        if var == "oblique":
            tangent = TANGENT_MERGED if f.get("merged") else TANGENT_KEPT
            correct = _with_tangent(correct, tangent)
            confusing = tuple(_with_tangent(t, TANGENT_KEPT) for t in confusing)
            fab = _with_tangent(fab, TANGENT_KEPT)
        return correct, confusing, fab
    if law == "at_rest":
        if var == "surface":
            return REST_FLAT, (REST_FLAT_SLIDING, REST_FLAT_FALLING), REST_FLAT_FAB
        return REST_RAMP, (INCL_LIMIT, FLAT_REST_FORCES), INCL_STATIC_FAB
    if law == "uniform_linear_motion":
        if var == "slide":
            return UNI_SLIDE, (UNI_WITH_FRICTION, UNI_WITH_GRAVITY), UNI_SLIDE_FAB
        return UNI_ROLL, (UNI_ROLL_NO_SPIN, UNI_ROLL_BRAKED), UNI_ROLL_FAB
    if law == "bounce":
        if var == "elastic":
            return BOUNCE_ELASTIC, (BOUNCE_STICK,), BOUNCE_ELASTIC_FAB
        return BOUNCE_INELASTIC, (BOUNCE_ELASTIC, BOUNCE_STICK), BOUNCE_INELASTIC_FAB
    if law == "surface_friction":
        if var == "slide":
            return SF_SLIDE, (SF_VERTICAL, SF_UNIFORM), SF_SLIDE_FAB
        correct = SF_ROLL_SLIP_OVERSPIN if f.get("overspin") else SF_ROLL_SLIP
        return correct, (SF_RS_ROLLING, SF_RS_NO_TORQUE), SF_ROLL_SLIP_FAB
    raise ValueError(f"no formulas for law {law!r}")


def _template_sympy(t: Template) -> str:
    return "; ".join(e.sympy for e in t.equations)


def _template_display(t: Template) -> str:
    return ", ".join(_render_display(e.display) for e in t.equations if e.display)


def _numeric(t: Template, values: Mapping[str, float]) -> dict[str, float] | None:
    try:
        return evaluate_formula(_template_sympy(t), values)
    except (ValueError, TypeError, ZeroDivisionError):
        return None


def _differs(a: dict[str, float] | None, b: dict[str, float] | None) -> bool:
    if a is None or b is None:
        return False
    common = set(a) & set(b)
    if not common:
        return False
    return any(not math.isclose(a[k], b[k], rel_tol=1e-6, abs_tol=1e-9) for k in common)


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------
_FUNC_BEFORE = ("sin", "cos", "tan", "√", "sin²", "cos²")


def format_angle(rad: float) -> str:
    """An angle as the infographic prints it: whole degrees."""
    s = f"{math.degrees(float(rad)):.0f}"
    return "0" if float(s) == 0 else s


def _display_number(name: str, value: float) -> str:
    if is_angle(name):
        return format_angle(value).replace("-", "−") + "°"
    return format_value(value).replace("-", "−")


def _render_display(text: str, subst: Mapping[str, float] | None = None) -> str:
    subst = subst or {}

    def sub(m: re.Match) -> str:
        name = m.group(1)
        if name not in subst:
            return display_name(name)
        s = _display_number(name, subst[name])
        before = text[:m.start()]
        if s.startswith("−") or any(before.endswith(f) for f in _FUNC_BEFORE):
            s = f"({s})"
        return s
    return _PLACEHOLDER.sub(sub, text)


def _sympy_number(name: str, value: float) -> str:
    if is_angle(name):
        return f"{format_angle(value)}*pi/180"
    return format_value(value)


def _render_sympy(text: str, subst: Mapping[str, float]) -> str:
    def sub(m: re.Match) -> str:
        name = m.group(1)
        after = text[m.end():m.end() + 1]
        if after == "(" or name not in subst:
            return name
        s = _sympy_number(name, subst[name])
        before = text[m.start() - 1:m.start()]
        if (s.startswith("-") or "*" in s) and not (before == "(" and after == ")"):
            s = f"({s})"
        return s
    return _IDENT.sub(sub, text)


def _displayed_value(name: str, value: float) -> float:
    """The number exactly as printed (angles in degrees)."""
    return float(format_angle(value) if is_angle(name) else format_value(value))


def _template_symbols(t: Template) -> list[str]:
    seen: list[str] = []
    for eq in parse_system(_template_sympy(t)):
        for s in sorted(eq.free_symbols, key=lambda s: s.name):
            if s.name not in seen:
                seen.append(s.name)
        for fn in sorted(eq.atoms(sympy.core.function.AppliedUndef), key=str):
            if fn.func.__name__ not in seen:
                seen.append(fn.func.__name__)
    return seen


# ---------------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------------
def _law_variant(step: Any) -> tuple[str, str]:
    law, variant = str(step.law), getattr(step, "variant", None)
    if law not in LAW_VARIANTS:
        raise ValueError(f"unknown law {law!r}; expected one of {', '.join(LAW_VARIANTS)}")
    if variant not in LAW_VARIANTS[law]:
        raise ValueError(f"unknown variant {variant!r} of {law}; expected one of {', '.join(LAW_VARIANTS[law])}")
    return law, str(variant)


@dataclass(frozen=True)
class _Step:
    """A law step as the binder reads it (any object with LawStep's attributes is accepted)."""
    law: str
    variant: str
    objects: tuple[str, ...]
    t_start: float
    t_end: float
    parameters: dict[str, Any]


def _stage(config: Any, step: Any, index: int) -> _StageCtx:
    params = dict(getattr(step, "parameters", None) or {})
    law, variant = _law_variant(step)

    s = _Step(law, variant, tuple(getattr(step, "objects", ()) or ()), float(getattr(step, "t_start", 0.0) or 0.0),
              float(getattr(step, "t_end", 0.0) or 0.0), params)
    binder = _Binder(config, s, index)
    bindings, flags = binder.bind()
    t0, t1 = float(getattr(step, "t_start", 0.0) or 0.0), float(getattr(step, "t_end", 0.0) or 0.0)
    ctx = _StageCtx(index=index, letter=chr(ord("A") + index), law=law,
                    variant=variant, objects=s.objects, t_start=t0, t_end=t1, bindings=bindings, flags=flags)
    ctx.free["t"] = (t1 - t0) / 2.0 if t1 - t0 > 1e-9 else 0.5
    phi0 = bindings.get("phi_0")
    p0 = phi0.value if phi0 is not None and phi0.value is not None else 0.0
    ctx.free["phi"] = 0.0 if abs(p0) > 0.05 else p0 + 0.5
    return ctx


def _apply_renames(stages: list[_StageCtx]) -> None:
    seen: dict[str, float | None] = {}
    for st in stages:
        mapping: dict[str, str] = {}
        for name, b in st.bindings.items():
            new = name
            if st.index > 0 and name in INITIAL_CONDITION_SYMBOLS:
                new = renamed(name, st.letter)
            elif name in seen and b.value is not None and seen[name] is not None and not math.isclose(
                    b.value, seen[name], rel_tol=1e-9, abs_tol=1e-12):
                new = renamed(name, st.letter)
            if new != name:
                mapping[name] = new
        st.rename = mapping
        st.bindings = {mapping.get(n, n): b for n, b in st.bindings.items()}
        for n, b in st.bindings.items():
            seen.setdefault(n, b.value)


def _choose(stages: list[_StageCtx], chain_laws: set[str]) -> None:
    for st in stages:
        correct, confusing, fab = _candidates(st)
        correct = correct.renamed(st.rename)
        values = st.values()
        ref = _numeric(correct, values)
        pick, fallback, differs = None, None, False
        for cand in confusing:
            cand = cand.renamed(st.rename)
            if _template_display(cand) == _template_display(correct):
                continue
            num = _numeric(cand, values)
            if _differs(ref, num):
                pick, differs = cand, True
                break
            if fallback is None or (num is not None and fallback[1] is None):
                fallback = (cand, num)
        if pick is None and fallback is not None:
            pick = fallback[0]
        st.correct, st.confusing, st.confusing_differs = correct, pick, differs
        st.fabricated = fab.renamed(st.rename)
        prefs = UNRELATED_PREFERENCE[st.law]
        allowed = [u for u in prefs if not (_UNRELATED_FAMILY_CONFLICT[u.key] & chain_laws)]
        st.unrelated = (allowed or [U_PENDULUM])[0]


TRIVIAL_LAWS = frozenset({"at_rest", "uniform_linear_motion"})


def select_steps(config: Any, steps: Sequence[Any]) -> tuple[list[Any], str]:
    """The steps the question is about.

    A single-law task (free fall, inclined plane, a collision, …) asks for its own law: the first step
    of that law, even when the solver also reports incidental stages (the approach before a
    collision, a bounce after a fall). A composition, or a single-law case whose law never occurs,
    asks for the chain of laws in the order they first occur: a law that recurs (the flight between
    bounces, the next bounce) is the same law and appears once, so the answer stays readable.
    """
    task = getattr(config, "task", None)
    if task is not None and getattr(task, "law_level", "") == "single":
        same = [s for s in steps if str(s.law) == task.name]
        if same:
            return [same[0]], "task_law"
    chain, seen = [], set()
    for step in steps:
        key = (str(step.law), str(step.variant))
        if key not in seen:
            seen.add(key)
            chain.append(step)
    return chain, "chain"


def build_formula_info(config: Any, steps: Sequence[Any]) -> dict[str, Any]:
    """Four-way formula question of one case; JSON-ready, valid against formula_info.schema.json.

    ``steps``: the law chain in time order, objects with ``law``, ``variant``, ``objects``,
    ``t_start``, ``t_end`` and ``parameters`` (``orchard_build.mechanics.types.LawStep``). Missing
    parameters are computed from ``config``.
    """
    steps = list(steps)
    if not steps:
        raise ValueError("a case needs at least one law step")
    steps, scope = select_steps(config, steps)
    stages = [_stage(config, step, i) for i, step in enumerate(steps)]
    _apply_renames(stages)
    _choose(stages, {st.law for st in stages})

    rng = np.random.default_rng(int(config.seed))
    slot_of_kind = [int(x) for x in rng.permutation(4)]  # kind index → letter index

    # stage swapped by each distractor of a chain
    if len(stages) == 1:
        swap = {"confusing": 0, "unrelated": 0, "fabricated": 0}
    else:
        def pick(pool: list[int]) -> int:
            core = [i for i in pool if stages[i].law not in TRIVIAL_LAWS] or pool
            return int(core[int(rng.integers(len(core)))])

        everyone = [st.index for st in stages]
        swap = {"confusing": pick([st.index for st in stages if st.confusing_differs] or everyone),
                "unrelated": pick(everyone),
                "fabricated": pick(everyone)}

    def chain(kind: str) -> list[Template]:
        out = []
        for st in stages:
            if kind != "correct" and st.index == swap[kind]:
                alt = getattr(st, kind)
                out.append(alt if alt is not None else st.correct)
            else:
                out.append(st.correct)
        return out

    def candidate(kind: str) -> dict[str, Any]:
        temps = chain(kind)
        display = "; ".join(_template_display(t) for t in temps)
        sym = "; ".join(_template_sympy(t) for t in temps)
        if len(stages) == 1:
            law = temps[0].law
            variant = temps[0].variant
        else:
            law = "composition" if kind == "correct" else temps[swap[kind]].law
            variant = None if kind == "correct" else temps[swap[kind]].variant
        symbols: list[str] = []
        for t in temps:
            for s in _template_symbols(t):
                if s not in symbols:
                    symbols.append(s)
        return {
            "kind": kind, "display": display, "sympy": sym, "law": law, "variant": variant,
            "stages": [{"law": t.law, "variant": t.variant, "template": t.key} for t in temps],
            "rationale": "; ".join(t.note for t in temps) if len(temps) > 1 else temps[0].note,
            "symbols": symbols,
        }

    by_kind = {k: candidate(k) for k in KINDS}
    for i, k in enumerate(KINDS):
        by_kind[k]["letter"] = LETTERS[slot_of_kind[i]]
    ordered = sorted(by_kind.values(), key=lambda c: c["letter"])
    candidates = [{"letter": c["letter"], **{k: v for k, v in c.items() if k != "letter"}} for c in ordered]
    correct = by_kind["correct"]

    # merged symbol table (stage bindings after renaming are consistent by construction)
    table: dict[str, Binding] = {}
    for st in stages:
        for n, b in st.bindings.items():
            if n in table:
                table[n].annotated = table[n].annotated or b.annotated
            else:
                table[n] = Binding(b.value, b.annotated, b.source)

    # substituted correct formula
    used = set(correct["symbols"])
    subst = {n: b.value for n, b in table.items() if b.annotated and b.value is not None and n in used}
    disp_parts, sym_parts = [], []
    for st in stages:
        for eq in st.correct.equations:
            if eq.display:
                disp_parts.append((st.index, _render_display(eq.display, subst)))
            sym_parts.append(_render_sympy(eq.sympy, subst))
    stage_disp = []
    for st in stages:
        stage_disp.append(", ".join(d for i, d in disp_parts if i == st.index))
    substituted = {
        "display": "; ".join(stage_disp),
        "sympy": "; ".join(sym_parts),
        "values": {n: _displayed_value(n, v) for n, v in sorted(subst.items())},
    }

    in_candidates: list[str] = []
    for c in candidates:
        for s in c["symbols"]:
            if s not in in_candidates:
                in_candidates.append(s)
    symbol_names = [n for n in table if table[n].annotated or n in in_candidates]
    symbol_names += [n for n in in_candidates if n not in symbol_names]
    symbol_table = []
    for n in symbol_names:
        info = _base_info(n)
        b = table.get(n)
        symbol_table.append({
            "name": n, "display": display_name(n), "meaning": info.meaning if info else "",
            "angle": is_angle(n),
            "value": None if b is None or b.value is None else float(b.value),
            "annotated": bool(b.annotated) if b is not None else False,
            "source": b.source if b is not None else None,
        })

    return {
        "formula_bank_version": FORMULA_BANK_VERSION,
        "case_id": str(config.case_id),
        "seed": int(config.seed),
        "choices": [f"{c['letter']}. {c['display']}" for c in candidates],
        "correct_letter": correct["letter"],
        "correct_formula": correct["display"],
        "correct_sympy": correct["sympy"],
        "candidates": candidates,
        "substituted": substituted,
        "annotated_symbols": [n for n in symbol_names if n in table and table[n].annotated],
        "scope": scope,
        "laws": [{"law": st.law, "variant": st.variant, "objects": list(st.objects), "t_start": st.t_start,
                  "t_end": st.t_end, "stage_letter": st.letter} for st in stages],
        "symbol_table": symbol_table,
    }
