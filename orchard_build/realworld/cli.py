"""Subcommands for real-world cases (wired into `orchard-build` by orchard_build/cli.py):

    orchard-build ingest VIDEO --task T --source self-recorded|internet [--fps native] [--measurements FILE]
                  [--case-number N] [--window START:END] [--out DIR]
    orchard-build annotate push DIR --url URL [--document-root DIR] [--token-env NAME]
    orchard-build annotate pull DIR --url URL [--token-env NAME]
    orchard-build agreement A.json B.json [--json OUT]
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from ..tasks import TASK_NAMES

COMMANDS = ("ingest", "annotate", "agreement")


def _ingest_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-build ingest", description="Create a real-world case from a video clip.")
    p.add_argument("video", type=Path)
    p.add_argument("--task", required=True, choices=TASK_NAMES, metavar="TASK")
    p.add_argument("--source", required=True, choices=("self-recorded", "internet"))
    p.add_argument("--fps", default="native", help="'native' (default) or the expected native rate as a check; "
                                                   "real-world clips are never resampled")
    p.add_argument("--measurements", type=Path, default=None, help="case description with the measured values (YAML/JSON)")
    p.add_argument("--case-number", type=int, default=None)
    p.add_argument("--window", default=None, help="motion window START:END in seconds of the clip (overrides the file)")
    p.add_argument("--out", type=Path, default=Path("orchard"), help="dataset root (default: ./orchard)")
    return p


def _annotate_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-build annotate", description="Label Studio round trip of real-world cases.")
    p.add_argument("action", choices=("push", "pull"))
    p.add_argument("path", type=Path, help="dataset root or case directory")
    p.add_argument("--url", required=True, help="Label Studio server, e.g. http://127.0.0.1:8080")
    p.add_argument("--token-env", default="LABEL_STUDIO_API_KEY",
                   help="environment variable holding the API token (default LABEL_STUDIO_API_KEY)")
    p.add_argument("--document-root", type=Path, default=None,
                   help="the server's LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT (push; default: that variable)")
    return p


def _agreement_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="orchard-build agreement",
                                description="Cohen's κ and ICC(2,1) between two annotators' independent passes.")
    p.add_argument("a", type=Path)
    p.add_argument("b", type=Path)
    p.add_argument("--json", type=Path, default=None, help="also write the tables as JSON here")
    return p


def run(command: str, argv: list[str]) -> int:
    if command == "ingest":
        from .ingest import ingest

        a = _ingest_parser().parse_args(argv)
        path = ingest(a.video, a.task, a.source, a.out, a.measurements, a.case_number, a.fps, a.window)
        print(path)
        return 0
    if command == "annotate":
        from . import labelstudio as LS

        a = _annotate_parser().parse_args(argv)
        token = os.environ.get(a.token_env, "")
        if not token:
            raise LS.LabelStudioError(f"no API token: set {a.token_env} in the environment")
        if a.action == "push":
            LS.push(a.path, a.url, token, a.document_root)
            return 0
        records = LS.pull(a.path, a.url, token)
        open_cases = [r for r in records if not r["reviewed"]]
        if open_cases:
            print(f"{len(open_cases)} of {len(records)} case(s) not reviewed (see review.json)", file=sys.stderr)
            return 1
        return 0
    if command == "agreement":
        from ..io import write_json
        from .agreement import agreement, format_tables, load_pass

        a = _agreement_parser().parse_args(argv)
        result = agreement(load_pass(a.a), load_pass(a.b))
        print(format_tables(result))
        if a.json:
            write_json(a.json, result)
        return 0
    raise ValueError(command)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1], sys.argv[2:]) if len(sys.argv) > 1 else 2)
