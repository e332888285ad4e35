#!/bin/bash
# Device call 3 (issue 38): llama-quantize (a CPU build) makes the llama3-8b Q8_0 / Q4_K_M files
# again; foldserve's engine on them (graphs on); foldserve serve over HTTP on Q4_K_M.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /root/keep/lcpp /root/keep/models "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /root/keep/site .whl/*.whl > /root/keep/pip.txt 2>&1
export PYTHONPATH=/root/keep/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
cp .lead/commit.txt "$OUT/commit.txt"; git diff --stat HEAD -- bench >> "$OUT/commit.txt" 2>/dev/null
tar xzf .peers/llama.cpp-0c1e570.tgz -C /root/keep/lcpp
S=/root/keep/lcpp/llama.cpp
( cmake -S $S -B $S/bcpu -DGGML_CUDA=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_BUILD_SERVER=OFF -DCMAKE_BUILD_TYPE=Release > /root/keep/bcpu.log 2>&1 && cmake --build $S/bcpu -j 16 --target llama-quantize >> /root/keep/bcpu.log 2>&1; echo $? > /root/keep/bcpu.rc ) &
python3 bench/peer_llamacpp.py --make-gguf 2>&1 | tail -1
wait; el "build rc $(cat /root/keep/bcpu.rc)"; tail -2 /root/keep/bcpu.log
M=/root/keep/models
for k in Q4_K_M; do t=$(date +%s); $S/bcpu/bin/llama-quantize $M/l3-BF16.gguf $M/l3-$k.gguf $k 16 > /dev/null 2>&1; el "quantized $k in $(( $(date +%s) - t )) s"; done
rm -f $M/l3-BF16.gguf; sha256sum $M/l3-Q4_K_M.gguf | tee -a "$OUT/commit.txt"
waitup() { for i in $(seq 1 $2); do python3 -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$1/health', timeout=2)" 2>/dev/null && return 0; kill -0 $3 2>/dev/null || return 1; sleep 1; done; return 1; }
{
  el foldserve
  python3 -m server.cli serve --device cuda --model $M/l3-Q4_K_M.gguf --port 9002 --context 1024 --parallel 65 > /root/keep/fs.log 2>&1 &
  FS=$!
  if waitup 9002 200 $FS; then
    el up
    python3 -m server.cli bench --url http://127.0.0.1:9002 --concurrency 1 --requests 4 --input-len 128 --output-len 256 --seed 1 --json 2>&1 | tail -1 | sed "s/^/foldserve b1 /"
    python3 -m server.cli bench --url http://127.0.0.1:9002 --concurrency 64 --requests 64 --input-len 512 --output-len 256 --seed 2 --json 2>&1 | tail -1 | sed "s/^/foldserve c64 /"
  fi
  kill $FS; wait $FS 2>/dev/null
  grep -v "^INFO" /root/keep/fs.log | tail -25
} > "$OUT/http.txt" 2>&1; grep -E "^foldserve|^\[|Error" "$OUT/http.txt" | cut -c1-700
el engine
timeout $(( ${LIMIT:-400} - ($(date +%s) - T0) )) python3 bench/quant_engine_bench.py $M/l3-Q4_K_M.gguf > "$OUT/engine.txt" 2>&1; tail -3 "$OUT/engine.txt"; grep WARN "$OUT/engine.txt"
el done
