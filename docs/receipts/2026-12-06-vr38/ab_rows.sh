#!/bin/sh
# alternate base and new verify_rows runs: $1 = tag, $2 = rounds
tag=$1; n=${2:-2}
for i in $(seq 1 $n); do
  for side in base new; do
    if [ $side = base ]; then tree=/tmp/vr38-base; else tree=/work/wt/vr38; fi
    cd $tree
    echo "== $side round $i $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
    PYTHONPATH=$tree /work/main/.venv/bin/python bench/verify_rows.py --sizes 1,2,3,4,5,6,7,8,9 --reps 9 --out /tmp/vr38/rows_${tag}_${side}$i.json | grep -v "^1x1 "
  done
done
echo "== end $(date -u +%H:%M:%S) load $(cat /proc/loadavg)"
