#!/bin/sh
# vr38 against main through the server, alternated, each run its own process and its own
# hold of the bench lock (bench/drafts.py --rounds 2); the load and time beside each run.
#   sh docs/receipts/2026-12-06-vr38/ab.sh N [new|base ...]   (N: the pair's number)
set -e
D=$(cd "$(dirname "$0")" && pwd)
NEW=$(cd "$D/../../.." && pwd)
BASE=/tmp/vr38-base
PY=/work/main/.venv/bin/python
n=$1; shift
sides=${*:-new base}
for side in $sides; do
  if [ $side = new ]; then T=$NEW; else T=$BASE; fi
  out=$D/bench-$side$n
  flock /work/notes/bench.lock sh -c "{ date -u; cat /proc/loadavg; } > $out.load; cd $T && PYTHONPATH=$T $PY bench/drafts.py --rounds 2 --out $out > $out.stdout 2>&1; { date -u; cat /proc/loadavg; } >> $out.load"
  tail -1 $out.stdout | cut -c1-300
done
