#!/bin/bash
# One device call: the attention tests (RoPE + KV write inside the decode attention launch),
# the GPU suite, op profiles at b1 and the engine's b1 steps (smollm2 and llama3 shapes).
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 240 python3 -m pytest -q -x tests/gpu 2>&1 | tail -5 | tee $OUT/tests.txt
timeout 150 python3 bench/op_profile.py --shapes smollm2-135m,llama3-8b --M 1,64 --context 384 2>&1 | tee $OUT/profile.txt | grep -v "^\s*$"
timeout 150 python3 bench/engine_bench.py --what b1,smollm 2>&1 | tee $OUT/engine.txt | tail -8
