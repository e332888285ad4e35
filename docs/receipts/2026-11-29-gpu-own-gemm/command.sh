#!/bin/bash
# One device call: the GPU tests, the GEMM bench (ours vs cuBLAS vs floors), the engine bench
# (b1, smollm2, prefill 2048, 64 static), and speed through the server (TP=1, llama3-8b shape).
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > $OUT/nvidia-smi.txt
timeout 150 python3 -m pytest -q tests/gpu -x 2>&1 | tail -3 | tee $OUT/tests.txt
timeout 120 python3 bench/gemm_bench.py --out $OUT > $OUT/gemm_bench.txt 2>&1; tail -10 $OUT/gemm_bench.txt
timeout 150 python3 bench/engine_bench.py --out $OUT > $OUT/engine_bench.txt 2>&1; cat $OUT/engine_bench.txt
timeout 240 python3 bench/multi_gpu.py --out $OUT/mg --tps 1 --stages speed --golden .keep/golden.json > $OUT/speed.txt 2>&1; tail -5 $OUT/speed.txt
