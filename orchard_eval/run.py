"""`orchard-eval run`: score a prediction directory on a dataset, response by response.

For every case × subtrack × rollout (a "response") the run

1. canonicalises the answer (D.1–D.4): the PNG or the last decodable MP4 frame for P-T/P-G/F-T/F-G;
   for Deduction the MP4 is decoded ONCE (the frames to keep are chosen from the container's frame
   count and checked against the decoded count) and only the frames sampled at T_c are converted and
   resized, once, to the GT resolution; image-protocol Deduction reads the keyframes;
2. computes the objective metrics (`objective.graphic_iou`, `objective.deduction_metrics`; velocity
   from the sampled frames, `objective.sampled_velocity`, so each sampled frame is segmented once);
3. asks the judge (looked up by name in the judge registry; `none` gives objective-only results),
   retrying failures; a persistent failure scores 0 and is logged (D.6);
4. fuses criteria and metrics (`fusion.fuse`) and appends one record to `<out>/records.jsonl`
   (see `records`: one fsynced line per response, resumable after `kill -9`).

A response without a decodable artifact scores 0 and is logged with the reason (D.6); nothing a
prediction directory contains can crash the run or make it write outside `<out>`. After the last
response the rollouts are averaged per case and subtrack (`fusion.rollout_mean`), aggregated
(`aggregate.aggregate`) and written as `summary.json`, `table.csv` and `table.md` (Table 2 order).

Scores do not depend on `--jobs`: every response is scored by a pure function of its inputs (the
worker processes hold identical read-only copies of the dataset), and the summary is computed from
the records sorted by key, never in completion order.
"""
from __future__ import annotations

import json
import logging
from collections import OrderedDict
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np

from . import __version__
from .aggregate import aggregate, case_scores_from
from .canonical import DeductionPacket, canonical_answer, canonical_deduction, dense_times, physical_index, \
    published_index
from .cases import SUBTRACKS, CaseFormatError, Dataset, EvalCase, load_dataset
from .fusion import JUDGED, OBJECTIVE_ONLY, RolloutScore, fuse, fuse_deduction_keyframes, rollout_mean
from .judges import Judge, JudgeParseError, JudgeRequest, get_judge, judge_config, validate_scores
from .media import MediaError, _open_video, check_dimensions, resize_rgb
from .objective import deduction_metrics, graphic_iou
from .paths import UnsafePathError
from .predictions import Submission, load_submission, rollout_path, validate_predictions
from .records import RECORD_VERSION, RECORDS_FILE, RecordLog, key_str, provenance, sha256_file
from .apt.answers import TRANSITION_F1, score_answer
from .apt.answers import summarise as transition_summary
from .rubrics import rubric_for, with_transitions

log = logging.getLogger("orchard_eval")

RULES = ("paper", "published")
JUDGE_ATTEMPTS = 3
SEGMENTATIONS_KEPT = 4   # answers whose Deduction segmentations stay in memory for the judge
MAX_KEEP_FRAMES = 4000   # frames held at GT resolution when a video declares no frame count


# ---------------------------------------------------------------------------------------------
# Deduction: one decode per video
# ---------------------------------------------------------------------------------------------
def _indices(case: EvalCase, times: Sequence[float], n_phys: int, rule: str) -> list[int]:
    if rule == "paper":
        return [physical_index(t, n_phys, case.physics_duration) for t in times]
    if rule == "published":
        return [published_index(int(round(t * case.gt_fps)) - 1, case.gt_fps, n_phys, case.physics_duration)
                for t in times]
    raise ValueError(f"unknown alignment rule {rule!r}")


def _decode_pass(path: Path, size: tuple[int, int], keep: Callable[[int | None], set[int] | None]
                 ) -> tuple[dict[int, np.ndarray], int, int | None, tuple[int, int] | None]:
    """Decode `path` once in order; the frames whose index is in `keep(declared)` (`declared`: the
    container's declared frame count, None when it declares none; all frames, up to
    MAX_KEEP_FRAMES, when `keep` returns None) are converted and resized to `size`. Returns
    (frames, decodable count, the declared frame count or None, the video's own frame size). Stops
    at the first corrupt packet after frame 0."""
    container, stream = _open_video(path)
    declared = int(stream.frames) if stream.frames else None
    keep = keep(declared)
    frames: dict[int, np.ndarray] = {}
    n = 0
    source: tuple[int, int] | None = None
    try:
        it = container.decode(stream)
        while True:
            try:
                frame = next(it)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 - a corrupt packet ends the decodable prefix
                if n == 0:
                    raise MediaError("undecodable", path, f"{type(exc).__name__}: {exc}") from exc
                break
            if n == 0:
                check_dimensions(frame.width, frame.height, path)
                source = (int(frame.width), int(frame.height))
            if (keep is None and n < MAX_KEEP_FRAMES) or (keep is not None and n in keep):
                frames[n] = resize_rgb(frame.to_ndarray(format="rgb24"), size)
            n += 1
    finally:
        container.close()
    if n == 0:
        raise MediaError("no_frames", path, "the video holds no decodable frame")
    return frames, n, declared, source


def decode_deduction(case: EvalCase, path: Path, rule: str = "paper", dense: bool = True
                     ) -> tuple[DeductionPacket, DeductionPacket | None]:
    """The packets `canonical.canonical_deduction` would build at T_c (and, with `dense`, at every GT
    frame time), from a single decoding pass in the common case: the frames to keep are chosen from
    the container's declared frame count and checked against the decoded count afterwards (a second
    pass only when the declaration was wrong and the frames were not all kept). Never raises."""
    times = tuple(float(t) for t in case.timestamps)
    dtimes = tuple(dense_times(case)) if dense else ()
    size = case.frame_size

    def fail(err: str, kind: str, n: int | None = None) -> tuple[DeductionPacket, DeductionPacket | None]:
        pk = DeductionPacket("video", times, [None] * len(times), [None] * len(times), n_video_frames=n,
                             error=err, error_kind=kind)
        return pk, None

    def wanted(n_total: int) -> set[int]:
        n_phys = n_total - 1
        if n_phys <= 0:
            return {0}
        return {0} | set(_indices(case, times, n_phys, rule)) | set(_indices(case, dtimes, n_phys, rule))

    try:
        frames, n_total, _, source = _decode_pass(path, size, lambda declared: wanted(declared) if declared else None)
        if n_total - 1 <= 0:
            return fail(f"{path}: only the condition frame, no physics frames", "no_frames", n_total)
        need = wanted(n_total)
        if not need <= set(frames):
            frames, n2, _, source = _decode_pass(path, size, lambda _declared: need)
            n_total = min(n_total, n2)
    except MediaError as exc:
        return fail(str(exc), exc.kind)
    except Exception as exc:  # noqa: BLE001
        return fail(f"{type(exc).__name__}: {exc}", "undecodable")
    n_phys = n_total - 1
    cond = frames.get(0)

    def packet(ts: tuple[float, ...]) -> DeductionPacket:
        idx = _indices(case, ts, n_phys, rule)
        return DeductionPacket("video", ts, list(idx), [frames.get(i) for i in idx], condition_frame=cond,
                               n_video_frames=n_total, source_size=source)

    return packet(times), (packet(dtimes) if dense else None)


def _escaping(root: Path, path: Path) -> Path | None:
    """The first of `path` (and, for a keyframe directory, its entries) that resolves outside `root`
    (a symlink out of the prediction directory), or None."""
    try:
        real_root = root.resolve()
        cands = [path]
        if path.is_dir():
            cands += sorted(path.iterdir())
        for p in cands:
            if p.exists() or p.is_symlink():
                r = p.resolve()
                if r != real_root and real_root not in r.parents:
                    return p
    except OSError as exc:  # symlink loops and the like
        return Path(f"{path} ({exc})")
    return None


def last_frame_answer(path: Path, protocol: str, size: tuple[int, int]):
    """`canonical.canonical_answer`, with the video case decoding every frame but converting only the
    last decodable one to RGB (the conversion dominates the decode of long answer clips)."""
    from .canonical import AnswerArtifact

    if protocol != "video":
        return canonical_answer(path, protocol, size)
    try:
        container, stream = _open_video(path)
    except MediaError as exc:
        return AnswerArtifact(None, error=str(exc), error_kind=exc.kind)
    last, n = None, 0
    try:
        it = container.decode(stream)
        while True:
            try:
                frame = next(it)
            except StopIteration:
                break
            except Exception as exc:  # noqa: BLE001 - the decodable prefix is what counts
                if n == 0:
                    return AnswerArtifact(None, error=f"{path}: undecodable: {type(exc).__name__}: {exc}",
                                          error_kind="undecodable")
                break
            if n == 0:
                try:
                    check_dimensions(frame.width, frame.height, path)
                except MediaError as exc:
                    return AnswerArtifact(None, error=str(exc), error_kind=exc.kind)
            last, n = frame, n + 1
        if last is None:
            return AnswerArtifact(None, error=f"{path}: no_frames: the video holds no decodable frame",
                                  error_kind="no_frames")
        img = last.to_ndarray(format="rgb24")
    except Exception as exc:  # noqa: BLE001
        return AnswerArtifact(None, error=f"{type(exc).__name__}: {exc}", error_kind="undecodable")
    finally:
        container.close()
    return AnswerArtifact(resize_rgb(img, size), source_size=(int(img.shape[1]), int(img.shape[0])), n_frames=n)


# ---------------------------------------------------------------------------------------------
# Judge requests
# ---------------------------------------------------------------------------------------------
def _facts(case: EvalCase, subtrack: str) -> dict[str, Any]:
    f: dict[str, Any] = {"case": case, "case_dir": str(case.path), "layout": case.layout,
                         "task": case.task, "pillar": case.pillar, "annotation_text": case.annotation_text,
                         "physics_duration": case.physics_duration, "target_time": case.target_time}
    if case.formula is not None:
        f.update({"formula_choices": list(case.formula.choices), "correct_letter": case.formula.correct_letter,
                  "correct_formula": case.formula.correct_formula, "substituted_formula": case.formula.substituted})
    if subtrack == "formulation_graphic":
        f["target_state"] = [{"id": s.id, "label": s.label, "moving": s.moving, "speed": s.speed,
                              "arrow_direction_image": s.arrow_direction_image} for s in case.target_state]
    if subtrack == "deduction":
        f["timestamps"] = list(case.timestamps)
    return f


def _refs(case: EvalCase, roles: Iterable[str]) -> dict[str, np.ndarray]:
    out = {}
    for r in roles:
        try:
            if case.has(r) or r == "condition_frame":
                img = case.image(r)
                if img is not None:
                    out[r] = img
        except (CaseFormatError, KeyError, OSError):
            continue
    return out


REFERENCE_ROLES = {
    "perception_text": ("annotated_first_frame", "perception_text"),
    "perception_graphic": ("annotated_first_frame", "perception_graphic"),
    "formulation_text": ("annotated_first_frame", "formulation_text"),
    "formulation_graphic": ("annotated_first_frame", "formulation_graphic"),
    "deduction": ("annotated_first_frame",),
}


def ask_judge(judge: Judge, request: JudgeRequest, attempts: int = JUDGE_ATTEMPTS
              ) -> tuple[dict[str, float] | None, str, str | None]:
    """(criteria, feedback, error). criteria None with error None: the judge scores nothing (objective-
    only). A failure (exception, reply that misses criteria) is retried `attempts` times in all."""
    last = None
    for _ in range(max(1, attempts)):
        try:
            res = judge.score(request)
            if res is None:
                return None, "", None
            return validate_scores(res.scores, request.rubric), res.feedback, None
        except JudgeParseError as exc:
            last = f"unparsable judge reply: {exc}"
        except Exception as exc:  # noqa: BLE001 - network, quota, anything: retried, then logged
            last = f"{type(exc).__name__}: {exc}"
    return None, "", last or "judge failure"


# ---------------------------------------------------------------------------------------------
# One response
# ---------------------------------------------------------------------------------------------
@dataclass
class Scorer:
    """Everything a worker needs to score responses; built once per process."""
    dataset: Dataset
    submission: Submission
    judge: Judge
    rule: str = "paper"
    segmenter_name: str = "classical"
    prov: dict[str, Any] = field(default_factory=dict)
    judge_attempts: int = JUDGE_ATTEMPTS
    # the transition F1 joins the Deduction physics group (`--fuse-transitions`); off: the paper's score
    fuse_transitions: bool = False

    def __post_init__(self):
        from .segment import get_segmenter

        self.segmenter = get_segmenter(self.segmenter_name)
        self.objective_only = getattr(self.judge, "name", "") == "none"
        # objective results of identical answer files (same bytes, same case and subtrack): rollouts that
        # repeat a file are scored once per process; the values are those a fresh computation gives
        self._objective_cache: dict[tuple[str, str, str], dict[str, Any]] = {}
        self._segmentations: OrderedDict[Any, list] = OrderedDict()
        # case id -> the segmentation of its GT frame 0, for answers that start on it (transitions)
        self._frame0: dict[str, Any] = {}

    def forget_answers(self) -> None:
        """Drop what was computed from answers (objective results per identical file, kept
        segmentations), keeping the per-case models: the next score of an answer is computed again."""
        self._objective_cache.clear()
        self._segmentations.clear()

    def base_record(self, case: EvalCase, subtrack: str, rollout: int) -> dict[str, Any]:
        return {"record_version": RECORD_VERSION, "case_id": case.case_id, "subtrack": subtrack, "rollout": rollout,
                "model": self.submission.model, "protocol": self.submission.protocol, "pillar": case.pillar,
                "task": case.task, "source": case.source, "mode": OBJECTIVE_ONLY if self.objective_only else JUDGED,
                "score": None, "valid": True, "error": None, "metrics": {}, "metric_details": {}, "criteria": None,
                "judge_feedback": None, "groups": {}, "weights": {}, "artifact": {}, "notes": [], "transitions": None,
                "low_confidence": False, "elapsed_s": 0.0, "provenance": self.prov}

    def score(self, case_id: str, subtrack: str, rollout: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        case = self.dataset.cases[case_id]
        rec = self.base_record(case, subtrack, rollout)
        try:
            self._score(case, subtrack, rollout, rec)
        except Exception as exc:  # noqa: BLE001 - an unexpected failure is this response's error, not the run's
            self._invalid(rec, "internal_error", f"{type(exc).__name__}: {exc}")
            rec["notes"].append(traceback.format_exc(limit=4)[-1500:])
        rec["elapsed_s"] = round(time.perf_counter() - t0, 4)
        return rec

    @staticmethod
    def _invalid(rec: dict[str, Any], kind: str, detail: str) -> None:
        rec.update(score=0.0, valid=False, error={"kind": kind, "detail": detail[:2000]})

    def _artifact(self, rec: dict[str, Any], path: Path) -> None:
        try:
            rel = path.relative_to(self.submission.root).as_posix()
        except ValueError:
            rel = path.name
        rec["artifact"]["path"] = rel
        try:
            rec["artifact"]["sha256"] = sha256_file(path) if path.is_file() else None
        except OSError:
            rec["artifact"]["sha256"] = None

    def _cached(self, case: EvalCase, subtrack: str, rec: dict[str, Any], compute, extra=None) -> dict[str, Any]:
        """The objective result of an answer (computed once per identical file); `extra(result)`
        adds what is derived from the result's segmentations while they are at hand."""
        sha = rec["artifact"].get("sha256")
        key = (case.case_id, subtrack, sha) if sha else None
        if key is not None and key in self._objective_cache:
            return self._objective_cache[key]
        r = compute()
        out = {"values": dict(r.values), "details": r.details, "notes": list(r.notes),
               "low_confidence": bool(r.low_confidence)}
        if extra is not None:
            out.update(extra(r))
        if key is not None:
            if len(self._objective_cache) > 256:
                self._objective_cache.clear()
            self._objective_cache[key] = out
        # the segmentations are large: kept for the judge of this answer and of identical rollouts
        # (scored right after it, in the same task), not for the whole run
        if r.segmentations is not None and not self.objective_only:
            self._segmentations[key or (case.case_id, subtrack, None)] = r.segmentations
            while len(self._segmentations) > SEGMENTATIONS_KEPT:
                self._segmentations.popitem(last=False)
        return out

    def _transitions(self, case: EvalCase, pk: DeductionPacket, res) -> dict[str, Any]:
        """The transition score from the metrics' own segmentations; a failure is a note, never the
        response's error (the paper's score does not depend on it)."""
        try:
            tr, note = score_answer(case, pk, res.segmentations, self.segmenter, self.rule, self._frame0,
                                    res.answer_cache)
        except Exception as exc:  # noqa: BLE001
            tr, note = None, f"transition score failed: {type(exc).__name__}: {exc}"
        if note:
            log.info("%s: %s", case.case_id, note)
        return {"transitions": tr, "transitions_note": note}

    def _kept_segmentations(self, case: EvalCase, subtrack: str, rec: dict[str, Any]) -> list | None:
        return self._segmentations.get((case.case_id, subtrack, rec["artifact"].get("sha256") or None))

    def _score(self, case: EvalCase, subtrack: str, rollout: int, rec: dict[str, Any]) -> None:
        protocol = self.submission.protocol
        try:
            path = rollout_path(self.submission, case.case_id, subtrack, rollout)
        except UnsafePathError as exc:
            return self._invalid(rec, "unsafe_path", str(exc))
        escaping = _escaping(self.submission.root, path)
        if escaping is not None:
            return self._invalid(rec, "unsafe_path", f"{escaping} resolves outside the prediction directory")
        self._artifact(rec, path)
        rubric = rubric_for(subtrack, protocol)
        objective: dict[str, float | None] = {}
        if subtrack != "deduction":
            ans = last_frame_answer(path, protocol, case.frame_size)
            if not ans.ok:
                return self._invalid(rec, ans.error_kind or "undecodable", ans.error or "no answer artifact")
            rec["artifact"].update(source_size=ans.source_size, n_frames=ans.n_frames)
            if subtrack in ("perception_graphic", "formulation_graphic"):
                r = self._cached(case, subtrack, rec,
                                 lambda: graphic_iou(case, subtrack, ans.image, self.segmenter, ans.source_size))
                objective.update(r["values"])
                rec["metric_details"] = r["details"]
                rec["notes"] += r["notes"]
                rec["low_confidence"] = r["low_confidence"]
            request = JudgeRequest(case.case_id, subtrack, rubric, [ans.image],
                                   _refs(case, REFERENCE_ROLES[subtrack]), _facts(case, subtrack))
            per_ts = None
        else:
            if protocol == "video":
                pk, dense = decode_deduction(case, path, self.rule, dense=False)
            else:
                pk, dense = canonical_deduction(case, path, "image", rule=self.rule), None
            if not pk.ok:
                return self._invalid(rec, pk.error_kind or "undecodable", pk.error or "no decodable frame")
            rec["artifact"].update(n_frames=pk.n_video_frames, pred_indices=pk.pred_indices,
                                   missing_timestamps=[pk.times[i] for i in pk.missing])
            rec["notes"] += pk.notes
            r = self._cached(case, subtrack, rec,
                             lambda: deduction_metrics(case, pk, self.segmenter, dense=dense, rule=self.rule),
                             lambda res: self._transitions(case, pk, res))
            objective.update(r["values"])
            rec["metric_details"] = r["details"]
            rec["notes"] += r["notes"]
            rec["low_confidence"] = r["low_confidence"]
            rec["transitions"] = r["transitions"]
            if r["transitions_note"]:
                rec["notes"].append(r["transitions_note"])
            if self.fuse_transitions:
                objective[TRANSITION_F1] = None if r["transitions"] is None else r["transitions"]["f1"]
                rubric = with_transitions(rubric)
            refs = _refs(case, REFERENCE_ROLES[subtrack])
            segs = self._kept_segmentations(case, subtrack, rec)
            if protocol == "image":
                request = None
                per_ts = []
                gt = None
                for i, t in enumerate(pk.times):
                    frame = pk.frames[i]
                    if frame is None:
                        continue
                    if gt is None:
                        from .canonical import gt_deduction

                        gt = gt_deduction(case, pk.times)
                    facts = dict(_facts(case, subtrack), time_point=t)
                    one = None if segs is None else [segs[i]]
                    req = JudgeRequest(case.case_id, subtrack, rubric, [frame], dict(refs, gt_frame=gt.frames[i]),
                                       facts, context={"segmentations": one, "sequence": (pk.frames, pk.times, i),
                                                       "source_size": pk.source_size})
                    crit, fb, err = ask_judge(self.judge, req, self.judge_attempts)
                    if err is not None:
                        rec["metrics"] = objective
                        return self._invalid(rec, "judge_failure", f"t = {t:.3f}s: {err}")
                    if crit is None:
                        per_ts = None
                        break
                    per_ts.append(crit)
            else:
                shown = [i for i, f in enumerate(pk.frames) if f is not None]
                context = {"condition_frame": pk.condition_frame, "source_size": pk.source_size,
                           "segmentations": None if segs is None else [segs[i] for i in shown]}
                request = JudgeRequest(case.case_id, subtrack, rubric, [pk.frames[i] for i in shown],
                                       refs, _facts(case, subtrack), context=context)
                per_ts = None
        rec["metrics"] = objective
        criteria, feedback = None, None
        if request is not None:
            criteria, feedback, err = ask_judge(self.judge, request, self.judge_attempts)
            if err is not None:
                return self._invalid(rec, "judge_failure", err)
        if subtrack == "deduction" and protocol == "image":
            fr = fuse_deduction_keyframes(per_ts, objective, rubric)
            rec["criteria"] = None if per_ts is None else {"per_timestamp": per_ts}
        else:
            fr = fuse(rubric, criteria, objective, rule=self.rule, protocol=protocol)
            rec["criteria"] = criteria
        rec["judge_feedback"] = feedback or None
        rec.update(score=fr.score, mode=fr.mode, groups=fr.groups, weights=fr.weights)


# ---------------------------------------------------------------------------------------------
# Worker processes
# ---------------------------------------------------------------------------------------------
_WORKER: Scorer | None = None


def _init_worker(spec: dict[str, Any]) -> None:
    global _WORKER
    _WORKER = build_scorer(**spec)
    logging.getLogger("orchard_eval").setLevel(logging.ERROR)


def _work(case_tasks: list[tuple[str, str, tuple[int, ...]]]) -> list[dict[str, Any]]:
    assert _WORKER is not None
    return [_WORKER.score(cid, st, r) for cid, st, rollouts in case_tasks for r in rollouts]


def _pool_tasks(tasks: list[tuple[str, str, tuple[int, ...]]], jobs: int
                ) -> list[list[tuple[str, str, tuple[int, ...]]]]:
    """One pool task per case: all its responses share the worker's per-case models (GT frames, scene
    depth, rigid models, the light, the references' measurements), which a worker keeps for its last
    few cases only, so a case split over tasks has them computed again. A case is small enough
    (≤ 5 subtracks × rollouts) not to form a long tail. Fewer cases than 2 × `jobs`: one task per
    (case, subtrack), Deduction first, so that every worker has work."""
    by_case: dict[str, list[tuple[str, str, tuple[int, ...]]]] = {}
    for t in tasks:
        by_case.setdefault(t[0], []).append(t)
    if len(by_case) >= 2 * jobs:
        return list(by_case.values())
    return [[t] for t in sorted(tasks, key=lambda t: (t[1] != "deduction", t[0], t[1]))]


def build_scorer(cases: str, predictions: str, judge: str, judge_options: Mapping[str, Any] | None,
                 rule: str, segmenter: str, case_ids: Sequence[str] | None = None,
                 fuse_transitions: bool = False) -> Scorer:
    ds = load_dataset(cases, case_ids=case_ids)
    sub = load_submission(predictions)
    j = get_judge(judge, **dict(judge_options or {}))
    prov = provenance(cases, judge_config(j), rule, segmenter, sub.protocol, ds.num_rollouts, sub.prompt_version,
                      fuse_transitions=fuse_transitions)
    return Scorer(ds, sub, j, rule, segmenter, prov, fuse_transitions=fuse_transitions)


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------
@dataclass
class RunOptions:
    cases: str
    predictions: str
    out: str
    judge: str = "none"
    judge_options: dict[str, Any] = field(default_factory=dict)
    jobs: int = 1
    rule: str = "paper"
    segmenter: str = "classical"
    subtracks: tuple[str, ...] = SUBTRACKS
    progress: bool = True
    restart: bool = False
    limit: int | None = None    # score at most this many new responses (tests, smoke runs)
    fuse_transitions: bool = False


@dataclass
class RunResult:
    out: Path
    summary: dict[str, Any]
    n_scored: int
    n_skipped: int
    complete: bool


def _file_logger(out: Path) -> logging.Handler:
    h = logging.FileHandler(out / "eval.log", encoding="utf-8")
    h.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    h.setLevel(logging.INFO)
    return h


def run_evaluation(opts: RunOptions) -> RunResult:
    if opts.rule not in RULES:
        raise ValueError(f"unknown rule {opts.rule!r}; known: {', '.join(RULES)}")
    out = Path(opts.out)
    ds = load_dataset(opts.cases)                      # refuses unsafe manifests before anything is written
    sub = load_submission(opts.predictions)
    judge = get_judge(opts.judge, **opts.judge_options)
    prov = provenance(opts.cases, judge_config(judge), opts.rule, opts.segmenter, sub.protocol, ds.num_rollouts,
                      sub.prompt_version, fuse_transitions=opts.fuse_transitions)
    out.mkdir(parents=True, exist_ok=True)
    handler = _file_logger(out)
    log.addHandler(handler)
    if log.level == logging.NOTSET or log.level > logging.INFO:
        log.setLevel(logging.INFO)
    try:
        return _run(opts, out, ds, sub, judge, prov)
    finally:
        log.removeHandler(handler)
        handler.close()


def _run(opts: RunOptions, out: Path, ds: Dataset, sub: Submission, judge: Judge, prov: dict[str, Any]) -> RunResult:
    for p in ds.problems:
        log.warning("dataset problem (case left out): %s", p)
    report = validate_predictions(ds, opts.predictions, opts.subtracks, decode=False)
    (out / "validation.json").write_text(json.dumps(report.to_dict(), indent=1, default=str), encoding="utf-8")
    for issue in report.issues:
        if issue.kind in ("unknown_case", "unexpected_file", "unexpected_keyframe", "mislabelled", "submission"):
            log.warning("predictions: %s", issue)
    rec_path = out / RECORDS_FILE
    if opts.restart and rec_path.exists():
        rec_path.unlink()
    rlog = RecordLog.open(rec_path)
    if rlog.dropped_tail is not None:
        log.warning("records: dropped a torn last line from an interrupted run: %r", rlog.dropped_tail[:80])
    rlog.check_provenance(prov)
    n_roll = ds.num_rollouts
    tasks: list[tuple[str, str, tuple[int, ...]]] = []
    skipped = 0
    for cid in sorted(ds.cases):
        for st in opts.subtracks:
            todo = tuple(r for r in range(n_roll) if (cid, st, r) not in rlog)
            skipped += n_roll - len(todo)
            if todo:
                tasks.append((cid, st, todo))
    if opts.limit is not None:
        kept, budget = [], opts.limit
        for cid, st, rs in tasks:
            if budget <= 0:
                break
            kept.append((cid, st, rs[:budget]))
            budget -= len(rs[:budget])
        tasks = kept
    total = sum(len(t[2]) for t in tasks)
    bar = _progress(total, opts.progress and total > 0, sub.model)
    scored = 0

    def consume(recs: list[dict[str, Any]]) -> None:
        nonlocal scored
        for rec in recs:
            if rlog.append(rec):
                scored += 1
                if not rec["valid"]:
                    log.warning("%s scores 0: %s: %s", key_str((rec["case_id"], rec["subtrack"], rec["rollout"])),
                                rec["error"]["kind"], rec["error"]["detail"][:300])
            bar.update(1)

    try:
        if opts.jobs <= 1 or len(tasks) <= 1:
            scorer = Scorer(ds, sub, judge, opts.rule, opts.segmenter, prov, fuse_transitions=opts.fuse_transitions)
            for cid, st, rs in tasks:
                consume([scorer.score(cid, st, r) for r in rs])
        else:
            from concurrent.futures import as_completed

            from orchard_build.pool import process_pool

            spec = dict(cases=opts.cases, predictions=opts.predictions, judge=opts.judge,
                        judge_options=opts.judge_options, rule=opts.rule, segmenter=opts.segmenter,
                        fuse_transitions=opts.fuse_transitions)
            with process_pool(opts.jobs, _init_worker, (spec,)) as pool:
                futures = [pool.submit(_work, ts) for ts in _pool_tasks(tasks, opts.jobs)]
                for fut in as_completed(futures):
                    consume(fut.result())
    finally:
        bar.close()
        rlog.close()
    complete = all((cid, st, r) in rlog for cid in ds.cases for st in opts.subtracks for r in range(n_roll))
    summary = summarise(rlog.records.values(), ds, sub, prov, opts.subtracks, report)
    summary["complete"] = complete
    write_outputs(out, summary)
    return RunResult(out, summary, scored, skipped, complete)


class _NoBar:
    def update(self, n: int = 1) -> None: ...
    def close(self) -> None: ...


def _progress(total: int, enabled: bool, model: str):
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return _NoBar()
    return tqdm(total=total, unit="resp", desc=f"scoring {model}", dynamic_ncols=True, file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# Summary
# ---------------------------------------------------------------------------------------------
SUMMARY_VERSION = 1


def summarise(records: Iterable[Mapping[str, Any]], ds: Dataset, sub: Submission, prov: Mapping[str, Any],
              subtracks: Sequence[str] = SUBTRACKS, report: Any = None) -> dict[str, Any]:
    """Case-level means over rollouts, then the hierarchical aggregate, from records in key order."""
    recs = sorted((r for r in records if r["case_id"] in ds.cases and r["subtrack"] in subtracks),
                  key=lambda r: (r["case_id"], r["subtrack"], int(r["rollout"])))
    modes = {r["mode"] for r in recs}
    mode = modes.pop() if len(modes) == 1 else (OBJECTIVE_ONLY if prov.get("judge", {}).get("name") == "none"
                                                else JUDGED)
    by_pair: dict[tuple[str, str], list[RolloutScore]] = {}
    for r in recs:
        rs = RolloutScore(r["case_id"], r["subtrack"], int(r["rollout"]), r["mode"],
                          None if r["score"] is None else float(r["score"]), bool(r["valid"]),
                          "" if r["error"] is None else f"{r['error']['kind']}: {r['error']['detail'][:200]}")
        by_pair.setdefault((r["case_id"], r["subtrack"]), []).append(rs)
    case_results = []
    per_case: dict[str, dict[str, float | None]] = {}
    for cid in sorted(ds.cases):
        for st in subtracks:
            cs = rollout_mean(cid, st, by_pair.get((cid, st), []), ds.num_rollouts, mode=mode)
            case_results.append(cs)
            per_case.setdefault(cid, {})[st] = cs.score
    agg = aggregate(case_scores_from(case_results, ds.cases), subtracks, expected_cases=ds.cases)
    errors: dict[str, int] = {}
    for r in recs:
        if r["error"] is not None:
            errors[r["error"]["kind"]] = errors.get(r["error"]["kind"], 0) + 1
    metric_means: dict[str, dict[str, float | None]] = {}
    for st in subtracks:
        keys = sorted({k for r in recs if r["subtrack"] == st for k in r.get("metrics", {})})
        metric_means[st] = {}
        for k in keys:
            vals = [r["metrics"][k] for r in recs if r["subtrack"] == st and r["valid"]
                    and r["metrics"].get(k) is not None]
            metric_means[st][k] = float(np.mean(vals)) if vals else None
    trans = transition_summary(recs, ds.cases, ds.num_rollouts)
    return {
        "summary_version": SUMMARY_VERSION,
        "model": sub.model,
        "protocol": sub.protocol,
        "mode": mode,
        "label": ("objective-only: no judge; P-T and F-T have no objective metric and are not scored, the other "
                  "subtracks use their objective metrics alone") if mode == OBJECTIVE_ONLY else "judged",
        "provenance": dict(prov),
        "counts": {"cases": len(ds.cases), "expected_responses": len(ds.cases) * len(subtracks) * ds.num_rollouts,
                   "records": len(recs), "invalid": sum(1 for r in recs if not r["valid"]), "by_error": errors},
        "aggregate": agg.to_dict(),
        "table_row": table_row({**agg.row(), "Trans.": trans["mean_f1"]}),
        "transitions": trans,
        "metric_means": metric_means,
        "cases": per_case,
        "invalid": [f"{r['case_id']}/{r['subtrack']}/rollout_{int(r['rollout']):02d}: {r['error']['kind']}"
                    for r in recs if not r["valid"]],
        "dataset_problems": list(ds.problems),
        "prediction_issues": {} if report is None else report.by_kind(),
        "unknown_cases": [] if report is None else sorted({i.case_id for i in report.issues
                                                           if i.kind == "unknown_case" and i.case_id}),
    }


def table_row(row: Mapping[str, float | None]) -> dict[str, float | None]:
    from .tables import COLUMNS

    r = dict(row)
    r["Avg."] = r.pop("Overall", None)
    return {c: r.get(c) for c in COLUMNS}


def write_outputs(out: Path, summary: Mapping[str, Any]) -> None:
    from .tables import write_tables

    tmp = out / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=1, sort_keys=False, default=str), encoding="utf-8")
    os.replace(tmp, out / "summary.json")
    write_tables([summary], out / "table")


def version() -> str:
    return __version__
