#!/bin/bash
# The final device call of a stop (one H200), on the tree that lands: the GEMM definition
# tests first (it stops if they fail), then all GPU tests, gpu_bench (ours vs transformers,
# ceilings in the same run), gemm_bench,
# the serving checks (solo == concurrent x5, check-pages x2) and bench/multi_gpu.py's speed
# stage at TP=1 (64 concurrent requests through the server). Carry .whl and .keep/golden.json.
# PART=a: tests and benches only; PART=b: serving only. Writes under $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > $OUT/nvidia-smi.txt
if [ "${PART:-ab}" != b ]; then
  timeout 120 python3 -m pytest -q -x tests/gpu/test_gemm_definition.py > $OUT/definition.txt 2>&1 \
    || { tail -30 $OUT/definition.txt; exit 1; }
  tail -2 $OUT/definition.txt
  timeout 200 python3 -m pytest -q tests/gpu 2>&1 | tail -4 | tee $OUT/tests.txt
  timeout 150 python3 bench/gpu_bench.py --out $OUT > $OUT/bench.txt 2>&1; sed -n '/== summary ==/,$p' $OUT/bench.txt | grep -v "gemms_\|graphs\|tokens_per"
  timeout 60 python3 bench/gemm_bench.py --rows 1,64,2048 --out $OUT > $OUT/gemm_bench.txt 2>&1; tail -5 $OUT/gemm_bench.txt
  timeout 100 python3 bench/op_profile.py --shapes llama3-8b --prefill 2048 > $OUT/profile.txt 2>&1; tail -8 $OUT/profile.txt
fi
if [ "${PART:-ab}" != a ]; then
  mkdir -p /tmp/serve; OUT=/tmp/serve timeout 120 bash bench/device/serve_checks.sh 2>&1 | grep -E "^\{|check-pages:" | tee $OUT/serve_summary.txt
  FOLDSERVE_MODEL=dummy:smollm2-135m timeout 100 python3 bench/multi_gpu.py --out /tmp/multi --tps 1 \
    --stages speed --golden .keep/golden.json > $OUT/multi_run.txt 2>&1
  cp /tmp/multi/results.json $OUT/multi_results.json
  tar czf $OUT/logs.tgz -C /tmp serve multi 2>/dev/null
  python3 bench/device/multi_summary.py $OUT/multi_results.json
fi
