#!/bin/bash
# locked run 2: kernel alone (new a67e8bb, base bd23a1e, 99039a5), side by side 2 rounds
# (new and base in fresh processes), stage profiles new / base
PY=/work/main/.venv/bin/python
NEW=/tmp/mla3-a67e8bb; BASE=/tmp/mla3-base; OLD=/tmp/mla3-99039a5; OUT=/tmp/mla3-out
date -u; cat /proc/loadavg
for T in $NEW $BASE $OLD; do
  echo "kernel $T load $(cat /proc/loadavg)"
  (cd $T && PYTHONPATH=$T timeout 200 $PY -m bench.mla_kernel --depth 4096 --reps 5)
done
echo "side by side load $(cat /proc/loadavg)"
(cd $NEW && PYTHONPATH=$NEW timeout 700 $PY -m bench.mla_cpu --stages bench --rounds 2 --base $BASE --out $OUT/sbs_a67e8bb.json)
for T in $NEW $BASE; do
  echo "profile $T $(date -u +%T) load $(cat /proc/loadavg)"
  (cd $T && PYTHONPATH=$T timeout 200 $PY -m bench.mla_cpu --stages profile --depth 4096)
done
date -u; cat /proc/loadavg
