#!/bin/bash
# Issue 31's Q4_K_M rows again after the harness warms the prefill at 512 (a fresh tree: a cold numba cache).
set -u
T=$1; O=$2
PY=/work/main/.venv/bin/python; LBB=/work/peers-build/avx512
mkdir -p $O; cd $T
lg() { echo "$1 $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt; }
lg "k start commit $(cat $T/COMMIT)"
PYTHONPATH=$T timeout 480 $PY -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q4_K_M --rounds 3 --out $O/k_r31_qwen3.json > $O/k_r31_qwen3.txt 2>&1; lg "k qwen (a) done"
PYTHONPATH=$T timeout 420 $PY -m bench.moe_cpu --llama-cpp $LBB --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q4_K_M --rounds 2 --out $O/k_b_r31_qwen3.json > $O/k_b_r31_qwen3.txt 2>&1; lg "k qwen (b) done"
PYTHONPATH=$T timeout 420 $PY -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes glm-4.5-air --types Q4_K_M --rounds 2 --out $O/k_r31_glm.json > $O/k_r31_glm.txt 2>&1; lg "k glm (a) done"
PYTHONPATH=$T timeout 420 $PY -m bench.moe_cpu --llama-cpp $LBB --dir /tmp/moe-bench --stages bench --shapes glm-4.5-air --types Q4_K_M --rounds 1 --out $O/k_b_r31_glm.json > $O/k_b_r31_glm.txt 2>&1; lg "k glm (b) done"
