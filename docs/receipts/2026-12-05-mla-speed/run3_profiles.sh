#!/bin/bash
# stage profiles, new (a67e8bb's kernel) then base (bd23a1e's), each in its own process, the
# same bench/mla_cpu.py (a7 fix of its profile stage) in both trees
PY=/work/main/.venv/bin/python
for T in /tmp/mla3-a67e8bb /tmp/mla3-base; do
  echo "profile $T $(date -u +%T) load $(cat /proc/loadavg)"
  (cd $T && PYTHONPATH=$T timeout 200 $PY -m bench.mla_cpu --stages profile --depth 4096)
done
date -u; cat /proc/loadavg
