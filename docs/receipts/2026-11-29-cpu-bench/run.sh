#!/bin/bash
# run from /work/main; writes raw outputs into $1
set -u
D=$1
cd /work/main
PORT=$(python3 -c "import socket; s=socket.socket(); s.bind(('127.0.0.1',0)); print(s.getsockname()[1])")
{
echo "date: $(date -u +%FT%TZ)"
echo "commit: $(git rev-parse HEAD)"
echo "worktree changes not committed (other helpers' work in progress):"; git status --short --untracked-files=no | sed 's/^/  /'
echo "nproc: $(nproc)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "memory: $(free -h | awk '/Mem:/ {print $2 " total, " $7 " available"}')"
echo "python: $(python3 --version 2>&1), numpy $(python3 -c 'import numpy; print(numpy.__version__)')"
echo "uptime before: $(uptime)"
} > $D/machine.txt
SERVE="python3 -m server.cli serve --port $PORT --context 1024 --parallel 8"
echo "server: $SERVE   (TF_KV_PAGES unset = auto)" >> $D/machine.txt
$SERVE > $D/server.log 2>&1 &
SPID=$!
for i in $(seq 1 240); do curl -sf localhost:$PORT/health >/dev/null && break; sleep 0.5; done
curl -s localhost:$PORT/health > $D/health-before.json
SEED=0
for C in 1 8; do
  if [ $C = 1 ]; then N=16; else N=32; fi
  for FMT in table json; do
    SEED=$((SEED+1))     # fresh prompts each run: no prompt-cache hits from an earlier run
    CMD="python3 -m server.cli bench --url http://127.0.0.1:$PORT --concurrency $C --requests $N --input-len 128 --output-len 64 --seed $SEED"
    [ $FMT = json ] && CMD="$CMD --json"
    OUTF=$D/bench-c$C-$FMT-seed$SEED
    echo "c=$C $FMT seed=$SEED load before: $(cat /proc/loadavg)" >> $D/machine.txt
    echo "\$ $CMD" > $OUTF.stdout.txt
    $CMD >> $OUTF.stdout.txt 2> $OUTF.stderr.txt
    echo "c=$C $FMT seed=$SEED load after: $(cat /proc/loadavg)" >> $D/machine.txt
    curl -s localhost:$PORT/health >> $D/health-after-each.jsonl; echo >> $D/health-after-each.jsonl
    ps -eo pid,pcpu,etime,comm,args --sort=-pcpu | grep -v "ps -eo" | head -6 | cut -c1-160 >> $D/top-after-each.txt
  done
done
curl -s localhost:$PORT/health > $D/health-after.json
echo "uptime after: $(uptime)" >> $D/machine.txt
kill -TERM $SPID; wait $SPID
echo done
