#!/bin/bash
# one locked run, most wanted first: kernel alone new/base alternating (own processes), one
# side-by-side round with llama-bench (ours and base each in a fresh process), the stage
# profiles new / base
PY=/work/main/.venv/bin/python
NEW=$1; BASE=/tmp/mla3-base; OUT=/tmp/mla3-out
date -u; cat /proc/loadavg
for r in 1; do
  for T in $NEW $BASE; do
    echo "kernel round $r $T load $(cat /proc/loadavg)"
    (cd $T && PYTHONPATH=$T timeout 200 $PY -m bench.mla_kernel --depth 4096 --reps 5)
  done
done
echo "side by side load $(cat /proc/loadavg)"
(cd $NEW && PYTHONPATH=$NEW timeout 500 $PY -m bench.mla_cpu --stages bench --rounds 1 --base $BASE --out $OUT/sbs1.json)
for T in $NEW $BASE; do
  echo "profile $T load $(cat /proc/loadavg)"
  (cd $T && PYTHONPATH=$T timeout 240 $PY -m bench.mla_cpu --stages profile --depth 4096)
done
date -u; cat /proc/loadavg
