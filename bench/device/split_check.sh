#!/bin/bash
# One device call: the range-split wgmma GEMM for 17..64 rows (matmul_cuda.WGMMA_SMALL): its
# tests, then the static 64-stream decode step with it on and off (llama3-8b shape).
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 40 python3 -m pytest -q -x tests/gpu/test_wgmma.py 2>&1 | tail -4 | tee $OUT/tests_wgmma.txt
timeout 80 python3 - <<'PY' 2>&1 | tee $OUT/split.txt
from bench.engine_bench import static_batch
from bench.fixtures import model_of
from kernels import matmul_cuda as mm
from server.shapes.spec import SHAPES
spec = SHAPES["llama3-8b"]
m = model_of(spec)
for on in (True, False, True):
    mm.WGMMA_SMALL = (17, 96) if on else (1 << 30, 96)
    m.graphs.graphs.clear()
    print(f"static 64 streams, range-split wgmma {on}: {static_batch(m, spec, 64, new=16):.2f} ms/step", flush=True)
PY
