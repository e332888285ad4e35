#!/bin/bash
# Device call 2 (issue 38), on the machine call 1 warmed: the default model requantized on the
# device (GPU goldens), foldserve's engine on the llama3-8b files, HTTP rows beside llama-server.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
[ -d /root/keep/site ] || { echo "cold machine: call 1's state is gone"; exit 3; }
export PYTHONPATH=/root/keep/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
cp .lead/commit.txt "$OUT/commit.txt"
B=/root/keep/lcpp/llama.cpp/build/bin; M=/root/keep/models
cat /root/keep/smol.part00 .lead/smol.part01 > $M/smol-Q4_1.gguf
sha256sum $M/smol-Q4_1.gguf
for k in Q8_0 Q4_K_M; do $B/llama-quantize --allow-requantize $M/smol-Q4_1.gguf $M/smollm2-$k.gguf $k 2 > /dev/null 2>&1; done
sha256sum $M/smollm2-*.gguf; cat docs/receipts/2026-12-02-requant-cpu/files.sha256
R=docs/receipts/2026-12-02-requant-cpu
{
  el golden
  timeout 60 python3 bench/golden_check.py --device cuda --model $M/smol-Q4_1.gguf
  timeout 40 python3 bench/golden_check.py --device cuda --model $M/smol-Q4_1.gguf --golden $R/Q4_1-cpu.json
  timeout 40 python3 bench/golden_check.py --device cuda --model $M/smollm2-Q8_0.gguf --golden $R/Q8_0-cpu.json
  timeout 40 python3 bench/golden_check.py --device cuda --model $M/smollm2-Q4_K_M.gguf --golden $R/Q4_K_M-cpu.json
} > "$OUT/golden.txt" 2>&1; grep -E '"passed"|Error' "$OUT/golden.txt"
while [ ! -f /root/keep/quant.rc ] && [ $(( $(date +%s) - T0 )) -lt 200 ]; do sleep 3; done
el "quant rc $(cat /root/keep/quant.rc 2>/dev/null)"; tail -3 /root/keep/quant.log
if [ -z "$(ls /root/keep/lb 2>/dev/null)" ]; then mkdir -p /root/keep/lb; timeout 150 python3 bench/peer_llamacpp.py --llama-bench --out /root/keep/lb 2>&1 | grep -v "^+" | tee "$OUT/peer2.txt" | tail -6; tar czf "$OUT/lb.tgz" -C /root/keep lb; fi
el engine
timeout 170 python3 bench/quant_engine_bench.py $M/l3-Q8_0.gguf $M/l3-Q4_K_M.gguf > "$OUT/engine.txt" 2>&1; tail -3 "$OUT/engine.txt"
F=$M/l3-Q4_K_M.gguf
bench() {  # $1 label
  python3 -m server.cli bench --url http://127.0.0.1:$2 --concurrency 1 --requests 4 --input-len 128 --output-len 256 --seed 1 --json 2>&1 | tail -1 | sed "s/^/$1 b1 /"
  python3 -m server.cli bench --url http://127.0.0.1:$2 --concurrency 64 --requests 64 --input-len 512 --output-len 256 --seed 2 --json 2>&1 | tail -1 | sed "s/^/$1 c64 /"
}
waitup() { for i in $(seq 1 $2); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$1/health', timeout=2)" 2>/dev/null && return 0; sleep 1; done; return 1; }
{
  el llama-server
  $B/llama-server -m $F -ngl 99 -fa on -c 65536 -np 64 -b 2048 -ub 512 --port 9001 > /root/keep/ls.log 2>&1 &
  LS=$!; waitup 9001 90 && bench llama-server 9001; kill $LS; wait $LS 2>/dev/null
  el foldserve
  python3 -m server.cli serve --device cuda --model $F --port 9002 --context 1024 --parallel 65 > /root/keep/fs.log 2>&1 &
  FS=$!; waitup 9002 $(( 560 - ($(date +%s) - T0) - 60 )) && bench foldserve 9002; kill $FS; wait $FS 2>/dev/null
  tail -5 /root/keep/ls.log; grep -v "^INFO" /root/keep/fs.log | tail -15
} > "$OUT/http.txt" 2>&1; grep -E "^llama-server|^foldserve|^\[" "$OUT/http.txt" | cut -c1-600
el done
