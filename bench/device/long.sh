#!/bin/bash
# Issue 18's long contexts on one GPU, the parts named by $STAGES (default tests,new,old):
#   tests  the attention definition tests, long rows up to 131,072 keys, paged == window at
#          32k (kernel and engine), graphs and paging ($TESTS: other pytest paths)
#   new    bench/long_context.py on this tree (stages $BENCH, default attn,decode,prefill,interleave)
#   old    the same script's attn,decode stages on the checkout at $OLD (the code before)
#   serve  `foldserve serve` on dummy:llama3-8b at --context 131072 --parallel 8 (its startup
#          block shows the plan's page count), then `foldserve bench` with one 32,000-token
#          and one 131,000-token prompt through HTTP: TTFT and TPOT
#   STAGES=tests,new OLD=.. bash bench/device/long.sh
# Writes $OUT/tests.log, $OUT/new.txt, $OUT/old.txt and the script's json files.
cd "$(dirname "$0")/../.." && source bench/device/common.sh
W=",${STAGES:-tests,new,old},"
has() { [[ "$W" == *",$1,"* ]]; }
if has tests; then
  timeout "${TESTS_S:-170}" python3 -m pytest -q -x -rs ${TESTS:-tests/gpu/test_attention_definition.py \
    tests/gpu/test_split_attention.py tests/gpu/test_long_context.py tests/gpu/test_paged.py \
    tests/gpu/test_graphs.py} > "$OUT/tests.log" 2>&1
  echo "tests rc $?"; tail -4 "$OUT/tests.log"
fi
if has new; then
  timeout "${NEW_S:-200}" python3 bench/long_context.py --stages "${BENCH:-attn,decode,prefill,interleave}" \
    --out "$OUT" --tag new > "$OUT/new.txt" 2>&1
  echo "new rc $?"
fi
if has old && [ -n "${OLD:-}" ]; then
  timeout "${OLD_S:-80}" python3 bench/long_context.py --stages attn,decode --tree "$OLD" --tag old \
    --out "$OUT" > "$OUT/old.txt" 2>&1
  echo "old rc $?"
fi
if has serve; then
  python3 -m server.cli serve --model dummy:llama3-8b --device cuda --context 131072 --parallel 8 \
    --port 8011 > "$OUT/serve.log" 2>&1 &
  pid=$!
  python3 -c "
import time, httpx
for _ in range(240):
    try:
        if httpx.get('http://127.0.0.1:8011/health', timeout=2).status_code == 200: break
    except Exception: pass
    time.sleep(0.5)
"
  for n in 512 32000 131000; do                     # 512: compiles and captures first
    timeout "${SERVE_S:-120}" python3 -m server.cli bench --url http://127.0.0.1:8011 --requests 1 \
      --concurrency 1 --input-len $n --output-len 64 --timeout 300 > "$OUT/bench_$n.txt" 2>&1
    echo "bench $n rc $?"; tail -12 "$OUT/bench_$n.txt"
  done
  kill $pid; wait $pid
  grep -E "KV pool|streams|plan |rounds" "$OUT/serve.log" | head -6
fi
true
