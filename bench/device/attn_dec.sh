#!/bin/bash
# One device call (fifth stop): decode tiles sharing each span among the block's 4 warps:
# the attention tests (every bit against the definition), the launch-settings sweep, the
# engine's numbers. Writes under $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 200 python3 -m pytest -q -x tests/gpu/test_attention_definition.py tests/gpu/test_split_attention.py \
  tests/gpu/test_kernels.py tests/gpu/test_paged.py 2>&1 | tail -15 | tee $OUT/tests.txt
timeout 120 python3 bench/attn_sweep.py 2>&1 | tee $OUT/attn_sweep.txt
timeout 150 python3 bench/engine_bench.py --out $OUT 2>&1 | tee $OUT/engine.txt | tail -12
