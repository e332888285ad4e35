#!/bin/bash
# under the lock: flock /work/notes/bench.lock bash prof.sh  (the stage profile, q8_0 x then float x)
T=/work/wt/glm5q8; F=/tmp/glm5q8-bench/glm-5.3-flash-L4-Q8_0.gguf; D=$T/docs/receipts/2026-12-05-glm5q8
cd $T
for mode in q8 float; do
  echo "$mode start $(date -u +%T) load $(cat /proc/loadavg) commit $(git rev-parse --short HEAD)"
  if [ $mode = float ]; then export TF_Q8_0_X=float; else unset TF_Q8_0_X; fi
  PYTHONPATH=$T timeout 220 /work/main/.venv/bin/python -m bench.moe_stage_profile $F --threads 2 --steps 32 --prefill 512 --no-b8 > $D/prof-$mode.txt 2>&1
  echo "$mode end $(date -u +%T) rc $? load $(cat /proc/loadavg)"
done
