"""The CUDA the kernels compile is byte for byte what it was when the fixture was made
(tests/data/cuda_sources.sha256.json, written by tests/house/cuda_sources.py --write before
the sources moved from Python strings to kernels/csrc/). A GPU test cannot run in CI; this
holds the compiled bytes on the CPU. A deliberate kernel change rewrites the fixture in the
same commit."""
import json
from pathlib import Path

from cuda_sources import digests   # tests/house/cuda_sources.py (pytest puts this folder on the path)

FIXTURE = Path(__file__).resolve().parents[1] / "data/cuda_sources.sha256.json"


def test_composed_cuda_sources_are_unchanged():
    want = json.loads(FIXTURE.read_text())
    got = digests()
    assert sorted(got) == sorted(want)
    assert [k for k in want if got[k] != want[k]] == []
