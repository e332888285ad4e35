#!/bin/bash
cd /work/wt/gdnpp
git show f54632e:kernels/gdn_cpu.py > kernels/_gdn_cpu_orig_tmp.py   # the old kernel beside the new
echo "start $(date -u +%T) load $(cat /proc/loadavg) commit $(git rev-parse --short HEAD)"
for r in 1 2; do
PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python docs/receipts/2026-12-05-gdnpp/gdn_parts.py 512 2>&1 | tail -2
done
PYTHONPATH=$PWD timeout 200 /work/main/.venv/bin/python docs/receipts/2026-12-05-gdnpp/tm.py 512 2>&1 | tail -9
PYTHONPATH=$PWD timeout 300 /work/main/.venv/bin/python docs/receipts/2026-12-05-gdnpp/gdn_bytes_equal.py 512 2>&1 | grep -c "equal True"
rm kernels/_gdn_cpu_orig_tmp.py
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
