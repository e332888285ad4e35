#!/bin/bash
# locked run 1: the Q8_0 kernels alone, base (main 1d7017b) and new (this tree), alternating
PY=/work/main/.venv/bin/python
NEW=/work/wt/q8; BASE=/tmp/q8-base
date -u; cat /proc/loadavg
for round in 1 2; do
for T in $BASE $NEW; do
  echo "== round $round tree $T load $(cat /proc/loadavg)"
  (cd $T && PYTHONPATH=$T timeout 250 $PY -m bench.q8_kernels --what bw,l2,head,gemm --reps 5)
done
done
date -u; cat /proc/loadavg
