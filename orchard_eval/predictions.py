"""Model predictions in the published submission layout, and their validation.

    <pred_dir>/submission.json            {model, protocol: video|image, num_rollouts, prompt_version, notes}
    <pred_dir>/cases/<case_id>/<subtrack>/rollout_00.mp4 ...            (video protocol)
    <pred_dir>/cases/<case_id>/<subtrack>/rollout_00.png ...            (image protocol, first four subtracks)
    <pred_dir>/cases/<case_id>/deduction/rollout_00/frame_000_t0.500s.png  (image protocol, one per timestamp)

`validate_predictions` never raises on bad files: every problem becomes an `Issue` with a stable
`kind`. `fatal` issues mean the rollout (or keyframe) has no usable artifact and will score zero.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from .cases import SUBTRACKS, EvalCase, read_json_file, schema_errors, CaseFormatError
from .media import MediaError, probe_image, probe_video, read_image, sniff_format
from .paths import UnsafePathError, check_relpath, safe_join

KEYFRAME_RE = re.compile(r"^frame_(\d{3,})_t(\d+(?:\.\d+)?)s\.png$")
ROLLOUT_RE = re.compile(r"^rollout_(\d{2,})(\.mp4|\.png)?$")
TIME_TOL = 5e-4 + 1e-9  # file names carry three decimals


@dataclass(frozen=True)
class Submission:
    root: Path
    model: str
    protocol: str          # "video" or "image"
    num_rollouts: int
    prompt_version: str | None = None
    notes: str | None = None


def load_submission(pred_dir: str | Path) -> Submission:
    root = Path(pred_dir)
    doc = read_json_file(root / "submission.json")
    errs = schema_errors(doc, "eval_submission.schema.json")
    if errs:
        raise CaseFormatError(f"{root / 'submission.json'}: " + "; ".join(errs[:5]))
    return Submission(root=root, model=doc["model"], protocol=doc["protocol"], num_rollouts=int(doc["num_rollouts"]),
                      prompt_version=doc.get("prompt_version"), notes=doc.get("notes"))


def keyframe_name(index: int, t: float) -> str:
    return f"frame_{index:03d}_t{t:.3f}s.png"


def parse_keyframe_name(name: str) -> tuple[int, float] | None:
    m = KEYFRAME_RE.match(name)
    return None if m is None else (int(m.group(1)), float(m.group(2)))


def subtrack_dir(root: Path, case_id: str, subtrack: str) -> Path:
    check_relpath(case_id)
    return safe_join(root, f"cases/{case_id}/{subtrack}")


def rollout_path(sub: Submission, case_id: str, subtrack: str, rollout: int) -> Path:
    """Where rollout `rollout` of a subtrack lives: an MP4 (video protocol), a PNG (image protocol) or a
    keyframe directory (image protocol, deduction)."""
    d = subtrack_dir(sub.root, case_id, subtrack)
    if sub.protocol == "video":
        return d / f"rollout_{rollout:02d}.mp4"
    if subtrack == "deduction":
        return d / f"rollout_{rollout:02d}"
    return d / f"rollout_{rollout:02d}.png"


@dataclass(frozen=True)
class Keyframe:
    index: int          # position of the timestamp in the case's sorted timestamp list
    t: float
    path: Path | None   # None when no file answers this timestamp


def match_keyframes(rollout_dir: Path, timestamps: Iterable[float]) -> tuple[list[Keyframe], list[tuple[str, str, Path]]]:
    """Pair each requested timestamp with its keyframe file. The canonical name is matched first; a
    file whose time matches but whose index does not is accepted and reported as mislabelled; files
    whose time matches no timestamp are reported as unexpected. Returns (keyframes, [(kind, detail, path)])."""
    ts = list(timestamps)
    notes: list[tuple[str, str, Path]] = []
    files: list[tuple[int, float, Path]] = []
    if rollout_dir.is_dir():
        for p in sorted(rollout_dir.iterdir()):
            parsed = parse_keyframe_name(p.name)
            if parsed is None:
                notes.append(("unexpected_file", "not a keyframe name frame_III_tS.SSSs.png", p))
                continue
            files.append((parsed[0], parsed[1], p))
    used: set[Path] = set()
    out: list[Keyframe] = []
    for i, t in enumerate(ts):
        exact = rollout_dir / keyframe_name(i, t)
        if exact.is_file():
            used.add(exact)
            out.append(Keyframe(i, t, exact))
            continue
        cands = [(idx, ft, p) for idx, ft, p in files if abs(ft - t) <= TIME_TOL and p not in used]
        if cands:
            idx, ft, p = cands[0]
            used.add(p)
            notes.append(("mislabelled", f"timestamp {t:.3f}s is filed under index {idx:03d}, expected {i:03d}", p))
            out.append(Keyframe(i, t, p))
        else:
            out.append(Keyframe(i, t, None))
    for idx, ft, p in files:
        if p not in used:
            notes.append(("unexpected_keyframe", f"t = {ft:.3f}s is not an evaluation timestamp of the case", p))
    return out, notes


@dataclass
class Issue:
    kind: str
    path: str
    detail: str = ""
    case_id: str | None = None
    subtrack: str | None = None
    rollout: int | None = None
    fatal: bool = True

    def __str__(self) -> str:
        where = "/".join(str(x) for x in (self.case_id, self.subtrack,
                                          None if self.rollout is None else f"rollout_{self.rollout:02d}") if x)
        sev = "error" if self.fatal else "warning"
        return f"{sev}: {where or self.path}: {self.kind}" + (f": {self.detail}" if self.detail else "")


@dataclass
class ValidationReport:
    pred_dir: Path
    submission: Submission | None
    expected: int = 0          # rollouts expected
    usable: int = 0            # rollouts with a usable artifact
    issues: list[Issue] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.submission is not None and not any(i.fatal for i in self.issues)

    def by_kind(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for i in self.issues:
            out[i.kind] = out.get(i.kind, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"pred_dir": str(self.pred_dir), "ok": self.ok, "expected_rollouts": self.expected,
                "usable_rollouts": self.usable, "by_kind": self.by_kind(),
                "issues": [asdict(i) for i in self.issues]}


def _check_image(path: Path) -> list[tuple[str, str, bool]]:
    """(kind, detail, fatal) problems of one PNG answer file."""
    if not path.exists():
        return [("missing", "", True)]
    probs: list[tuple[str, str, bool]] = []
    try:
        if path.is_file() and path.stat().st_size > 0:
            real = sniff_format(path)
            if real != "png":
                probs.append(("mislabelled", f"named .png but holds {real}", False))
        probe_image(path)
        read_image(path)
    except MediaError as exc:
        kind = exc.kind
        if kind == "undecodable" and "truncat" in exc.detail.lower():
            kind = "truncated"
        probs.append((kind, exc.detail, True))
    return probs


def _check_video(path: Path, min_frames: int = 1) -> list[tuple[str, str, bool]]:
    if not path.exists():
        return [("missing", "", True)]
    probs: list[tuple[str, str, bool]] = []
    try:
        if path.is_file() and path.stat().st_size > 0:
            real = sniff_format(path)
            if real != "mp4":
                probs.append(("mislabelled", f"named .mp4 but holds {real}", False))
        info = probe_video(path)
        if info.n_frames < min_frames:
            probs.append(("no_frames", "a Deduction video needs frames after the condition frame", True))
        if info.truncated:
            probs.append(("truncated", f"{info.n_frames} decodable frames; the last decodable one is used", False))
    except MediaError as exc:
        probs.append((exc.kind, exc.detail, True))
    return probs


def _as_cases(cases: Any) -> dict[str, EvalCase]:
    if isinstance(cases, Mapping):
        return dict(cases)
    if hasattr(cases, "cases") and isinstance(cases.cases, Mapping):
        return dict(cases.cases)
    return {c.case_id: c for c in cases}


def validate_predictions(cases: Any, pred_dir: str | Path, subtracks: Iterable[str] = SUBTRACKS,
                         decode: bool = True) -> ValidationReport:
    """Check a prediction directory against the cases: submission.json, every expected rollout (and,
    for image-protocol Deduction, every keyframe), file integrity (empty, oversized, undecodable,
    truncated, 0-frame, mislabelled) and prediction directories of unknown cases. Never raises."""
    root = Path(pred_dir)
    rep = ValidationReport(pred_dir=root, submission=None)
    try:
        sub = load_submission(root)
        rep.submission = sub
    except Exception as exc:  # noqa: BLE001
        rep.issues.append(Issue("submission", str(root / "submission.json"), str(exc)))
        return rep
    case_map = _as_cases(cases)
    subtracks = list(subtracks)
    for cid, case in case_map.items():
        for st in subtracks:
            for r in range(sub.num_rollouts):
                rep.expected += 1
                try:
                    usable = _validate_rollout(rep, sub, case, st, r, decode)
                except Exception as exc:  # noqa: BLE001 - validation must never crash
                    rep.issues.append(Issue("error", "", f"{type(exc).__name__}: {exc}", cid, st, r))
                    usable = False
                rep.usable += int(usable)
    # predictions for cases the dataset does not have
    cases_dir = root / "cases"
    if cases_dir.is_dir():
        try:
            for pillar in sorted(p for p in cases_dir.iterdir() if p.is_dir()):
                for task in sorted(p for p in pillar.iterdir() if p.is_dir()):
                    for num in sorted(p for p in task.iterdir() if p.is_dir()):
                        cid = f"{pillar.name}/{task.name}/{num.name}"
                        if cid not in case_map:
                            rep.issues.append(Issue("unknown_case", str(num), "no such case in the dataset",
                                                    cid, fatal=False))
                        else:
                            for d in sorted(num.iterdir()):
                                if d.name not in SUBTRACKS:
                                    rep.issues.append(Issue("unexpected_file", str(d), "not a subtrack", cid,
                                                            fatal=False))
        except OSError as exc:
            rep.issues.append(Issue("error", str(cases_dir), str(exc)))
    return rep


def _validate_rollout(rep: ValidationReport, sub: Submission, case: EvalCase, st: str, r: int, decode: bool) -> bool:
    cid = case.case_id
    try:
        path = rollout_path(sub, cid, st, r)
    except UnsafePathError as exc:
        rep.issues.append(Issue("error", "", str(exc), cid, st, r))
        return False
    if sub.protocol == "image" and st == "deduction":
        if not path.is_dir():
            kind = "missing" if not path.exists() else "mislabelled"
            rep.issues.append(Issue(kind, str(path), "expected a keyframe directory", cid, st, r))
            return False
        kfs, notes = match_keyframes(path, case.timestamps)
        for kind, detail, p in notes:
            rep.issues.append(Issue(kind, str(p), detail, cid, st, r, fatal=False))
        n_ok = 0
        for kf in kfs:
            if kf.path is None:
                rep.issues.append(Issue("missing_keyframe", str(path / keyframe_name(kf.index, kf.t)),
                                        f"no keyframe for t = {kf.t:.3f}s (scores 0 at that timestamp)", cid, st, r))
                continue
            probs = _check_image(kf.path) if decode else ([] if kf.path.is_file() else [("missing", "", True)])
            for kind, detail, fatal in probs:
                rep.issues.append(Issue(kind, str(kf.path), detail, cid, st, r, fatal))
            n_ok += int(not any(f for _, _, f in probs))
        return n_ok > 0
    if not decode:
        ok = path.is_file() and path.stat().st_size > 0
        if not ok:
            rep.issues.append(Issue("missing" if not path.exists() else "empty", str(path), "", cid, st, r))
        return ok
    probs = _check_video(path, min_frames=2 if st == "deduction" else 1) if sub.protocol == "video" \
        else _check_image(path)
    for kind, detail, fatal in probs:
        rep.issues.append(Issue(kind, str(path), detail, cid, st, r, fatal))
    return not any(f for _, _, f in probs)
