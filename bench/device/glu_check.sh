#!/bin/bash
# (A fourth-stop record: its knob matmul_cuda.WGMMA_GLU was merged into WGMMA_SMALL in the fifth.)
# One device call: the GPU tests, the gate|up GEMM at 32 / 64 rows through wgmma + swiglu
# against the fused streaming launch (matmul_cuda.WGMMA_GLU on / off), the static 64-stream
# decode step both ways, and speed through the server (64 concurrent) with the default.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 110 python3 -m pytest -q -x tests/gpu 2>&1 | tail -3 | tee $OUT/tests.txt
timeout 90 python3 - <<'PY' 2>&1 | tee $OUT/glu.txt
import cupy as cp
from bench.cudatime import graph_ms
from bench.engine_bench import static_batch
from bench.fixtures import model_of
from kernels import matmul_cuda as mm
from server.shapes.spec import SHAPES
spec = SHAPES["llama3-8b"]
m = model_of(spec)
w, F = m.w.layers[0].wgu, spec.d_ff
for M in (32, 64):
    x = cp.random.standard_normal((M, spec.d_model), dtype=cp.float32)
    for on in (True, False):
        mm.WGMMA_GLU = (17, 96) if on else (1 << 30, 96)
        t = graph_ms(lambda: mm.cuda_glu(x, w, F), reps=10, inner=4)
        print(f"gate|up {w.shape} M={M} wgmma+swiglu={on}: {1e3 * t:.1f} us ({w.nbytes / t / 1e9:.2f} TB/s of weights)", flush=True)
for on in (True, False, True):
    mm.WGMMA_GLU = (17, 96) if on else (1 << 30, 96)
    m.graphs.graphs.clear()
    print(f"static 64 streams, wgmma gate|up {on}: {static_batch(m, spec, 64):.2f} ms/step", flush=True)
PY
timeout 100 python3 bench/multi_gpu.py --out $OUT/speed --tps 1 --stages speed --golden .keep/golden.json > $OUT/speed.txt 2>&1; tail -2 $OUT/speed.txt | cut -c1-1200
