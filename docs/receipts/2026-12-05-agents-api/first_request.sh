#!/bin/bash
# usage: first.sh CHECKOUT LABEL CACHE_DIR PORT  -- start serve, time /health ready, then the README's curl three times (EXTRA: more serve flags; OUTDIR: where logs and replies go)
set -u
CO=$1; LABEL=$2; CACHE=$3; PORT=$4
PY=/work/main/.venv/bin/python
LOG=${OUTDIR:-/tmp}/$LABEL.log
cd "$CO"
T0=$(date +%s.%N)
NUMBA_CACHE_DIR=$CACHE PYTHONPATH=$CO nice -n 5 $PY -m server.cli serve --host 127.0.0.1 --port $PORT ${EXTRA:-} > "$LOG" 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null' EXIT
until curl -sf 127.0.0.1:$PORT/health >/dev/null 2>&1; do
  sleep 0.2
  kill -0 $PID 2>/dev/null || { echo "server died"; tail -20 "$LOG"; exit 1; }
done
T1=$(date +%s.%N)
echo "$LABEL: healthy after $(echo "$T1 - $T0" | bc) s"
for i in 1 2 3; do
  curl -s -o ${OUTDIR:-/tmp}/$LABEL.reply$i.json -w "$LABEL: README curl $i: %{time_total} s (http %{http_code})\n" 127.0.0.1:$PORT/v1/chat/completions -H 'content-type: application/json' \
    -d '{"messages": [{"role": "user", "content": "What does a GPU do?"}], "max_tokens": 40}'
done
