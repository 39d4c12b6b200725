"""The paper's own prompts, taken at run time from a user's installation of the published Apple-π
evaluator (Python package `apple_pi`). Orchard ships none of that text: our templates
(`prompt_templates/default.yaml`) are our own wording, so a model prompted with them is not evaluated
under the paper's protocol. `orchard-eval prompts --templates apple-pi` renders the published ones.

What is read from the installed package (its public module layout, release 1.0):

* `apple_pi.prompts.templates`: `VM_PROMPT_TEMPLATES` (video protocol) and `UM_PROMPT_TEMPLATES`
  (image protocol), mappings from subtrack (an enum whose values are our subtrack names) to a
  `str.format` template;
* `apple_pi.prompts.builder.build_prompt` when present: the package's own renderer, called as it is,
  so the prompts are exactly the package's whatever its version;
* `apple_pi.constants.PROMPT_VERSION` (and `NUM_ROLLOUTS`), recorded with every prompt.

Without the builder the templates are formatted here the way release 1.0's builder formats them:
Formulation-Text gets the four choices as `A) …` … `D) …` lines (each indented by two spaces in the
video protocol; exactly four are required), Formulation-Graphic gets `target_time` and image
Deduction `time_point` as the case's numbers, video Deduction gets `physics_duration` as a whole
number of seconds (`int()`, so 1.5 s reads "1"); Perception templates are used as written.
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from .cases import SUBTRACKS
from .prompts import TemplateError

SOURCE = "apple-pi"                 # the value of --templates that selects these prompts
PACKAGE = "apple_pi"
DISTRIBUTION = "apple-pi"
TEMPLATES_MODULE = "apple_pi.prompts.templates"
BUILDER_MODULE = "apple_pi.prompts.builder"
CONSTANTS_MODULE = "apple_pi.constants"
PROMPT_VERSION = "1.0"              # the release's prompt version (what its submissions declare)
TEMPLATE_NAMES = {"video": "VM_PROMPT_TEMPLATES", "image": "UM_PROMPT_TEMPLATES"}
LETTERS = ("A", "B", "C", "D")


class ApplePiUnavailable(TemplateError):
    """The published package is not importable, or does not have the expected layout."""


def _key(k: Any) -> str:
    return str(getattr(k, "value", k))


@dataclass
class ApplePiTemplates:
    templates: dict[str, dict[str, str]]            # protocol -> subtrack -> template text
    prompt_version: str
    num_rollouts: int | None
    builder: Callable[..., str] | None
    info: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def render(self, protocol: str, subtrack: str, *, formula_choices: Iterable[str] | None = None,
               target_time: float | None = None, physics_duration: float | None = None,
               time_point: float | None = None) -> str:
        """One prompt, by the package's builder when it has one, else by the release-1.0 rules."""
        if self.builder is not None:
            try:
                return str(self.builder(protocol, subtrack, formula_choices=None if formula_choices is None
                                        else list(formula_choices), target_time=target_time,
                                        physics_duration=physics_duration, time_point=time_point))
            except (ValueError, KeyError, TypeError, IndexError) as exc:
                raise ApplePiUnavailable(f"{BUILDER_MODULE}.build_prompt({protocol}, {subtrack}): {exc}") from exc
        return format_prompt(self.templates[protocol][subtrack], protocol, subtrack, formula_choices=formula_choices,
                             target_time=target_time, physics_duration=physics_duration, time_point=time_point)


def bare_choices(choices: Iterable[str]) -> list[str]:
    """Formula choices without a leading label of their own position ("A. …", "B) …"): Orchard cases
    label their choices, the published metadata does not, and its builder adds the letters."""
    out = []
    for i, c in enumerate(choices):
        c = str(c).strip()
        letter = LETTERS[i] if i < len(LETTERS) else None
        for sep in (". ", ") "):
            if letter and c.startswith(letter + sep):
                c = c[len(letter) + len(sep):].strip()
                break
        out.append(c)
    return out


def choices_block(choices: Iterable[str], indent: bool) -> str:
    values = [str(c) for c in choices]
    if len(values) != 4:
        raise ApplePiUnavailable(f"the published Formulation-Text prompt needs exactly four formula choices, "
                                 f"got {len(values)}")
    pad = "  " if indent else ""
    return "\n".join(f"{pad}{letter}) {c}" for letter, c in zip(LETTERS, values))


def format_prompt(template: str, protocol: str, subtrack: str, *, formula_choices: Iterable[str] | None = None,
                  target_time: float | None = None, physics_duration: float | None = None,
                  time_point: float | None = None) -> str:
    """Release 1.0's formatting of one template (see the module docstring)."""
    def need(value, name):
        if value is None:
            raise ApplePiUnavailable(f"{protocol} {subtrack}: the prompt needs {name}")
        return value

    try:
        if subtrack == "formulation_text":
            return template.format(formula_choices=choices_block(need(formula_choices, "formula choices"),
                                                                 indent=protocol == "video"))
        if subtrack == "formulation_graphic":
            return template.format(target_time=need(target_time, "target_time"))
        if subtrack == "deduction":
            if protocol == "video":
                return template.format(physics_duration=int(need(physics_duration, "physics_duration")))
            return template.format(time_point=need(time_point, "time_point"))
    except (KeyError, IndexError, ValueError) as exc:
        if isinstance(exc, ApplePiUnavailable):
            raise
        raise ApplePiUnavailable(f"{TEMPLATES_MODULE}: the {protocol} {subtrack} template cannot be formatted: "
                                 f"{type(exc).__name__}: {exc}") from exc
    return template


def _import(name: str):
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if missing == PACKAGE or missing.startswith(PACKAGE + "."):
            raise ApplePiUnavailable(
                f"--templates {SOURCE} renders the paper's prompts from the published Apple-π package "
                f"`{PACKAGE}`, which is not importable here ({exc}). Install the published evaluator into this "
                f"environment (its prompt modules are pure Python: `pip install --no-deps <its checkout>` is "
                f"enough) or put its checkout on PYTHONPATH. Orchard ships none of its text.") from exc
        raise ApplePiUnavailable(f"`{PACKAGE}` is installed but {name} needs {missing!r}: {exc}") from exc
    except Exception as exc:  # noqa: BLE001 - a third-party package failing at import time
        raise ApplePiUnavailable(f"`{PACKAGE}` is installed but {name} fails to import: "
                                 f"{type(exc).__name__}: {exc}") from exc


def _package_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None


def _source_sha256(module) -> str | None:
    try:
        text = inspect.getsource(module)
    except (OSError, TypeError):
        return None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load_apple_pi() -> ApplePiTemplates:
    """The installed package's templates (raises ApplePiUnavailable with what to do otherwise)."""
    mod = _import(TEMPLATES_MODULE)
    templates: dict[str, dict[str, str]] = {}
    for protocol, attr in TEMPLATE_NAMES.items():
        table = getattr(mod, attr, None)
        if not isinstance(table, Mapping):
            raise ApplePiUnavailable(f"{TEMPLATES_MODULE} has no mapping {attr} (is this the published Apple-π "
                                     f"package?)")
        entries = {_key(k): v for k, v in table.items()}
        missing = [st for st in SUBTRACKS if not isinstance(entries.get(st), str)]
        if missing:
            raise ApplePiUnavailable(f"{TEMPLATES_MODULE}.{attr} has no template for {', '.join(missing)}")
        templates[protocol] = {st: entries[st] for st in SUBTRACKS}
    notes: list[str] = []
    try:
        consts = importlib.import_module(CONSTANTS_MODULE)
    except Exception:  # noqa: BLE001 - optional, fall back to the release's values
        consts = None
    version = getattr(consts, "PROMPT_VERSION", None)
    if not isinstance(version, str) or not version:
        notes.append(f"{CONSTANTS_MODULE}.PROMPT_VERSION not found; recording prompt_version {PROMPT_VERSION!r}")
        version = PROMPT_VERSION
    rollouts = getattr(consts, "NUM_ROLLOUTS", None)
    builder = None
    try:
        bmod = importlib.import_module(BUILDER_MODULE)
        builder = getattr(bmod, "build_prompt", None)
        builder = builder if callable(builder) else None
    except ModuleNotFoundError:
        pass
    except Exception as exc:  # noqa: BLE001 - a broken builder: format the templates here instead
        notes.append(f"{BUILDER_MODULE} fails to import ({type(exc).__name__}: {exc}); formatting the templates "
                     f"by the release-1.0 rules instead")
    info = {"source": SOURCE, "module": TEMPLATES_MODULE, "package_version": _package_version(),
            "sha256": _source_sha256(mod), "prompt_version": version,
            "renderer": f"{BUILDER_MODULE}.build_prompt" if builder is not None else "orchard (release-1.0 rules)"}
    return ApplePiTemplates(templates=templates, prompt_version=version,
                            num_rollouts=rollouts if isinstance(rollouts, int) else None,
                            builder=builder, info=info, notes=notes)


def installed_info() -> dict[str, Any]:
    """What an installed package would render with, for a run's provenance; never raises."""
    try:
        t = load_apple_pi()
    except ApplePiUnavailable as exc:
        return {"installed": False, "reason": str(exc).split(". ")[0]}
    return {"installed": True, **{k: t.info[k] for k in ("package_version", "sha256", "prompt_version", "renderer")}}
