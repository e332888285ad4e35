#!/bin/bash
cd /work/wt/pp38
for n_s in glm4:glm-4.5-air qwen34:qwen3-30b-a3b glm5:glm-4.5-air; do
  n=${n_s%%:*}; s=${n_s#*:}
  flock /work/notes/bench.lock sh -c "echo locked \$(date -u +%H:%M:%S) \$(cat /proc/loadavg) > /tmp/pp38/$n.load; PYTHONPATH=$PWD /work/main/.venv/bin/python -m bench.moe_cpu --llama-cpp /work/peers-build/avx512 --dir /tmp/moe-bench --stages bench --shapes $s --types Q4_K_M --rounds 1 --base /tmp/pp38-base --out /tmp/pp38/$n.json > /tmp/pp38/$n.txt 2>&1; echo end \$(date -u +%H:%M:%S) \$(cat /proc/loadavg) >> /tmp/pp38/$n.load"
  sleep 3
done
echo all done
