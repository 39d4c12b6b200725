"""Formula text (as printed, or as read by OCR) → tokens → sympy equations, and the comparisons the
Formulation-Text criteria need.

The same tokenizer reads the case's display formulas and the OCR'd answer lines, so both sides go
through identical normalisation: `·`/`•`/`×` → product, `−`/`–` → minus, `²`/`³` → powers, `√` → sqrt,
`°` → ·π/180, Greek letters → sympy names (θ → theta, μ/µ → mu, …), `NAME(t)` (function-of-time
notation) → NAME, chained `a = b = c` → two equations, `,`/`;` separate equations. Symbols are matched
longest-first against the case vocabulary (sympy names, display forms, and forms without the
underscore, so OCR's `v0`/`m1` read as `v_0`/`m_1`); OCR misreads handled: `θ` read as `0` right after
sin/cos/tan (when θ is in the vocabulary), `u` for `μ` (when `u` is not a symbol of the case), case
slips (`V0` → `v_0`) when only one case exists in the vocabulary, `o`/`º` after a number before `)`
→ degrees. Implicit products are made explicit, so `2m_2u_2` parses.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import numpy as np

GREEK = {"θ": "theta", "ϑ": "theta", "μ": "mu", "µ": "mu", "α": "alpha", "β": "beta", "γ": "gamma",
         "ε": "epsilon", "ϵ": "epsilon", "ω": "omega", "φ": "phi", "ϕ": "phi", "π": "pi", "Δ": "Delta",
         "ρ": "rho", "τ": "tau", "λ": "lambda_", "σ": "sigma", "η": "eta", "Ω": "Omega"}
FUNCS = ("sqrt", "sin", "cos", "tan", "exp", "ln", "log")
_PRE = [("−", "-"), ("–", "-"), ("—", "-"), ("‐", "-"), ("·", "*"), ("•", "*"), ("∙", "*"), ("⋅", "*"),
        ("×", "*"), ("÷", "/"), ("²", "^2"), ("³", "^3"), ("√", "sqrt"), ("º", "°"), ("˚", "°"), ("**", "^"), ("½", "(1/2)"), ("¼", "(1/4)"),
        ("ν", "v"), ("{", "("), ("}", ")"), ("[", "("), ("]", ")"), ("：", ":"), ("，", ","), ("；", ";"), ("＝", "=")]


@dataclass(frozen=True)
class Tok:
    kind: str    # num, sym, func, op, pow, lp, rp, eq, sep, deg
    text: str


@dataclass
class Vocab:
    """Known symbol names (sympy) and the spellings that map to them."""
    aliases: dict[str, str] = field(default_factory=dict)

    @classmethod
    def build(cls, names: Iterable[str] = (), displays: Iterable[tuple[str, str]] = ()) -> "Vocab":
        v = cls()
        for n in names:
            v.add(n, n)
        for name, disp in displays:
            v.add(name, prenormalise(disp))
            v.add(name, name)
        return v

    def add(self, name: str, spelling: str) -> None:
        if not spelling or not re.match(r"^[A-Za-z]", spelling):
            return
        self.aliases.setdefault(spelling, name)
        if "_" in spelling:
            self.aliases.setdefault(spelling.replace("_", ""), name)
        if spelling.endswith("_0"):   # OCR reads a subscript 0 as the letter o
            self.aliases.setdefault(spelling[:-2] + "o", name)
            self.aliases.setdefault(spelling[:-1] + "o", name)

    @property
    def names(self) -> set[str]:
        return set(self.aliases.values())

    def match(self, s: str, i: int) -> tuple[str, int] | None:
        """Longest alias at s[i:]: exact case first, then case-insensitive when unambiguous."""
        best = None
        for a, n in self.aliases.items():
            if s.startswith(a, i) and (best is None or len(a) > len(best[0])):
                best = (a, n)
        if best is None:
            low = s.lower()
            cands = {}
            for a, n in self.aliases.items():
                if low.startswith(a.lower(), i):
                    cands.setdefault(len(a), set()).add(n)
            if cands:
                L = max(cands)
                if len(cands[L]) == 1:
                    best = (s[i:i + L], next(iter(cands[L])))
        if best is None:
            return None
        # an alias must not end inside a longer identifier such as "k_s" vs "k"
        j = i + len(best[0])
        if j < len(s) and s[j] == "_":
            return None
        return best[1], j


def prenormalise(s: str) -> str:
    s = unicodedata.normalize("NFC", s)
    for a, b in _PRE:
        s = s.replace(a, b)
    for g, n in GREEK.items():
        s = s.replace(g, n + " ")
    return re.sub(r"\s+", " ", s).strip()


def resolve_dots(text: str, known: Sequence[float]) -> str:
    """A run of digits with two or more periods ("1.63.9.81") is not a number: some period is a product
    dot OCR misread. Each way of reading the periods as products is tried and the one whose numbers are
    most often among `known` (the expected line's numbers) is kept; ties keep the leftmost product."""
    def best(m: re.Match) -> str:
        run = m.group(0)
        dots = [i for i, ch in enumerate(run) if ch == "."]
        choices = []
        for mask in range(1, 1 << len(dots)):
            prods = {dots[k] for k in range(len(dots)) if mask >> k & 1}
            pieces, cur = [], ""
            for i, ch in enumerate(run):
                if i in prods:
                    pieces.append(cur)
                    cur = ""
                else:
                    cur += ch
            pieces.append(cur)
            if any(not p or p.count(".") > 1 or p.startswith(".") or p.endswith(".") for p in pieces):
                continue
            hits = sum(any(abs(float(p) - k) <= 1e-9 + 1e-6 * abs(k) for k in known) for p in pieces)
            choices.append((-hits, min(prods), "*".join(pieces)))
        return min(choices)[2] if choices else run
    return re.sub(r"\d+(?:\.\d+){2,}", best, text)


def tokenize(text: str, vocab: Vocab | None = None) -> list[Tok]:
    vocab = vocab or Vocab()
    s = prenormalise(text)
    # degrees read as a letter o: "30o)" → "30°)"
    s = re.sub(r"(\d)\s*[oO](?=\s*[),;]|\s*$)", r"\1°", s)
    # a product dot read as a period: a number has one decimal point ("2.9.81" → 2·9.81), and a period
    # directly before a letter or a bracket is not a decimal point ("2.g" → 2·g)
    s = re.sub(r"(?<![\d.])(\d+)\.(?=\d+\.\d)", r"\1*", s)
    s = re.sub(r"(\d)\.(?=[A-Za-z(])", r"\1*", s)
    out: list[Tok] = []
    i = 0
    n = len(s)
    while i < n:
        ch = s[i]
        if ch.isspace():
            i += 1
            continue
        m = re.match(r"\d+(?:\.\d+)?|\.\d+", s[i:])
        if m:
            # OCR: θ read as 0 right after a trig function
            if (m.group(0) == "0" and out and out[-1].kind == "func" and out[-1].text in ("sin", "cos", "tan")
                    and "theta" in vocab.names):
                out.append(Tok("sym", "theta"))
            elif (m.group(0) in ("2", "3") and out and out[-1].kind in ("sym", "rp") and i > 0
                  and not s[i - 1].isspace() and s[i - 1] not in "*/+-(=,;"):
                out.append(Tok("pow", m.group(0)))   # OCR: a superscript read as a plain digit
            else:
                out.append(Tok("num", m.group(0)))
            i += len(m.group(0))
            continue
        if ch.isalpha() and not ch.isascii():
            out.append(Tok("sym", ch))     # a letter no rule knows (an OCR misread): an unknown symbol
            i += 1
            continue
        if ch.isalpha():
            hit = vocab.match(s, i)
            fm = next((f for f in FUNCS if s.startswith(f, i)), None)
            if hit is not None and (fm is None or hit[1] - i > len(fm)):
                out.append(Tok("sym", hit[0]))
                i = hit[1]
                continue
            if fm is not None:
                out.append(Tok("func", fm))
                i += len(fm)
                continue
            word = re.match(r"[A-Za-z]+", s[i:]).group(0)
            if word in GREEK.values() or word == "lambda_":
                out.append(Tok("sym", word))
                i += len(word)
                continue
            m = re.match(r"[A-Za-z](?:_(?:[0-9]+[a-z]?|[A-Za-z]{1,2}))?", s[i:])
            name = m.group(0)
            if name == "u" and "u" not in vocab.names and "mu" in vocab.names:
                name = "mu"
            out.append(Tok("sym", name))
            i += len(m.group(0))
            continue
        if ch == "^":
            m = re.match(r"\^\s*(\d+)", s[i:])
            if m:
                out.append(Tok("pow", m.group(1)))
                i += len(m.group(0))
            else:
                out.append(Tok("op", "^"))
                i += 1
            continue
        if ch in "+-*/":
            out.append(Tok("op", ch))
        elif ch == "(":
            out.append(Tok("lp", ch))
        elif ch == ")":
            out.append(Tok("rp", ch))
        elif ch == "=":
            out.append(Tok("eq", ch))
        elif ch in ",;":
            out.append(Tok("sep", ch))
        elif ch == "°":
            out.append(Tok("deg", ch))
        i += 1
    # function-of-time notation: NAME ( t ) → NAME
    j, res = 0, []
    while j < len(out):
        t = out[j]
        if (t.kind == "sym" and t.text != "t" and j + 3 < len(out) + 0 and j + 3 <= len(out) - 1
                and out[j + 1].kind == "lp" and out[j + 2] == Tok("sym", "t") and out[j + 3].kind == "rp"):
            res.append(t)
            j += 4
            continue
        res.append(t)
        j += 1
    return res


def _operand_end(toks: Sequence[Tok], k: int) -> int:
    """Index after the operand starting at k (a symbol/number, or a parenthesised group)."""
    if k >= len(toks):
        return k
    if toks[k].kind == "lp":
        depth = 0
        for j in range(k, len(toks)):
            if toks[j].kind == "lp":
                depth += 1
            elif toks[j].kind == "rp":
                depth -= 1
                if depth == 0:
                    return j + 1
        return len(toks)
    return k + 1


def to_expr_text(toks: Sequence[Tok]) -> str:
    """Python/sympy text of a token run with explicit products and function applications."""
    parts: list[str] = []
    prev_operand = False
    k = 0
    while k < len(toks):
        t = toks[k]
        if t.kind == "func":
            power = None
            k2 = k + 1
            if k2 < len(toks) and toks[k2].kind == "pow":
                power = toks[k2].text
                k2 += 1
            end = _operand_end(toks, k2)
            inner = to_expr_text(toks[k2:end]) if end > k2 else "0"
            if end > k2 and toks[k2].kind == "lp":
                inner = inner  # already parenthesised
            else:
                # sinθ·t: only the first operand is the argument
                pass
            name = {"ln": "log"}.get(t.text, t.text)
            call = f"{name}({inner})"
            if power:
                call = f"({call})**{power}"
            if prev_operand:
                parts.append("*")
            parts.append(call)
            prev_operand = True
            k = end
            continue
        if t.kind in ("num", "sym", "lp"):
            if prev_operand:
                parts.append("*")
            if t.kind == "lp":
                end = _operand_end(toks, k)
                inner_toks = toks[k + 1:end - 1] if end - 1 > k and toks[end - 1].kind == "rp" else toks[k + 1:end]
                parts.append("(" + to_expr_text(inner_toks) + ")")
                k = end
            else:
                parts.append(t.text)
                k += 1
            prev_operand = True
            continue
        if t.kind == "rp":
            k += 1
            continue
        if t.kind == "pow":
            parts.append(f"**{t.text}")
            k += 1
            prev_operand = True
            continue
        if t.kind == "deg":
            parts.append("*pi/180")
            k += 1
            prev_operand = True
            continue
        if t.kind == "op":
            parts.append("**" if t.text == "^" else t.text)
            prev_operand = False
            k += 1
            continue
        k += 1
    return "".join(parts)


def split_equations(toks: Sequence[Tok]) -> list[tuple[list[Tok], list[Tok]]]:
    """(lhs, rhs) token runs: separators at depth 0 split equations, chained = gives one per lhs."""
    eqs, cur, depth = [], [], 0
    chunks: list[list[Tok]] = []
    for t in toks:
        if t.kind == "lp":
            depth += 1
        elif t.kind == "rp":
            depth = max(0, depth - 1)
        if t.kind == "sep" and depth == 0:
            chunks.append(cur)
            cur = []
        else:
            cur.append(t)
    chunks.append(cur)
    for c in chunks:
        sides, side = [], []
        for t in c:
            if t.kind == "eq":
                sides.append(side)
                side = []
            else:
                side.append(t)
        sides.append(side)
        sides = [s for s in sides if s]
        if len(sides) >= 2:
            for lhs in sides[:-1]:
                eqs.append((lhs, sides[-1]))
    return eqs


def _sympify(text: str, names: set[str]):
    import sympy
    from sympy.parsing.sympy_parser import parse_expr, standard_transformations

    local = {n: sympy.Symbol(n) for n in names}
    local.update({"pi": sympy.pi, "sqrt": sympy.sqrt, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan,
                  "exp": sympy.exp, "log": sympy.log})
    return parse_expr(text, local_dict=local, transformations=standard_transformations, evaluate=True)


@dataclass
class Parsed:
    text: str
    tokens: list[Tok]
    equations: list = field(default_factory=list)   # sympy expressions lhs − rhs (residuals)
    errors: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return bool(self.equations) and not self.errors

    @property
    def symbols(self) -> set[str]:
        return {t.text for t in self.tokens if t.kind == "sym" and t.text != "pi"}

    def numbers(self) -> list[float]:
        return [float(t.text) for t in self.tokens if t.kind == "num"]

    def operators(self) -> list[str]:
        return [t.text if t.kind != "pow" else "^" + t.text for t in self.tokens
                if t.kind in ("op", "func", "pow", "eq", "deg") and t.text != "*"]


def parse(text: str, vocab: Vocab | None = None) -> Parsed:
    toks = tokenize(text, vocab)
    p = Parsed(text, toks)
    names = {t.text for t in toks if t.kind == "sym"}
    for lhs, rhs in split_equations(toks):
        try:
            L = _sympify(to_expr_text(lhs), names)
            R = _sympify(to_expr_text(rhs), names)
            p.equations.append(L - R)
        except Exception as exc:  # noqa: BLE001 - any parse failure is reported, not raised
            p.errors.append(f"{type(exc).__name__}: {exc}"[:200])
    if not p.equations and not p.errors:
        p.errors.append("no equation")
    return p


def _evaluate(expr, syms, points) -> np.ndarray:
    import sympy

    f = sympy.lambdify(syms, expr, modules="numpy")
    with np.errstate(all="ignore"):
        vals = np.array([complex(f(*pt)) for pt in points])
    return vals


def equivalent(a, b, n: int = 7, seed: int = 0, rtol: float = 1e-6) -> bool:
    """Residuals a = lhs−rhs and b describe the same equation: both vanish everywhere, or a/b is a
    constant (≠ 0) at random positive points of their symbols."""
    import sympy

    syms = sorted(a.free_symbols | b.free_symbols, key=lambda s: s.name)
    rng = np.random.default_rng(seed)
    pts = rng.uniform(0.35, 1.9, size=(n, len(syms))) if syms else np.zeros((n, 0))
    try:
        va = _evaluate(a, syms, pts)
        vb = _evaluate(b, syms, pts)
    except Exception:  # noqa: BLE001
        return False
    ok = np.isfinite(va) & np.isfinite(vb)
    if ok.sum() < 3:
        return False
    va, vb = va[ok], vb[ok]
    scale = max(1.0, float(np.max(np.abs(va))), float(np.max(np.abs(vb))))
    za, zb = np.abs(va) < 1e-9 * scale, np.abs(vb) < 1e-9 * scale
    if za.all() and zb.all():
        return True
    if (za != zb).any():
        return False
    r = va[~za] / vb[~zb]
    return bool(np.all(np.abs(r - r[0]) <= rtol * max(1.0, abs(r[0]))) and abs(r[0]) > 1e-12)


def system_match(answer: Parsed, expected: Parsed) -> float:
    """Fraction of expected equations that the answer states (one-to-one), over the larger count."""
    if not expected.equations or not answer.equations:
        return 0.0
    used: set[int] = set()
    hits = 0
    for e in expected.equations:
        for j, a in enumerate(answer.equations):
            if j not in used and equivalent(a, e):
                used.add(j)
                hits += 1
                break
    return hits / max(len(expected.equations), len(answer.equations))


def _pieces(text: str, vocab: "Vocab | None") -> list[Parsed]:
    """One Parsed per equation of a system (the text split where `split_equations` splits it)."""
    out = []
    for lhs, rhs in split_equations(tokenize(text, vocab)):
        toks = lhs + [Tok("eq", "=")] + rhs
        p = Parsed(text, toks)
        try:
            names = {t.text for t in toks if t.kind == "sym"}
            p.equations.append(_sympify(to_expr_text(lhs), names) - _sympify(to_expr_text(rhs), names))
        except Exception as exc:  # noqa: BLE001
            p.errors.append(f"{type(exc).__name__}: {exc}"[:200])
        out.append(p)
    return out


def element_scores(answer: Parsed, expected: Parsed, vocab: "Vocab | None" = None) -> tuple[float, float, float]:
    """(variables, constants, operators) of a formula that is not equivalent to the expected one, per
    equation: each expected equation is paired (one-to-one) with the answer's equation it is equivalent
    to, else the one with the same left side, else the most alike. An equivalent pair is right on all
    three; otherwise each element is right only when it is exactly the expected one (symbol set, number
    multiset, operator sequence) and, where all three are, the structure is wrong and operators count 0.
    Each score is ½ the share of right equations (over the larger count of equations) + ½ whether all
    are right."""
    exp = _pieces(expected.text, vocab) if vocab is not None else _pieces_from(expected)
    ans = _pieces(answer.text, vocab) if vocab is not None else _pieces_from(answer)
    if not exp or not ans:
        return 0.0, 0.0, 0.0
    free = list(range(len(ans)))
    sums = [0.0, 0.0, 0.0]
    for e in exp:
        def rank(j: int) -> tuple:
            a = ans[j]
            eq = bool(a.equations and e.equations and equivalent(a.equations[0], e.equations[0]))
            lhs_a = [t.text for t in a.tokens[:a.tokens.index(Tok("eq", "="))]] if Tok("eq", "=") in a.tokens else []
            lhs_e = [t.text for t in e.tokens[:e.tokens.index(Tok("eq", "="))]]
            return (eq, lhs_a == lhs_e, jaccard(a.symbols, e.symbols))
        if not free:
            break
        j = max(free, key=rank)
        free.remove(j)
        a = ans[j]
        if rank(j)[0]:
            sums = [x + 1.0 for x in sums]
            continue
        v = a.symbols == e.symbols
        c = sorted(a.numbers()) == sorted(e.numbers())
        o = a.operators() == e.operators() and not (v and c)
        sums = [sums[0] + v, sums[1] + c, sums[2] + o]
    n = max(len(exp), len(ans))
    # half the share of right equations, half whether the whole system is right: a system with one
    # wrong law is not "written correctly", yet keeps credit for the laws it got right
    return tuple(0.5 * x / n + 0.5 * (x == n) for x in sums)


def _pieces_from(p: Parsed) -> list[Parsed]:
    return _pieces(p.text, _vocab_of(p))


def _vocab_of(p: Parsed) -> "Vocab":
    v = Vocab()
    for t in p.tokens:
        if t.kind == "sym":
            v.add(t.text, t.text)
    return v


def multiset_f1(found: Sequence[float], wanted: Sequence[float], rtol: float = 1e-4) -> float:
    """F1 of two number multisets, equal within a relative 1e-4 (1.0 when both are empty)."""
    if not wanted and not found:
        return 1.0
    if not wanted or not found:
        return 0.0
    pool = list(found)
    tp = 0
    for w in wanted:
        for i, f in enumerate(pool):
            if abs(f - w) <= 1e-9 + rtol * abs(w):
                tp += 1
                pool.pop(i)
                break
    if tp == 0:
        return 0.0
    prec, rec = tp / len(found), tp / len(wanted)
    return 2 * prec * rec / (prec + rec)


def recall(found: Sequence[float], wanted: Sequence[float], rtol: float = 1e-4) -> float:
    if not wanted:
        return 1.0
    pool = list(found)
    tp = 0
    for w in wanted:
        for i, f in enumerate(pool):
            if abs(f - w) <= 1e-9 + rtol * abs(w):
                tp += 1
                pool.pop(i)
                break
    return tp / len(wanted)


def multiset_minus(a: Sequence[float], b: Sequence[float], rtol: float = 1e-4) -> list[float]:
    pool = list(a)
    for w in b:
        for i, f in enumerate(pool):
            if abs(f - w) <= 1e-9 + rtol * abs(w):
                pool.pop(i)
                break
    return pool


def sequence_similarity(a: Sequence[str], b: Sequence[str]) -> float:
    """1 − edit distance / longer length of two token sequences (1.0 when both are empty)."""
    if not a and not b:
        return 1.0
    if not a or not b:
        return 0.0
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return 1.0 - prev[-1] / max(len(a), len(b))


def jaccard(a: set, b: set) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)
