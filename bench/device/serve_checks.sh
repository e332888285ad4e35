#!/bin/bash
# One device call: solo == concurrent through the real server (greedy and sampled, windows
# and pages, a small round budget) and check-pages, on dummy weights at real shapes.
# Needs the wheels in .whl (carried). Writes under $OUT.
set -x
mkdir -p /root/keep && [ -f .keep/gguf.part00 ] && cp .keep/gguf.part00 /root/keep/
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
git rev-parse HEAD 2>/dev/null
nvidia-smi > $OUT/nvidia-smi.txt
c=bench/sampled_serve_check.py
timeout 120 python3 $c --greedy --out $OUT/greedy-windows 2>&1 | tail -2
timeout 120 python3 $c --out $OUT/sampled-windows 2>&1 | tail -2
TF_KV_PAGES=on timeout 120 python3 $c --greedy --out $OUT/greedy-pages 2>&1 | tail -2
TF_KV_PAGES=on timeout 120 python3 $c --out $OUT/sampled-pages 2>&1 | tail -2
timeout 120 python3 $c --greedy --server-args "--max-batch-tokens 256 --prompt-cache-gib 0" --out $OUT/greedy-budget256 2>&1 | tail -2
timeout 100 python3 -m server.cli check-pages --model dummy:smollm2-135m --device cuda 2>&1 | tail -4
timeout 150 python3 -m server.cli check-pages --model dummy:llama3-8b --device cuda 2>&1 | tail -4
