#!/bin/bash
# One device call (sixth stop): the TMA GEMM in the product (kernels/wgmma_tma_cuda.py) and the
# pi-ordered Packed layout: the GEMM definition tests and the kernel / wgmma / forward tests,
# then bench/engine_bench.py (b1, prefill 2,048, 64 static streams). Writes under $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout 240 python3 -m pytest -q -x ${TESTS:-tests/gpu/test_gemm_definition.py tests/gpu/test_wgmma.py tests/gpu/test_kernels.py tests/gpu/test_forward.py} 2>&1 | tail -25 | tee $OUT/tests.txt
timeout 200 python3 bench/engine_bench.py --what ${WHAT:-b1,prefill,b64} --out $OUT 2>&1 | tail -30 | tee $OUT/engine.txt
[ -n "$PROFILE" ] && timeout 200 python3 bench/op_profile.py --shapes llama3-8b --prefill 2048 2>&1 | tail -12 | tee $OUT/prefill_profile.txt
