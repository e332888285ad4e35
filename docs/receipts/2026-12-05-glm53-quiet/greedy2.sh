#!/bin/bash
F=/tmp/glm53q-bench/glm-5.3-flash-L4-Q8_0.gguf; O=/tmp/glm53q-bench/r/greedy.json
echo "start $(date -u +%T) load $(cat /proc/loadavg)"
cd /work/wt/glm53q
PYTHONPATH=/work/wt/glm53q timeout 300 /work/main/.venv/bin/python /tmp/glm53q-bench/greedy.py $F $O ours-q8x
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
