#!/bin/bash
# the KDA kernel at GLM-5.3's shape: before (serial) and the worktree's variant, time and bytes (quiet gate up to 60 s)
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
t0=$(date +%s)
while :; do
  b0=$(busy); sleep 5; b1=$(busy)
  cores=$(awk -v a=$b0 -v b=$b1 -v h=$(getconf CLK_TCK) 'BEGIN{printf "%.2f", (b-a)/h/5}')
  if awk -v c=$cores 'BEGIN{exit !(c < 0.3)}'; then echo "$(date -u +%T) quiet: $cores cores"; break; fi
  if [ $(( $(date +%s) - t0 )) -ge 60 ]; then echo "$(date -u +%T) not quiet ($cores cores); running anyway"; break; fi
done
cd /tmp/glm53q-bench/base && PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/glm53q-bench/kdamb.py /tmp/glm53q-bench/kda_old.npy | sed 's/^/serial (f54632e): /'
cd /work/wt/glm53q && PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/glm53q-bench/kdamb.py /tmp/glm53q-bench/kda_new.npy | sed "s/^/$1: /"
/work/main/.venv/bin/python -c "
import numpy as np; a=np.load('/tmp/glm53q-bench/kda_old.npy'); b=np.load('/tmp/glm53q-bench/kda_new.npy'); print('n 512, 2 threads: output and state bytes serial == $1:', np.array_equal(a.view(np.uint32), b.view(np.uint32)))"
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
