#!/bin/bash
# Before (main bd23a1e, exported to $BASE) and after (this worktree) side by side: each
# side's bench/cpu_fused_ab.py in its own fresh process, alternating, under the bench lock.
# usage: ab.sh BASE_DIR NEW_DIR ROUNDS ARGS...
BASE=$1; NEW=$2; N=$3; shift 3
PY=/work/main/.venv/bin/python
for i in $(seq 1 $N); do
  for side in base new; do
    dir=$BASE; [ $side = new ] && dir=$NEW
    echo "== $side $i loadavg $(cat /proc/loadavg)"
    (cd $dir && PYTHONPATH=$dir timeout 300 $PY bench/cpu_fused_ab.py "$@" 2>&1 | grep -E '^-t|^round')
  done
done
