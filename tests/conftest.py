import copy
import os
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("ORCHARD_NO_PROGRESS", "1")

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "scenes"  # the shipped suite, the material library and the generator ranges
FIXTURES = REPO / "tests" / "fixtures" / "scenes"  # hand-written configs, a few per task


@pytest.fixture(scope="session")
def materials():
    from orchard_build.materials import load_materials

    return load_materials(SCENES / "materials.yaml")


@pytest.fixture
def scene_raw():
    """Load a fixture config as a dict (a fresh copy per call)."""
    def load(rel: str) -> dict:
        return copy.deepcopy(yaml.safe_load((FIXTURES / rel).read_text()))
    return load
