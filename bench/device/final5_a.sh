#!/bin/bash
# Final device call of the fifth stop (nvidia-h200-x2), on the tree that lands: GPU tests,
# gpu_bench (ours vs transformers, ceilings in the same run), the serving checks
# (solo == concurrent x5, check-pages x2), and on two GPU ranks with dummy weights the
# mismatch, rooms, all-reduce and speed TP=1 vs TP=2 (bench/multi_gpu.py). Keeps the GGUF's
# first half in /root/keep for multi_b.sh. Logs are packed into tarballs. Writes under $OUT.
mkdir -p /root/keep && cp .keep/gguf.part00 /root/keep/
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > $OUT/nvidia-smi.txt
timeout 150 python3 -m pytest -q tests/gpu 2>&1 | tail -4 | tee $OUT/tests.txt
timeout 120 python3 bench/gpu_bench.py --out $OUT > $OUT/bench.txt 2>&1; sed -n '/== summary ==/,$p' $OUT/bench.txt | grep -v gemms_
mkdir -p /tmp/serve; OUT=/tmp/serve timeout 120 bash bench/device/serve_checks.sh 2>&1 | grep -E "^\{|check-pages:" | tee $OUT/serve_summary.txt
# one GPU (the two-GPU kind was withdrawn): TPS=1 STAGES=speed
FOLDSERVE_MODEL=dummy:smollm2-135m timeout 200 python3 bench/multi_gpu.py --out /tmp/multi --tps ${TPS:-1,2} \
  --stages ${STAGES:-mismatch,rooms,allreduce,speed} --golden .keep/golden.json > $OUT/multi_run.txt 2>&1
cp /tmp/multi/results.json $OUT/multi_results.json
tar czf $OUT/logs.tgz -C /tmp serve multi 2>/dev/null
python3 bench/device/multi_summary.py $OUT/multi_results.json
