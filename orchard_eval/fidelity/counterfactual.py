"""Counterfactual re-renders: the case's own config with one thing changed, built by `orchard-build`
in the same scene and camera. Their rendered masks and states are the truth of answers that got the
physics wrong (other g, v0, restitution, friction, mass ratio, a displaced start) or that show the
right physics in another look (another ground material, recoloured objects).

Physics and look are bound by one material key, so a change of one without the other uses a *twin*
material written into a copy of the library: the original's look with other physics, or the
original's physics with another look. The build runs as a user would run it (the `orchard-build`
command on the edited configs), and the result is read back through the evaluator's own reader.
"""
from __future__ import annotations

import colorsys
import copy
import subprocess
import sys
from pathlib import Path
from typing import Callable

import yaml

from orchard_build.config import default_rail_height

from ..cases import EvalCase, load_case

TWIN = "{}_cf"


def _objects(cfg: dict) -> list[dict]:
    return list(cfg.get("objects") or [])


def _twin(lib: dict, key: str, **changes) -> str:
    """A copy of material `key` with `changes` (physics fields, or `look`) under a new key."""
    name = TWIN.format(key) + "_" + "_".join(sorted(changes))
    m = copy.deepcopy(lib["materials"][key])
    for k, v in changes.items():
        m[k] = v
    if "restitution" in changes or "static_friction" in changes:
        m.pop("idealised", None)
        if m.get("restitution") in (0.0, 1.0) or m.get("static_friction") == 0.0:
            m["idealised"] = True
    lib["materials"][name] = m
    return name


def _scale_velocity(p: dict, f: float) -> bool:
    hit = False
    for kind, key in (("free", "linear_velocity"), ("surface", "velocity"), ("ramp", "speed"), ("track", "speed")):
        spec = p.get(kind)
        if isinstance(spec, dict) and spec.get(key) is not None:
            v = spec[key]
            spec[key] = [round(f * x, 4) for x in v] if isinstance(v, list) else round(f * v, 4)
            hit = hit or any(abs(x) > 1e-9 for x in (v if isinstance(v, list) else [v]))
    return hit


def _size(o: dict) -> float:
    s = o.get("size") or {}
    return float(s.get("edge") or 2 * s.get("radius", 0.05))


def edit_gravity(cfg: dict, lib: dict) -> bool:
    env = cfg.setdefault("environment", {"g": 9.81})
    env["g"] = round(0.6 * float(env["g"]), 4)
    env.pop("body", None)
    return True


def edit_velocity(cfg: dict, lib: dict) -> bool:
    return any([_scale_velocity(o.get("placement") or {}, 0.7) for o in _objects(cfg)])


def edit_restitution(cfg: dict, lib: dict) -> bool:
    done = {}
    for o in _objects(cfg):
        key = o["material"]
        e = float(lib["materials"][key].get("restitution", 0.5))
        if key not in done:
            done[key] = _twin(lib, key, restitution=0.3 if e >= 0.6 else 0.9)
        o["material"] = done[key]
    ground = cfg.setdefault("ground", {"material": "concrete"})
    g = ground["material"]
    ground["material"] = _twin(lib, g, restitution=0.9 if float(lib["materials"][g].get("restitution", 0.5)) < 0.6
                               else 0.3)
    return bool(done)


def edit_friction(cfg: dict, lib: dict) -> bool:
    def rough(key: str) -> str:
        m = lib["materials"][key]
        mu_s, mu_d = float(m.get("static_friction", 0.5)), float(m.get("dynamic_friction", 0.4))
        if mu_s < 0.05:
            mu_s, mu_d = 0.3, 0.25
        else:
            mu_s, mu_d = round(0.4 * mu_s, 4), round(0.4 * mu_d, 4)
        return _twin(lib, key, static_friction=mu_s, dynamic_friction=mu_d)

    for o in _objects(cfg):
        o["material"] = rough(o["material"])
    for kind in ("ramps", "tracks", "platforms"):
        for s in ((cfg.get("supports") or {}).get(kind) or []):
            s["material"] = rough(s["material"])
    ground = cfg.setdefault("ground", {"material": "concrete"})
    ground["material"] = rough(ground["material"])
    return True


def edit_mass(cfg: dict, lib: dict) -> bool:
    objs = _objects(cfg)
    if len(objs) < 2:
        return False
    key = objs[0]["material"]
    objs[0]["material"] = _twin(lib, key, density=round(2.5 * float(lib["materials"][key]["density"]), 3))
    return True


def edit_start(cfg: dict, lib: dict) -> bool:
    o = _objects(cfg)[0]
    p = o.get("placement") or {}
    d = 1.5 * _size(o)
    if "free" in p:
        x, y, z = p["free"]["position"]
        p["free"]["position"] = [round(x + d, 4), y, round(z + 0.5 * d, 4)]
    elif "surface" in p:
        x, y = p["surface"]["xy"]
        p["surface"]["xy"] = [round(x + d, 4), y]
    elif "ramp" in p:
        p["ramp"]["distance_from_top"] = round(float(p["ramp"]["distance_from_top"]) + d, 4)
    elif "track" in p:
        p["track"]["angle_deg"] = round(float(p["track"]["angle_deg"]) + 25.0, 3)
    else:
        return False
    return True


SIZE_FACTOR = 1.1     # `edit_size`: the silhouette's area grows by 21 %, its fit to the case's body stays above the gate
SHRINK_FACTOR = 0.9   # `edit_shrink`: the silhouette's area shrinks by 19 %


def edit_size(cfg: dict, lib: dict, factor: float = SIZE_FACTOR) -> bool:
    """The first object `factor` × as large in every dimension: a body drawn larger (or smaller) than
    the case's, whose true masks are its own render's (m = ρV makes its mass follow). The scene stays
    the same: a track it rolls on keeps the rails its original bodies gave it (by default they grow
    with the bodies on the track)."""
    o = _objects(cfg)[0]
    size = o.get("size") or {}
    if not size:
        return False
    on = ((o.get("placement") or {}).get("track") or {}).get("track")
    for t in (cfg.get("supports") or {}).get("tracks") or []:
        if t.get("id") == on and t.get("rail_height") is None:
            radii = [float(x["size"]["radius"]) for x in _objects(cfg)
                     if ((x.get("placement") or {}).get("track") or {}).get("track") == on and "radius" in (x.get("size") or {})]
            t["rail_height"] = round(default_rail_height(radii), 5)
    o["size"] = {k: round(factor * float(v), 4) for k, v in size.items()}
    return True


def edit_shrink(cfg: dict, lib: dict) -> bool:
    """The first object SHRINK_FACTOR × as large: a body drawn smaller than the case's."""
    return edit_size(cfg, lib, SHRINK_FACTOR)


def _other_look(lib: dict, key: str) -> dict:
    look = lib["materials"][key]["look"]
    donor = "painted_wood" if look.get("texture") else "oak"
    return copy.deepcopy(lib["materials"][donor]["look"])


def edit_background(cfg: dict, lib: dict) -> bool:
    ground = cfg.setdefault("ground", {"material": "concrete"})
    ground["material"] = _twin(lib, ground["material"], look=_other_look(lib, ground["material"]))
    return True


def edit_recolour(cfg: dict, lib: dict) -> bool:
    done = {}
    for o in _objects(cfg):
        key = o["material"]
        if key not in done:
            look = copy.deepcopy(lib["materials"][key]["look"])
            h, l, s = colorsys.rgb_to_hls(*look["base_color"])
            # a third of the hue circle away; greys get a colour of their own
            r, g, b = colorsys.hls_to_rgb((h + 1 / 3) % 1.0, l, max(s, 0.5))
            look["base_color"] = [round(r, 3), round(g, 3), round(b, 3)]
            done[key] = _twin(lib, key, look=look)
        o["material"] = done[key]
    return True


EDITS: dict[str, Callable[[dict, dict], bool]] = {
    "gravity": edit_gravity, "velocity": edit_velocity, "restitution": edit_restitution,
    "friction": edit_friction, "mass": edit_mass, "start": edit_start, "size": edit_size, "shrink": edit_shrink,
    "background": edit_background, "recolour": edit_recolour,
}


def default_library() -> Path:
    """The material library `orchard-build` uses by default (the shipped one)."""
    from orchard_build.config import default_materials_path

    return Path(default_materials_path())


def write_variant(case: EvalCase, variant: str, root: Path, library: Path) -> Path | None:
    """The edited config of `case` for `variant` under `root/<variant>/scenes/<task>/`, with the
    twin materials in `root/<variant>/materials.yaml`; None where the variant changes nothing."""
    cfg = yaml.safe_load((case.path / "config.yaml").read_text(encoding="utf-8"))
    lib_path = root / variant / "materials.yaml"
    lib = (yaml.safe_load(lib_path.read_text(encoding="utf-8")) if lib_path.is_file()
           else yaml.safe_load(library.read_text(encoding="utf-8")))
    if not EDITS[variant](cfg, lib):
        return None
    cfg["description"] = f"{cfg.get('description', '')} [counterfactual: {variant}]".strip()
    out = root / variant / "scenes" / cfg["task"] / f"{int(cfg['case_number']):06d}.yaml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    lib_path.write_text(yaml.safe_dump(lib, sort_keys=False), encoding="utf-8")
    return out


def build_variant(root: Path, variant: str, configs: list[Path], jobs: int = 1) -> tuple[Path, str]:
    """Build the variant's configs with `orchard-build` into `root/<variant>/out`. Returns the dataset
    root and the command's output (a config the build refuses is reported there, the others are
    built)."""
    out = root / variant / "out"
    todo, refused, text = list(configs), [], ""
    while todo:
        cmd = [sys.executable, "-m", "orchard_build.cli", "--config", *map(str, todo),
               "--materials", str(root / variant / "materials.yaml"), "--out", str(out),
               "--allow-qa-failures", "--no-progress", "--jobs", str(jobs)]
        res = subprocess.run(cmd, capture_output=True, text=True)
        text = res.stdout + res.stderr
        if res.returncode == 0:
            break
        # the build refuses a whole batch when one config asks for what the model cannot do (it
        # names the file): leave those out and build the rest
        bad = [p for p in todo if str(p) in text]
        if not bad:
            break
        refused += bad
        todo = [p for p in todo if p not in bad]
    if refused:
        text = f"refused {len(refused)}: " + ", ".join(p.stem for p in refused) + "\n" + text
    return out, text[-4000:]


def load_variant_case(root: Path, variant: str, case: EvalCase) -> EvalCase | None:
    d = root / variant / "out" / "cases" / case.case_id
    if not (d / "case.json").is_file():
        return None
    return load_case(d, case.case_id)
