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
"""
from __future__ import annotations

import hashlib
import json
import math
import re
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
        times: list[float | None] = [None]
        if st == "deduction" and protocol == "image":
            times = list(case.timestamps)
        for i, t in enumerate(times):
            v = dict(vals)
            if t is not None:
                v["time_point"] = fmt_seconds(t)
            if protocol == "video":
                f = f"cases/{case.case_id}/{st}/rollout_XX.mp4"
            elif t is None:
                f = f"cases/{case.case_id}/{st}/rollout_XX.png"
            else:
                f = f"cases/{case.case_id}/{st}/rollout_XX/{keyframe_name(i, t)}"
            recs.append({
                "prompt_version": templates["prompt_version"], "variant": variant, "protocol": protocol,
                "case_id": case.case_id, "subtrack": st, "timestamp": t, "input_image": img,
                "prompt": render(tmpl, v), "expected_output": dict(expected, file=f),
                "num_rollouts": num_rollouts,
            })
    return recs, notes


def build_prompts(cases: str | Path | Dataset, protocol: str = "video", variant: str = "default",
                  templates: str | Path | None = None, subtracks: Iterable[str] = SUBTRACKS
                  ) -> tuple[list[dict[str, Any]], list[str]]:
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be one of {PROTOCOLS}, got {protocol!r}")
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
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
    for r in recs:
        r["templates"] = {"file": Path(tm["_source"]).name, "sha256": tm["_sha256"]}
    return recs, notes


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
