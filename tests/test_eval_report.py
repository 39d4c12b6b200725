"""`orchard-eval report` on runs of the oracle, static and blank baselines over small synthetic cases,
opened in a real headless Chromium (Selenium + the system chromium-driver): pages load without
console errors or failed requests, the oracle's Table 2 values are in the DOM, images decode."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from orchard_eval import synthetic as syn
from orchard_eval.cases import load_dataset
from orchard_eval.cli import main
from orchard_eval.prompts import build_prompts, shipped_prompt_version
from orchard_eval.tables import COLUMNS

CIDS = ["UniversalGravitation/FreeFall/000000", "ConservationOfMomentum/PerfectlyElasticCollision/000001"]
TASKS = ["free_fall", "perfectly_elastic_collision"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("rep")
    ds = root / "ds"
    for k, (cid, task) in enumerate(zip(CIDS, TASKS)):
        syn.write_orchard_case(ds, syn.Scene(width=96, height=64, background_seed=k), cid, task=task)
    syn.write_index(ds, CIDS, "orchard")
    # the shipped templates' version (the synthetic index declares the paper's, whose text needs the
    # apple_pi package), so that the case pages can show the prompts
    index = json.loads((ds / "dataset.json").read_text())
    index["prompt_version"] = shipped_prompt_version()
    (ds / "dataset.json").write_text(json.dumps(index))
    out = {}
    for kind in ("oracle", "static", "blank"):
        pred, res = root / f"pred_{kind}", root / f"res_{kind}"
        assert main(["baseline", "--kind", kind, "--cases", str(ds), "--out", str(pred)]) == 0
        assert main(["run", "--judge", "none", "--cases", str(ds), "--predictions", str(pred), "--out", str(res),
                     "--no-progress"]) == 0
        out[kind] = res
    return root, out


def _browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("no system chromium + chromedriver (apt-get install chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (pip install -e .[test])")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1800"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    return webdriver.Chrome(service=Service(driver), options=opts)


def _failed_requests(drv) -> list[str]:
    bad = []
    for e in drv.get_log("performance"):
        msg = json.loads(e["message"])["message"]
        if msg["method"] == "Network.loadingFailed":
            bad.append(str(msg["params"]))
        if msg["method"] == "Network.responseReceived" and msg["params"]["response"].get("status", 200) >= 400:
            bad.append(msg["params"]["response"]["url"])
    return bad


def _check_page(drv, path: Path, shot: Path) -> str:
    drv.get(path.as_uri())
    errors = [e for e in drv.get_log("browser") if e["level"] == "SEVERE"]
    assert errors == [], errors
    assert _failed_requests(drv) == []
    widths = drv.execute_script("return Array.from(document.images).map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 0 for w in widths), widths
    drv.save_screenshot(str(shot))
    assert shot.stat().st_size > 0
    return drv.find_element("tag name", "body").text, len(widths)


def test_report_opens_in_a_real_browser(runs, tmp_path):
    root, res = runs
    out = tmp_path / "report"
    preds = [x for k in ("oracle", "static", "blank") for x in ("--predictions", str(root / f"pred_{k}"))]
    assert main(["report", str(res["oracle"]), str(res["static"]), str(res["blank"]), "--out", str(out),
                 "--no-progress", *preds]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report"]  # the temp dir was renamed, nothing else left
    drv = _browser()
    try:
        text, _ = _check_page(drv, out / "index.html", tmp_path / "overview.png")
        row = json.loads((res["oracle"] / "summary.json").read_text())["table_row"]
        for c in COLUMNS:
            if row[c] is not None:
                assert f"{float(row[c]):.3f}" in text, c
        assert "Stage funnel" in text
        page = out / "cases" / (CIDS[0].replace("/", "__") + ".html")
        text, n_img = _check_page(drv, page, tmp_path / "case.png")
        assert n_img >= 1 and "deduction" in text
        # Deduction rollout 0 of each run: GT and answer frames with mask outlines, decoded in the browser
        outlined = drv.execute_script("return Array.from(document.images).filter(i => /_t[0-9]+_(gt|answer)[.]png$/"
                                      ".test(i.src) && i.complete && i.naturalWidth > 0).length")
        assert outlined >= 2 * 3, outlined
        assert len(drv.find_elements("css selector", "svg.trajectory polyline")) >= 2
        # per-timestamp details: the oracle's constant 40 dB is said in words, the static answer's varying PSNR is
        # plotted on an axis from 0 dB; speed vs time per run, its axis topped by the GT's top speed
        assert "psnr_db = 40 dB at every timestamp (constant: not plotted)" in text
        titles = drv.execute_script("return Array.from(document.querySelectorAll('svg.lines > title'))"
                                    ".map(t => t.textContent)")
        assert "psnr_db per timestamp" in titles and titles.count("speed |v| vs time") == 3, titles
        case = load_dataset(root / "ds").cases[CIDS[0]]
        tr = case.object_tracks()
        top = max(float(np.linalg.norm(v, axis=1)[tr.times <= max(case.timestamps) + 1e-9].max())
                  for v in tr.velocities.values())
        ticks = drv.execute_script("return Array.from(document.querySelectorAll('svg.speed text')).map(t => t.textContent)")
        assert f"{top:.3g}" in ticks, (top, ticks)
        assert len(drv.find_elements("css selector", "svg.speed polyline")) >= 3 * 2
        # the prompt of every subtrack, exactly as orchard-eval prompts renders it for this case
        shown = drv.execute_script("return Array.from(document.querySelectorAll('pre.prompt')).map(p => p.textContent)")
        want = [r["prompt"] for r in build_prompts(root / "ds")[0] if r["case_id"] == CIDS[0]]
        assert len(want) == 5 and shown == want, (shown, want)
        assert "missing" not in text.lower() or "missing: answer" not in text
        # the image subtracks show the answer next to the case's reference image
        page2 = out / "cases" / (CIDS[1].replace("/", "__") + ".html")
        text2, _ = _check_page(drv, page2, tmp_path / "case2.png")
        refs = drv.execute_script("return Array.from(document.images).filter(i => /__ref_.*[.]png$/.test(i.src)"
                                  " && i.naturalWidth > 0).length")
        answers = drv.execute_script("return Array.from(document.images).filter(i => /_answer[.]png$/.test(i.src)"
                                     " && i.naturalWidth > 0).length")
        assert refs >= 1 and answers >= 4, (refs, answers)
        text, _ = _check_page(drv, out / "cases.html", tmp_path / "cases.png")
        drv.find_element("css selector", 'input.filter[data-col="1"]').send_keys("free_fall")
        visible = drv.execute_script("return Array.from(document.querySelectorAll('#cases tbody tr'))"
                                     ".filter(r => r.style.display !== 'none').length")
        assert visible == 1
        text, _ = _check_page(drv, out / "compare.html", tmp_path / "compare.png")
        assert "Most disagreement" in text
    finally:
        drv.quit()
    print("screenshots in", tmp_path)


def test_partial_and_foreign_runs_are_reported(runs, tmp_path):
    root, res = runs
    torn = tmp_path / "torn"
    shutil.copytree(res["static"], torn)
    lines = (torn / "records.jsonl").read_text().splitlines()
    (torn / "records.jsonl").write_text("\n".join(lines[:-1]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    (torn / "summary.json").unlink()
    foreign = tmp_path / "foreign"
    shutil.copytree(res["blank"], foreign)
    recs = [json.loads(x) for x in (foreign / "records.jsonl").read_text().splitlines()]
    for r in recs:
        r["provenance"]["dataset_sha256"] = "0" * 64
    (foreign / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    s = json.loads((foreign / "summary.json").read_text())
    s["provenance"]["dataset_sha256"] = "0" * 64
    (foreign / "summary.json").write_text(json.dumps(s))
    out = tmp_path / "rep"
    assert main(["report", str(res["oracle"]), str(torn), str(foreign), "--out", str(out), "--no-progress"]) == 0
    html = (out / "index.html").read_text()
    assert "torn last line" in html and "summary.json is missing" in html and "another dataset" in html
    assert "torn last line skipped" in html
    # a partial run that has its summary: the number of responses without a record is exact
    partial = tmp_path / "partial"
    shutil.copytree(res["static"], partial)
    lines = (partial / "records.jsonl").read_text().splitlines(keepends=True)
    expected = json.loads((partial / "summary.json").read_text())["counts"]["expected_responses"]
    assert expected == len(lines) == 2 * 5 * 3
    (partial / "records.jsonl").write_text("".join(lines[:-4]))
    out_p = tmp_path / "rep_partial"
    assert main(["report", str(partial), "--out", str(out_p), "--no-progress"]) == 0
    assert f"4 of {expected} expected responses have no record" in (out_p / "index.html").read_text()
    shutil.rmtree(out_p)
    shutil.rmtree(partial)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["foreign", "rep", "torn"]
    assert main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "rep2"), "--no-progress"]) == 2
    assert not (tmp_path / "rep2").exists()


def test_visual_cache_is_reused_and_keyed_by_content(runs, tmp_path):
    from orchard_eval.report import write_report

    root, res = runs
    pred = tmp_path / "pred"
    shutil.copytree(root / "pred_oracle", pred)
    out = tmp_path / "rep"
    s1, s2, s3 = {}, {}, {}
    write_report([res["oracle"]], out, progress=False, predictions=[pred], stats=s1)
    stem = CIDS[0].replace("/", "__")
    thumb = out / "thumbs" / f"{stem}__r0_deduction_0_t1_answer.png"
    first = thumb.read_bytes()
    entries = sorted((out / "cache").rglob("*.json"))
    # one entry per distinct answer file (identical rollouts share one) and one per Deduction answer
    assert s1["cache_misses"] == len(entries) > 0
    # the oracle's Deduction entries: its answer speeds match the GT's at the interval midpoints, to
    # the precision of a mask centroid on these 96 x 64 frames (half a pixel over an interval whose
    # GT displacement is a few pixels) and 5 % for the back-projection
    deds = [json.loads(e.read_text()) for e in entries if '"speed"' in e.read_text()]
    assert len(deds) == len(CIDS)
    n_times = {len(c.timestamps) for c in load_dataset(root / "ds").cases.values()}
    for ded in deds:
        for oid, sp in ded["speed"].items():
            (gt_t, gt_v), (a_t, a_v) = sp["gt"], sp["answer"]
            assert len(a_t) + 1 in n_times
            g = np.asarray(ded["tracks"][oid][0], float)
            disp = np.linalg.norm(np.diff(g, axis=0), axis=1)
            for t, v, d in zip(a_t, a_v, disp):
                ref = float(np.interp(t, gt_t, gt_v))
                tol = 0.05 * max(ref, 0.5) + ref * 0.5 / max(d, 0.5)
                assert v is not None and abs(v - ref) <= tol, (oid, t, v, ref, d)
    write_report([res["oracle"]], out, progress=False, predictions=[pred], stats=s2)
    assert s2 == {"cache_hits": s1["cache_hits"] + s1["cache_misses"], "cache_misses": 0}
    assert thumb.read_bytes() == first
    assert sorted((out / "cache").rglob("*.json")) == entries  # carried over into the new report
    # a torn entry is a miss, and a changed answer file is a new key: the static answer is drawn
    torn = next(e for e in entries if '"png"' in e.read_text())  # an answer thumbnail, not the Deduction entry
    torn.write_text("{")
    ded = pred / "cases" / CIDS[0] / "deduction" / "rollout_00.mp4"
    shutil.copyfile(root / "pred_static" / "cases" / CIDS[0] / "deduction" / "rollout_00.mp4", ded)
    write_report([res["oracle"]], out, progress=False, predictions=[pred], stats=s3)
    assert s3["cache_misses"] == 2, s3
    assert thumb.read_bytes() != first
    # --cache DIR: the entries go there, and the report folder holds none
    shared = tmp_path / "shared_cache"
    assert main(["report", str(res["oracle"]), "--out", str(tmp_path / "rep3"), "--no-progress",
                 "--predictions", str(pred), "--cache", str(shared)]) == 0
    assert len(list(shared.rglob("*.json"))) == len(entries) and not (tmp_path / "rep3" / "cache").exists()


def test_zero_reasons_from_eval_log_and_missing_responses_are_listed(runs, tmp_path):
    root, res = runs
    pred = tmp_path / "pred"
    shutil.copytree(root / "pred_static", pred)
    bad = pred / "cases" / CIDS[0] / "deduction" / "rollout_02.mp4"
    bad.write_bytes(b"not a video")
    run = tmp_path / "res"
    assert main(["run", "--judge", "none", "--cases", str(root / "ds"), "--predictions", str(pred), "--out", str(run),
                 "--no-progress"]) == 0
    lines = (run / "records.jsonl").read_text().splitlines(keepends=True)
    invalid = [x for x in lines if json.loads(x)["error"]]
    assert len(invalid) == 1
    kind = json.loads(invalid[0])["error"]["kind"]
    # the record of the zero score is lost, and so is one valid response of the other case
    other = next(x for x in lines if json.loads(x)["case_id"] == CIDS[1] and json.loads(x)["subtrack"] == "perception_text"
                 and json.loads(x)["rollout"] == 1)
    (run / "records.jsonl").write_text("".join(x for x in lines if x not in (invalid[0], other)))
    out = tmp_path / "rep"
    assert main(["report", str(run), "--out", str(out), "--no-progress"]) == 0
    drv = _browser()
    try:
        _check_page(drv, out / "index.html", tmp_path / "overview.png")
        zero = [[c.text for c in tr.find_elements("tag name", "td")]
                for tr in drv.find_elements("css selector", "table.zero tbody tr")]
        assert [z[:3] for z in zero] == [[kind, "1", "1"]], zero
        missing = {tr.find_elements("tag name", "td")[0].text: tr.find_elements("tag name", "td")[1].text
                   for tr in drv.find_elements("css selector", "table.missing tbody tr")}
        assert missing == {CIDS[0]: "deduction rollout 2", CIDS[1]: "perception_text rollout 1"}
        assert "2 of 30 expected responses have no record" in drv.find_element("tag name", "body").text
        text, _ = _check_page(drv, out / "cases" / (CIDS[0].replace("/", "__") + ".html"), tmp_path / "case.png")
        assert "responses without a record: deduction rollout 2" in text
        assert f"eval.log: deduction rollout 2 scored 0: {kind}:" in text
    finally:
        drv.quit()


def test_prompts_of_other_template_sets_get_a_note(runs):
    from orchard_eval.cases import load_dataset
    from orchard_eval.report.prompt_text import prompts_block

    root, _ = runs
    case = load_dataset(root / "ds").cases[CIDS[0]]
    custom = prompts_block(case, root / "ds", {"source": "custom", "prompt_version": "mine-3"}, "video", 3)
    assert "custom template set (prompt version &#x27;mine-3&#x27;)" in custom and "<pre" not in custom
    old = prompts_block(case, root / "ds", {"source": "orchard", "prompt_version": "orchard-prompts-v0"}, "video", 3)
    assert "the run answered prompts orchard-prompts-v0" in old and "<pre" not in old
    image = prompts_block(case, root / "ds", {"source": "orchard", "prompt_version": shipped_prompt_version()}, "image", 3)
    assert image.count('<pre class="prompt">') == 4 + len(case.timestamps)  # one Deduction prompt per timestamp


def test_image_protocol_deduction_keyframes_are_drawn(runs, tmp_path):
    root, _ = runs
    pred, res, out = tmp_path / "pred", tmp_path / "res", tmp_path / "rep"
    assert main(["baseline", "--kind", "oracle", "--protocol", "image", "--cases", str(root / "ds"), "--out", str(pred)]) == 0
    assert main(["run", "--judge", "none", "--cases", str(root / "ds"), "--predictions", str(pred), "--out", str(res),
                 "--no-progress"]) == 0
    assert main(["report", str(res), "--out", str(out), "--no-progress", "--predictions", str(pred)]) == 0
    case = load_dataset(root / "ds").cases[CIDS[0]]
    drv = _browser()
    try:
        text, _ = _check_page(drv, out / "cases" / (CIDS[0].replace("/", "__") + ".html"), tmp_path / "case.png")
        answers = drv.execute_script("return Array.from(document.images).filter(i => /deduction_0_t[0-9]+_answer[.]png$/"
                                     ".test(i.src) && i.naturalWidth > 0).map(i => i.alt)")
        assert answers == [f"answer keyframe at t={t:.2f} s" for t in case.timestamps], answers
        assert "could not be drawn" not in text and "missing: answer" not in text
        assert len(drv.find_elements("css selector", "svg.trajectory polyline")) >= 2
        # image answers of the other subtracks are drawn as they are (no last frame of a video)
        refs = drv.execute_script("return Array.from(document.images).filter(i => /perception_graphic_0_answer[.]png$/"
                                  ".test(i.src) && i.naturalWidth > 0).map(i => i.alt)")
        assert len(refs) == 1 and "last frame" not in refs[0], refs
    finally:
        drv.quit()
