#!/bin/bash
# alternate base / new decode-step profiles: alt.sh OUTDIR ROUNDS
O=$1; N=${2:-2}; mkdir -p $O
PY=/work/main/.venv/bin/python; F=/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf
for r in $(seq 1 $N); do
  for t in base new; do
    T=/tmp/dec-base; [ $t = new ] && T=/tmp/dec-new
    echo "== round $r $t $(cat $T/COMMIT) $(date -u +%T) load $(cat /proc/loadavg)" >> $O/alt.txt
    (cd $T && PYTHONPATH=$T timeout 300 $PY -m bench.moe_stage_profile $F --threads 2 --steps 64 --no-b8 --prefill 64 >> $O/alt.txt 2>&1)
  done
done
echo "== end $(date -u +%T) load $(cat /proc/loadavg)" >> $O/alt.txt
