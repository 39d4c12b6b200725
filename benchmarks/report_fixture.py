"""Build a results directory for benchmarks/bench_report.py over every case of a dataset, from the
records of a smaller run (scoring 400 × 5 × 3 responses takes hours; drawing them is what the
benchmark measures). Each record of SOURCE is reused for its case when it has one (else one of the
same subtrack and rollout), and its artifact is pointed at the case's own answer in PRED_DIR with
the frame count and the chosen Deduction frames (paper rule) derived from that file, so the report
decodes and segments exactly what a real run of that prediction dir would make it draw.

    python3 benchmarks/report_fixture.py SOURCE_RESULTS DATASET PRED_DIR OUT_RESULTS
"""
from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

from orchard_eval.canonical import physical_index
from orchard_eval.cases import load_dataset
from orchard_eval.media import iter_video


def count_frames(path: Path, memo: dict) -> int:
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    if sha not in memo:
        n = 0
        for i, _ in iter_video(path, keep=()):
            n = i + 1
        memo[sha] = n
    return memo[sha]


def main() -> None:
    ap = argparse.ArgumentParser()
    for a in ("source", "dataset", "pred", "out"):
        ap.add_argument(a)
    a = ap.parse_args()
    src = [json.loads(x) for x in Path(a.source, "records.jsonl").read_text().splitlines() if x.strip()]
    own = {(r["case_id"], r["subtrack"], r["rollout"]): r for r in src}
    any_of = {(r["subtrack"], r["rollout"]): r for r in src}
    ds = load_dataset(a.dataset)
    # the fixture covers DATASET, so its provenance names it (the report finds cases through it)
    where = {"dataset": str(Path(a.dataset).resolve()),
             "dataset_sha256": hashlib.sha256(Path(a.dataset, "dataset.json").read_bytes()).hexdigest()}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    memo: dict = {}
    n = 0
    with open(out / "records.jsonl", "w", encoding="utf-8") as f:
        for cid, case in sorted(ds.cases.items()):
            for (st, ro), tmpl in sorted(any_of.items()):
                rec = json.loads(json.dumps(own.get((cid, st, ro), tmpl)))
                rec.update(case_id=cid, task=case.task, pillar=case.pillar)
                if isinstance(rec.get("provenance"), dict):
                    rec["provenance"].update(where)
                rel = f"cases/{cid}/{st}/rollout_{ro:02d}.mp4"
                p = Path(a.pred) / rel
                art = rec.setdefault("artifact", {})
                art["path"] = rel
                if p.is_file():
                    nf = count_frames(p, memo)
                    art["n_frames"] = nf
                    if st == "deduction":
                        art["pred_indices"] = [physical_index(t, nf - 1, case.physics_duration) for t in case.timestamps]
                f.write(json.dumps(rec) + "\n")
                n += 1
    summary = json.loads(Path(a.source, "summary.json").read_text())
    if isinstance(summary.get("provenance"), dict):
        summary["provenance"].update(where)
    summary.setdefault("counts", {}).update(expected_responses=n, cases=len(ds.cases), records=n)
    # the per-case means of the source run, for every case (the report takes its expected cases from here)
    means = summary.get("cases") or {}
    first = next(iter(means.values()), {})
    summary["cases"] = {cid: means.get(cid, first) for cid in sorted(ds.cases)}
    (out / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    print(f"{n} records for {len(ds.cases)} cases in {out}")


if __name__ == "__main__":
    main()
