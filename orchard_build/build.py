"""Build pipeline: configs → (all validated first) → one case directory each, staged then renamed.

Nothing is written until every selected config has been loaded, resolved and solved, so a bad
config stops the build with its error and leaves the output directory untouched. Each case is
written into a staging directory under the output root and renamed into place, so an interrupted
build never leaves half a case.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import traceback
from concurrent.futures import as_completed
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Callable, Iterable

from . import __version__
from .artifacts import case_doc, events_doc, timestamps_doc, velocity_doc
from .config import CaseConfig, load_config
from .errors import ConfigError, OrchardError, PhysicsError
from .formulas import build_formula_info
from .io import read_json, replace_dir, write_bytes_atomic, write_json, write_text_atomic
from .materials import MaterialLibrary, load_materials
from .mechanics import solve
from .mechanics.types import Trajectory
from .pool import process_pool, removed_if_abandoned
from .provenance import code_sha256, dependency_versions, provenance
from .tasks import TASK_NAMES

CASES_DIR = "cases"
STAGING_DIR = ".staging"


@dataclass
class PreparedCase:
    path: Path
    config: CaseConfig
    trajectory: Trajectory


@dataclass
class BuildReport:
    built: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)

    def summary_table(self) -> str:
        """Per task: built, skipped, failed (with the first line of each distinct reason)."""
        rows: dict[str, list] = {}
        for kind, ids in (("built", self.built), ("skipped", self.skipped), ("failed", [c for c, _ in self.failed])):
            for cid in ids:
                task = cid.split("/")[1]
                rows.setdefault(task, [0, 0, 0, []])[("built", "skipped", "failed").index(kind)] += 1
        for cid, reason in self.failed:
            kind = reason.split(":")[-2].strip() if "QA failed" in reason else reason.split("\n")[0][-80:]
            rows[cid.split("/")[1]][3].append(kind)
        lines = ["| task | built | skipped | failed | why |", "|---|---|---|---|---|"]
        for task in sorted(rows):
            b, s, f, why = rows[task]
            reasons = "; ".join(sorted(set(why)))[:160] or "—"
            lines.append(f"| {task} | {b} | {s} | {f} | {reasons} |")
        return "\n".join(lines)


class BuildErrors(OrchardError):
    def __init__(self, errors: list[str]):
        self.errors = errors
        super().__init__("\n".join(errors))


# ---------------------------------------------------------------------------------------------
def find_configs(scenes: Path, tasks: Iterable[str]) -> list[Path]:
    found = []
    for task in tasks:
        folder = scenes / task
        if folder.is_dir():
            found.extend(sorted(p for p in folder.rglob("*.yaml") if p.is_file()))
    return found


def prepare(paths: list[Path], materials: MaterialLibrary, backend: str | None = None) -> list[PreparedCase]:
    """Load, resolve and solve every config; raise BuildErrors listing every problem found.
    `backend` overrides the simulation/render backend of every case (render.backend)."""
    prepared, errors, seen = [], [], {}
    for path in paths:
        try:
            cfg = load_config(path, materials)
            expected_task = path.parent.name
            if expected_task in TASK_NAMES and cfg.task.name != expected_task:
                raise ConfigError(path, "task", f"config says {cfg.task.name!r} but lives in scenes/{expected_task}/")
            if cfg.case_id in seen:
                raise ConfigError(path, "case_number", f"duplicate case id {cfg.case_id} (also {seen[cfg.case_id]})")
            seen[cfg.case_id] = path
            if backend:
                cfg.render["backend"] = backend
            prepared.append(PreparedCase(path, cfg, solve(cfg)))
        except (ConfigError, PhysicsError) as exc:
            errors.append(str(exc))
    if errors:
        raise BuildErrors(errors)
    return prepared


# ---------------------------------------------------------------------------------------------
# Artifact producers: each writes into the staging directory and records what it wrote.
Producer = Callable[[PreparedCase, Path, dict], None]


def write_core_artifacts(case: PreparedCase, stage: Path, artifacts: dict) -> None:
    cfg, traj = case.config, case.trajectory
    write_bytes_atomic(stage / "config.yaml", case.path.read_bytes())
    write_json(stage / "config_resolved.json", cfg.to_resolved_dict())
    write_text_atomic(stage / "physics_duration.txt", f"{cfg.timing.duration:g}\n")
    write_json(stage / "timestamps.json", timestamps_doc(cfg, traj))
    write_json(stage / "velocity.json", velocity_doc(cfg, traj))
    write_json(stage / "events.json", events_doc(cfg, traj))
    write_json(stage / "formula_info.json", build_formula_info(cfg, traj.law_steps()))
    artifacts.update({
        "config": "config.yaml", "config_resolved": "config_resolved.json",
        "physics_duration": "physics_duration.txt", "timestamps": "timestamps.json",
        "velocity": "velocity.json", "events": "events.json", "formula_info": "formula_info.json",
    })


def write_qa_artifact(case: PreparedCase, stage: Path, artifacts: dict, strict: bool = True) -> None:
    from .qa import QAError, write_qa

    report = write_qa(case.config, case.trajectory, stage)
    artifacts["qa"] = "qa.json"
    if strict and not report.passed:
        failed = "; ".join(f"{c.category}/{c.name}: {c.detail}" for c in report.failures())
        raise QAError(f"{case.path}: QA failed: {failed} (build with --allow-qa-failures to keep it)")


def producers_for(render: bool, allow_qa_failures: bool = False) -> list[Producer]:
    """JSON/text artifacts always; images, video and render passes when `render` is set; QA last."""
    producers: list[Producer] = [write_core_artifacts]
    if render:
        from .render_case import write_render_artifacts

        producers.append(write_render_artifacts)
    producers.append(partial(write_qa_artifact, strict=not allow_qa_failures))
    return producers


def case_dir(out_root: Path, case_id: str) -> Path:
    return out_root / CASES_DIR / case_id


def is_up_to_date(case: PreparedCase, out_root: Path, render: bool = True) -> bool:
    """A case is current when its config, material library and tool version are unchanged."""
    path = case_dir(out_root, case.config.case_id) / "case.json"
    try:
        doc = read_json(path)
    except (OSError, ValueError):
        return False
    if render and "video" not in doc.get("artifacts", {}):
        return False
    return (doc.get("config", {}).get("sha256") == case.config.config_sha256
            and doc.get("config", {}).get("materials_sha256") == case.config.materials_sha256
            and doc.get("provenance", {}).get("tool_version") == __version__
            and doc.get("provenance", {}).get("code_sha256") == code_sha256()
            and doc.get("provenance", {}).get("dependencies") == dependency_versions())


def build_case(case: PreparedCase, out_root: Path, render: bool = True, allow_qa_failures: bool = False) -> Path:
    staging_root = out_root / STAGING_DIR
    staging_root.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(dir=staging_root, prefix="case-"))
    os.chmod(stage, 0o777 & ~_umask())  # mkdtemp makes the directory private; a case is ordinary data
    with removed_if_abandoned(stage):
        try:
            artifacts: dict[str, str] = {}
            for produce in producers_for(render, allow_qa_failures):
                produce(case, stage, artifacts)
            diag = stage / "diagnostics.json"
            prov = provenance(*((read_json(diag)["engine"], read_json(diag)["playback"]) if diag.is_file() else ()))
            write_json(stage / "case.json", case_doc(case.config, artifacts, prov))
            final = case_dir(out_root, case.config.case_id)
            replace_dir(stage, final)
            return final
        except BaseException:
            shutil.rmtree(stage, ignore_errors=True)
            raise


def write_dataset_index(out_root: Path, name: str = "orchard") -> dict:
    """Index every complete case under out_root/cases (a case is complete once case.json exists)."""
    entries = []
    for case_json in sorted((out_root / CASES_DIR).glob("*/*/*/case.json")):
        doc = read_json(case_json)
        rel = case_json.parent.relative_to(out_root).as_posix()
        entries.append({"case_id": doc["case_id"], "path": rel, "split": "test", "task": doc["task"],
                        "source": doc["source"]})
    index = {"name": name, "version": __version__, "prompt_version": "orchard-prompts-v1", "num_rollouts": 3,
             "layout": "orchard", "generator": {"tool": "orchard-build", "tool_version": __version__},
             "cases": entries}
    write_json(out_root / "dataset.json", index)
    return index


# ---------------------------------------------------------------------------------------------
def _build_one(config_path: str, materials_path: str, out_root: str, render: bool, allow_qa: bool,
               backend: str | None) -> str:
    materials = load_materials(materials_path)
    case = prepare([Path(config_path)], materials, backend)[0]
    return str(build_case(case, Path(out_root), render, allow_qa))


def build(paths: list[Path], materials_path: Path, out_root: Path, jobs: int = 1, force: bool = False,
          progress: bool = True, render: bool = True, allow_qa_failures: bool = False,
          backend: str | None = None) -> BuildReport:
    """Build every config into out_root. `render=False` writes the JSON/text artifacts only."""
    materials = load_materials(materials_path)
    prepared = prepare(paths, materials, backend)  # raises before anything is written
    report = BuildReport()
    todo = []
    for case in prepared:
        if not force and is_up_to_date(case, out_root, render):
            report.skipped.append(case.config.case_id)
        else:
            todo.append(case)
    out_root.mkdir(parents=True, exist_ok=True)
    bar = _progress(len(todo), progress)
    try:
        if jobs <= 1 or len(todo) <= 1:
            for case in todo:
                _run_guarded(report, case.config.case_id, lambda c=case: build_case(c, out_root, render, allow_qa_failures))
                bar.update(1)
        else:
            with process_pool(jobs) as pool:
                futures = {pool.submit(_build_one, str(c.path), str(materials_path), str(out_root), render,
                                       allow_qa_failures, backend): c.config.case_id
                           for c in todo}
                for fut in as_completed(futures):
                    _run_guarded(report, futures[fut], fut.result)
                    bar.update(1)
    finally:
        bar.close()
        staging = out_root / STAGING_DIR
        if staging.is_dir() and not any(staging.iterdir()):
            staging.rmdir()
    report.built.sort()
    write_dataset_index(out_root)
    return report


def _run_guarded(report: BuildReport, case_id: str, fn: Callable[[], object]) -> None:
    try:
        fn()
        report.built.append(case_id)
    except OrchardError as exc:
        report.failed.append((case_id, str(exc)))
    except Exception as exc:  # a bug in one case must not lose the others; keep the trace for the report
        report.failed.append((case_id, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _progress(total: int, enabled: bool):
    from tqdm import tqdm

    return tqdm(total=total, unit="case", disable=not enabled or total <= 1 or os.environ.get("ORCHARD_NO_PROGRESS") == "1")
