#!/bin/bash
# One device call while tuning: the GPU tests, the streaming GEMM sweep, the per-op profile
# and the engine bench (b1, smollm2). Writes under $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > $OUT/nvidia-smi.txt
timeout 200 python3 -m pytest -q tests/gpu -x 2>&1 | tail -15 | tee $OUT/tests.txt
timeout 150 python3 bench/stream_sweep.py ${SWEEP_MS:+--ms $SWEEP_MS} > $OUT/stream_sweep.txt 2>&1; grep -E "best|copy|split|tiled" $OUT/stream_sweep.txt
timeout 120 python3 bench/op_profile.py --M 1,64 > $OUT/op_profile.txt 2>&1; cat $OUT/op_profile.txt
timeout 100 python3 bench/engine_bench.py --what b1,smollm > $OUT/engine_bench.txt 2>&1; cat $OUT/engine_bench.txt
