#!/bin/bash
# The quiet side-by-side run of the eleventh session: T = a git archive of main with a COMMIT file, O = output
# folder, B = the session's base tree (main at 0bdf8c1, git archive) timed in the same rounds.
# Issue 31 against peer (b) AVX-512 (3 rounds Q4_K_M, base beside), then peer (a) AVX2 and Q8_0, then issue 35.
set -u
T=$1; O=$2; B=$3
PY=/work/main/.venv/bin/python; LBB=/work/peers-build/avx512; LS=/work/peers-build/llama.cpp/build-cpu/bin/llama-server
mkdir -p $O; cd $T
lg() { echo "$1 $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt; }
lg "start commit $(cat $T/COMMIT) base $(cat $B/COMMIT)"
PYTHONPATH=$T timeout 900 $PY -m bench.moe_cpu --llama-cpp $LBB --base $B --dir /tmp/moe-bench --stages bench --shapes glm-4.5-air --types Q4_K_M --rounds 3 --out $O/b_glm_q4km.json > $O/b_glm_q4km.txt 2>&1; lg "glm (b) Q4_K_M done"
PYTHONPATH=$T timeout 900 $PY -m bench.moe_cpu --llama-cpp $LBB --base $B --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q4_K_M --rounds 3 --out $O/b_qwen3_q4km.json > $O/b_qwen3_q4km.txt 2>&1; lg "qwen (b) Q4_K_M done"
PYTHONPATH=$T timeout 600 $PY -m bench.moe_cpu --llama-cpp $LBB --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b glm-4.5-air --types Q8_0 --rounds 1 --out $O/b_q80.json > $O/b_q80.txt 2>&1; lg "(b) Q8_0 done"
PYTHONPATH=$T timeout 900 $PY -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b glm-4.5-air --types Q4_K_M Q8_0 --rounds 1 --out $O/a_all.json > $O/a_all.txt 2>&1; lg "(a) done"
[ "${SKIP_DRAFTS:-0}" = 1 ] && exit 0
PYTHONPATH=$T timeout 1200 $PY bench/drafts.py --rounds 3 --out $O/drafts > $O/drafts.txt 2>&1; lg "drafts done"
PYTHONPATH=$T timeout 1200 $PY bench/drafts.py --rounds 1 --llama-server $LS --out $O/drafts_llama > $O/drafts_llama.txt 2>&1; lg "drafts llama-server done"
