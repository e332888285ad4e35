#!/bin/bash
# alternate base / new profile runs in fresh processes; $1 = tag, $2 = rounds, $3 = new tree
TAG=$1; R=$2; NEW=$3
F=/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf
for i in $(seq 1 $R); do
  for side in base new; do
    T=/tmp/gdnstep-base; [ $side = new ] && T=$NEW
    cd $T && PYTHONPATH=$T timeout 200 /work/main/.venv/bin/python -m bench.moe_stage_profile $F --threads 2 --steps 64 --prefill 64 --no-b8 > /tmp/gdnstep-ab/$TAG-$side-$i.txt 2>&1
    echo "$side $i $(grep 'decode b1' /tmp/gdnstep-ab/$TAG-$side-$i.txt) $(cat /proc/loadavg)"
  done
done
