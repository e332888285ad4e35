#!/bin/bash
# /tmp/gdnpp/new, /tmp/gdnpp/base: git archive 271df9a / f54632e (a COMMIT file in each)
cd /tmp/gdnpp/new
echo "start $(date -u +%T) load $(cat /proc/loadavg) commit $(cat COMMIT)"
PYTHONPATH=/tmp/gdnpp/new timeout 240 /work/main/.venv/bin/python -m bench.moe_stage_profile /tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf --threads 2 --steps 16 --prefill 512
echo "profile done $(date -u +%T) load $(cat /proc/loadavg)"
PYTHONPATH=/tmp/gdnpp/new timeout 300 /work/main/.venv/bin/python bench/snapshot_resume.py --model /tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf --tokens 2048 --new 16 --chunk 512 --repeat 2
echo "resume done $(date -u +%T) load $(cat /proc/loadavg)"
