#!/bin/bash
# The quiet side-by-side run of the tenth session: T = a git archive of main with a COMMIT file, O = output folder.
# Issue 31 (Qwen3 and GLM-4.5-Air, Q4_K_M and Q8_0) against peer (a) AVX2 and peer (b) AVX-512, then issue 35's drafts.
set -u
T=$1; O=$2
PY=/work/main/.venv/bin/python; LBB=/work/peers-build/avx512; LS=/work/peers-build/llama.cpp/build-cpu/bin/llama-server
mkdir -p $O; cd $T
lg() { echo "$1 $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt; }
lg "start commit $(cat $T/COMMIT)"
PYTHONPATH=$T timeout 600 $PY -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q4_K_M Q8_0 --rounds 2 --out $O/r31_qwen3.json > $O/r31_qwen3.txt 2>&1; lg "qwen (a) done"
PYTHONPATH=$T timeout 600 $PY -m bench.moe_cpu --llama-cpp $LBB --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q4_K_M Q8_0 --rounds 2 --out $O/b_r31_qwen3.json > $O/b_r31_qwen3.txt 2>&1; lg "qwen (b) done"
PYTHONPATH=$T timeout 600 $PY -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes glm-4.5-air --types Q4_K_M Q8_0 --rounds 2 --out $O/r31_glm.json > $O/r31_glm.txt 2>&1; lg "glm (a) done"
PYTHONPATH=$T timeout 600 $PY -m bench.moe_cpu --llama-cpp $LBB --dir /tmp/moe-bench --stages bench --shapes glm-4.5-air --types Q4_K_M Q8_0 --rounds 2 --out $O/b_r31_glm.json > $O/b_r31_glm.txt 2>&1; lg "glm (b) done"
[ "${SKIP_DRAFTS:-0}" = 1 ] && exit 0
PYTHONPATH=$T timeout 1200 $PY bench/drafts.py --rounds 3 --out $O/drafts > $O/drafts.txt 2>&1; lg "drafts done"
PYTHONPATH=$T timeout 1200 $PY bench/drafts.py --rounds 1 --llama-server $LS --out $O/drafts_llama > $O/drafts_llama.txt 2>&1; lg "drafts llama-server done"
