#!/bin/bash
# /tmp/gdnpp/new, /tmp/gdnpp/base: git archive 271df9a / f54632e (a COMMIT file in each)
cd /tmp/gdnpp/new
echo "start $(date -u +%T) load $(cat /proc/loadavg) new $(cat COMMIT) base $(cat /tmp/gdnpp/base/COMMIT)"
PYTHONPATH=/tmp/gdnpp/new timeout 580 /work/main/.venv/bin/python -m bench.moe_cpu --shapes qwen3.5-35b-a3b --dir /tmp/peers-bench --types Q8_0 --stages bench --rounds 3 --no-b8 --base /tmp/gdnpp/base --out /tmp/gdnpp/sbs.json
echo "done $(date -u +%T) load $(cat /proc/loadavg) rc $?"
