#!/bin/bash
# The sixth stop's final device calls (one H200), on the tree that lands. PART=a: GPU tests and
# gpu_bench (ours vs transformers, ceilings in the same run) and gemm_bench at prefill rows;
# PART=b: the serving checks (solo == concurrent x5, check-pages x2) and bench/multi_gpu.py's
# speed stage at TP=1 (64 concurrent requests through the server). Writes under $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > $OUT/nvidia-smi.txt
if [ "${PART:-a}" = a ]; then
  timeout 200 python3 -m pytest -q tests/gpu 2>&1 | tail -4 | tee $OUT/tests.txt
  timeout 200 python3 bench/gpu_bench.py --out $OUT > $OUT/bench.txt 2>&1; sed -n '/== summary ==/,$p' $OUT/bench.txt | grep -v gemms_
  timeout 100 python3 bench/gemm_bench.py --rows 1,64,512,2048 --out $OUT > $OUT/gemm_bench.txt 2>&1; tail -6 $OUT/gemm_bench.txt
else
  mkdir -p /tmp/serve; OUT=/tmp/serve timeout 150 bash bench/device/serve_checks.sh 2>&1 | grep -E "^\{|check-pages:" | tee $OUT/serve_summary.txt
  FOLDSERVE_MODEL=dummy:smollm2-135m timeout 250 python3 bench/multi_gpu.py --out /tmp/multi --tps 1 \
    --stages speed --golden .keep/golden.json > $OUT/multi_run.txt 2>&1
  cp /tmp/multi/results.json $OUT/multi_results.json
  tar czf $OUT/logs.tgz -C /tmp serve multi 2>/dev/null
  python3 bench/device/multi_summary.py $OUT/multi_results.json
fi
