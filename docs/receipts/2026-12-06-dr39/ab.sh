#!/bin/sh
# One before/after pair through the server, each side its own process and its own hold of
# the bench lock: sh ab.sh N ORDER (ORDER "base new" or "new base"); base = /tmp/dr39-base
# (git archive main), new = this tree. Raw: bench-{base,new}N/, .stdout, .load.
N=$1; shift
D=$(cd "$(dirname "$0")" && pwd)
NEW=$(cd "$D/../../.." && pwd)
for side in "$@"; do
  if [ "$side" = base ]; then T=/tmp/dr39-base; else T=$NEW; fi
  out=$D/bench-$side$N
  flock /work/notes/bench.lock sh -c "date -u +%H:%M:%S; cat /proc/loadavg; cd $T && PYTHONPATH=$T timeout 300 /work/main/.venv/bin/python bench/drafts.py --rounds 2 --out $out > $out.stdout 2>&1; date -u +%H:%M:%S; cat /proc/loadavg" > $out.load
done
