"""`orchard-eval`: the evaluator's command line.

    orchard-eval validate-predictions --cases DATASET --predictions PRED_DIR [--json]
    orchard-eval prompts  --cases DATASET --protocol video|image [--variant default|text-parameter|concise]
                          [--templates FILE|apple-pi] --out PROMPTS.jsonl
    orchard-eval run      --cases DATASET --predictions PRED_DIR --out results/<model>/
                          [--judge none|…] [--judge-option KEY=VALUE …] [--jobs N] [--rule paper|published]
                          [--fuse-transitions]
    orchard-eval table    results/* [--out STEM]
    orchard-eval baseline --kind oracle|static|blank --cases DATASET --out PRED_DIR [--protocol video|image]
    orchard-eval report   RESULTS_DIR [RESULTS_DIR …] --out REPORT_DIR [--jobs N]
    orchard-eval agreement RESULTS_A RESULTS_B [--json]
    orchard-eval doctor   [--json] [--out DIR] [--label-studio-url URL] [--only CHECK …]
    orchard-eval apt export --cases DATASET --out DIR [--frames 16]
    orchard-eval apt score  --cases DATASET --predictions FILE.jsonl|DIR --out DIR [--frames 16]
    orchard-eval apt run    --cases DATASET --base-url URL --model NAME --out DIR [--frames 16] [--jobs N]

Exit status: 0 success; 1 the input has problems (validation issues, responses that scored 0 because
of bad artifacts are NOT a failure of `run`); 2 the command could not run (bad arguments, a dataset
manifest that is refused, a record file that cannot be resumed).
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from . import __version__


def _add_cases(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cases", required=True, metavar="DATASET", help="dataset root (Orchard or Apple-PI-GT layout)")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-eval", description="Score model outputs on Orchard cases.")
    p.add_argument("--version", action="version", version=f"orchard-eval {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    v = sub.add_parser("validate-predictions", help="check a prediction directory against a dataset")
    _add_cases(v)
    v.add_argument("--predictions", required=True, metavar="PRED_DIR")
    v.add_argument("--json", action="store_true", help="print the report as JSON")
    v.add_argument("--no-decode", action="store_true", help="check presence and size only (fast)")
    v.add_argument("--max-issues", type=int, default=200, help="issues printed (default 200)")

    pr = sub.add_parser("prompts", help="render the generation prompts of a dataset")
    _add_cases(pr)
    pr.add_argument("--protocol", required=True, choices=("video", "image"))
    pr.add_argument("--variant", default="default", choices=("default", "text-parameter", "concise"))
    pr.add_argument("--templates", metavar="FILE|apple-pi",
                    help="template file (YAML or JSON; default: the shipped one), or apple-pi: the paper's own "
                         "prompts from the installed published package `apple_pi`")
    pr.add_argument("--out", required=True, metavar="PROMPTS.jsonl")

    r = sub.add_parser("run", help="score a prediction directory")
    _add_cases(r)
    r.add_argument("--predictions", required=True, metavar="PRED_DIR")
    r.add_argument("--out", required=True, metavar="RESULTS_DIR")
    r.add_argument("--judge", default="programmatic",
                   help="judge name from the registry: programmatic (default, offline), openai (any OpenAI-compatible "
                        "endpoint), none (objective metrics only)")
    r.add_argument("--model", help="judge model (openai judge; same as --judge-option model=…)")
    r.add_argument("--base-url", help="OpenAI-compatible endpoint (openai judge; same as --judge-option base_url=…); "
                                      "the key comes from ORCHARD_JUDGE_API_KEY or OPENAI_API_KEY only")
    r.add_argument("--judge-cache", help="judge cache folder: the openai judge's replies, the programmatic judge's OCR readings under ocr/ (those by default in the user cache folder, 'off': memory only); same as --judge-option cache_dir=…")
    r.add_argument("--judge-option", action="append", default=[], metavar="KEY=VALUE",
                   help="option passed to the judge (repeatable; VALUE parsed as JSON when it can be)")
    r.add_argument("--jobs", type=int, default=1, help="worker processes (default 1)")
    r.add_argument("--rule", default="paper", choices=("paper", "published"),
                   help="frame alignment and P-T fusion: the paper's (default) or the published code's")
    r.add_argument("--segmenter", default="classical", help="segmenter name (default classical)")
    r.add_argument("--restart", action="store_true", help="discard existing records in --out and start over")
    r.add_argument("--fuse-transitions", action="store_true",
                   help="let the Deduction transition F1 (Trans.) join the physics group of the Deduction score; "
                        "off by default: the paper's score, with Trans. reported beside it (docs/apt.md)")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    r.add_argument("--limit", type=int, default=None, help=argparse.SUPPRESS)

    t = sub.add_parser("table", help="put several runs side by side (CSV + Markdown)")
    t.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    t.add_argument("--out", metavar="STEM", help="write STEM.csv and STEM.md (default: print Markdown)")

    rp = sub.add_parser("report", help="write a static HTML report of one or more runs (opens from disk)")
    rp.add_argument("results", nargs="+", metavar="RESULTS_DIR")
    rp.add_argument("--out", required=True, metavar="REPORT_DIR")
    rp.add_argument("--jobs", type=int, default=1, help="worker processes for the case pages (default 1)")
    rp.add_argument("--no-progress", action="store_true", help="no progress bar")
    rp.add_argument("--predictions", action="append", default=[], metavar="PRED_DIR",
                    help="prediction dir of each RESULTS_DIR, in the same order (draws the answer images)")
    rp.add_argument("--cache", metavar="DIR", default=None,
                    help="cache of the answers' visual data (default: REPORT_DIR/cache, kept across builds)")

    b = sub.add_parser("baseline", help="write an oracle / static / blank prediction directory")
    b.add_argument("--kind", required=True, choices=("oracle", "static", "blank"))
    _add_cases(b)
    b.add_argument("--out", required=True, metavar="PRED_DIR")
    b.add_argument("--protocol", default="video", choices=("video", "image"))
    b.add_argument("--num-rollouts", type=int, default=None)

    ag = sub.add_parser("agreement", help="agreement of two runs (e.g. two judges): Pearson r and Spearman ρ")
    ag.add_argument("results_a", metavar="RESULTS_A")
    ag.add_argument("results_b", metavar="RESULTS_B")
    ag.add_argument("--json", action="store_true", help="print the full result as JSON")

    apt = sub.add_parser("apt", help="APT chain benchmark for video-language models (docs/apt.md)")
    apt_sub = apt.add_subparsers(dest="apt_command", metavar="APT_COMMAND", required=True)
    ae = apt_sub.add_parser("export", help="write per case the GT video, sampled frames, prompt and GT chain")
    asc = apt_sub.add_parser("score", help="score chain replies (JSON Lines) against the GT chains")
    ar = apt_sub.add_parser("run", help="ask an OpenAI-compatible VLM for every chain, then score")
    for q in (ae, asc, ar):
        _add_cases(q)
        q.add_argument("--out", required=True, metavar="DIR")
        q.add_argument("--frames", type=int, default=16, help="frames sampled per clip (default 16)")
    asc.add_argument("--predictions", required=True, metavar="FILE.jsonl|DIR")
    ar.add_argument("--base-url", help="OpenAI-compatible endpoint; the key comes from ORCHARD_JUDGE_API_KEY or "
                                       "OPENAI_API_KEY only")
    ar.add_argument("--model", required=True)
    ar.add_argument("--cache", help="reply cache folder (default OUT/cache)")
    ar.add_argument("--max-tokens", type=int, default=2048)
    ar.add_argument("--jobs", type=int, default=4, help="requests in flight (default 4)")
    ar.add_argument("--timeout", type=float, default=120.0, help="seconds per request (default 120)")
    ar.add_argument("--retries", type=int, default=5, help="retries on 429/5xx/timeouts (default 5)")

    # parsed by orchard_build.doctor (see main); listed here for --help
    from .questions.commands import add_parser as add_questions_parser

    add_questions_parser(sub)
    sub.add_parser("doctor", add_help=False, help="what works on this machine (rendering, video, OCR, judge, "
                                                  "Label Studio, …), with fixes; exit 1 when the default path cannot")
    return p


def _run_judge_options(a: argparse.Namespace) -> dict:
    opts = _judge_options(a.judge_option)
    for flag, key in (("model", "model"), ("base_url", "base_url"), ("judge_cache", "cache_dir")):
        value = getattr(a, flag, None)
        if value is not None:
            opts[key] = value
    return opts


def _judge_options(items: list[str]) -> dict:
    out = {}
    for it in items:
        if "=" not in it:
            raise ValueError(f"--judge-option expects KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        try:
            out[k.strip()] = json.loads(v)
        except ValueError:
            out[k.strip()] = v
    return out


def cmd_validate(a) -> int:
    from .cases import load_dataset
    from .predictions import validate_predictions

    ds = load_dataset(a.cases)
    rep = validate_predictions(ds, a.predictions, decode=not a.no_decode)
    if a.json:
        print(json.dumps(rep.to_dict(), indent=1, default=str))
    else:
        fatal = [i for i in rep.issues if i.fatal]
        warn = [i for i in rep.issues if not i.fatal]
        print(f"{a.predictions}: {rep.usable}/{rep.expected} rollouts usable; "
              f"{len(fatal)} error(s), {len(warn)} warning(s)")
        if rep.submission is not None:
            s = rep.submission
            print(f"model {s.model!r}, protocol {s.protocol}, {s.num_rollouts} rollouts")
        for p in ds.problems:
            print(f"dataset: {p}")
        for i in (fatal + warn)[:a.max_issues]:
            print(f"  {i}")
        if len(rep.issues) > a.max_issues:
            print(f"  … {len(rep.issues) - a.max_issues} more (--json for all)")
        if rep.by_kind():
            print("by kind: " + ", ".join(f"{k} {n}" for k, n in sorted(rep.by_kind().items())))
    return 0 if rep.ok else 1


def cmd_prompts(a) -> int:
    from .prompts import build_prompts, write_jsonl

    recs, notes = build_prompts(a.cases, a.protocol, a.variant, a.templates)
    n = write_jsonl(recs, a.out)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"{n} prompts → {a.out}")
    return 0


def cmd_run(a) -> int:
    from .run import RunOptions, run_evaluation

    opts = RunOptions(cases=a.cases, predictions=a.predictions, out=a.out, judge=a.judge,
                      judge_options=_run_judge_options(a), jobs=max(1, a.jobs), rule=a.rule,
                      segmenter=a.segmenter, progress=not a.no_progress and sys.stderr.isatty(),
                      restart=a.restart, limit=a.limit, fuse_transitions=a.fuse_transitions)
    res = run_evaluation(opts)
    s = res.summary
    print(f"{s['model']} ({s['protocol']}, {s['mode']}): {res.n_scored} responses scored, {res.n_skipped} "
          f"already done, {s['counts']['invalid']} scored 0 (see {Path(a.out) / 'eval.log'})")
    if s["mode"] == "objective-only":
        print("objective-only: no judge; P-T and F-T have no objective metric and are not scored")
    from .tables import to_markdown

    print(to_markdown([s]))
    return 0


def cmd_table(a) -> int:
    from .tables import load_summary, to_markdown, write_tables

    sums = []
    for d in a.results:
        try:
            sums.append(load_summary(d))
        except ValueError as exc:
            print(f"skipped: {exc}", file=sys.stderr)
    if not sums:
        print("no results to tabulate", file=sys.stderr)
        return 1
    from .tables import mixed_prompts

    if mixed_prompts(sums):
        print("warning: the rows answered different prompts (" + "; ".join(mixed_prompts(sums)) + "); see the "
              "Prompts column", file=sys.stderr)
    if a.out:
        c, m = write_tables(sums, a.out)
        print(f"{c}\n{m}")
    print(to_markdown(sums))
    return 0


def cmd_report(a) -> int:
    from .report import write_report

    problems = write_report(a.results, a.out, jobs=a.jobs, progress=not a.no_progress, predictions=a.predictions,
                            cache_dir=a.cache)
    for m in problems:
        print(f"orchard-eval report: warning: {m}", file=sys.stderr)
    print(f"report written to {a.out}/index.html")
    return 0


def cmd_baseline(a) -> int:
    from .baselines import write_baseline

    notes = write_baseline(a.kind, a.cases, a.out, protocol=a.protocol, num_rollouts=a.num_rollouts)
    for n in notes:
        print(f"note: {n}", file=sys.stderr)
    print(f"baseline {a.kind} ({a.protocol}) → {a.out}")
    return 0


def cmd_agreement(a: argparse.Namespace) -> int:
    from .judging.agreement import agreement, format_table

    result = agreement(a.results_a, a.results_b)
    print(json.dumps(result, indent=2) if a.json else format_table(result))
    return 0


def cmd_apt(a: argparse.Namespace) -> int:
    if a.apt_command == "export":
        from .apt.export import export_dataset

        manifest, notes = export_dataset(a.cases, a.out, n_frames=a.frames)
        for n in notes:
            print(f"note: {n}", file=sys.stderr)
        print(f"{manifest['n_cases']} cases → {Path(a.out) / 'manifest.json'}")
        return 0
    from .apt.score import score, to_markdown, write_report

    if a.apt_command == "score":
        rep = score(a.cases, a.predictions, n_frames=a.frames)
        write_report(rep, a.out)
    else:
        from .apt.vlm import run_vlm

        rep = run_vlm(a.cases, a.out, model=a.model, base_url=a.base_url, n_frames=a.frames, cache_dir=a.cache,
                      max_tokens=a.max_tokens, jobs=a.jobs, timeout=a.timeout, max_retries=a.retries)
    for n in rep["notes"]:
        print(f"note: {n}", file=sys.stderr)
    print(to_markdown(rep))
    print(f"report → {Path(a.out) / 'report.json'}")
    return 0


def cmd_questions(a: argparse.Namespace) -> int:
    from .questions.commands import run

    return run(a)


COMMANDS = {"agreement": cmd_agreement, "apt": cmd_apt, "validate-predictions": cmd_validate, "prompts": cmd_prompts,
            "run": cmd_run, "table": cmd_table, "baseline": cmd_baseline, "report": cmd_report,
            "questions": cmd_questions}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["doctor"]:
        from orchard_build.doctor import main as doctor

        return doctor(args[1:], prog="orchard-eval doctor")
    p = _parser()
    a = p.parse_args(argv)
    if a.command is None:
        p.print_help()
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")
    from .cases import CaseFormatError
    from .paths import UnsafePathError
    from .prompts import TemplateError
    from .records import RecordLogError

    from .judging.openai import JudgeFailure

    try:
        return COMMANDS[a.command](a)
    except (CaseFormatError, UnsafePathError, TemplateError, RecordLogError, JudgeFailure, KeyError, ValueError,
            OSError) as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        print(f"orchard-eval {a.command}: error: {msg}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
