#!/bin/bash
# Serving checks on one GPU, through real `foldserve serve` processes on dummy weights at
# real shapes: solo == concurrent for greedy and sampled requests, on windows and on pages,
# and under a small round budget (bench/sampled_serve_check.py), then check-pages.
#   bash bench/device/serve.sh [model ...]     check-pages models, default dummy:smollm2-135m dummy:llama3-8b
# Writes $OUT/<check>/ and prints one JSON line a check; $OUT/summary.txt collects them.
cd "$(dirname "$0")/../.." && source bench/device/common.sh
c=bench/sampled_serve_check.py
T=${TIMEOUT:-150}
{
  timeout $T python3 $c --greedy --out "$OUT/greedy-windows" 2>&1 | tail -2
  timeout $T python3 $c --out "$OUT/sampled-windows" 2>&1 | tail -2
  TF_KV_PAGES=on timeout $T python3 $c --greedy --out "$OUT/greedy-pages" 2>&1 | tail -2
  TF_KV_PAGES=on timeout $T python3 $c --out "$OUT/sampled-pages" 2>&1 | tail -2
  timeout $T python3 $c --greedy --server-args "--max-batch-tokens 256 --prompt-cache-gib 0" \
    --out "$OUT/greedy-budget256" 2>&1 | tail -2
  MODELS=("$@"); [ ${#MODELS[@]} -eq 0 ] && MODELS=(dummy:smollm2-135m dummy:llama3-8b)
  for m in "${MODELS[@]}"; do
    timeout $T python3 -m server.cli check-pages --model "$m" --device cuda 2>&1 | tail -4
  done
} | tee "$OUT/serve.log" | grep -E "^\{|check-pages:" | tee "$OUT/summary.txt"
