#!/bin/bash
# One device call (fifth stop, two GPUs): the tensor-core attention in the server's kernel
# (tests/gpu, incl. every bit against the definition and the TP=2 exit), then the engine's
# own numbers (b1, smollm2, prefill 2,048, 64 static streams). Writes under $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 280 python3 -m pytest -q -x tests/gpu 2>&1 | tail -25 | tee $OUT/tests.txt
timeout 240 python3 bench/engine_bench.py --out $OUT 2>&1 | tee $OUT/engine.txt | tail -25
