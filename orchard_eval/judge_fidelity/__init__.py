"""How far the programmatic judge can be trusted: calibration on the baselines and discrimination of
answers with exactly one thing wrong (`bench.run`; `benchmarks/bench_judge.py` prints the tables)."""
