#!/bin/bash
set -u
T=$1; O=$2
PY=/work/main/.venv/bin/python; LB=/work/peers-build/llama.cpp/build-cpu/bin
mkdir -p $O; cd $T
echo "start $(date -u +%T) load $(cat /proc/loadavg) commit $(cat $T/COMMIT)" > $O/load.txt
F=/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf
FOLDSERVE_MODEL=$F PYTHONPATH=$T timeout 480 $PY bench/cpu_serve.py --threads 2 --rounds 4 --port 8439 --llama-bench $LB/llama-bench --model-file $F > $O/r33_serve.txt 2>&1
echo "r33 done $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt
