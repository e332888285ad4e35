"""Fixtures of the multi-rank tests."""
from __future__ import annotations

import pytest

from serve_procs import Group


@pytest.fixture
def group():
    """The test's serve_procs.Group: teardown kills every process group it started, asserts
    none is left, and removes its workdir (the processes' output files)."""
    g = Group()
    yield g
    left = g.close()
    assert not left, f"processes left behind: {left}"
