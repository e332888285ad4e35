#!/bin/bash
# one round: the file's pages read into the page cache first (cat), then llama-bench, this tree's foldserve, the base's
T=/tmp/glm53c-bench/tree
F=/tmp/glm53c-bench/glm-5.3-flash-L4-Q8_0.gguf
now=$(date -u +%s); stop=$(date -u -d "12:23" +%s); left=$(( (stop - now) / 60 ))
echo "start $(date -u) load $(cat /proc/loadavg) minutes left $left"
if [ $left -lt 7 ]; then echo "too late, skipped"; exit 0; fi
t0=$(date +%s); cat $F > /dev/null; echo "page cache read $(( $(date +%s) - t0 )) s; $(free -g | sed -n 2p)"
cd $T && PYTHONPATH=$T timeout $(( left * 60 )) /work/main/.venv/bin/python -m bench.moe_cpu --shapes glm-5.3-flash --dir /tmp/glm53c-bench --stages bench --rounds 1 --no-b8 --base /tmp/glm53c-bench/base --out /tmp/glm53c-bench/bench3.json 2>&1 | grep -v "^+"
echo "end $(date -u) load $(cat /proc/loadavg)"
