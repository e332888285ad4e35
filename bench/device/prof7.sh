#!/bin/bash
# Seventh stop, one H200: GEMM definition tests, the prefill profile (bench/op_profile.py), and
# permute_k32 against a device copy of the same bytes (its physical limit). Carry .whl.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout 100 python3 -m pytest -q -x tests/gpu/test_gemm_definition.py 2>&1 | tail -2 | tee $OUT/definition.txt
timeout 60 python3 - <<'PY' 2>&1 | tee $OUT/permute.txt
import cupy as cp
import numpy as np
from bench.cudatime import cuda_ms
from kernels.common_cuda import kernel
OLD = r"""extern "C" __global__ void permute_old(const uint4* __restrict__ in, uint4* __restrict__ out, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i >= n) return;
    const uint4 a = in[4 * i], b = in[4 * i + 1], c = in[4 * i + 2], d = in[4 * i + 3];
    out[4 * i + 0] = make_uint4(a.x, b.x, c.x, d.x); out[4 * i + 1] = make_uint4(a.y, b.y, c.y, d.y);
    out[4 * i + 2] = make_uint4(a.z, b.z, c.z, d.z); out[4 * i + 3] = make_uint4(a.w, b.w, c.w, d.w);
}"""
from kernels import wgmma_tma_cuda as t
from kernels.common_cuda import as_bf16
for M, K in ((2048, 4096), (2048, 14336)):
    x = as_bf16(cp.random.standard_normal((M, K), dtype=cp.float32))
    y = cp.empty_like(x)
    a = cuda_ms(lambda: t.permute(x), reps=20)
    b = cuda_ms(lambda: y.__setitem__(Ellipsis, x), reps=20)
    n = M * K // 32
    old = lambda: kernel(OLD, "permute_old")((-(-n // 256),), (256,), (x, y, np.int64(n)))
    old()
    same = bool((y.view(cp.uint16) == t.permute(x).view(cp.uint16)).all())
    c = cuda_ms(old, reps=20)
    print(f"permute {M}x{K}: new {a * 1e3:.1f} us, old {c * 1e3:.1f} us, copy {b * 1e3:.1f} us, new/copy {a / b:.2f}, same bytes {same}")
PY
timeout 300 python3 bench/op_profile.py --shapes llama3-8b --prefill 2048 > $OUT/profile.txt 2>&1; tail -12 $OUT/profile.txt
