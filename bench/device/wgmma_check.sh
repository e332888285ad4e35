#!/bin/bash
# One device call: the wgmma GEMM in the product (kernels/wgmma_cuda.py): its tests, then the
# llama3-8b prefill of 2,048 tokens with it and without it (WGMMA off: the tiled kernel).
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 120 python3 -m pytest -q -x tests/gpu/test_wgmma.py 2>&1 | tail -15 | tee $OUT/tests_wgmma.txt
timeout 150 python3 - <<'PY' 2>&1 | tee $OUT/prefill.txt
import numpy as np, cupy as cp
from bench.cudatime import cuda_ms, graph_ms
from bench.fixtures import model_of, store
from kernels import matmul_cuda as mm
from server.shapes.spec import SHAPES
spec = SHAPES["llama3-8b"]; m = model_of(spec)
kv = store(spec, 2048, fill=False)
ids = tuple(int(t) for t in np.random.default_rng(1).integers(0, spec.vocab, 2048))
table = tuple(range(2048 // 16))
for on in (True, False, True):
    mm.WGMMA = on
    print(f"prefill 2048 wgmma={on}: {cuda_ms(lambda: m.forward([(table, 16, 0, ids, True)], kv), reps=3, warm=1):.1f} ms", flush=True)
L = m.w.layers[0]
x = cp.random.standard_normal((2048, 4096), dtype=cp.float32)
for name, w in (("qkv", L.wqkv), ("o", L.wo), ("gate_up", L.wgu)):
    for how in ("wgmma", "tiled"):
        t = graph_ms(lambda: mm.cuda(x, w, force=how), reps=5, inner=2)
        print(f"  {name} {w.shape}: {how} {t:.3f} ms ({2 * 2048 * w.shape[0] * w.shape[1] / t / 1e9:.0f} TFLOP/s)", flush=True)
PY
