#!/bin/bash
set -u
T=$1; O=$2
PY=/work/main/.venv/bin/python
mkdir -p $O; cd $T
echo "r31 start $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt
PYTHONPATH=$T timeout 420 $PY -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q8_0 Q4_K_M --rounds 2 --out $O/r31_qwen3.json > $O/r31_qwen3.txt 2>&1
echo "r31 done $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt
PYTHONPATH=$T timeout 360 $PY -m bench.mla_cpu --dir /tmp/mla-bench --stages bench --rounds 2 --out $O/r32_mla.json > $O/r32_mla.txt 2>&1
echo "r32 done $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt
