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


def _resolved_as_before(name: str) -> str:
    """kernels/qmatmul_cuda.source as it was before common_cuda.csrc took over include
    resolution (kept here verbatim as the reference)."""
    import re
    csrc = Path(__file__).resolve().parents[2] / "kernels/csrc"
    text = (csrc / name).read_text()

    def inc(m):
        return (csrc / m.group(1)).read_text().replace("#pragma once", "")
    return re.sub(r'^#include "([^"]+)"\s*$', inc, text, flags=re.M)


def test_include_resolution_is_the_one_qgemv_had():
    """qgemv.cu's #include lines (qblocks.cuh, matmul_mma.cuh) are resolved by the one composing
    function, common_cuda.csrc, into the string qmatmul_cuda composed itself before (whatever
    the files hold: not a digest), and that is what qmatmul_cuda hands the compiler."""
    from cuda_sources import _stub_cupy
    _stub_cupy()
    from kernels import common_cuda, qmatmul_cuda
    got = common_cuda.csrc("qgemv.cu")
    assert got == _resolved_as_before("qgemv.cu")
    assert '#include "' not in got and "#pragma once" not in got
    assert qmatmul_cuda._SRC == got
