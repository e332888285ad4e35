#!/bin/bash
# One device call: the GPU suite with programmatic dependent launch in graphs, decode-step
# profiles with PDL on and off, and the engine's b1 steps.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv
timeout 240 python3 -m pytest -q -x tests/gpu 2>&1 | tail -5 | tee $OUT/tests.txt
for s in smollm2-135m llama3-8b; do for p in 1 0 1; do
  echo "### $s pdl $p"
  timeout 120 python3 bench/op_profile.py --shapes $s --M 1 --pdl $p 2>&1 | grep -E "==|ops sum|FAULT|Error|us each"
done; done 2>&1 | tee $OUT/profile.txt
timeout 150 python3 bench/engine_bench.py --what b1,smollm 2>&1 | tee $OUT/engine.txt | tail -8
TF_PDL=0 timeout 150 python3 bench/engine_bench.py --what b1,smollm 2>&1 | tee $OUT/engine_nopdl.txt | tail -8
