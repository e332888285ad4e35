#!/bin/bash
# One device call while tuning; which parts run: $WHAT (tests,sweep,profile,gemm,engine).
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
W=${WHAT:-tests,sweep,profile,gemm,engine}
nvidia-smi > $OUT/nvidia-smi.txt
has() { [[ ",$W," == *",$1,"* ]]; }
has tests && { timeout 200 python3 -m pytest -q tests/gpu -x 2>&1 | tail -15 | tee $OUT/tests.txt; }
has sweep && { timeout 200 python3 bench/stream_sweep.py ${SWEEP_MS:+--ms $SWEEP_MS} > $OUT/stream_sweep.txt 2>&1; grep -E "best|copy|split|tiled|fail" $OUT/stream_sweep.txt; }
has profile && { timeout 150 python3 bench/op_profile.py --M 1,64 > $OUT/op_profile.txt 2>&1; cat $OUT/op_profile.txt; }
has gemm && { timeout 150 python3 bench/gemm_bench.py --out $OUT > $OUT/gemm_bench.txt 2>&1; tail -11 $OUT/gemm_bench.txt; }
has engine && { timeout 150 python3 bench/engine_bench.py ${ENGINE:+--what $ENGINE} > $OUT/engine_bench.txt 2>&1; cat $OUT/engine_bench.txt; }
true
