#!/bin/bash
# The same side by side against llama.cpp's AVX-512 build (VNNI, VBMI, BF16; no AMX: the native build's AMX dies here).
set -u
T=$1; O=$2
PY=/work/main/.venv/bin/python; LC=/work/peers-build/avx512; LB=$LC/build-cpu/bin
mkdir -p $O; cd $T
lg() { echo "$1 $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt; }
lg "avx512 start commit $(cat $T/COMMIT)"
PYTHONPATH=$T timeout 420 $PY -m bench.moe_cpu --llama-cpp $LC --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q8_0 Q4_K_M --rounds 1 --out $O/a512_r31_qwen3.json > $O/a512_r31_qwen3.txt 2>&1; lg "avx512 r31 qwen done"
F=/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf
FOLDSERVE_MODEL=$F PYTHONPATH=$T timeout 420 $PY bench/cpu_serve.py --threads 2 --rounds 2 --port 8439 --llama-bench $LB/llama-bench --model-file $F > $O/a512_r33_serve.txt 2>&1; lg "avx512 r33 done"
PYTHONPATH=$T timeout 360 $PY -m bench.mla_cpu --llama-cpp $LC --dir /tmp/mla-bench --stages bench --rounds 1 --out $O/a512_r32_mla.json > $O/a512_r32_mla.txt 2>&1; lg "avx512 r32 done"
