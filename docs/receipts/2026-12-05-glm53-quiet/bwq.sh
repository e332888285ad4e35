#!/bin/bash
# memory read bandwidth (bw.py: a streaming xor over 2 GiB, 1 and 2 threads, best of 4) after waiting up to 90 s for quiet,
# then the KDA kernel at GLM-5.3's shape before (f54632e = ccd10e6 here, serial) and after (7411ff7, heads in parallel): time and bytes
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
t0=$(date +%s)
while :; do
  b0=$(busy); sleep 5; b1=$(busy)
  cores=$(awk -v a=$b0 -v b=$b1 -v h=$(getconf CLK_TCK) 'BEGIN{printf "%.2f", (b-a)/h/5}')
  if awk -v c=$cores 'BEGIN{exit !(c < 0.3)}'; then echo "$(date -u +%T) quiet: $cores cores busy over 5 s"; break; fi
  if [ $(( $(date +%s) - t0 )) -ge 90 ]; then echo "$(date -u +%T) not quiet after 90 s ($cores cores busy); running anyway"; break; fi
done
cd /work/wt/glm53q && PYTHONPATH=$PWD timeout 120 /work/main/.venv/bin/python /tmp/glm53q-bench/bw.py
cd /tmp/glm53q-bench/base && PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/glm53q-bench/kdamb.py /tmp/glm53q-bench/kda_old.npy | sed 's/^/before f54632e (serial, as ccd10e6): /'
cd /work/wt/glm53q && PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/glm53q-bench/kdamb.py /tmp/glm53q-bench/kda_new.npy | sed 's/^/after 7411ff7: /'
/work/main/.venv/bin/python -c "
import numpy as np; a=np.load('/tmp/glm53q-bench/kda_old.npy'); b=np.load('/tmp/glm53q-bench/kda_new.npy'); print('n 512, 2 threads: output and state bytes before == after:', np.array_equal(a.view(np.uint32), b.view(np.uint32)))"
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
