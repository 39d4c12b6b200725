"""Reading a results directory for the report: summary.json, records.jsonl (a torn last line is
dropped and said), eval.log's zero-score reasons and warnings, the responses a partial run lacks,
and the dataset the run was made on."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# `orchard-eval run` logs every zero score as "<case>/<subtrack>/rollout_NN scores 0: <kind>: <detail>"
# (run.py, records.key_str); the log outlives records a torn write or a --restart lost
_LOG_LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) (?P<msg>.*)$")
_LOG_ZERO = re.compile(r"^(?P<cid>.+)/(?P<st>[^/]+)/rollout_(?P<ro>\d+) scores 0: (?P<kind>[^:]+): (?P<detail>.*)$")


@dataclass
class Results:
    path: Path
    name: str
    summary: dict[str, Any] | None
    records: list[dict[str, Any]]
    problems: list[str] = field(default_factory=list)
    # zero scores logged in eval.log: {(case, subtrack, rollout): (kind, detail)}
    log_zero: dict[tuple[str, str, int], tuple[str, str]] = field(default_factory=dict)
    log_warnings: list[str] = field(default_factory=list)  # the log's other warnings, in order
    missing: list[tuple[str, str, int]] = field(default_factory=list)  # expected responses without a record

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


def read_log(path: Path, problems: list[str]) -> tuple[dict, list[str]]:
    """Zero-score reasons and other warnings of eval.log (absent log: nothing, no complaint: older
    runs and copied results dirs have none)."""
    zero: dict[tuple[str, str, int], tuple[str, str]] = {}
    other: list[str] = []
    if not path.is_file():
        return zero, other
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        problems.append(f"eval.log is unreadable ({exc}): zero-score reasons from the records only")
        return zero, other
    for line in text.splitlines():
        m = _LOG_LINE.match(line)
        if not m or m["level"] not in ("WARNING", "ERROR"):
            continue
        z = _LOG_ZERO.match(m["msg"])
        if z:
            zero[(z["cid"], z["st"], int(z["ro"]))] = (z["kind"].strip(), z["detail"].strip())
        else:
            other.append(m["msg"])
    return zero, other


def expected_keys(r: Results, dataset_cases: list[str] | None) -> set[tuple[str, str, int]] | None:
    """The responses the run should have scored, or None when that cannot be known. Cases: the
    summary's, else the dataset's (when on disk), else those in the records; subtracks: all five
    when the summary's expected count says so, else those in the records; rollouts: provenance."""
    from orchard_eval.cases import SUBTRACKS

    prov = r.provenance
    n_roll = prov.get("num_rollouts")
    if not n_roll:
        return None
    summ = r.summary or {}
    cases = list(summ.get("cases") or {}) or dataset_cases or r.case_ids()
    if not cases:
        return None
    seen = sorted({rec["subtrack"] for rec in r.records})
    exp = (summ.get("counts") or {}).get("expected_responses")
    subtracks = list(SUBTRACKS) if not exp or exp == len(cases) * len(SUBTRACKS) * int(n_roll) else seen
    return {(c, st, ro) for c in cases for st in subtracks for ro in range(int(n_roll))}


def find_missing(r: Results, dataset_cases: list[str] | None) -> None:
    """Fill `r.missing` (sorted) with the expected responses that have no record."""
    exp = expected_keys(r, dataset_cases)
    if exp is None:
        return
    have = {(rec["case_id"], rec["subtrack"], int(rec.get("rollout") or 0)) for rec in r.records}
    r.missing = sorted(exp - have)


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
    log_zero, log_warnings = read_log(p / "eval.log", problems)
    return Results(p, name, summary, records, problems, log_zero, log_warnings)


def dataset_case_ids(root: Path | None) -> list[str] | None:
    """The case ids a dataset's manifest lists (None without a readable dataset.json)."""
    if root is None:
        return None
    try:
        index = json.loads((Path(root) / "dataset.json").read_text(encoding="utf-8"))
        return [str(e["case_id"]) for e in index.get("cases", [])]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


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
