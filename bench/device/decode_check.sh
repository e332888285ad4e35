#!/bin/bash
# One device call: the norm-fused GEMM's configurations (LM head), host time of a b1 step,
# tests touched by the change, engine b1 steps.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 100 python3 bench/norm_head_sweep.py 2>&1 | tee $OUT/norm_head_sweep.txt
timeout 100 python3 bench/host_probe.py 2>&1 | tee $OUT/host_probe.txt
