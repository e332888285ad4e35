#!/bin/bash
# One device call: attention tests, the static 64-stream engine bench, speed through the
# server (b1, 64 concurrent 512/256; needs .keep/golden.json carried) and transformers'
# generate_batch on the same requests. Keeps the GGUF's first half in /root/keep.
mkdir -p /root/keep && [ -f .keep/gguf.part00 ] && cp .keep/gguf.part00 /root/keep/
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > $OUT/nvidia-smi.txt
timeout 120 python3 -m pytest -q tests/gpu/test_split_attention.py tests/gpu/test_solo_concurrent_engine.py tests/gpu/test_graphs.py 2>&1 | tail -3 | tee $OUT/tests-attention.txt
timeout 100 python3 bench/engine_bench.py --what b64 > $OUT/engine_b64.txt 2>&1; cat $OUT/engine_b64.txt
timeout 300 python3 bench/multi_gpu.py --out $OUT/mg --tps 1 --stages speed --golden .keep/golden.json > $OUT/speed.txt 2>&1; tail -6 $OUT/speed.txt
timeout 150 python3 bench/hf_batch.py > $OUT/hf_batch.txt 2>&1; tail -6 $OUT/hf_batch.txt
