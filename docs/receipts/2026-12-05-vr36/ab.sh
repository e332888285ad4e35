#!/bin/sh
# vr36 against main, alternated, each run its own process and its own hold of the
# bench lock (bench/drafts.py --rounds 4); the load beside each run.
#   sh docs/receipts/2026-12-05-vr36/ab.sh N   (N: the pair's number)
set -e
D=$(cd "$(dirname "$0")" && pwd)
NEW=$(cd "$D/../../.." && pwd)
BASE=/tmp/vr36-base
PY=/work/main/.venv/bin/python
n=$1
for side in new base; do
  if [ $side = new ]; then T=$NEW; else T=$BASE; fi
  out=$D/bench-$side$n
  flock /work/notes/bench.lock sh -c "{ date -u; cat /proc/loadavg; } > $out.load; cd $T && PYTHONPATH=$T timeout 500 $PY bench/drafts.py --rounds 4 --out $out > $out.stdout 2>&1; { date -u; cat /proc/loadavg; } >> $out.load"
  tail -1 $out.stdout | cut -c1-300
done
