#!/bin/bash
# A/B of sampled b1 (temperature 0.7, top_p 0.95): base (1f8397c) vs new3, alternating fresh
# processes; the Qwen3-30B-shaped file. One lock a round.
set -u
O=$1; R=${2:-3}
PY=/work/main/.venv/bin/python; TR=/tmp/servehot/new3/bench/serve_trace.py
Q=/tmp/moe-bench/qwen3-30b-a3b-L4-Q8_0.gguf
SAMP='{"temperature": 0.7, "top_p": 0.95}'
mkdir -p $O
for i in $(seq 1 $R); do
  if [ $((i % 2)) = 1 ]; then order="base new3"; else order="new3 base"; fi
  flock /work/notes/bench.lock bash -c "
    echo \"round $i start \$(date -u +%T) load \$(cat /proc/loadavg)\" >> $O/load.txt
    for t in $order; do
      SERVE_TRACE_TREE=/tmp/servehot/\$t timeout 200 $PY $TR --phase serve --raw --requests 3 --port 8454 --model-file $Q --sampling '$SAMP' --out $O/qs_\${t}_$i.json > $O/qs_\${t}_$i.txt 2>&1
    done
    echo \"round $i end \$(date -u +%T) load \$(cat /proc/loadavg)\" >> $O/load.txt
  "
done
