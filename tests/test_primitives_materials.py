import math

import numpy as np
import pytest

from orchard_build.materials import load_materials
from orchard_build.primitives import Primitive

SHAPES = [
    ("sphere", {"radius": 0.07}),
    ("cube", {"edge": 0.13}),
    ("cylinder", {"radius": 0.05, "height": 0.17}),
    ("cone", {"radius": 0.06, "height": 0.21}),
]


@pytest.mark.parametrize("shape,size", SHAPES)
def test_analytic_mass_properties_match_trimesh(shape, size):
    prim = Primitive(shape, size)
    mesh = prim.mesh(sections=512)
    assert mesh.is_watertight
    mesh.density = 1000.0
    # finely tessellated meshes converge to the analytic solid from inside
    assert mesh.volume == pytest.approx(prim.volume, rel=2e-3)
    assert np.allclose(mesh.center_mass, 0.0, atol=1e-6)  # body origin is the centre of mass
    inertia = prim.inertia_diagonal(prim.mass(1000.0))
    assert np.allclose(np.diag(mesh.moment_inertia), inertia, rtol=4e-3)
    assert np.allclose(mesh.moment_inertia - np.diag(np.diag(mesh.moment_inertia)), 0.0, atol=1e-9)


def test_cone_centre_of_mass_is_a_quarter_height_above_base():
    prim = Primitive("cone", {"radius": 0.1, "height": 0.4})
    mesh = prim.mesh()
    assert mesh.bounds[0][2] == pytest.approx(-0.1)  # base at -h/4
    assert mesh.bounds[1][2] == pytest.approx(0.3)  # apex at 3h/4
    assert prim.com_from_base == pytest.approx(0.1)


def test_mass_is_density_times_volume(materials):
    steel = materials["steel"]
    prim = Primitive("sphere", {"radius": 0.05})
    assert prim.mass(steel.density) == pytest.approx(7850.0 * 4 / 3 * math.pi * 0.05**3)


@pytest.mark.parametrize("size", [{"radius": -1.0}, {"radius": float("nan")}, {"radius": 0.0}, {"edge": 0.1}])
def test_bad_sizes_rejected(size):
    with pytest.raises(ValueError):
        Primitive("sphere", size)


def test_pair_rules_are_symmetric_and_explicit(materials):
    ab = materials.pair("steel", "rubber")
    ba = materials.pair("rubber", "steel")
    assert ab == ba
    assert ab.restitution == min(materials["steel"].restitution, materials["rubber"].restitution)
    assert ab.dynamic_friction == pytest.approx(math.sqrt(0.40 * 0.80))
    # a frictionless surface makes every pair frictionless; a putty body makes every impact sticky
    assert materials.pair("air_table", "steel").static_friction == 0.0
    assert materials.pair("putty", "elastic_polymer").restitution == 0.0
    assert materials.pair("elastic_polymer", "elastic_polymer").restitution == 1.0


def test_pair_override(tmp_path):
    text = (tmp_path / "m.yaml")
    from tests.conftest import SCENES

    src = (SCENES / "materials.yaml").read_text().replace(
        "overrides: []", "overrides: [{a: steel, b: rubber, restitution: 0.7}]")
    text.write_text(src)
    lib = load_materials(text)
    assert lib.pair("rubber", "steel").restitution == 0.7
    assert lib.pair("steel", "glass").restitution == 0.6


def test_material_library_errors(tmp_path):
    from orchard_build.errors import ConfigError

    bad = tmp_path / "m.yaml"
    bad.write_text("version: 1\npair_rules: {friction: min, restitution: min}\nmaterials:\n"
                   "  x: {density: -5, static_friction: 0.1, dynamic_friction: 0.1, restitution: 0.5,"
                   " look: {base_color: [1, 1, 1], roughness: 0.5}}\n")
    with pytest.raises(ConfigError, match=r"materials\.x\.density"):
        load_materials(bad)
