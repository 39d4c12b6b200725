"""`orchard-build`: build case directories from configs, and validate datasets.

    orchard-build --task inclined_plane [--out orchard/] [--scenes scenes/] [--jobs N]
    orchard-build --all
    orchard-build validate orchard/
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import __version__
from .config import default_materials_path
from .errors import ConfigError, OrchardError
from .materials import load_materials
from .resources import scenes_dir
from .tasks import TASK_NAMES

SUBCOMMANDS = ("build", "validate", "sheet", "qa", "generate", "export")
SUBCOMMANDS += ("export-usd",)  # Isaac Sim: the OpenUSD stage of a case
SUBCOMMANDS += ("ingest", "annotate", "agreement")  # real-world cases: orchard_build/realworld/cli.py
SUBCOMMANDS += ("doctor",)  # what works on this machine: orchard_build/doctor.py


def _build_parser(prog: str = "orchard-build") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Build Orchard case directories from case configs.")
    sel = p.add_mutually_exclusive_group(required=True)
    sel.add_argument("--task", action="append", choices=TASK_NAMES, metavar="TASK",
                     help=f"task to build (repeatable): {', '.join(TASK_NAMES)}")
    sel.add_argument("--all", action="store_true", help="build every task")
    sel.add_argument("--config", action="extend", nargs="+", type=Path, metavar="FILE", help="build these config files")
    p.add_argument("--out", type=Path, default=Path("orchard"), help="dataset root (default: ./orchard)")
    p.add_argument("--scenes", type=Path, default=None, help="config folder (default: the shipped scenes/)")
    p.add_argument("--materials", type=Path, default=None, help="material library (default: <scenes>/materials.yaml)")
    p.add_argument("--jobs", type=int, default=1, help="parallel worker processes (default 1)")
    p.add_argument("--force", action="store_true", help="rebuild cases whose config and tool version are unchanged")
    p.add_argument("--no-render", action="store_true",
                   help="write the JSON/text artifacts only (no simulation engine, images or video)")
    p.add_argument("--allow-qa-failures", action="store_true",
                   help="keep cases that fail automatic QA (their qa.json says why)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--backend", choices=("mujoco", "isaac"), default=None,
                   help="simulation/render engine for every case (default: the config's render.backend, else mujoco); "
                        "isaac needs NVIDIA Isaac Sim (docs/isaac-sim.md)")
    p.add_argument("--version", action="version", version=f"orchard-build {__version__}")
    return p


def _validate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-build validate",
                                description="Check a dataset against the schemas and cross-file rules.")
    p.add_argument("dataset", type=Path, help="dataset root holding dataset.json")
    p.add_argument("--materials", type=Path, default=None,
                   help="material library to check masses against (default: the shipped one)")
    return p


def _sheet_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-build sheet",
                                description="Write one contact-sheet PNG per task of a rendered dataset.")
    p.add_argument("dataset", type=Path, help="dataset root holding dataset.json")
    p.add_argument("--out", type=Path, default=Path("docs/contact_sheets"), help="output folder")
    p.add_argument("--per-task", type=int, default=6, help="cases shown per task (default 6)")
    p.add_argument("--thumb-width", type=int, default=320, help="thumbnail width in pixels (default 320)")
    return p


def _cmd_sheet(args: argparse.Namespace) -> int:
    from .contact_sheet import write_sheets

    for path in write_sheets(args.dataset, args.out, args.per_task, args.thumb_width):
        print(path)
    return 0


def _qa_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-build qa",
                                description="Run automatic QA on every case of a dataset; writes qa.json per case.")
    p.add_argument("dataset", type=Path, help="dataset root holding dataset.json")
    p.add_argument("--materials", type=Path, default=None, help="material library (default: the shipped one)")
    return p


def _cmd_qa(args: argparse.Namespace) -> int:
    from .io import read_json
    from .mechanics import solve
    from .qa import qa_summary, write_qa
    from .config import load_config

    materials = load_materials(args.materials or default_materials_path())
    index = read_json(args.dataset / "dataset.json")
    reports = []
    for entry in index["cases"]:
        case = args.dataset / entry["path"]
        cfg = load_config(case / "config.yaml", materials)
        report = write_qa(cfg, solve(cfg), case)
        reports.append((cfg.task.name, report))
        for c in report.failures():
            print(f"FAIL {cfg.case_id}: {c.category}/{c.name}: {c.detail}"
                  + (f" (suggestion: {c.suggestion})" if c.suggestion else ""))
    print(qa_summary(reports))
    return 0 if all(r.passed for _, r in reports) else 1


def _generate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-build generate",
                                description="Sample case configs from the declared ranges (deterministic per seed).")
    p.add_argument("--task", required=True, choices=TASK_NAMES, metavar="TASK")
    p.add_argument("--count", type=int, required=True)
    p.add_argument("--seed", type=int, required=True)
    p.add_argument("--out", type=Path, required=True, help="folder for the YAML files, e.g. scenes/free_fall")
    p.add_argument("--start", type=int, default=0, help="first case number (default 0)")
    p.add_argument("--ranges", type=Path, default=None, help="ranges file (default: <scenes>/ranges.yaml)")
    p.add_argument("--materials", type=Path, default=None)
    p.add_argument("--no-engine-check", action="store_true",
                   help="keep samples without simulating them in the embedded engine first (faster; some may then "
                        "fail the build's engine–analytic tolerance)")
    return p


def _cmd_generate(args: argparse.Namespace) -> int:
    from .generate import generate

    ranges = args.ranges or (scenes_dir() / "ranges.yaml")
    materials = load_materials(args.materials or default_materials_path())
    paths = generate(args.task, args.count, args.seed, args.out, ranges, materials, start=args.start,
                     engine_check=not args.no_engine_check)
    print(f"wrote {len(paths)} configs to {args.out}")
    return 0


# ---- Isaac Sim: export-usd and --backend ---------------------------------------------------------
def _export_usd_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-build export-usd",
                                description="Write the OpenUSD stage of a case (the scene the Isaac Sim backend "
                                            "simulates and renders). Needs usd-core: pip install -e '.[isaac]'.")
    p.add_argument("case", type=Path, help="case directory holding config.yaml, or a config .yaml file")
    p.add_argument("--out", type=Path, default=None,
                   help="stage file, .usda (text) or .usd/.usdc (binary) (default: <case dir>/scene.usda)")
    p.add_argument("--materials", type=Path, default=None, help="material library (default: the shipped one)")
    return p


def _cmd_export_usd(args: argparse.Namespace) -> int:
    from .config import load_config
    from .engines.usd_stage import write_stage
    from .io import read_json

    case_dir = args.case if args.case.is_dir() else args.case.parent
    src = args.case / "config.yaml" if args.case.is_dir() else args.case
    if not src.is_file():
        raise ConfigError(src, "", "no case config: give a case directory holding config.yaml, or a config file")
    cfg = load_config(src, load_materials(args.materials or default_materials_path()))
    try:
        recorded = read_json(case_dir / "case.json").get("config", {}).get("materials_sha256")
    except (OSError, ValueError):
        recorded = None
    if recorded and recorded != cfg.materials_sha256:
        print(f"warning: {case_dir} was built with another material library than the one used here", file=sys.stderr)
    out = args.out or case_dir / "scene.usda"
    scene = write_stage(cfg, out)
    print(f"{out}: {cfg.case_id}, {len(cfg.objects)} object(s), {scene.steps_per_second} physics steps/s, "
          f"pair coefficients: {scene.plan.strategy}")
    for a, b in scene.inexact_pairs:
        print(f"warning: no PhysX combine mode gives the {a}–{b} pair coefficients exactly", file=sys.stderr)
    return 0


def _apply_backend_option(args: argparse.Namespace) -> None:
    """--backend: fail now, with install instructions, if the engine cannot run here (the build then
    passes the name down to every case)."""
    name = getattr(args, "backend", None)
    if name == "isaac":
        from .engines.isaac_backend import require_isaac

        require_isaac()
        if args.jobs > 1:
            raise ConfigError("--jobs", "", "the isaac backend runs one Isaac Sim per process: use --jobs 1")


def _export_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-build export",
                                description="Write a rendered Orchard dataset in another published layout.")
    p.add_argument("dataset", type=Path, help="dataset root holding dataset.json")
    p.add_argument("--format", choices=["apple-pi-gt"], default="apple-pi-gt")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--no-progress", action="store_true")
    return p


def _cmd_export(args: argparse.Namespace) -> int:
    from .export_apple_pi import export_dataset

    done = export_dataset(args.dataset, args.out, progress=not args.no_progress)
    print(f"exported {len(done)} cases in the {args.format} layout → {args.out}")
    return 0


def _top_help() -> str:
    return (_build_parser().format_help()
            + "\nsubcommands:\n  validate DIR   check a dataset (orchard-build validate --help)\n"
            + "  export-usd CASE  the case's OpenUSD stage for Isaac Sim (orchard-build export-usd --help)\n"
            + "  sheet DIR      contact sheets of a rendered dataset (orchard-build sheet --help)\n"
            + "  ingest VIDEO   a real-world case from a clip (orchard-build ingest --help)\n"
            + "  annotate push|pull DIR  Label Studio round trip of real-world cases\n"
            + "  agreement A B  inter-annotator Cohen's κ and ICC(2,1) of two passes\n"
            + "  qa DIR         automatic case QA (orchard-build qa --help)\n"
            + "  generate       sample configs from declared ranges (orchard-build generate --help)\n"
            + "  export DIR     write a dataset in the Apple-PI-GT layout (orchard-build export --help)\n"
            + "  doctor         what works on this machine, with fixes (orchard-build doctor --help)\n")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(_top_help())
        return 0
    command = argv.pop(0) if argv and argv[0] in SUBCOMMANDS else "build"
    try:
        if command == "validate":
            return _cmd_validate(_validate_parser().parse_args(argv))
        if command == "sheet":
            return _cmd_sheet(_sheet_parser().parse_args(argv))
        if command == "export-usd":
            return _cmd_export_usd(_export_usd_parser().parse_args(argv))
        if command == "qa":
            return _cmd_qa(_qa_parser().parse_args(argv))
        if command == "generate":
            return _cmd_generate(_generate_parser().parse_args(argv))
        if command == "export":
            return _cmd_export(_export_parser().parse_args(argv))
        if command == "doctor":
            from .doctor import main as doctor

            return doctor(argv, prog="orchard-build doctor")
        if command in ("ingest", "annotate", "agreement"):  # real-world cases
            from .realworld.cli import run as run_realworld

            return run_realworld(command, argv)
        return _cmd_build(_build_parser().parse_args(argv))
    except OrchardError as exc:
        errors = getattr(exc, "errors", [str(exc)])
        for e in errors:
            print(f"error: {e}", file=sys.stderr)
        print(f"{len(errors)} error(s); nothing was written.", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: finished cases are kept, the case in progress was discarded", file=sys.stderr)
        return 130


def _cmd_build(args: argparse.Namespace) -> int:
    from .build import build, find_configs

    _apply_backend_option(args)

    scenes = args.scenes or scenes_dir()
    materials = args.materials or default_materials_path(scenes)
    if args.config:
        paths = list(args.config)
    else:
        tasks = TASK_NAMES if args.all else tuple(dict.fromkeys(args.task))
        paths = find_configs(scenes, tasks)
        missing = [t for t in tasks if not find_configs(scenes, [t])]
        if missing:
            raise ConfigError(scenes, "", f"no configs for task(s) {', '.join(missing)} under {scenes}")
    if args.jobs < 1:
        raise ConfigError("--jobs", "", "must be at least 1")
    report = build(paths, materials, args.out, jobs=args.jobs, force=args.force,
                   progress=not args.no_progress, render=not args.no_render,
                   allow_qa_failures=args.allow_qa_failures, backend=getattr(args, "backend", None))
    print(f"built {len(report.built)}, skipped {len(report.skipped)} (unchanged), failed {len(report.failed)} "
          f"→ {args.out}")
    print(report.summary_table())
    for case_id, reason in report.failed:
        print(f"FAILED {case_id}: {reason}", file=sys.stderr)
    return 1 if report.failed else 0


def _cmd_validate(args: argparse.Namespace) -> int:
    from .validate import validate_dataset

    materials = load_materials(args.materials or default_materials_path())
    problems = validate_dataset(args.dataset, materials)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s) in {args.dataset}", file=sys.stderr)
        return 1
    print(f"{args.dataset}: valid")
    return 0


if __name__ == "__main__":
    sys.exit(main())
