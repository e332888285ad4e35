#!/bin/bash
# One device call (fifth stop): the attention with q and P carried as two bf16 parts (high,
# rest): its tests, the engine's numbers; keeps the GGUF's first half in /root/keep for
# multi_b.sh (the golden cases at TP=1 and TP=2 right after). Writes under $OUT.
mkdir -p /root/keep && cp .keep/gguf.part00 /root/keep/
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 200 python3 -m pytest -q -x tests/gpu/test_attention_definition.py tests/gpu/test_split_attention.py \
  tests/gpu/test_kernels.py tests/gpu/test_paged.py tests/gpu/test_graphs.py 2>&1 | tail -15 | tee $OUT/tests.txt
timeout 200 python3 bench/engine_bench.py --out $OUT 2>&1 | tee $OUT/engine.txt | tail -12
