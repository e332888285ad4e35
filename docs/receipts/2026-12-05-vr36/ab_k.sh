#!/bin/sh
# vr36 at 0bb7aed (tile2, main's CHUNK_COST: the kernel alone) against main, alternated,
# each run its own process and its own hold of the bench lock (bench/drafts.py --rounds 4).
#   sh docs/receipts/2026-12-05-vr36/ab_k.sh N   (N: the pair's number)
set -e
D=$(cd "$(dirname "$0")" && pwd)
K=/tmp/vr36-k          # git archive 0bb7aed
BASE=/tmp/vr36-base    # git archive main (7f22113)
PY=/work/main/.venv/bin/python
n=$1
for side in k base; do
  if [ $side = k ]; then T=$K; else T=$BASE; fi
  out=$D/bench-$side$n
  flock /work/notes/bench.lock sh -c "{ date -u; cat /proc/loadavg; } > $out.load; cd $T && PYTHONPATH=$T timeout 500 $PY bench/drafts.py --rounds 4 --out $out > $out.stdout 2>&1; { date -u; cat /proc/loadavg; } >> $out.load"
  tail -1 $out.stdout | cut -c1-300
done
