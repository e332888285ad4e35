#!/bin/bash
# dsa_cpu.round_attend at GLM-5.3's sparse shape: ccd10e6 (copy in base-ccd) vs the worktree, CPU time on 1 thread and the bytes
echo "start $(date -u +%T) load $(cat /proc/loadavg)"
for i in 1 2; do
cd /tmp/glm53q-bench/base-ccd && PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/glm53q-bench/dsamb3.py "ccd10e6" /tmp/glm53q-bench/dsa_old.npy
cd /work/wt/glm53q && PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/glm53q-bench/dsamb3.py "row blocks" /tmp/glm53q-bench/dsa_new.npy
done
/work/main/.venv/bin/python -c "
import numpy as np; a=np.load('/tmp/glm53q-bench/dsa_old.npy'); b=np.load('/tmp/glm53q-bench/dsa_new.npy'); print('outputs (T 1, 37, 512) bytes ccd10e6 == row blocks:', np.array_equal(a.view(np.uint32), b.view(np.uint32)), a.size)"
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
