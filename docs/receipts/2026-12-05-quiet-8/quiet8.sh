#!/bin/bash
# The quiet side-by-side run of the eighth session: T = a git archive of main with a COMMIT file, O = output folder.
set -u
T=$1; O=$2
PY=/work/main/.venv/bin/python; LB=/work/peers-build/llama.cpp/build-cpu/bin
mkdir -p $O; cd $T
lg() { echo "$1 $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt; }
lg "start commit $(cat $T/COMMIT)"
PYTHONPATH=$T timeout 420 $PY -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q8_0 Q4_K_M --rounds 2 --out $O/r31_qwen3.json > $O/r31_qwen3.txt 2>&1; lg "r31 qwen done"
F=/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf
FOLDSERVE_MODEL=$F PYTHONPATH=$T timeout 420 $PY bench/cpu_serve.py --threads 2 --rounds 3 --port 8439 --llama-bench $LB/llama-bench --model-file $F > $O/r33_serve.txt 2>&1; lg "r33 done"
PYTHONPATH=$T timeout 360 $PY -m bench.mla_cpu --dir /tmp/mla-bench --stages bench --rounds 2 --out $O/r32_mla.json > $O/r32_mla.txt 2>&1; lg "r32 done"
PYTHONPATH=$T timeout 420 $PY -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes glm-4.5-air --types Q8_0 Q4_K_M --rounds 1 --out $O/r31_glm.json > $O/r31_glm.txt 2>&1; lg "r31 glm done"
/tmp/peer_builds.sh /tmp/moe-bench/qwen3-30b-a3b-L4-Q8_0.gguf > $O/peer_builds.txt 2>&1; lg "peer builds done"
