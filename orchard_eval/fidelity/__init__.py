"""Fidelity of the objective metrics on answers whose truth is known.

The oracle (our own GT render) proves only self-consistency. This package makes answers that differ
from the GT in known ways — physically wrong (re-timed, re-simulated with other physics) or right in
another look (codecs, photometry, overlays left on, another camera, another background) — keeps what
each truly shows (`truth`), scores them with the code path of `orchard-eval run` and compares the
reported values with the ideal ones (`bench`). `benchmarks/bench_fidelity.py` prints the table.
"""
from .bench import Row, run, select_cases, summarise, table
from .families import Family, Spec, catalogue

__all__ = ["Family", "Row", "Spec", "catalogue", "run", "select_cases", "summarise", "table"]
