"""`orchard-eval`: the evaluator's command line. The scoring commands arrive with the evaluation work;
until then this entry point says so plainly instead of pretending to score."""
from __future__ import annotations

import argparse
import sys

from . import __version__


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="orchard-eval", description="Score model outputs on Orchard cases.")
    p.add_argument("--version", action="version", version=f"orchard-eval {__version__}")
    p.add_argument("command", nargs="?", help="evaluation command (not available in this version)")
    args = p.parse_args(argv)
    if args.command is None:
        p.print_help()
        return 0
    print(f"orchard-eval {__version__}: the command {args.command!r} is not available yet; "
          "the evaluator is being built (see the project issues).", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
