#!/bin/bash
# One device call: the GPU tests and the side-by-side benchmark (ours vs transformers, the
# ceilings in the same run). Writes under $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > $OUT/nvidia-smi.txt
git log -1 --format=%H > $OUT/commit.txt 2>/dev/null
timeout 150 python3 -m pytest -q tests/gpu 2>&1 | tail -4 | tee $OUT/tests.txt
timeout 400 python3 bench/gpu_bench.py --out $OUT > $OUT/bench.txt 2>&1; sed -n '/== summary ==/,$p' $OUT/bench.txt
