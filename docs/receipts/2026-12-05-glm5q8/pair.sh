#!/bin/bash
# under the lock: flock /work/notes/bench.lock bash pair.sh NAME [ROUNDS] [WAIT]
T=/work/wt/glm5q8; F=/tmp/glm5q8-bench/glm-5.3-flash-L4-Q8_0.gguf; D=$T/docs/receipts/2026-12-05-glm5q8
echo "start $(date -u +%T) load $(cat /proc/loadavg) commit $(git -C $T rev-parse --short HEAD) dirty $(git -C $T status --porcelain -- server kernels | wc -l)"
t0=$(date +%s); cat $F > /dev/null; echo "page cache read $(( $(date +%s) - t0 )) s"
cd $T && PYTHONPATH=$T timeout 470 /work/main/.venv/bin/python $D/pair.py $F $D/pair-$1.json ${2:-3} ${3:-60}
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
