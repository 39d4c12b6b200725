"""The prompt of each subtrack as the model saw it, rendered again from the case (EvalCase, through
orchard_eval.prompts) with the templates the run's provenance names (`provenance.prompts`): Orchard's
shipped templates, or the paper's from the installed `apple_pi` package. Neither the records nor
the prediction dir store the text, so a run on a custom template file, or one that declares no
prompt version, gets a note instead of a guess."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from .html import esc


@lru_cache(maxsize=1)
def _shipped():
    from orchard_eval.prompts import load_templates

    return load_templates(None)


@lru_cache(maxsize=1)
def _apple_pi():
    from orchard_eval.apple_pi_prompts import load_apple_pi

    return load_apple_pi()


def prompt_records(case, ds_root: Path, prompts: dict, protocol: str, num_rollouts: int) -> tuple[list[dict], str]:
    """(prompt records of the case, a note to show with them, or the reason there are none)."""
    from orchard_eval import prompts as P

    source = str(prompts.get("source") or "unknown")
    version = prompts.get("prompt_version")
    if source == "orchard":
        tm = _shipped()
        if str(tm["prompt_version"]) != str(version):
            return [], (f"the run answered prompts {version}, the shipped templates are now "
                        f"{tm['prompt_version']}: their text is not shown")
        recs, notes = P.case_prompts(case, ds_root, tm, protocol, "default", num_rollouts)
        return recs, ("Orchard's shipped templates, version " + str(version) + ", default variant (the run "
                      "does not record the variant; text-parameter and concise runs saw other wording)"
                      + ("; " + "; ".join(notes) if notes else ""))
    if source == P.APPLE_PI:
        try:
            src = _apple_pi()
        except Exception as exc:  # noqa: BLE001 - package absent or incompatible: say so
            return [], f"the paper's prompts need the apple_pi package: {exc}"
        recs = P.apple_pi_case_prompts(case, ds_root, src, protocol, num_rollouts, _shipped())
        return recs, f"the paper's prompts (apple_pi package, prompt version {src.prompt_version})"
    return [], (f"the run answered prompts of a {source} template set (prompt version {version!r}); "
                "only Orchard's shipped and the paper's prompts can be shown")


def prompts_block(case, ds_root: Path | None, prompts: dict, protocol: str, num_rollouts: int) -> str:
    """The Prompts section of a case page: per subtrack (per timestamp for image-protocol Deduction)."""
    if case is None or ds_root is None:
        return '<div class="warn">prompts: the case is not on disk</div>'
    try:
        recs, note = prompt_records(case, ds_root, prompts, protocol, num_rollouts)
    except Exception as exc:  # noqa: BLE001 - a case the templates cannot fill still gets its page
        return f'<div class="warn">prompts could not be rendered: {esc(type(exc).__name__)}: {esc(exc)}</div>'
    if not recs:
        return f'<div class="warn">prompts: {esc(note)}</div>'
    parts = [f'<p class="legend">{esc(note)}; protocol {esc(protocol)}</p>']
    for r in recs:
        when = f" at t = {r['timestamp']:.3f} s" if r.get("timestamp") is not None else ""
        parts.append(f'<details class="prompt"><summary>{esc(r["subtrack"])}{esc(when)} · input image '
                     f'<code>{esc(r.get("input_image"))}</code> · answer <code>{esc(r["expected_output"].get("file"))}'
                     f'</code></summary><pre class="prompt">{esc(r["prompt"])}</pre></details>')
    return "".join(parts)
