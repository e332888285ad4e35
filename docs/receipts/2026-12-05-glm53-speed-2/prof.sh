#!/bin/bash
# usage: prof.sh OUTDIR TREE... : the stage profile of each tree, fresh process each, under the caller's lock
F=/tmp/glm53c-bench/glm-5.3-flash-L4-Q8_0.gguf
out=$1; shift
mkdir -p $out
for T in "$@"; do
  n=$(basename $T)
  echo "== $T $(git -C $T rev-parse --short HEAD 2>/dev/null) start $(date -u +%T) load $(cat /proc/loadavg)" >> $out/prof-$n.txt
  (cd $T && PYTHONPATH=$T timeout 560 /usr/bin/time -v /work/main/.venv/bin/python -m bench.moe_stage_profile $F --steps 4 --prefill 512) >> $out/prof-$n.txt 2>&1
  echo "== end $(date -u +%T) load $(cat /proc/loadavg)" >> $out/prof-$n.txt
done
