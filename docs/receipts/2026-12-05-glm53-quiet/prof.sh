#!/bin/bash
# the stage profile of the worktree's engine on the file, a fresh process (under the caller's lock)
T=/work/wt/glm53q
F=/tmp/glm53q-bench/glm-5.3-flash-L4-Q8_0.gguf
echo "== $(git -C $T rev-parse --short HEAD) ($(git -C $T status --short | wc -l) changed files) start $(date -u +%T) load $(cat /proc/loadavg)"
cat $F > /dev/null
cd $T && PYTHONPATH=$T timeout 560 /usr/bin/time -v /work/main/.venv/bin/python -m bench.moe_stage_profile $F --steps ${1:-8} --prefill 512 --no-b8 2>&1
echo "== end $(date -u +%T) load $(cat /proc/loadavg)"
