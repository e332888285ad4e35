#!/bin/bash
# One device call (fourth stop): the wgmma GEMM prototypes (bit check + TFLOP/s), the GPU
# tests, the side-by-side benchmark (ours vs transformers, ceilings in the same run) and the
# serving checks (solo == concurrent x5, check-pages x2). Keeps the GGUF's first half in
# /root/keep for final_b.sh. Writes under $OUT.
mkdir -p /root/keep && [ -f .keep/gguf.part00 ] && cp .keep/gguf.part00 /root/keep/
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > $OUT/nvidia-smi.txt
[ -f bench/device/wgmma_v2.sh ] && timeout 200 bash bench/device/wgmma_v2.sh > /dev/null 2>&1; tail -30 $OUT/wgmma_v2.txt 2>/dev/null
timeout 200 python3 -m pytest -q tests/gpu 2>&1 | tail -4 | tee $OUT/tests.txt
timeout 240 python3 bench/gpu_bench.py --out $OUT > $OUT/bench.txt 2>&1; sed -n '/== summary ==/,$p' $OUT/bench.txt | grep -v gemms_
mkdir -p $OUT/serve; OUT=$OUT/serve timeout 220 bash bench/device/serve_checks.sh 2>&1 | grep -E "^\{|check-pages:" | tee $OUT/serve/summary.txt
