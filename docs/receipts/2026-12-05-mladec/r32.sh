#!/bin/bash
# the MLA part of docs/receipts/2026-12-05-quiet-6/r3132.sh, with --base: llama.cpp, this tree
# and 1f8397c (a `git archive`) under the same load, alternately. r32.sh TREE BASE OUT
set -u
T=$1; B=$2; O=$3
PY=/work/main/.venv/bin/python
mkdir -p $O; cd $T
echo "r32 start $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt
PYTHONPATH=$T timeout ${TMO:-460} $PY -m bench.mla_cpu --dir /tmp/mla-bench --stages bench --rounds ${ROUNDS:-2} --base $B --out $O/r32_mla.json > $O/r32_mla.txt 2>&1
echo "r32 done $(date -u +%T) load $(cat /proc/loadavg)" >> $O/load.txt
