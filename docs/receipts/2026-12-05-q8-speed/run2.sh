#!/bin/bash
# locked run 2: issue 31's side by side, Qwen3-30B-A3B-shaped Q8_0, 2 rounds: llama-bench,
# then ours (this tree) and base (main 1d7017b) each in a fresh process
PY=/work/main/.venv/bin/python
NEW=/tmp/q8-cca4936; BASE=/tmp/q8-base
date -u; cat /proc/loadavg
cd $NEW && PYTHONPATH=$NEW timeout 900 $PY -m bench.moe_cpu --dir /tmp/moe-bench --stages bench --shapes qwen3-30b-a3b --types Q8_0 --rounds 2 --base $BASE --out /tmp/q8-out/run2_moe.json
date -u; cat /proc/loadavg
