"""Rubric prompt templates: one versioned YAML file per rubric (`rubric_prompts/<rubric>.yaml`).

A template file holds

    rubric:   the rubric name (`orchard_eval.rubrics.RUBRICS`)
    version:  the template's version string (it is part of every cache key and result)
    system:   the system message
    template: the user message, with `string.Template` placeholders (`${name}`), so the JSON example
              in it needs no escaping
    images:   the attached images in order: {role, caption, optional}; roles are `answer`,
              `reference:<image role>` (`orchard_eval.cases.IMAGE_ROLES`), `gt_frame` (keyframe
              rubric) and `gt_frames` (video rubric)
    gt_section (video Deduction only): text put in place of `${gt_section}` when GT frames are sent

Placeholders: `correct_letter`, `correct_formula`, `substituted_formula`, `annotation` (F-T),
`target_time` (F-G), `time_point` (keyframe, two decimals), `physics_duration`, `n_frames`,
`gt_section` (video). Unknown placeholders are an error at load time, so is a template that does not
name every criterion key of its rubric (the judge must be asked for exactly those keys).

`load_prompts(path)` reads the packaged defaults and then, when `path` is a directory or a file, a
user's replacements (same format; a user file replaces the default of its rubric).
"""
from __future__ import annotations

import hashlib
import json
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import yaml

from ..rubrics import RUBRICS

PROMPT_DIR = Path(__file__).resolve().parent / "rubric_prompts"
PLACEHOLDERS = frozenset({"correct_letter", "correct_formula", "substituted_formula", "annotation", "target_time",
                          "time_point", "physics_duration", "n_frames", "gt_section"})
IMAGE_ROLE_PREFIXES = ("answer", "reference:", "gt_frame", "gt_frames")


class PromptError(ValueError):
    """A rubric prompt file that does not follow the format above."""


@dataclass(frozen=True)
class ImageSlot:
    role: str
    caption: str
    optional: bool = False


@dataclass(frozen=True)
class RubricPrompt:
    rubric: str
    version: str
    system: str
    template: str
    images: tuple[ImageSlot, ...]
    gt_section: str = ""
    source: str = ""

    @property
    def digest(self) -> str:
        """SHA-256 of the prompt's content (what a cache key needs besides the rendered text)."""
        doc = {"rubric": self.rubric, "version": self.version, "system": self.system, "template": self.template,
               "images": [[s.role, s.caption, s.optional] for s in self.images], "gt_section": self.gt_section}
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    def render(self, values: Mapping[str, Any], with_gt: bool = False) -> str:
        """The user message with placeholders filled; missing values render as "(not available)"."""
        vals = {k: "(not available)" for k in PLACEHOLDERS}
        vals["gt_section"] = self.gt_section.strip() if with_gt else ""
        for k, v in values.items():
            if k in PLACEHOLDERS and v is not None and k != "gt_section":
                vals[k] = str(v)
        return string.Template(self.template).substitute(vals)


def _placeholders(template: str) -> set[str]:
    names = set()
    for m in string.Template.pattern.finditer(template):
        if m.group("invalid") is not None:
            raise PromptError(f"invalid '$' at offset {m.start('invalid')} (write $$ for a literal dollar)")
        n = m.group("named") or m.group("braced")
        if n:
            names.add(n)
    return names


def parse_prompt(doc: Any, source: str = "") -> RubricPrompt:
    if not isinstance(doc, dict):
        raise PromptError(f"{source}: not a mapping")
    for k in ("rubric", "version", "system", "template", "images"):
        if k not in doc:
            raise PromptError(f"{source}: missing '{k}'")
    rubric = str(doc["rubric"])
    if rubric not in RUBRICS:
        raise PromptError(f"{source}: unknown rubric {rubric!r}; known: {sorted(RUBRICS)}")
    template = str(doc["template"])
    unknown = _placeholders(template) - PLACEHOLDERS
    if unknown:
        raise PromptError(f"{source}: unknown placeholders {sorted(unknown)}; known: {sorted(PLACEHOLDERS)}")
    missing = [k for k in RUBRICS[rubric].criteria if f'"{k}"' not in template]
    if missing:
        raise PromptError(f"{source}: the template does not ask for the criterion keys {missing}")
    images = []
    for i, s in enumerate(doc["images"] or []):
        if not isinstance(s, dict) or "role" not in s:
            raise PromptError(f"{source}: images[{i}] needs a role")
        role = str(s["role"])
        if not (role in ("answer", "gt_frame", "gt_frames") or role.startswith("reference:")):
            raise PromptError(f"{source}: images[{i}]: unknown role {role!r}")
        images.append(ImageSlot(role, str(s.get("caption", "")), bool(s.get("optional", False))))
    if not any(s.role == "answer" for s in images):
        raise PromptError(f"{source}: no image slot for the answer")
    return RubricPrompt(rubric, str(doc["version"]), str(doc["system"]).strip(), template, tuple(images),
                        str(doc.get("gt_section", "") or ""), source)


def _read(path: Path) -> RubricPrompt:
    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise PromptError(f"{path}: {exc}") from exc
    return parse_prompt(doc, str(path))


@dataclass
class PromptSet:
    prompts: dict[str, RubricPrompt] = field(default_factory=dict)

    def __getitem__(self, rubric: str) -> RubricPrompt:
        try:
            return self.prompts[rubric]
        except KeyError as exc:
            raise PromptError(f"no prompt for rubric {rubric!r}") from exc

    def versions(self) -> dict[str, str]:
        return {k: v.version for k, v in sorted(self.prompts.items())}


def load_prompts(path: str | Path | None = None) -> PromptSet:
    """The packaged prompts, overridden by the user's file or directory of `*.yaml` files."""
    out = PromptSet({p.rubric: p for p in (_read(f) for f in sorted(PROMPT_DIR.glob("*.yaml")))})
    if path is not None:
        p = Path(path)
        files = sorted(p.glob("*.yaml")) + sorted(p.glob("*.yml")) if p.is_dir() else [p]
        if not files:
            raise PromptError(f"{p}: no prompt files")
        for f in files:
            rp = _read(f)
            out.prompts[rp.rubric] = rp
    missing = set(RUBRICS) - set(out.prompts)
    if missing:
        raise PromptError(f"no prompt for rubrics {sorted(missing)}")
    return out


def prompt_values(facts: Mapping[str, Any]) -> dict[str, Any]:
    """Placeholder values from a JudgeRequest's facts (formatting the time point to two decimals)."""
    out: dict[str, Any] = {}
    for k in ("correct_letter", "correct_formula", "substituted_formula", "annotation", "n_frames"):
        if facts.get(k) is not None:
            out[k] = facts[k]
    for k in ("target_time", "physics_duration"):
        if facts.get(k) is not None:
            out[k] = f"{float(facts[k]):g}"
    if facts.get("time_point") is not None:
        out["time_point"] = f"{float(facts['time_point']):.2f}"
    if isinstance(out.get("annotation"), str):
        out["annotation"] = "\n".join("    " + ln for ln in out["annotation"].splitlines()) or "    (none)"
    return out


def case_facts(case: Any) -> dict[str, Any]:
    """The prompt facts of an `EvalCase` (correct letter and formula, substitution, annotation text,
    target time, duration)."""
    f = getattr(case, "formula", None)
    return {
        "correct_letter": None if f is None else f.correct_letter,
        "correct_formula": None if f is None else f.correct_formula,
        "substituted_formula": None if f is None else f.substituted,
        "annotation": getattr(case, "annotation_text", "") or "",
        "target_time": getattr(case, "target_time", None),
        "physics_duration": getattr(case, "physics_duration", None),
    }
