#!/bin/bash
# Ranks on GPUs (a machine of 2 or more GPUs), end to end through real `foldserve serve`
# processes (bench/multi_gpu.py), then one line a result (bench/multi_summary.py).
#   bash bench/device/multi.sh [TPS] [STAGES] [extra multi_gpu.py args...]
#     TPS     default 1,2
#     STAGES  default mismatch,rooms,allreduce,speed; also golden (needs the real model:
#             TF_MODEL=path.gguf; the golden file is tests/data/smollm2-135m-instruct-q4_1.json)
#   TF_MODEL defaults to dummy:smollm2-135m here.
# Writes $OUT/multi/ (results.json, run.txt).
cd "$(dirname "$0")/../.." && source bench/device/common.sh
TPS=${1:-1,2}; STAGES=${2:-mismatch,rooms,allreduce,speed}; shift 2 2>/dev/null || shift $#
mkdir -p "$OUT/multi"
TF_MODEL=${TF_MODEL:-dummy:smollm2-135m} timeout "${TIMEOUT:-540}" \
  python3 bench/multi_gpu.py --out "$OUT/multi" --tps "$TPS" --stages "$STAGES" "$@" > "$OUT/multi/run.txt" 2>&1
grep -E "^(mismatch|rooms|allreduce|speed|golden):" "$OUT/multi/run.txt"
[ -f "$OUT/multi/results.json" ] && python3 bench/multi_summary.py "$OUT/multi/results.json"
true
