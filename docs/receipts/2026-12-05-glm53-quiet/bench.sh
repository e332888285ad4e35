#!/bin/bash
# one locked run: the file read into the page cache, then bench.moe_cpu's alternating rounds
# (llama-bench -t 2 -p 512 -n 32 -r 1, then foldserve in a fresh process), load recorded
T=/work/wt/glm53q
F=/tmp/glm53q-bench/glm-5.3-flash-L4-Q8_0.gguf
tag=$1; rounds=${2:-3}
echo "start $(date -u +%T) load $(cat /proc/loadavg) commit $(git -C $T rev-parse --short HEAD) $(git -C $T status --short | wc -l) changed files"
t0=$(date +%s); cat $F > /dev/null; echo "page cache read $(( $(date +%s) - t0 )) s; $(free -g | sed -n 2p)"
cd $T && PYTHONPATH=$T timeout 580 /work/main/.venv/bin/python -m bench.moe_cpu --shapes glm-5.3-flash --dir /tmp/glm53q-bench --stages bench --rounds $rounds --no-b8 --out /tmp/glm53q-bench/r/bench-$tag.json 2>&1 | grep -v "^+"
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
