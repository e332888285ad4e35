#!/bin/bash
# Second quiet run of the eleventh session: GLM Q4_K_M vs peer (b) with the base beside, then drafts.
set -u
T=$1; O=$2; B=$3
PY=/work/main/.venv/bin/python; LBB=/work/peers-build/avx512
mkdir -p $O; cd $T
lg() { echo "$1 $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt; }
lg "start commit $(cat $T/COMMIT) base $(cat $B/COMMIT)"
PYTHONPATH=$T timeout 900 $PY -m bench.moe_cpu --llama-cpp $LBB --base $B --dir /tmp/moe-bench --stages bench --shapes glm-4.5-air --types Q4_K_M --rounds 3 --out $O/b_glm_q4km.json > $O/b_glm_q4km.txt 2>&1; lg "glm (b) Q4_K_M done"
PYTHONPATH=$T timeout 1500 $PY bench/drafts.py --rounds 3 --out $O/drafts > $O/drafts.txt 2>&1; lg "drafts done"
PYTHONPATH=$T timeout 900 $PY -m bench.moe_cpu --llama-cpp $LBB --base $B --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q4_K_M --rounds 2 --out $O/b_qwen3_q4km.json > $O/b_qwen3_q4km.txt 2>&1; lg "qwen (b) Q4_K_M done"
