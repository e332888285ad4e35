#!/bin/bash
T=/work/wt/glm53q; F=/tmp/glm53q-bench/glm-5.3-flash-L4-Q8_0.gguf
echo "start $(date -u +%T) load $(cat /proc/loadavg) commit $(git -C $T rev-parse --short HEAD)"
t0=$(date +%s); cat $F > /dev/null; echo "page cache read $(( $(date +%s) - t0 )) s"
cd $T && PYTHONPATH=$T timeout 570 /work/main/.venv/bin/python /tmp/glm53q-bench/pair.py $F /tmp/glm53q-bench/r/pair-$1.json ${2:-2} ${3:-100}
echo "end $(date -u +%T) load $(cat /proc/loadavg)"
