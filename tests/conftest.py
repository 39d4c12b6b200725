import copy
import os
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("MUJOCO_GL", "egl")
os.environ.setdefault("ORCHARD_NO_PROGRESS", "1")

REPO = Path(__file__).resolve().parents[1]
SCENES = REPO / "scenes"


@pytest.fixture(scope="session")
def materials():
    from orchard_build.materials import load_materials

    return load_materials(SCENES / "materials.yaml")


@pytest.fixture
def scene_raw():
    """Load a shipped scene config as a dict (a fresh copy per call)."""
    def load(rel: str) -> dict:
        return copy.deepcopy(yaml.safe_load((SCENES / rel).read_text()))
    return load
