"""`orchard-build annotate push|pull`: real-world cases through a Label Studio server.

Per case two projects: `orchard <Task>/<number> primary` (one annotation per task) and `orchard <Task>/<number>
review` (two annotations per task: the 1+2 protocol). The labelling configs come from annotation/
(primary.xml, review.xml) with the case's objects as brush labels and its measured quantities as
number fields. Frames are served by Label Studio from the case directory through a local-files
storage connection (the case must lie under the server's LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT).

push: creates or updates both projects and their task; the primary task carries the ingest masks
(frame 0 and the frames the drift detector flagged) and the measured values as a pre-annotation;
once the primary annotation exists, the review task carries it as the pre-annotation.

pull: exports both projects, decodes the brush masks (bit-exact) of the annotated frames, propagates
them to the other frames, writes measurement.json and review.json (1+2 enforced, see review.py) and
re-derives the case. Everything is fetched before anything is written: an unreachable server or a
rejected token leaves the case untouched.

The API token is read from the environment (LABEL_STUDIO_API_KEY by default) and never written to
disk, results or logs. The client speaks the REST API directly (urllib), so the toolkit needs neither
the server nor the SDK installed.
"""
from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import OrchardError
from ..io import read_json, write_json
from ..video import write_png
from . import masks as MK
from . import measurements as M
from .brush import BrushFormatError, mask_to_rle, rle_to_mask
from .derive import derive_case, load_masks
from .review import CHECKLIST, Pass, evaluate

TOKEN_ENV = "LABEL_STUDIO_API_KEY"
DOC_ROOT_ENV = "LABEL_STUDIO_LOCAL_FILES_DOCUMENT_ROOT"
ANNOTATION_DIR = Path(__file__).resolve().parents[2] / "annotation"
COLORS = ("#e6194b", "#3cb44b", "#4363d8", "#f58231", "#911eb4", "#42d4f4", "#f032e6", "#bfef45")
MODEL_VERSION = "orchard-ingest"


class LabelStudioError(OrchardError):
    pass


# ---------------------------------------------------------------------------------------------
# REST client
# ---------------------------------------------------------------------------------------------
class Client:
    def __init__(self, url: str, token: str, timeout: float = 60.0):
        if not token:
            raise LabelStudioError(f"no API token: set {TOKEN_ENV} in the environment")
        self.url = url.rstrip("/")
        self._token = token
        self.timeout = timeout

    def __repr__(self) -> str:  # never show the token
        return f"Client({self.url!r})"

    def request(self, method: str, path: str, body: Any = None, params: dict | None = None) -> Any:
        url = f"{self.url}/{path.lstrip('/')}"
        if params:
            url += "?" + urllib.parse.urlencode({k: v for k, v in params.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method)
        req.add_header("Authorization", f"Token {self._token}")
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                raw = r.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:500].decode("utf-8", "replace")
            if exc.code in (401, 403):
                raise LabelStudioError(f"Label Studio at {self.url} rejected the API token ({exc.code}); check "
                                       f"{TOKEN_ENV}") from None
            raise LabelStudioError(f"Label Studio {method} /{path.lstrip('/')} failed with {exc.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise LabelStudioError(f"cannot reach Label Studio at {self.url}: {reason}") from None
        if not raw:
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except ValueError as exc:
            raise LabelStudioError(f"Label Studio {method} /{path.lstrip('/')} returned non-JSON") from exc

    # -- endpoints --
    def whoami(self) -> dict:
        return self.request("GET", "api/current-user/whoami")

    def projects(self) -> list[dict]:
        out, page = [], 1
        while True:
            doc = self.request("GET", "api/projects/", params={"page": page, "page_size": 100})
            items = doc.get("results", []) if isinstance(doc, dict) else doc
            out.extend(items)
            if not isinstance(doc, dict) or not doc.get("next"):
                return out
            page += 1

    def project_by_title(self, title: str) -> dict | None:
        return next((p for p in self.projects() if p.get("title") == title), None)

    def tasks(self, project: int) -> list[dict]:
        out, page = [], 1
        while True:
            doc = self.request("GET", "api/tasks/", params={"project": project, "page": page, "page_size": 100})
            items = doc.get("tasks", []) if isinstance(doc, dict) else doc
            out.extend(items)
            if not items or not isinstance(doc, dict) or len(out) >= int(doc.get("total", len(out))):
                return out
            page += 1

    def export(self, project: int) -> list[dict]:
        return self.request("GET", f"api/projects/{project}/export",
                            params={"exportType": "JSON", "download_all_tasks": "true"})

    def users(self) -> list[dict]:
        doc = self.request("GET", "api/users/")
        return doc.get("results", doc) if isinstance(doc, dict) else doc


# ---------------------------------------------------------------------------------------------
# Labelling configs
# ---------------------------------------------------------------------------------------------
def measurement_fields(meas: dict) -> list[dict]:
    """One number field per measured quantity: name, label text, step (the instrument precision)."""
    out = []
    for q in meas["quantities"]:
        key = M.key_of(q)
        name = key.replace("/", "__")
        what = q["name"] + (f" {q['dimension']}" if q.get("dimension") else "") + (f" ({q['object']})" if q.get("object") else "")
        out.append({"key": key, "name": name, "label": f"{what} [{q['unit']}], {q['instrument']}, {q['precision_text']}",
                    "step": q["precision"] or 0.01, "precision": q["precision"]})
    return out


def label_config(template: str, objects: list[dict], fields: list[dict]) -> str:
    root = ET.fromstring(template)
    brush = root.find(".//BrushLabels[@name='mask']")
    for child in list(brush):
        brush.remove(child)
    for o in objects:
        ET.SubElement(brush, "Label", {"value": o["id"], "background": COLORS[(o["instance_id"] - 1) % len(COLORS)]})
    view = root.find(".//View[@name='measurements']")
    if view is not None:
        for child in list(view):
            view.remove(child)
        ET.SubElement(view, "Header", {"value": "Measurements: SI units, at the instrument precision (Table 7)"})
        for f in fields:
            ET.SubElement(view, "Header", {"value": f["label"], "size": "6"})
            ET.SubElement(view, "Number", {"name": f["name"], "toName": "info", "step": f"{f['step']:g}",
                                           "required": "true"})
    return ET.tostring(root, encoding="unicode")


def _template(name: str) -> str:
    return (ANNOTATION_DIR / name).read_text(encoding="utf-8")


# ---------------------------------------------------------------------------------------------
# Results ↔ masks and values
# ---------------------------------------------------------------------------------------------
def mask_results(masks: dict[int, np.ndarray], objects: list[dict], width: int, height: int) -> list[dict]:
    out = []
    for frame, m in sorted(masks.items()):
        for o in objects:
            sel = m == o["instance_id"]
            if not sel.any():
                continue
            out.append({"id": f"f{frame}o{o['instance_id']}", "from_name": "mask", "to_name": "frame", "type": "brushlabels",
                        "original_width": width, "original_height": height, "image_rotation": 0,
                        "item_index": frame, "value": {"format": "rle", "rle": mask_to_rle(sel), "brushlabels": [o["id"]]}})
    return out


def number_results(values: dict[str, float], fields: list[dict]) -> list[dict]:
    return [{"id": f"n{i}", "from_name": f["name"], "to_name": "info", "type": "number",
             "value": {"number": values[f["key"]]}} for i, f in enumerate(fields) if f["key"] in values]


def decode_pass(ann: dict, objects: list[dict], fields: list[dict], width: int, height: int, n_frames: int,
                users: dict[int, str]) -> Pass:
    by_label = {o["id"]: o["instance_id"] for o in objects}
    by_field = {f["name"]: f["key"] for f in fields}
    masks: dict[int, np.ndarray] = {}
    values: dict[str, float] = {}
    checks: dict[str, str] = {}
    comment = ""
    for r in ann.get("result", []):
        v = r.get("value", {})
        if r.get("type") == "brushlabels" and r.get("from_name") == "mask":
            labels = v.get("brushlabels") or []
            if len(labels) != 1 or labels[0] not in by_label:
                raise LabelStudioError(f"annotation {ann.get('id')}: brush label {labels} is not one object of the case")
            frame = int(r.get("item_index", 0) or 0)
            if not 0 <= frame < n_frames:
                raise LabelStudioError(f"annotation {ann.get('id')}: frame {frame} is outside the case")
            w, h = int(r.get("original_width", width)), int(r.get("original_height", height))
            if (w, h) != (width, height):
                raise LabelStudioError(f"annotation {ann.get('id')}: mask is {w}×{h}, the frames are {width}×{height}")
            try:
                sel = rle_to_mask(v.get("rle", r.get("rle")), w, h)
            except BrushFormatError as exc:
                raise LabelStudioError(f"annotation {ann.get('id')}: {exc}") from exc
            m = masks.setdefault(frame, np.zeros((h, w), np.uint8))
            m[sel] = by_label[labels[0]]
        elif r.get("type") == "number" and r.get("from_name") in by_field:
            values[by_field[r["from_name"]]] = float(v.get("number"))
        elif r.get("type") == "choices" and str(r.get("from_name", "")).startswith("check_"):
            item = r["from_name"][len("check_"):]
            if item in CHECKLIST and v.get("choices"):
                checks[item] = v["choices"][0]
        elif r.get("type") == "textarea" and r.get("from_name") in ("review_comment",):
            comment = " ".join(v.get("text") or [])
    uid = ann.get("completed_by")
    if isinstance(uid, dict):
        uid = uid.get("id")
    user = users.get(uid, f"user {uid}")
    return Pass(user=user, user_id=uid, annotation_id=ann.get("id"), measurements=values, masks=masks,
                checks=checks, comment=comment)


# ---------------------------------------------------------------------------------------------
# Push
# ---------------------------------------------------------------------------------------------
@dataclass
class CaseRef:
    dir: Path
    case: dict
    source: dict
    measurement: dict

    @property
    def case_id(self) -> str:
        return self.case["case_id"]

    def title(self, kind: str) -> str:
        """Project title (Label Studio allows 50 characters; the task name implies the pillar)."""
        return f"orchard {self.case_id.split('/', 1)[1]} {kind}"


def find_cases(path: str | Path) -> list[CaseRef]:
    """Real-world cases at `path`: a case directory or a dataset root."""
    path = Path(path)
    dirs = [path] if (path / "case.json").is_file() else sorted(p.parent for p in path.glob("cases/*/*/*/case.json"))
    out = []
    for d in dirs:
        case = read_json(d / "case.json")
        if case.get("source") == "simulated" or not (d / "source.json").is_file():
            continue
        out.append(CaseRef(d.resolve(), case, read_json(d / "source.json"), read_json(d / "measurement.json")))
    if not out:
        raise LabelStudioError(f"{path}: no real-world case directories (case.json with source.json)")
    return out


def _local_url(doc_root: Path, file: Path) -> str:
    rel = file.resolve().relative_to(doc_root).as_posix()
    return "/data/local-files/?d=" + urllib.parse.quote(rel, safe="/")


def _document_root(value: str | Path | None) -> Path:
    value = value or os.environ.get(DOC_ROOT_ENV)
    if not value:
        raise LabelStudioError(f"the server's local-files document root is needed: --document-root or {DOC_ROOT_ENV}")
    return Path(value).resolve()


def task_data(ref: CaseRef, doc_root: Path, flagged: list[int]) -> dict:
    n = ref.case["n_frames"]
    frames = [_local_url(doc_root, ref.dir / "gt" / "rgb" / f"{k:04d}.png") for k in range(n)]
    ann = ref.dir / "annotated_first_frame.png"
    info = (f"{ref.case_id} · {ref.case['task']} · {ref.case['source']} · {ref.case['gt_fps']:g} fps · "
            f"{n} frames (frame 0 = condition frame) · T = {ref.case['physics_duration']:g} s · "
            f"t* = {ref.case['target_time']:g} s · objects: "
            + ", ".join(f"{o['id']} ({o['shape']})" for o in ref.case["objects"])
            + (f" · frames flagged for mask correction: {', '.join(map(str, flagged))}" if flagged else ""))
    return {"case_id": ref.case_id, "info": info, "frames": frames,
            "annotated": _local_url(doc_root, ann if ann.is_file() else ref.dir / "first_frame.png")}


def _ensure_project(cl: Client, ref: CaseRef, kind: str, config: str, max_ann: int, doc_root: Path) -> dict:
    title = ref.title(kind)
    body = {"title": title, "label_config": config, "maximum_annotations": max_ann,
            "show_overlap_first": True, "overlap_cohort_percentage": 100,
            "description": f"Orchard real-world case {ref.case_id}: {kind} pass"}
    proj = cl.project_by_title(title)
    if proj is None:
        proj = cl.request("POST", "api/projects/", body)
    else:
        proj = cl.request("PATCH", f"api/projects/{proj['id']}/", body)
    storages = cl.request("GET", "api/storages/localfiles/", params={"project": proj["id"]}) or []
    if not any(Path(s.get("path", "")) == ref.dir for s in storages):
        cl.request("POST", "api/storages/localfiles/", {"project": proj["id"], "path": str(ref.dir),
                                                         "title": f"{ref.case_id} files", "use_blob_urls": True,
                                                         "regex_filter": r"^$", "recursive_scan": False})
    return proj


def _ensure_task(cl: Client, project: dict, data: dict, prediction: list[dict] | None) -> dict:
    existing = [t for t in cl.tasks(project["id"]) if t.get("data", {}).get("case_id") == data["case_id"]]
    if existing:
        task = cl.request("PATCH", f"api/tasks/{existing[0]['id']}/", {"data": data})
    else:
        res = cl.request("POST", f"api/projects/{project['id']}/import", [data], params={"return_task_ids": "true"})
        task = {"id": res["task_ids"][0]}
    if prediction is not None:
        preds = cl.request("GET", "api/predictions/", params={"task": task["id"]}) or []
        for p in preds:
            if p.get("model_version") == MODEL_VERSION:
                cl.request("DELETE", f"api/predictions/{p['id']}/")
        cl.request("POST", "api/predictions/", {"task": task["id"], "result": prediction, "model_version": MODEL_VERSION,
                                                "score": 1.0})
    return task


def push(path: str | Path, url: str, token: str | None = None, document_root: str | Path | None = None,
         log=print) -> list[dict]:
    """Create or update the projects and tasks of every real-world case under `path`."""
    cl = Client(url, token if token is not None else os.environ.get(TOKEN_ENV, ""))
    doc_root = _document_root(document_root)
    refs = find_cases(path)
    for ref in refs:
        try:
            ref.dir.relative_to(doc_root)
        except ValueError:
            raise LabelStudioError(f"{ref.dir} is not under the server's document root {doc_root}") from None
    cl.whoami()  # fails early on a wrong token or a dead server
    summary = []
    for ref in refs:
        objects = ref.source["objects"]
        fields = measurement_fields(ref.measurement)
        W, H = ref.case["frame_size"]["width"], ref.case["frame_size"]["height"]
        n = ref.case["n_frames"]
        review_doc = read_json(ref.dir / "gt" / "mask_review.json") if (ref.dir / "gt" / "mask_review.json").is_file() else {}
        flagged = list(review_doc.get("frames_to_correct", []))
        data = task_data(ref, doc_root, flagged)
        primary = _ensure_project(cl, ref, "primary", label_config(_template("primary.xml"), objects, fields), 1, doc_root)
        review = _ensure_project(cl, ref, "review", label_config(_template("review.xml"), objects, fields), 2, doc_root)
        masks = load_masks(ref.dir, n) or []
        pre_frames = {k: masks[k] for k in sorted({0, *flagged}) if k < len(masks)}
        values = {M.key_of(q): q["value"] for q in ref.measurement["quantities"]}
        pre = mask_results(pre_frames, objects, W, H) + number_results(values, fields)
        ptask = _ensure_task(cl, primary, data, pre)
        anns = [a for a in cl.request("GET", f"api/tasks/{ptask['id']}/annotations/") or [] if not a.get("was_cancelled")]
        rtask = None
        if anns:
            carried = [dict(r) for r in anns[0]["result"]]
            rtask = _ensure_task(cl, review, data, carried)
        summary.append({"case_id": ref.case_id, "primary_project": primary["id"], "review_project": review["id"],
                        "primary_task": ptask["id"], "review_task": None if rtask is None else rtask["id"],
                        "state": "in review" if rtask else "awaiting the primary annotation"})
        log(f"{ref.case_id}: primary project {primary['id']} task {ptask['id']}; "
            + (f"review project {review['id']} task {rtask['id']}" if rtask else "review waits for the primary annotation"))
    return summary


# ---------------------------------------------------------------------------------------------
# Pull
# ---------------------------------------------------------------------------------------------
@dataclass
class Pulled:
    ref: CaseRef
    primary: Pass | None
    reviews: list[Pass]
    fields: list[dict]
    primary_ids: dict[str, int] = field(default_factory=dict)


def _export_task(cl: Client, project: dict | None, case_id: str) -> dict | None:
    if project is None:
        return None
    tasks = [t for t in cl.export(project["id"]) if t.get("data", {}).get("case_id") == case_id]
    return tasks[0] if tasks else None


def pull(path: str | Path, url: str, token: str | None = None, log=print) -> list[dict]:
    """Fetch every real-world case's annotations, then write masks, measurement.json and review.json."""
    cl = Client(url, token if token is not None else os.environ.get(TOKEN_ENV, ""))
    refs = find_cases(path)
    cl.whoami()
    users = {u["id"]: (u.get("email") or u.get("username") or f"user {u['id']}") for u in cl.users()}
    fetched: list[Pulled] = []
    for ref in refs:  # 1. fetch and decode everything (nothing written yet)
        objects = ref.source["objects"]
        fields = measurement_fields(ref.measurement)
        W, H = ref.case["frame_size"]["width"], ref.case["frame_size"]["height"]
        n = ref.case["n_frames"]
        ptask = _export_task(cl, cl.project_by_title(ref.title("primary")), ref.case_id)
        if ptask is None:
            raise LabelStudioError(f"{ref.case_id}: no primary task on the server (run `orchard-build annotate push` first)")
        anns = [a for a in ptask.get("annotations", []) if not a.get("was_cancelled")]
        if len(anns) > 1:
            raise LabelStudioError(f"{ref.case_id}: the primary pass allows one annotation, found {len(anns)}")
        primary = decode_pass(anns[0], objects, fields, W, H, n, users) if anns else None
        rtask = _export_task(cl, cl.project_by_title(ref.title("review")), ref.case_id)
        reviews = [decode_pass(a, objects, fields, W, H, n, users) for a in (rtask or {}).get("annotations", [])
                   if not a.get("was_cancelled")]
        fetched.append(Pulled(ref, primary, reviews, fields, {"primary_task": ptask["id"],
                                                               "review_task": None if rtask is None else rtask["id"]}))
    out = []
    for p in fetched:  # 2. write
        out.append(_write_pulled(p))
        log(f"{p.ref.case_id}: {out[-1]['status']}" + "".join(f"\n  - {x}" for x in out[-1]["problems"])
            + "".join(f"\n  - disagreement: {d['item']} ({d['kind']}) → {' → '.join(d['resolution_order'])}"
                      for d in out[-1]["disagreements"]))
    return out


def _write_pulled(p: Pulled) -> dict:
    ref = p.ref
    objects = ref.source["objects"]
    n = ref.case["n_frames"]
    precisions = {f["key"]: f["precision"] for f in p.fields}
    record = evaluate(ref.case_id, p.primary, p.reviews, precisions, {o["instance_id"]: o["id"] for o in objects})
    if p.primary is not None:
        from .derive import load_frame

        seeds = dict(p.primary.masks)
        if 0 not in seeds:
            existing = load_masks(ref.dir, n)
            if existing is None:
                raise LabelStudioError(f"{ref.case_id}: the primary annotation has no mask on frame 0 and the case has none")
            seeds[0] = existing[0]
        frames = np.stack([load_frame(ref.dir, k) for k in range(n)])
        result = MK.run_pipeline(frames, seeds, {o["instance_id"]: o["id"] for o in objects})
        for k, m in enumerate(result.masks):
            write_png(ref.dir / "gt" / "masks" / f"{k:04d}.png", m.astype(np.uint8))
        write_json(ref.dir / "gt" / "mask_review.json", MK.review_document(
            result, f"seed: Label Studio annotation {p.primary.annotation_id} by {p.primary.user} (frames "
                    f"{', '.join(map(str, sorted(p.primary.masks)))}); OpenCV Farnebäck flow + colour-model propagation"))
        meas = dict(ref.measurement)
        qs = []
        for q in meas["quantities"]:
            q = dict(q)
            key = M.key_of(q)
            if key in p.primary.measurements:
                q["value"] = p.primary.measurements[key]
                q["source"] = f"annotated:{p.primary.user}"
            qs.append(q)
        meas.update({"quantities": qs, "origin": "label-studio", "annotator": p.primary.user,
                     "reviewed": record["reviewed"],
                     "label_studio": {"primary_annotation": p.primary.annotation_id, **p.primary_ids,
                                      "review_annotations": [r["annotation_id"] for r in record["reviewers"]]}})
        write_json(ref.dir / "measurement.json", meas)
    write_json(ref.dir / "review.json", record)
    derive_case(ref.dir)
    return record


def write_agreement_pass(path: str | Path, out: str | Path, annotator: str, project_title: str, url: str,
                         token: str | None = None) -> None:
    """Export one annotator's agreement-study pass (annotation/agreement.xml) as an agreement file."""
    cl = Client(url, token if token is not None else os.environ.get(TOKEN_ENV, ""))
    proj = cl.project_by_title(project_title)
    if proj is None:
        raise LabelStudioError(f"no project titled {project_title!r}")
    users = {u["id"]: (u.get("email") or u.get("username")) for u in cl.users()}
    cases: dict[str, dict] = {}
    for t in cl.export(proj["id"]):
        for a in t.get("annotations", []):
            uid = a.get("completed_by")
            uid = uid.get("id") if isinstance(uid, dict) else uid
            if users.get(uid) != annotator or a.get("was_cancelled"):
                continue
            rec = {}
            for r in a.get("result", []):
                v = r.get("value", {})
                if r.get("type") == "choices" and v.get("choices"):
                    rec[r["from_name"]] = v["choices"][0]
                elif r.get("type") == "number":
                    rec[r["from_name"]] = v.get("number")
            cases[t["data"]["case_id"]] = rec
    write_json(out, {"annotator": annotator, "cases": dict(sorted(cases.items()))})

