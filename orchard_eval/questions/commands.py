"""`orchard-eval questions generate|oracle|score`: write questions.json per case under an output dir,
answer them from the cases' GT tracks (the oracle), and score an answers file."""
from __future__ import annotations

import json
from pathlib import Path

from ..apt.observable import shown_events
from ..atomic import write_json_atomic
from ..cases import load_dataset, read_json_file, schema_errors
from .answer import answer_questions
from .generate import generate_questions
from .score import score_answers


def generate_all(cases: str, out: str) -> dict[str, dict]:
    docs = {}
    for case in load_dataset(cases, strict=True):
        doc = generate_questions(case)
        write_json_atomic(Path(out) / case.case_id / "questions.json", doc, sort_keys=True)
        docs[case.case_id] = doc
    return docs


def read_questions(qdir: str) -> dict[str, dict]:
    """Every questions.json under `qdir` (case id -> document), each checked against
    schemas/questions.schema.json: a file that is not JSON, breaks the schema or repeats another's
    case id is a ValueError naming the file (and the field)."""
    docs: dict[str, dict] = {}
    source: dict[str, Path] = {}
    for p in sorted(Path(qdir).rglob("questions.json")):
        doc = read_json_file(p)
        errors = schema_errors(doc, "questions.schema.json")
        if errors:
            more = f" (and {len(errors) - 3} more)" if len(errors) > 3 else ""
            raise ValueError(f"{p}: not a questions document: {'; '.join(errors[:3])}{more}")
        cid = doc["case_id"]
        if cid in docs:
            raise ValueError(f"{p}: case {cid} is also asked in {source[cid]}")
        docs[cid], source[cid] = doc, p
    if not docs:
        raise ValueError(f"{qdir}: no questions.json found (run 'orchard-eval questions generate' first)")
    return docs


def oracle_answers(cases: str, docs: dict[str, dict]) -> dict[str, dict]:
    ds = load_dataset(cases, strict=True)
    unknown = sorted(set(docs) - set(ds.cases))
    if unknown:
        raise ValueError(f"questions for {len(unknown)} case(s) not in {cases}: {', '.join(unknown[:5])}")
    return {cid: answer_questions(doc, ds.cases[cid].object_tracks(), shown_events(ds.cases[cid]))
            for cid, doc in docs.items()}


def run(a) -> int:
    if a.questions_command == "generate":
        docs = generate_all(a.cases, a.out)
        print(f"{len(docs)} case(s), {sum(len(d['questions']) for d in docs.values())} questions -> {a.out}")
        return 0
    docs = read_questions(a.questions)
    if a.questions_command == "oracle":
        answers = oracle_answers(a.cases, docs)
        write_json_atomic(Path(a.out), {"answerer": "programmatic/gt-tracks", "answers": answers}, sort_keys=True)
        print(f"oracle answers for {len(answers)} case(s) -> {a.out}")
        return 0
    if a.questions_command == "answer":
        from .measured import measured_answers

        answers, problems = measured_answers(a.cases, docs, a.predictions, a.rollout)
        write_json_atomic(Path(a.out), {"answerer": f"programmatic/measured:{Path(a.predictions).name}",
                                        "rollout": a.rollout, "answers": answers, "problems": problems}, sort_keys=True)
        for line in problems:
            print(f"  {line}")
        print(f"measured answers for {len(answers)} case(s), {len(problems)} problem(s) -> {a.out}")
        return 0
    if a.questions_command == "ask":
        from .vlm import ask_all

        doc = ask_all(a.cases, docs, a.out, model=a.model, base_url=a.base_url, predictions=a.predictions,
                      cache_dir=a.cache, jobs=a.jobs, api_key_env=a.api_key_env)
        print(f"{doc['answerer']} answered {sum(v is not None for d in doc['answers'].values() for v in d.values())} "
              f"of {sum(len(d) for d in doc['answers'].values())} questions ({doc['run']['requests_sent']} requests, "
              f"{doc['run']['cache_hits']} cached, {len(doc['problems'])} problems) -> {Path(a.out) / 'answers.json'}")
        answers = doc["answers"]
    else:
        answers = json.loads(Path(a.answers).read_text(encoding="utf-8"))["answers"]
    rep = score_answers(docs, answers)
    if a.questions_command == "ask":
        write_json_atomic(Path(a.out) / "report.json", rep, sort_keys=True)
    elif a.out:
        write_json_atomic(Path(a.out), rep, sort_keys=True)
    o = rep["overall"]
    print(f"overall: n={o['n']} accuracy={o['accuracy']:.4f} balanced={o['balanced_accuracy']:.4f} "
          f"unanswered={o['unanswered']} (chance {rep['chance']})")
    for level in ("by_pillar", "by_task"):
        for k, r in rep[level].items():
            print(f"  {level[3:]:6s} {k:28s} n={r['n']:4d} acc={r['accuracy']:.4f} bal={r['balanced_accuracy']:.4f}")
    return 0


def add_parser(sub) -> None:
    q = sub.add_parser("questions", help="balanced yes/no questions per case: generate, oracle, score")
    qs = q.add_subparsers(dest="questions_command", required=True)
    g = qs.add_parser("generate", help="write <OUT>/<case id>/questions.json for every case")
    g.add_argument("--cases", required=True, metavar="DATASET")
    g.add_argument("--out", required=True, metavar="DIR")
    o = qs.add_parser("oracle", help="answer the questions from the cases' GT tracks")
    o.add_argument("--cases", required=True, metavar="DATASET")
    o.add_argument("--questions", required=True, metavar="DIR")
    o.add_argument("--out", required=True, metavar="ANSWERS_JSON")
    m = qs.add_parser("answer", help="answer the questions from tracks measured in a submission's Deduction videos")
    m.add_argument("--cases", required=True, metavar="DATASET")
    m.add_argument("--questions", required=True, metavar="DIR")
    m.add_argument("--predictions", required=True, metavar="PRED_DIR")
    m.add_argument("--rollout", type=int, default=0)
    m.add_argument("--out", required=True, metavar="ANSWERS_JSON")
    k = qs.add_parser("ask", help="answer the questions with an OpenAI-compatible VLM (prior + question-aware "
                                  "frames of the GT video, or of a model's Deduction answer), then score")
    k.add_argument("--cases", required=True, metavar="DATASET")
    k.add_argument("--questions", required=True, metavar="DIR")
    k.add_argument("--model", required=True)
    k.add_argument("--base-url", help="endpoint (default: the judge's, from OPENAI_BASE_URL)")
    k.add_argument("--api-key-env", help="environment variable holding the API key")
    k.add_argument("--predictions", metavar="PRED_DIR", help="show the frames of this submission's Deduction "
                                                              "rollout 0 instead of the GT video")
    k.add_argument("--cache", help="reply cache folder (default OUT/cache)")
    k.add_argument("--jobs", type=int, default=4, help="requests in flight")
    k.add_argument("--out", required=True, metavar="DIR", help="answers.json and report.json go here")
    s = qs.add_parser("score", help="accuracy / balanced accuracy of an answers file")
    s.add_argument("--questions", required=True, metavar="DIR")
    s.add_argument("--answers", required=True, metavar="ANSWERS_JSON")
    s.add_argument("--out", metavar="REPORT_JSON")
