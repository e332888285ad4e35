#!/bin/bash
# Second quiet round of the tenth session: GLM Q4_K_M vs peer (b), Qwen3 Q4_K_M vs (b), drafts.
set -u
T=$1; O=$2
PY=/work/main/.venv/bin/python; LBB=/work/peers-build/avx512
mkdir -p $O; cd $T
lg() { echo "$1 $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt; }
lg "start commit $(cat $T/COMMIT)"
PYTHONPATH=$T timeout 600 $PY -m bench.moe_cpu --llama-cpp $LBB --dir /tmp/moe-bench --stages bench --shapes glm-4.5-air --types Q4_K_M --rounds 3 --out $O/b_r31_glm.json > $O/b_r31_glm.txt 2>&1; lg "glm (b) done"
PYTHONPATH=$T timeout 1200 $PY bench/drafts.py --rounds 3 --out $O/drafts > $O/drafts.txt 2>&1; lg "drafts done"
PYTHONPATH=$T timeout 600 $PY -m bench.moe_cpu --llama-cpp $LBB --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q4_K_M --rounds 2 --out $O/b_r31_qwen3.json > $O/b_r31_qwen3.txt 2>&1; lg "qwen (b) done"
