#!/bin/bash
# kernel alone: c73398d (prefill tiles over 4 rows) vs a67e8bb vs base, then stage profiles
# new (a67e8bb's kernel) / base, each in its own process
PY=/work/main/.venv/bin/python
date -u; cat /proc/loadavg
for T in /tmp/mla3-c73398d /tmp/mla3-a67e8bb /tmp/mla3-base /tmp/mla3-c73398d /tmp/mla3-a67e8bb; do
  echo "kernel $T load $(cat /proc/loadavg)"
  (cd $T && PYTHONPATH=$T timeout 200 $PY -m bench.mla_kernel --depth 4096 --reps 5)
done
for T in /tmp/mla3-a67e8bb /tmp/mla3-base; do
  echo "profile $T $(date -u +%T) load $(cat /proc/loadavg)"
  (cd $T && PYTHONPATH=$T timeout 200 $PY -m bench.mla_cpu --stages profile --depth 4096)
done
date -u; cat /proc/loadavg
