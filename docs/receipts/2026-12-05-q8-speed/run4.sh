#!/bin/bash
# locked run 4: the kernels alone, cca4936 (tiles) vs the segmented 2x4 (dev), alternating
PY=/work/main/.venv/bin/python
date -u; cat /proc/loadavg
for round in 1 2; do
for T in /tmp/q8-cca4936 /tmp/q8-dev; do
  echo "== round $round tree $T load $(cat /proc/loadavg)"
  (cd $T && PYTHONPATH=$T timeout 250 $PY -m bench.q8_kernels --what l2,gemm --reps 5 --threads 1)
done
done
date -u; cat /proc/loadavg
