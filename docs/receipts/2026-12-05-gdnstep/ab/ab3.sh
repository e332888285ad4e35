#!/bin/bash
TAG=$1; R=$2; NEW=$3
for i in $(seq 1 $R); do
  for side in base new; do
    T=/tmp/gdnstep-base; [ $side = new ] && T=$NEW
    cd $T && PYTHONPATH=$T timeout 200 /work/main/.venv/bin/python -m bench.gdn_decode --steps 300 > /tmp/gdnstep-ab/$TAG-$side-$i.txt 2>&1
    echo "$side $i | $(grep -E 'gdn_round|add_norm' /tmp/gdnstep-ab/$TAG-$side-$i.txt | tr '\n' '|') $(cat /proc/loadavg)"
  done
done
