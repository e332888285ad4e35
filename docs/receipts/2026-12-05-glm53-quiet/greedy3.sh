#!/bin/bash
# more prompt lengths, 4 steps: llama-server, then ours (float x), then ours with llama.cpp's Q8_0 activation rounding
F=/tmp/glm53q-bench/glm-5.3-flash-L4-Q8_0.gguf; O=/tmp/glm53q-bench/r/greedy3.json
export GREEDY_N=4 GREEDY_LENS=1,4,8,15,16,17,33,64,100
echo "start $(date -u +%T) load $(cat /proc/loadavg)"
cd /work/wt/glm53q
PYTHONPATH=/work/wt/glm53q timeout 300 /work/venv-ref/bin/python /tmp/glm53q-bench/greedy.py $F $O llama
PYTHONPATH=/work/wt/glm53q timeout 300 /work/main/.venv/bin/python /tmp/glm53q-bench/greedy.py $F $O ours
PYTHONPATH=/work/wt/glm53q timeout 300 /work/main/.venv/bin/python /tmp/glm53q-bench/greedy.py $F $O ours-q8x
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
