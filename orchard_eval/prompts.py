"""Generation prompts: one record per case × subtrack (× timestamp for image-protocol Deduction),
rendered from a versioned template file (`prompt_templates/default.yaml` unless a user passes their
own YAML or JSON file with the same structure).

A record says what to send and what must come back:

    {prompt_version, variant, protocol, case_id, subtrack, timestamp, input_image, prompt,
     expected_output: {kind, scored, answer, file}, num_rollouts}

`input_image` is relative to the dataset root: the annotated first frame, or for the text-parameter
variant the clean first frame (the quantities then travel as structured text, read from the case's
annotation labels, with initial-velocity directions stated in words because the arrows are gone).
`expected_output.file` is where the answer belongs in the published submission layout
(`rollout_XX` stands for each of the `num_rollouts` rollouts).

Placeholders are substituted by name ({formula_choices}, {target_time}, {time_point},
{physics_duration}, {parameters}); any other text in braces is left untouched, so templates may
contain literal braces.

Template sources. `templates=None` is the shipped file (source "orchard"), a path is the user's file
("custom"), and the word "apple-pi" renders the paper's own prompts from the installed published
package (`apple_pi_prompts`; "apple-pi", prompt_version as that package declares it, default variant
only). Every record names its source under `templates.source`; `prompt_source` maps a submission's
declared prompt_version to a source, so scored runs say which prompts their predictions answered.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np

from .cases import SUBTRACKS, CaseFormatError, Dataset, EvalCase, load_dataset
from .paths import UnsafePathError, safe_join
from .predictions import keyframe_name

TEMPLATE_DIR = Path(__file__).resolve().parent / "prompt_templates"
DEFAULT_TEMPLATES = TEMPLATE_DIR / "default.yaml"
VARIANTS = ("default", "text-parameter", "concise")
PROTOCOLS = ("video", "image")
PLACEHOLDERS = ("formula_choices", "target_time", "time_point", "physics_duration", "parameters")
APPLE_PI = "apple-pi"          # --templates value: the paper's prompts from the installed `apple_pi` package
APPLE_PI_PROMPT_VERSION = "1.0"
_PH_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")


class TemplateError(ValueError):
    """A template file that does not have the expected structure."""


# ---------------------------------------------------------------------------------------------
# Templates
# ---------------------------------------------------------------------------------------------
def load_templates(path: str | Path | None = None) -> dict[str, Any]:
    p = Path(path) if path is not None else DEFAULT_TEMPLATES
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise TemplateError(f"{p}: cannot read: {exc}") from exc
    try:
        if p.suffix.lower() == ".json":
            doc = json.loads(text)
        else:
            import yaml

            doc = yaml.safe_load(text)
    except Exception as exc:  # noqa: BLE001 - YAML/JSON syntax
        raise TemplateError(f"{p}: not valid {'JSON' if p.suffix.lower() == '.json' else 'YAML'}: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("families"), dict):
        raise TemplateError(f"{p}: expected a mapping with 'prompt_version' and 'families'")
    if not isinstance(doc.get("prompt_version"), str) or not doc["prompt_version"]:
        raise TemplateError(f"{p}: 'prompt_version' must be a non-empty string")
    for fam, entries in doc["families"].items():
        if fam not in PROTOCOLS:
            raise TemplateError(f"{p}: unknown family {fam!r} (known: {', '.join(PROTOCOLS)})")
        if not isinstance(entries, dict):
            raise TemplateError(f"{p}: families.{fam} must be a mapping of subtrack → templates")
        for st, t in entries.items():
            if st not in SUBTRACKS:
                raise TemplateError(f"{p}: families.{fam}: unknown subtrack {st!r}")
            if not isinstance(t, dict) or not isinstance(t.get("default"), str):
                raise TemplateError(f"{p}: families.{fam}.{st} needs a 'default' template string")
            for v in ("default", "concise", "text_parameter"):
                if v in t and not isinstance(t[v], str):
                    raise TemplateError(f"{p}: families.{fam}.{st}.{v} must be a string")
            for name in re.findall(r"\{([a-z_]+)\}", "".join(str(t.get(v, "")) for v in
                                                            ("default", "concise", "text_parameter"))):
                if name not in PLACEHOLDERS:
                    # unknown names are left as text; warn through the record instead of failing
                    pass
    doc["_source"] = str(p)
    doc["_sha256"] = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return doc


def render(template: str, values: Mapping[str, str]) -> str:
    """Substitute the known placeholders; a known placeholder without a value is an error."""
    def sub(m: re.Match) -> str:
        k = m.group(1)
        if k not in values:
            raise TemplateError(f"placeholder {{{k}}} has no value for this prompt")
        return values[k]

    return _PH_RE.sub(sub, template)


# ---------------------------------------------------------------------------------------------
# Case values
# ---------------------------------------------------------------------------------------------
def fmt_seconds(t: float) -> str:
    """Seconds for a prompt: up to three decimals, no trailing zeros (0.5, 1.375, 0.717)."""
    s = f"{float(t):.3f}".rstrip("0").rstrip(".")
    return s or "0"


def formula_choices(case: EvalCase) -> str:
    if case.formula is None:
        raise CaseFormatError(f"{case.case_id}: no formula choices")
    out = []
    for letter, c in zip("ABCD", case.formula.choices):
        c = str(c).strip()
        out.append(c if re.match(r"^[A-D][.)]\s", c) else f"{letter}. {c}")
    return "\n".join(out)


def _annotation_labels(case: EvalCase) -> list[dict[str, Any]] | None:
    arts = case.extra.get("artifacts") if isinstance(case.extra, dict) else None
    rel = arts.get("annotations") if isinstance(arts, dict) else None
    if not rel:
        return None
    try:
        p = safe_join(case.path, rel)
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (UnsafePathError, OSError, ValueError):
        return None
    labels = doc.get("labels") if isinstance(doc, dict) else None
    return labels if isinstance(labels, list) else None


def _direction_words(dx: float, dy: float) -> str:
    """Image-plane direction (x right, y down) in words plus degrees above the horizontal."""
    ang = round(math.degrees(math.atan2(-dy, dx))) + 0  # + 0 turns −0 into 0
    horiz = "right" if dx > 1e-9 else "left" if dx < -1e-9 else ""
    vert = "up" if -dy > 1e-9 else "down" if -dy < -1e-9 else ""
    if abs(dx) > 5 * abs(dy):
        vert = ""
    if abs(dy) > 5 * abs(dx):
        horiz = ""
    word = " and ".join(w for w in (horiz, vert) if w) or "none"
    ang = 0 if ang == 0 else ang
    return f"towards the {word} of the picture ({ang:+d}° from the rightward horizontal, counter-clockwise)"


def initial_directions(case: EvalCase) -> dict[str, str]:
    """Per moving object, the image direction of its initial velocity, from the GT tracks and camera."""
    tracks = case.object_tracks()
    K, E = case.intrinsic, case.extrinsic
    if tracks is None or K is None or E is None:
        return {}
    out = {}
    for oid, vel in tracks.velocities.items():
        v = np.asarray(vel[0], float)
        p = np.asarray(tracks.positions[oid][0], float)
        if not (np.all(np.isfinite(v)) and np.all(np.isfinite(p))) or np.linalg.norm(v) < 1e-6:
            continue

        def proj(X):
            c = E[:, :3] @ X + E[:, 3]
            uvw = K @ c
            return uvw[:2] / uvw[2]

        a, b = proj(p), proj(p + 1e-3 * v / np.linalg.norm(v))
        d = b - a
        if np.linalg.norm(d) < 1e-12:
            out[oid] = "straight towards or away from the camera"
        else:
            out[oid] = _direction_words(float(d[0]), float(d[1]))
    return out


def parameters_text(case: EvalCase) -> str:
    """The quantities of the infographic as structured text, one line per entity."""
    objects = {o.id: o for o in case.objects}
    dirs = initial_directions(case)
    labels = _annotation_labels(case)
    lines: list[str] = []
    if labels is not None:
        for lab in labels:
            kind = lab.get("kind")
            text = lab.get("text") or " ".join(lab.get("lines") or [])
            text = "; ".join(s.strip() for s in str(text).splitlines() if s.strip())
            if not text or kind == "axis":
                continue
            oid = lab.get("object_id")
            if oid:
                o = objects.get(oid)
                desc = ", ".join(str(x).replace("_", " ") for x in
                                 (None if o is None else o.shape, None if o is None else o.material) if x)
                line = f"- object '{oid}'" + (f" ({desc})" if desc else "") + f": {text}"
                if oid in dirs and "v0" in text:
                    line += f"; v0 points {dirs[oid]}"
            else:
                line = f"- {'scene' if kind in ('global', None) else kind}: {text}"
            lines.append(line)
    else:
        for s in case.annotation_text.splitlines():
            if s.strip():
                lines.append(f"- {s.strip()}")
        for oid, d in dirs.items():
            lines.append(f"- object '{oid}': initial velocity points {d}")
    return "\n".join(lines) if lines else "- (no annotated quantities)"


def _rel_to_root(ds_root: Path, p: Path) -> str:
    try:
        return p.resolve().relative_to(ds_root.resolve()).as_posix()
    except ValueError:
        return p.as_posix()


def input_image(case: EvalCase, ds_root: Path, clean: bool = False) -> str | None:
    """Dataset-relative path of the model input: the annotated first frame (or the clean one)."""
    if case.layout == "orchard":
        arts = case.extra.get("artifacts", {})
        rel = arts.get("first_frame" if clean else "annotated_first_frame")
    else:
        meta = getattr(case.assets, "meta", {}) or {}
        rel = meta.get("clean_first_frame" if clean else "input_image")
    if not rel:
        return None
    try:
        return _rel_to_root(ds_root, safe_join(case.path, rel))
    except UnsafePathError:
        return None


# ---------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------
def _template_key(variant: str) -> str:
    return {"default": "default", "concise": "concise", "text-parameter": "text_parameter"}[variant]


def _output_file(case: EvalCase, st: str, protocol: str, i: int, t: float | None) -> str:
    if protocol == "video":
        return f"cases/{case.case_id}/{st}/rollout_XX.mp4"
    if t is None:
        return f"cases/{case.case_id}/{st}/rollout_XX.png"
    return f"cases/{case.case_id}/{st}/rollout_XX/{keyframe_name(i, t)}"


def _times(case: EvalCase, st: str, protocol: str) -> list[float | None]:
    return list(case.timestamps) if st == "deduction" and protocol == "image" else [None]


def _record(case: EvalCase, protocol: str, variant: str, st: str, i: int, t: float | None, img: str | None,
            prompt: str, expected: Mapping[str, Any], prompt_version: str, num_rollouts: int) -> dict[str, Any]:
    return {
        "prompt_version": prompt_version, "variant": variant, "protocol": protocol,
        "case_id": case.case_id, "subtrack": st, "timestamp": t, "input_image": img,
        "prompt": prompt, "expected_output": dict(expected, file=_output_file(case, st, protocol, i, t)),
        "num_rollouts": num_rollouts,
    }


def case_prompts(case: EvalCase, ds_root: Path, templates: Mapping[str, Any], protocol: str, variant: str,
                 num_rollouts: int, subtracks: Iterable[str] = SUBTRACKS) -> tuple[list[dict], list[str]]:
    """(records, notes) for one case."""
    fam = templates["families"].get(protocol)
    if fam is None:
        return [], [f"the template file has no '{protocol}' family"]
    recs, notes = [], []
    key = _template_key(variant)
    img = input_image(case, ds_root, clean=variant == "text-parameter")
    base_vals = {"target_time": fmt_seconds(case.target_time), "physics_duration": fmt_seconds(case.physics_duration)}
    for st in subtracks:
        entry = fam.get(st)
        if entry is None:
            notes.append(f"{case.case_id}/{st}: no template for the {protocol} family")
            continue
        tmpl = entry.get(key)
        if tmpl is None:
            if variant == "text-parameter" and st == "perception_text":
                continue  # reading overlays does not exist without overlays (paper Table 3: —)
            notes.append(f"{case.case_id}/{st}: no '{key}' template; using 'default'")
            tmpl = entry["default"]
        vals = dict(base_vals)
        if "{formula_choices}" in tmpl:
            vals["formula_choices"] = formula_choices(case)
        if "{parameters}" in tmpl:
            vals["parameters"] = parameters_text(case)
        expected = dict(entry.get("expected_output") or {})
        for i, t in enumerate(_times(case, st, protocol)):
            v = dict(vals)
            if t is not None:
                v["time_point"] = fmt_seconds(t)
            recs.append(_record(case, protocol, variant, st, i, t, img, render(tmpl, v), expected,
                                templates["prompt_version"], num_rollouts))
    return recs, notes


def apple_pi_case_prompts(case: EvalCase, ds_root: Path, source, protocol: str, num_rollouts: int,
                          expected_from: Mapping[str, Any], subtracks: Iterable[str] = SUBTRACKS) -> list[dict]:
    """Records for one case from the published package's templates (`source`: an
    `apple_pi_prompts.ApplePiTemplates`). The values are the case's own numbers, as the published
    exporter passes them (formula choices without Orchard's own "A. " labels, which the published
    builder adds itself); `expected_output` comes from our shipped file (what is scored, not wording)."""
    from .apple_pi_prompts import bare_choices

    if case.formula is None:
        raise CaseFormatError(f"{case.case_id}: no formula choices")
    choices = bare_choices(case.formula.choices)
    fam = expected_from["families"].get(protocol, {})
    img = input_image(case, ds_root)
    recs = []
    for st in subtracks:
        expected = dict((fam.get(st) or {}).get("expected_output") or {})
        for i, t in enumerate(_times(case, st, protocol)):
            prompt = source.render(protocol, st, formula_choices=choices,
                                   target_time=case.target_time, physics_duration=case.physics_duration,
                                   time_point=t)
            recs.append(_record(case, protocol, "default", st, i, t, img, prompt, expected, source.prompt_version,
                                num_rollouts))
    return recs


def build_prompts(cases: str | Path | Dataset, protocol: str = "video", variant: str = "default",
                  templates: str | Path | None = None, subtracks: Iterable[str] = SUBTRACKS
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    """Prompt records of a dataset. `templates`: None (the shipped file), a template file, or
    "apple-pi" (the paper's prompts from the installed published package)."""
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    if isinstance(templates, str) and templates == APPLE_PI:
        if variant != "default":
            raise TemplateError(f"--templates {APPLE_PI}: the published prompts exist in one variant only "
                                f"(default); {variant!r} is Orchard's own (use the shipped templates)")
        from .apple_pi_prompts import load_apple_pi

        source = load_apple_pi()           # fails here, before any case is read, when it is not installed
        ds = cases if isinstance(cases, Dataset) else load_dataset(cases)
        expected_from = load_templates(None)
        recs = []
        notes = [f"dataset problem (case skipped): {p}" for p in ds.problems] + list(source.notes)
        for cid in sorted(ds.cases):
            try:
                recs.extend(apple_pi_case_prompts(ds.cases[cid], ds.root, source, protocol, ds.num_rollouts,
                                                  expected_from, subtracks))
            except (CaseFormatError, TemplateError) as exc:
                notes.append(f"{cid}: {exc}")
        fractional = sorted(cid for cid, c in ds.cases.items() if float(c.physics_duration) != int(c.physics_duration))
        if protocol == "video" and fractional and "deduction" in subtracks:
            notes.append(f"{len(fractional)} case(s) have a non-integer physics_duration (e.g. {fractional[0]}); "
                         f"release 1.0 of the published builder states T in whole seconds (int(T))")
        for r in recs:
            r["templates"] = dict(source.info)
        return recs, notes
    ds = cases if isinstance(cases, Dataset) else load_dataset(cases)
    tm = load_templates(templates)
    recs: list[dict[str, Any]] = []
    notes = [f"dataset problem (case skipped): {p}" for p in ds.problems]
    for cid in sorted(ds.cases):
        try:
            r, n = case_prompts(ds.cases[cid], ds.root, tm, protocol, variant, ds.num_rollouts, subtracks)
        except (CaseFormatError, TemplateError) as exc:
            notes.append(f"{cid}: {exc}")
            continue
        recs.extend(r)
        notes.extend(n)
    shipped = Path(tm["_source"]).resolve() == DEFAULT_TEMPLATES.resolve()
    for r in recs:
        r["templates"] = {"source": "orchard" if shipped else "custom", "file": Path(tm["_source"]).name,
                          "sha256": tm["_sha256"]}
    return recs, notes


# ---------------------------------------------------------------------------------------------
# Which prompts a submission answered
# ---------------------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def shipped_prompt_version() -> str:
    return str(load_templates(None)["prompt_version"])


def prompt_source(prompt_version: str | None) -> str:
    """The template source a declared prompt_version stands for: "apple-pi" (the published release's
    prompts, version 1.0), "orchard" (our shipped templates), "custom" (any other) or "unknown"
    (nothing declared)."""
    if prompt_version is None or str(prompt_version) == "":
        return "unknown"
    if str(prompt_version) == APPLE_PI_PROMPT_VERSION:
        return APPLE_PI
    try:
        if str(prompt_version) == shipped_prompt_version():
            return "orchard"
    except TemplateError:  # pragma: no cover - the shipped file is part of the package
        pass
    return "custom"


def prompt_provenance(prompt_version: str | None) -> dict[str, Any]:
    """A run's record of the prompts its predictions answered (from submission.json's prompt_version);
    for the published prompts, also what the installed package would render them with."""
    out: dict[str, Any] = {"source": prompt_source(prompt_version),
                           "prompt_version": None if prompt_version is None else str(prompt_version)}
    if out["source"] == APPLE_PI:
        from .apple_pi_prompts import installed_info

        out["apple_pi"] = installed_info()
    return out


def write_jsonl(records: Iterable[Mapping[str, Any]], path: str | Path) -> int:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    tmp = p.with_name(p.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for r in records:
            fh.write(json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n")
            n += 1
    tmp.replace(p)
    return n
