#!/bin/bash
# /tmp/gdnpp/new, /tmp/gdnpp/base: git archive 271df9a / f54632e (a COMMIT file in each)
# r33.sh of docs/receipts/2026-12-05-quiet-recheck, on tree $1, rounds $2, port $3
T=$1; R=$2; P=$3
PY=/work/main/.venv/bin/python; LB=/work/peers-build/llama.cpp/build-cpu/bin
F=/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf
cd $T
echo "start $(date -u +%T) load $(cat /proc/loadavg) commit $(cat $T/COMMIT)"
FOLDSERVE_MODEL=$F PYTHONPATH=$T timeout 560 $PY bench/cpu_serve.py --threads 2 --rounds $R --port $P --llama-bench $LB/llama-bench --model-file $F
echo "done $(date -u +%T) load $(cat /proc/loadavg)"
