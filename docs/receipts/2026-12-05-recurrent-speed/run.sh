#!/bin/bash
# One locked run for this receipt: the engine's stage profile (its own fresh process, before
# any llama-bench in this run), then bench/cpu_serve.py (the server in its own process,
# alternating with llama-bench round by round).
#   flock /work/notes/bench.lock docs/receipts/2026-12-05-recurrent-speed/run.sh TREE OUT [ROUNDS] [BASE]
# TREE: a `git archive` of the commit measured; OUT: where the outputs go; BASE: an earlier
# commit's archive whose GDN scan (bench/gdn_scan.py) alternates with TREE's first, and
# whose stage profile runs just before TREE's.
set -u
T=$1; O=$2; R=${3:-2}; B=${4:-}
F=/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf
LB=/work/peers-build/llama.cpp/build-cpu/bin/llama-bench
PY=/work/main/.venv/bin/python
mkdir -p "$O"
cd "$T"
echo "start $(date -u +%T) load $(cat /proc/loadavg)" > "$O/load.txt"
if [ -n "$B" ]; then
    for rep in 1 2; do
        for tree in "$B" "$T"; do
            echo "== $tree rep $rep" >> "$O/gdn_scan.txt"
            (cd "$tree" && PYTHONPATH=$tree timeout 120 $PY bench/gdn_scan.py --n 512 --reps 2 >> "$O/gdn_scan.txt" 2>&1)
        done
    done
    echo "gdn_scan done $(date -u +%T) load $(cat /proc/loadavg)" >> "$O/load.txt"
fi
if [ -n "$B" ]; then         # the base's stage profile first, then this tree's (same load)
    (cd "$B" && PYTHONPATH=$B timeout 330 $PY -m bench.moe_stage_profile $F --steps 4 --prefill 512 > "$O/profile_base.txt" 2>&1)
    echo "base profile done $(date -u +%T) load $(cat /proc/loadavg)" >> "$O/load.txt"
fi
PYTHONPATH=$T timeout 330 $PY -m bench.moe_stage_profile $F --steps 4 --prefill 512 > "$O/profile.txt" 2>&1
echo "profile done $(date -u +%T) load $(cat /proc/loadavg)" >> "$O/load.txt"
FOLDSERVE_MODEL=$F PYTHONPATH=$T timeout 420 $PY bench/cpu_serve.py --threads 2 --rounds "$R" \
    --port 8439 --llama-bench $LB --model-file $F > "$O/serve.txt" 2>&1
echo "serve done $(date -u +%T) load $(cat /proc/loadavg)" >> "$O/load.txt"
