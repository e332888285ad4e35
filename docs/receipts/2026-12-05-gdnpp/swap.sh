#!/bin/bash
cd /work/wt/gdnpp
git show f54632e:kernels/gdn_cpu.py > kernels/_gdn_cpu_orig_tmp.py
echo "start $(date -u +%T) load $(cat /proc/loadavg) tree $(git rev-parse --short HEAD)"
PYTHONPATH=$PWD timeout 300 /work/main/.venv/bin/python /tmp/gdnpp/swap.py 2>&1 | grep -v Warn
rm kernels/_gdn_cpu_orig_tmp.py
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
