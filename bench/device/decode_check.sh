#!/bin/bash
# One device call: host time of a b1 step (pieces), engine b1 steps, tests of the GEMMs.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 100 python3 bench/host_probe.py 2>&1 | tee $OUT/host_probe.txt
timeout 150 python3 bench/engine_bench.py --what b1,smollm 2>&1 | tee $OUT/engine.txt | tail -8
timeout 200 python3 -m pytest -q -x tests/gpu/test_kernels.py tests/gpu/test_graphs.py 2>&1 | tail -3
