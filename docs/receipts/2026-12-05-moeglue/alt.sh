#!/bin/bash
# alternate base / new decode-step profiles, each a fresh process:
#   alt.sh OUTFILE ROUNDS FILE.gguf BASE_TREE NEW_TREE     (under flock /work/notes/bench.lock)
O=$1; N=${2:-4}; F=${3:-/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf}
B=${4:-/tmp/moeglue-base}; W=${5:-/tmp/moeglue-new}
PY=/work/main/.venv/bin/python
for r in $(seq 1 $N); do
  for T in $B $W; do
    echo "== round $r $(cat $T/COMMIT) $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O
    (cd $T && PYTHONPATH=$T timeout 300 $PY -m bench.moe_stage_profile $F --threads 2 --steps 64 --no-b8 --prefill 64 2>&1 | sed -n '/^decode b1/,/^prefill/p' >> $O)
  done
done
echo "== end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" >> $O
