#!/bin/bash
# side by side: each round llama-bench, this tree's foldserve, the base tree's foldserve (fresh processes)
T=/tmp/glm53c-bench/tree
now=$(date -u +%s); stop=$(date -u -d "12:24" +%s); left=$(( (stop - now) / 60 ))
echo "start $(date -u) load $(cat /proc/loadavg) minutes left $left"
if [ $left -lt 7 ]; then echo "too late, skipped"; exit 0; fi
R=2; [ $left -lt 13 ] && R=1
echo "rounds $R"
cd $T && PYTHONPATH=$T timeout $(( left * 60 )) /work/main/.venv/bin/python -m bench.moe_cpu --shapes glm-5.3-flash --dir /tmp/glm53c-bench --stages bench --rounds $R --no-b8 --base /tmp/glm53c-bench/base --out /tmp/glm53c-bench/bench.json 2>&1 | grep -v "^+"
echo "end $(date -u) load $(cat /proc/loadavg)"
