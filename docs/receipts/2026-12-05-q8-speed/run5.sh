#!/bin/bash
# locked run 5: bandwidth (numpy max over 2 GiB, 2 threads), the head on main vs final, the int8 prototype
PY=/work/main/.venv/bin/python
date -u; cat /proc/loadavg
for T in /tmp/q8-base /tmp/q8-final /tmp/q8-base /tmp/q8-final; do
  echo "== tree $T load $(cat /proc/loadavg)"
  (cd $T && PYTHONPATH=$T timeout 200 $PY -m bench.q8_kernels --what bw,l2,head,gemm --reps 5)
done
echo "== int8 prototype load $(cat /proc/loadavg)"
(cd /tmp/q8-final && PYTHONPATH=/tmp/q8-final timeout 200 $PY -m bench.q8_int8_gemv --reps 5)
date -u; cat /proc/loadavg
