"""Session fixtures shared by the suites: the real default model (opened once) and the golden file."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import kernels

kernels.init()      # before any test module imports a numba kernel (kernels/__init__.py)

GOLDEN_PATH = Path(__file__).resolve().parent / "data/smollm2-135m-instruct-q4_1.json"   # provenance: tests/data/README.md





@pytest.fixture(scope="session")
def golden():
    return json.loads(GOLDEN_PATH.read_text(encoding="utf-8"))


@pytest.fixture(scope="session")
def real_model():
    from server.engine.build import open_model
    from server.engine.locate import ModelNotFound
    try:
        return open_model(None, progress=False)
    except ModelNotFound as e:
        pytest.skip(str(e))
