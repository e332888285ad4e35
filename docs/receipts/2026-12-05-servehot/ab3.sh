#!/bin/bash
# A/B: base (1f8397c) vs new, alternating fresh processes, one lock a round.
set -u
O=$1; R=${2:-3}
PY=/work/main/.venv/bin/python; TR=/tmp/servehot/new2/bench/serve_trace.py
Q=/tmp/moe-bench/qwen3-30b-a3b-L4-Q8_0.gguf
mkdir -p $O
for i in $(seq 1 $R); do
  if [ $((i % 2)) = 1 ]; then order="base new2"; else order="new2 base"; fi
  flock /work/notes/bench.lock bash -c "
    echo \"round $i start \$(date -u +%T) load \$(cat /proc/loadavg)\" >> $O/load.txt
    for t in $order; do
      SERVE_TRACE_TREE=/tmp/servehot/\$t timeout 200 $PY $TR --phase serve --raw --requests 3 --port 8455 --model-file $Q --out $O/q_\${t}_$i.json > $O/q_\${t}_$i.txt 2>&1
    done
    SERVE_TRACE_TREE=/tmp/servehot/new2 timeout 120 $PY $TR --phase engine --requests 3 --model-file $Q --out $O/q_engine_$i.json > $O/q_engine_$i.txt 2>&1
    for t in $order; do
      SERVE_TRACE_TREE=/tmp/servehot/\$t timeout 120 $PY $TR --phase serve --raw --requests 3 --port 8455 --out $O/d_\${t}_$i.json > $O/d_\${t}_$i.txt 2>&1
    done
    SERVE_TRACE_TREE=/tmp/servehot/new2 timeout 120 $PY $TR --phase engine --requests 3 --out $O/d_engine_$i.json > $O/d_engine_$i.txt 2>&1
    echo \"round $i end \$(date -u +%T) load \$(cat /proc/loadavg)\" >> $O/load.txt
  "
done
