"""`orchard-build doctor` / `orchard-eval doctor`: what works on this machine, one line per capability.

Every check tries the capability itself, in the way Orchard uses it, and reports `ok`, `missing` (not
installed or not configured) or `broken` (present but failing), with the reason and the fix:

| check | how |
|---|---|
| render: egl / osmesa | a child process renders a 32×32 MuJoCo scene offscreen on that GL platform |
| render (build) | the platform a build would use: `MUJOCO_GL` when set, else EGL when it renders, else OSMesa |
| video: H.264 | PyAV encodes 8 frames with the build's encoder (libx264) and decodes them again |
| fonts | the shipped DejaVu fonts load through Pillow/FreeType and draw a label |
| ocr | (child process) RapidOCR with its bundled models reads a rendered "v = 1.25" |
| judge endpoint | when one is configured (ORCHARD_JUDGE_* / OPENAI_*): one `GET …/models`; the key is never shown |
| label studio | `label-studio` on PATH; a named server (--label-studio-url, LABEL_STUDIO_URL): `/health`, the token |
| apple_pi | the published package's prompt templates (for `--templates apple-pi`); its validate-gt's NumPy needs |
| isaac sim, usd-core, newton, ray | optional backends: present or not (nothing of the default path needs them) |
| disk | free space where the build writes (`--out`) against a full build's size |

Checks marked required (render (build), video, fonts, disk) make up the default path, a build plus
an objective evaluation; the command exits 1 when one of them is not ok. Both commands run the
same checks. Nothing is written outside a temporary folder, and secrets never reach the output.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from . import __version__

STATUSES = ("ok", "missing", "broken")
GL_PLATFORMS = ("egl", "osmesa")
FULL_BUILD_BYTES = int(1.0e9)      # the 400-case suite measured 0.91 GB
HEADROOM_BYTES = int(0.5e9)        # staging of the cases in progress, logs
JUDGE_KEY_ENVS = ("ORCHARD_JUDGE_API_KEY", "OPENAI_API_KEY")
JUDGE_URL_ENVS = ("ORCHARD_JUDGE_BASE_URL", "OPENAI_BASE_URL")
DEFAULT_JUDGE_URL = "https://api.openai.com/v1"
LS_URL_ENV = "LABEL_STUDIO_URL"
LS_TOKEN_ENV = "LABEL_STUDIO_API_KEY"
FONT_DIR = Path(__file__).resolve().parent / "assets" / "fonts"


@dataclass
class Check:
    name: str
    status: str                 # ok | missing | broken
    detail: str
    fix: str = ""
    required: bool = False      # part of the default path (build + objective evaluation)
    seconds: float = 0.0


def _redact(text: str, secrets: list[str]) -> str:
    for s in secrets:
        if s:
            text = text.replace(s, "[redacted]")
    return text


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


# ---------------------------------------------------------------------------------------------
# Rendering
# ---------------------------------------------------------------------------------------------
_RENDER_PROBE = r"""
import json, mujoco, numpy as np
xml = '''<mujoco><visual><global offwidth="32" offheight="32"/></visual><worldbody>
<light pos="0 0 3"/><camera name="c" pos="0 -1 0.3" xyaxes="1 0 0 0 0.3 1"/>
<geom type="box" size=".1 .1 .1" rgba="1 0 0 1"/></worldbody></mujoco>'''
m = mujoco.MjModel.from_xml_string(xml)
d = mujoco.MjData(m)
mujoco.mj_forward(m, d)
r = mujoco.Renderer(m, 32, 32)
r.update_scene(d, camera="c")
img = r.render()
r.close()
red = float(((img[..., 0] > 120) & (img[..., 1] < 80)).mean())
print(json.dumps({"red": red, "mujoco": mujoco.__version__}))
"""

_GL_PACKAGES = {"egl": "libegl1 (and a GPU driver's EGL, or Mesa's)", "osmesa": "libosmesa6"}


def probe_gl(platform_name: str, timeout: float = 90.0) -> tuple[str, str]:
    """(status, detail) of rendering the test scene with MUJOCO_GL=platform_name, in a child process."""
    env = dict(os.environ, MUJOCO_GL=platform_name)
    if platform_name in GL_PLATFORMS:
        env["PYOPENGL_PLATFORM"] = platform_name
    try:
        res = subprocess.run([sys.executable, "-c", _RENDER_PROBE], env=env, capture_output=True, text=True,
                             timeout=timeout)
    except subprocess.TimeoutExpired:
        return "broken", f"the test render did not finish within {timeout:.0f} s"
    if res.returncode != 0:
        err = _last_line(res.stderr) or f"exit status {res.returncode}"
        low = res.stderr.lower()
        if "no module named 'mujoco'" in low:
            return "missing", "MuJoCo is not installed"
        if any(k in low for k in ("cannot open shared object", "library not found", "unable to load",
                                  "could not find", "no such file")):
            return "missing", err
        return "broken", err
    try:
        out = json.loads(_last_line(res.stdout))
    except ValueError:
        return "broken", f"unexpected probe output: {_last_line(res.stdout)!r}"
    if out["red"] < 0.01:
        return "broken", "a context was made but the test scene rendered empty"
    return "ok", f"renders the test scene (MuJoCo {out['mujoco']})"


def check_render() -> list[Check]:
    out: list[Check] = []
    results: dict[str, tuple[str, str, float]] = {}
    for p in GL_PLATFORMS:
        t0 = time.monotonic()
        status, detail = probe_gl(p)
        results[p] = (status, detail, time.monotonic() - t0)
        pkg = _GL_PACKAGES[p]
        fix = "" if status == "ok" else f"install {pkg} (Debian/Ubuntu: apt-get install {pkg.split()[0]})"
        out.append(Check(f"render: {p}", status, detail, fix, seconds=results[p][2]))
    explicit = os.environ.get("MUJOCO_GL")
    if explicit:
        if explicit in results:
            status, detail, secs = results[explicit]
        else:
            t0 = time.monotonic()
            status, detail = probe_gl(explicit)
            secs = time.monotonic() - t0
        works = [p for p in GL_PLATFORMS if results[p][0] == "ok"]
        fix = "" if status == "ok" else (
            f"a build uses MUJOCO_GL as it is set ({explicit!r}); unset it (Orchard then uses EGL, else OSMesa)"
            + (f" or set MUJOCO_GL={works[0]}, which works here" if works else
               "; no GL platform works here: " + "; ".join(c.fix for c in out if c.fix)))
        out.append(Check("render (build)", status, f"MUJOCO_GL={explicit}: {detail}", fix, required=True,
                         seconds=secs))
    else:
        chosen = "egl" if results["egl"][0] == "ok" else "osmesa"
        status, detail, _ = results[chosen]
        fix = "" if status == "ok" else "no GL platform renders here: " + "; ".join(c.fix for c in out if c.fix)
        out.append(Check("render (build)", status, f"MUJOCO_GL unset: the build uses {chosen}"
                         + (" (EGL first, else OSMesa)" if status == "ok" else f": {detail}"), fix, required=True))
    return out


# ---------------------------------------------------------------------------------------------
# Video, fonts, OCR
# ---------------------------------------------------------------------------------------------
def check_video() -> list[Check]:
    try:
        import av
        import numpy as np
    except ImportError as exc:
        return [Check("video: H.264", "missing", f"PyAV is not installed ({exc})", "pip install av", required=True)]
    from .video import decode_mp4, write_mp4

    frames = [np.full((48, 64, 3), 30 * k, np.uint8) for k in range(8)]
    with tempfile.TemporaryDirectory(prefix="orchard-doctor-") as tmp:
        path = Path(tmp) / "probe.mp4"
        try:
            write_mp4(path, frames, 24)
        except Exception as exc:  # noqa: BLE001 - report whatever the codec says
            return [Check("video: H.264", "broken", f"PyAV {av.__version__} cannot encode H.264: {exc}",
                          "install a PyAV wheel from PyPI (it bundles libx264): pip install --force-reinstall av",
                          required=True)]
        try:
            back, _ = decode_mp4(path)
        except Exception as exc:  # noqa: BLE001
            return [Check("video: H.264", "broken", f"PyAV {av.__version__} cannot decode its own H.264: {exc}",
                          "pip install --force-reinstall av", required=True)]
    err = None
    if back.shape == (8, 48, 64, 3):
        err = float(np.abs(back.astype(int) - np.stack(frames).astype(int)).mean())
    if err is None or err > 4:
        return [Check("video: H.264", "broken", f"the decoded frames differ from the encoded ones ({back.shape}, "
                      f"mean error {err})", "pip install --force-reinstall av", required=True)]
    return [Check("video: H.264", "ok", f"PyAV {av.__version__} encodes and decodes H.264 (libx264)", required=True)]


def check_fonts() -> list[Check]:
    try:
        import numpy as np
        from PIL import Image, ImageDraw, ImageFont, features
    except ImportError as exc:
        return [Check("fonts", "missing", f"Pillow is not installed ({exc})", "pip install pillow", required=True)]
    missing = [n for n in ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf") if not (FONT_DIR / n).is_file()]
    if missing:
        return [Check("fonts", "missing", f"{', '.join(missing)} not in {FONT_DIR}",
                      "reinstall Orchard (pip install -e .); the fonts ship in orchard_build/assets/fonts",
                      required=True)]
    if not features.check("freetype2"):
        return [Check("fonts", "broken", "this Pillow has no FreeType support", "pip install --force-reinstall pillow",
                      required=True)]
    try:
        for n in ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf"):
            img = Image.new("L", (120, 40), 255)
            ImageDraw.Draw(img).text((4, 4), "v = 1.25 m/s²", font=ImageFont.truetype(str(FONT_DIR / n), 20), fill=0)
            if (np.asarray(img) < 128).sum() < 50:
                raise ValueError(f"{n} drew no text")
    except Exception as exc:  # noqa: BLE001
        return [Check("fonts", "broken", f"{exc}", "reinstall Orchard (pip install -e .) and Pillow", required=True)]
    return [Check("fonts", "ok", "DejaVu Sans (regular, bold) draw labels", required=True)]


_OCR_PROBE = r"""
import json, sys
import numpy as np
from PIL import Image, ImageDraw, ImageFont
from orchard_eval.judging import ocr
img = Image.new("RGB", (360, 90), (255, 255, 255))
ImageDraw.Draw(img).text((20, 20), "v = 1.25", font=ImageFont.truetype(sys.argv[1], 40), fill=(0, 0, 0))
boxes = ocr.read_text(np.asarray(img))
print(json.dumps({"text": " ".join(b.text for b in boxes)}))
"""


def check_ocr(timeout: float = 180.0) -> list[Check]:
    name = "ocr (programmatic judge)"
    need = [m for m in ("rapidocr", "onnxruntime") if importlib.util.find_spec(m) is None]
    if need:
        return [Check(name, "missing", f"{' and '.join(need)} not installed: `run`'s default judge cannot read text "
                      "(objective evaluation, --judge none, does not need it)", "pip install -e '.[ocr]'")]
    t0 = time.monotonic()
    try:
        res = subprocess.run([sys.executable, "-c", _OCR_PROBE, str(FONT_DIR / "DejaVuSans.ttf")], capture_output=True,
                             text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return [Check(name, "broken", f"reading a test label took over {timeout:.0f} s (a model download offline?)",
                      "keep rapidocr's bundled default models; reinstall: "
                      "pip install --force-reinstall 'rapidocr>=3.10,<4'")]
    secs = time.monotonic() - t0
    if res.returncode != 0:
        return [Check(name, "broken", _last_line(res.stderr) or f"exit status {res.returncode}",
                      "reinstall: pip install --force-reinstall -e '.[ocr]' (the default models ship in the rapidocr "
                      "wheel)", seconds=secs)]
    try:
        text = json.loads(_last_line(res.stdout))["text"]
    except (ValueError, KeyError):
        text = ""
    if "1.25" not in text.replace(" ", ""):
        return [Check(name, "broken", f"read {text!r} from a rendered 'v = 1.25'", "pip install --force-reinstall "
                      "-e '.[ocr]'", seconds=secs)]
    from importlib.metadata import version

    return [Check(name, "ok", f"RapidOCR {version('rapidocr')} reads a rendered label ({text!r})", seconds=secs)]


# ---------------------------------------------------------------------------------------------
# Network services: the judge endpoint, Label Studio
# ---------------------------------------------------------------------------------------------
def _get(url: str, headers: dict[str, str], timeout: float) -> tuple[int | None, bytes, str]:
    """(HTTP status or None, body, error text)."""
    req = urllib.request.Request(url, headers=headers, method="GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read(1 << 20), ""
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(2000), ""
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return None, b"", str(getattr(exc, "reason", exc))


def check_judge(timeout: float = 10.0) -> list[Check]:
    name = "judge endpoint (--judge openai)"
    key_env = next((e for e in JUDGE_KEY_ENVS if os.environ.get(e)), None)
    key = os.environ.get(key_env, "") if key_env else ""
    url_env = next((e for e in JUDGE_URL_ENVS if os.environ.get(e)), None)
    model = os.environ.get("ORCHARD_JUDGE_MODEL")
    if not (key_env or url_env or model):
        return [Check(name, "missing", "not configured (run's default judge, programmatic, is offline)",
                      "to use an OpenAI-compatible judge set ORCHARD_JUDGE_BASE_URL, ORCHARD_JUDGE_MODEL and "
                      "ORCHARD_JUDGE_API_KEY (docs/judges.md)")]
    base = (os.environ.get(url_env) if url_env else DEFAULT_JUDGE_URL).rstrip("/")
    headers = {"Accept": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    t0 = time.monotonic()
    status, body, err = _get(base + "/models", headers, timeout)
    secs = time.monotonic() - t0
    where = f"{base} ({url_env or 'the SDK default'}; key {'from ' + key_env if key_env else 'not set'})"
    sdk = importlib.util.find_spec("openai") is not None
    if status is None:
        c = Check(name, "broken", f"cannot reach {where}: {err}", "check the URL and the network; a local server "
                  "must be running", seconds=secs)
    elif status in (401, 403):
        c = Check(name, "broken", f"{where} rejected the key (HTTP {status})",
                  f"set a valid key in {key_env or JUDGE_KEY_ENVS[0]}", seconds=secs)
    elif status != 200:
        c = Check(name, "broken", f"GET /models at {where} answered HTTP {status}", "check ORCHARD_JUDGE_BASE_URL "
                  "(it ends before /chat/completions, e.g. http://host:port/v1)", seconds=secs)
    else:
        try:
            ids = [m.get("id") for m in json.loads(body.decode("utf-8")).get("data", [])]
        except (ValueError, AttributeError):
            ids = []
        listed = "" if not model else (f"; model {model!r} listed" if model in ids else
                                       f"; model {model!r} not among the {len(ids)} listed")
        if not model:
            c = Check(name, "missing", f"{where} answers, but no model is named", "set ORCHARD_JUDGE_MODEL "
                      "(or pass --model)", seconds=secs)
        elif not sdk:
            c = Check(name, "missing", f"{where} answers{listed}, but the openai SDK is not installed",
                      "pip install -e '.[judge]'", seconds=secs)
        else:
            c = Check(name, "ok", f"{where} answers{listed}", seconds=secs)
    c.detail, c.fix = _redact(c.detail, [key]), _redact(c.fix, [key])
    return [c]


def check_label_studio(url: str | None = None, timeout: float = 10.0) -> list[Check]:
    name = "label studio (annotate)"
    url = url or os.environ.get(LS_URL_ENV)
    exe = shutil.which("label-studio")
    token = os.environ.get(LS_TOKEN_ENV, "")
    if not url:
        have = f"`label-studio` found at {exe}" if exe else "no `label-studio` program on PATH"
        return [Check(name, "missing", f"no server named ({have}); only `annotate` of real-world cases needs one",
                      f"start one (docs/real-world.md; pip install -e '.[annotation-server]') and pass "
                      f"--label-studio-url URL or set {LS_URL_ENV}")]
    base = url.rstrip("/")
    t0 = time.monotonic()
    status, body, err = _get(base + "/health", {"Accept": "application/json"}, timeout)
    secs = time.monotonic() - t0
    if status is None:
        c = Check(name, "broken", f"cannot reach {base}: {err}", "start the server (docs/real-world.md) or fix the URL",
                  seconds=secs)
    elif status != 200 or b"UP" not in body:
        c = Check(name, "broken", f"{base}/health answered HTTP {status}", "is this a Label Studio server?",
                  seconds=secs)
    elif not token:
        c = Check(name, "missing", f"{base} is up; no API token in {LS_TOKEN_ENV}",
                  f"set {LS_TOKEN_ENV} (label-studio user --username <you> prints it)", seconds=secs)
    else:
        from .realworld.labelstudio import Client, LabelStudioError

        try:
            who = Client(base, token, timeout=timeout).whoami() or {}
            c = Check(name, "ok", f"{base} is up and accepts the token (user {who.get('email') or who.get('id')})",
                      seconds=time.monotonic() - t0)
        except LabelStudioError as exc:
            c = Check(name, "broken", str(exc), f"set a valid token in {LS_TOKEN_ENV}", seconds=time.monotonic() - t0)
    c.detail = _redact(c.detail, [token])
    return [c]


# ---------------------------------------------------------------------------------------------
# Packages, optional backends, disk
# ---------------------------------------------------------------------------------------------
def _dist_version(*names: str) -> str | None:
    from importlib import metadata

    for n in names:
        try:
            return metadata.version(n)
        except metadata.PackageNotFoundError:
            continue
    return None


def check_apple_pi() -> list[Check]:
    name = "apple_pi (--templates apple-pi)"
    if importlib.util.find_spec("apple_pi") is None:
        return [Check(name, "missing", "the published Apple-π package is not installed: the paper's own prompts are "
                      "not available (Orchard's are)", "install the published evaluator here (pip install --no-deps "
                      "<its checkout> is enough for the prompts) or put it on PYTHONPATH")]
    from orchard_eval.apple_pi_prompts import ApplePiUnavailable, load_apple_pi

    try:
        t = load_apple_pi()
    except ApplePiUnavailable as exc:
        return [Check(name, "broken", str(exc), "reinstall the published package")]
    out = [Check(name, "ok", f"templates for both protocols, prompt_version {t.prompt_version}, rendered by "
                 f"{t.info['renderer']}")]
    import numpy.lib.format as npformat

    if not hasattr(npformat, "_read_array_header"):
        import numpy

        out.append(Check("apple_pi validate-gt", "broken", f"its NPZ check calls numpy.lib.format._read_array_header, "
                         f"which NumPy {numpy.__version__} no longer has: every NPZ is reported as unreadable",
                         "run the published tools in an environment with the NumPy its package pins "
                         "(pip install 'numpy<2.3')"))
    return out


def check_optional_backends() -> list[Check]:
    from .engines.isaac_backend import isaac_status

    out = []
    st = isaac_status()
    out.append(Check("isaac sim (--backend isaac)", "ok" if st["available"] else "missing",
                     st["message"].splitlines()[0] if st["available"] else "not available: " + "; ".join(st["missing"]),
                     "" if st["available"] else "docs/isaac-sim.md (needs an RTX GPU)"))
    usd = importlib.util.find_spec("pxr") is not None
    out.append(Check("usd-core (export-usd)", "ok" if usd else "missing",
                     f"OpenUSD {_dist_version('usd-core') or '(bundled)'}" if usd else "OpenUSD's pxr is not installed",
                     "" if usd else "pip install -e '.[isaac]'"))
    for mod, what, why in (("newton", "Newton physics", "no Orchard backend uses it (the engines are MuJoCo and "
                                                        "Isaac Sim)"),
                           ("ray", "Ray", "no Orchard command uses it (--jobs runs local processes)")):
        have = importlib.util.find_spec(mod) is not None
        out.append(Check(f"{mod} (optional)", "ok" if have else "missing",
                         (f"{what} {_dist_version(mod) or '?'} installed" if have else f"{what} is not installed")
                         + f"; {why}", "" if have else f"nothing to do unless you use it yourself (pip install {mod})"))
    return out


def check_disk(out_dir: Path) -> list[Check]:
    p = Path(out_dir).resolve()
    probe = p
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        free = shutil.disk_usage(probe).free
    except OSError as exc:
        return [Check("disk", "broken", f"cannot read free space at {probe}: {exc}",
                      "pass --out DIR on a writable disk", required=True)]
    need = FULL_BUILD_BYTES + HEADROOM_BYTES
    detail = (f"{free / 1e9:.1f} GB free at {probe}; a full build (400 cases) takes about "
              f"{FULL_BUILD_BYTES / 1e9:.1f} GB")
    if free < need:
        return [Check("disk", "broken", detail, f"free at least {need / 1e9:.1f} GB there, or build elsewhere (--out)",
                      required=True)]
    return [Check("disk", "ok", detail, required=True)]


# ---------------------------------------------------------------------------------------------
# The report
# ---------------------------------------------------------------------------------------------
def _timed(fn: Callable[[], list[Check]], label: str) -> list[Check]:
    t0 = time.monotonic()
    try:
        checks = fn()
    except Exception as exc:  # noqa: BLE001 - a check that crashes is a broken capability, not a crashed doctor
        checks = [Check(label, "broken", f"{type(exc).__name__}: {exc}", "report this with the output of --json")]
    for c in checks:
        if not c.seconds:
            c.seconds = time.monotonic() - t0
        if c.status not in STATUSES:
            raise ValueError(f"check {c.name!r} reported an unknown status {c.status!r}")
    return checks


CHECKS = ("render", "video", "fonts", "ocr", "judge", "label-studio", "apple-pi", "backends", "disk")


def run_checks(out_dir: Path = Path("orchard"), label_studio_url: str | None = None,
               only: tuple[str, ...] | None = None) -> list[Check]:
    table: dict[str, Callable[[], list[Check]]] = {
        "render": check_render, "video": check_video, "fonts": check_fonts, "ocr": check_ocr,
        "judge": check_judge, "label-studio": lambda: check_label_studio(label_studio_url),
        "apple-pi": check_apple_pi, "backends": check_optional_backends, "disk": lambda: check_disk(out_dir),
    }
    out: list[Check] = []
    for key in CHECKS:
        if only is None or key in only:
            out.extend(_timed(table[key], key))
    return out


def default_path_works(checks: list[Check]) -> bool:
    return all(c.status == "ok" for c in checks if c.required)


def report_text(checks: list[Check], partial: bool = False) -> str:
    width = max((len(c.name) for c in checks), default=10) + 2
    lines = [f"orchard doctor: orchard-bench {__version__}, Python {platform.python_version()}, "
             f"{platform.system()} {platform.machine()}"]
    for c in checks:
        mark = "*" if c.required else " "
        lines.append(f"{c.status:<8}{mark} {c.name:<{width}}{c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"{'':<10}{'':<{width}}fix: {c.fix}")
    bad = [c.name for c in checks if c.required and c.status != "ok"]
    lines.append("* = needed by the default path (build + objective evaluation)")
    scope = "default path (of the checks run)" if partial else "default path"
    lines.append(f"{scope}: works" if not bad else f"{scope}: cannot work ({', '.join(bad)})")
    return "\n".join(lines)


def report_json(checks: list[Check], partial: bool = False) -> str:
    return json.dumps({"orchard_bench": __version__, "python": platform.python_version(),
                       "platform": f"{platform.system()} {platform.machine()}",
                       "default_path_works": default_path_works(checks), "partial": partial,
                       "checks": [asdict(c) for c in checks]}, indent=1)


def parser(prog: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="Check what works on this machine: rendering, video, fonts, "
                                "OCR, the judge endpoint, Label Studio, the apple_pi package, optional backends, "
                                "disk. Exit 1 when the default path (build + objective evaluation) cannot work.")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--out", type=Path, default=Path("orchard"), help="where a build would write (disk check; "
                   "default ./orchard)")
    p.add_argument("--label-studio-url", default=None, help=f"Label Studio server to try (default: ${LS_URL_ENV})")
    p.add_argument("--only", action="append", choices=CHECKS, metavar="CHECK",
                   help=f"run only this check (repeatable): {', '.join(CHECKS)}")
    return p


def main(argv: list[str] | None = None, prog: str = "orchard-build doctor") -> int:
    a = parser(prog).parse_args(argv)
    checks = run_checks(a.out, a.label_studio_url, tuple(a.only) if a.only else None)
    partial = bool(a.only)
    print(report_json(checks, partial) if a.json else report_text(checks, partial))
    return 0 if default_path_works(checks) else 1
