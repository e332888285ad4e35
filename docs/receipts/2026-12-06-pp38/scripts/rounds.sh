#!/bin/bash
cd /work/wt/pp38
for r in 2 3; do
  for s in qwen3-30b-a3b glm-4.5-air; do
    n=${s%%-*}$r
    flock /work/notes/bench.lock sh -c "echo locked \$(date -u +%H:%M:%S) \$(cat /proc/loadavg) > /tmp/pp38/$n.load; PYTHONPATH=$PWD /work/main/.venv/bin/python -m bench.moe_cpu --llama-cpp /work/peers-build/avx512 --dir /tmp/moe-bench --stages bench --shapes $s --types Q4_K_M --rounds 1 --base /tmp/pp38-base --out /tmp/pp38/$n.json > /tmp/pp38/$n.txt 2>&1; echo end \$(date -u +%H:%M:%S) \$(cat /proc/loadavg) >> /tmp/pp38/$n.load"
    sleep 5
  done
done
echo all done
