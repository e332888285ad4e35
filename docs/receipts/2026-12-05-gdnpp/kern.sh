#!/bin/bash
cd /work/wt/gdnpp
cp /tmp/gdnpp/_gdn_cpu_orig_tmp.py kernels/_gdn_cpu_orig_tmp.py
echo "start $(date -u +%T) load $(cat /proc/loadavg) commit $(git rev-parse --short HEAD)"
for r in 1 2; do
PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/gdnpp/parts.py 512 2>&1 | tail -2
done
PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python /tmp/gdnpp/tm.py 512 2>&1 | tail -9
PYTHONPATH=$PWD timeout 300 /work/main/.venv/bin/python /tmp/gdnpp/eq.py 512 2>&1 | grep -c "equal True"
rm kernels/_gdn_cpu_orig_tmp.py
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
