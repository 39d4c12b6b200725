"""Reading a results directory for the report: summary.json, records.jsonl (a torn last line is
dropped and said), eval.log's zero-score reasons, and the dataset the run was made on."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Results:
    path: Path
    name: str
    summary: dict[str, Any] | None
    records: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)

    @property
    def provenance(self) -> dict[str, Any]:
        if self.summary and isinstance(self.summary.get("provenance"), dict):
            return self.summary["provenance"]
        return self.records[0].get("provenance") or {} if self.records else {}

    def dataset_key(self) -> tuple[str | None, str | None]:
        p = self.provenance
        return p.get("dataset"), p.get("dataset_sha256")

    def case_ids(self) -> list[str]:
        return sorted({r["case_id"] for r in self.records})


def read_records(path: Path, problems: list[str]) -> list[dict[str, Any]]:
    if not path.is_file():
        problems.append(f"{path.name} is missing: no per-response records to show")
        return []
    out = []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            where = "torn last line" if k == len(lines) - 1 else f"unreadable line {k + 1}"
            problems.append(f"{path.name}: {where} skipped (the run was interrupted or the file was cut)")
            continue
        if isinstance(rec, dict) and "case_id" in rec and "subtrack" in rec:
            out.append(rec)
        else:
            problems.append(f"{path.name}: line {k + 1} is not an orchard-eval record (skipped)")
    return out


def load_results(path: str | Path) -> Results:
    p = Path(path)
    if not p.is_dir():
        raise FileNotFoundError(f"{p}: not a results directory")
    problems: list[str] = []
    summary = None
    sp = p / "summary.json"
    if sp.is_file():
        try:
            summary = json.loads(sp.read_text(encoding="utf-8"))
        except ValueError as exc:
            problems.append(f"summary.json is not JSON ({exc}): no table row")
    else:
        problems.append("summary.json is missing: no table row (run `orchard-eval run` to the end)")
    records = read_records(p / "records.jsonl", problems)
    if summary and not summary.get("complete", True):
        problems.append("the run is incomplete: summary.json says not every expected response was scored")
    if summary:
        exp = (summary.get("counts") or {}).get("expected_responses")
        if exp and len(records) < exp:
            problems.append(f"{exp - len(records)} of {exp} expected responses have no record")
    name = str((summary or {}).get("model") or (records[0].get("model") if records else p.name))
    return Results(p, name, summary, records, problems)


def dataset_root(results: list[Results]) -> Path | None:
    """The dataset the runs were made on, when it is still on disk."""
    for r in results:
        d = r.dataset_key()[0]
        if d and (Path(d) / "cases").is_dir():
            return Path(d)
    return None


def check_same_dataset(results: list[Results]) -> list[str]:
    """Messages for runs whose dataset (path's SHA-256 of dataset.json) differs from the first run's."""
    if len(results) < 2:
        return []
    ref = results[0].dataset_key()[1]
    out = []
    for r in results[1:]:
        sha = r.dataset_key()[1]
        if sha != ref:
            out.append(f"{r.path}: made on another dataset (dataset.json SHA-256 {str(sha)[:12]}… vs "
                       f"{str(ref)[:12]}… of {results[0].path}); left out of the comparison")
    return out
