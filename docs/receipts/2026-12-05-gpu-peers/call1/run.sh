#!/bin/bash
# Device call 1 (issue 38): llama.cpp build + llama3-8b GGUFs in the background; tests/gpu;
# llama-bench on Q8_0 / Q4_K_M; foldserve's engine on the same files.
set -u
T0=$(date +%s); el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
mkdir -p /root/keep "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /root/keep/site .whl/*.whl > /root/keep/pip.txt 2>&1
export PYTHONPATH=/root/keep/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1; cp .lead/commit.txt "$OUT/commit.txt"; nproc >> "$OUT/nvidia-smi.txt"
cp .lead/smol.part00 /root/keep/
python3 bench/peer_llamacpp.py --build --tgz .peers/llama.cpp-0c1e570.tgz 2>&1 | tail -2
mkdir -p /root/keep/tree && cp -r bench server kernels /root/keep/tree/
setsid nohup bash -c "cd /root/keep/tree && export PYTHONPATH=$PYTHONPATH:/root/keep/tree && python3 bench/peer_llamacpp.py --make-gguf > /root/keep/gguf.log 2>&1; python3 bench/peer_llamacpp.py --wait 560 --quantize > /root/keep/quant.log 2>&1; echo \$? > /root/keep/quant.rc" > /dev/null 2>&1 < /dev/null &
el tests
timeout 290 python3 -m pytest -q -p no:cacheprovider tests/gpu > "$OUT/tests.log" 2>&1; echo "tests rc $?"
tail -12 "$OUT/tests.log"
el "waiting for quantize"
while [ ! -f /root/keep/quant.rc ] && [ $(( $(date +%s) - T0 )) -lt 470 ]; do sleep 3; done
cat /root/keep/gguf.log /root/keep/quant.log > "$OUT/peer.txt" 2>/dev/null; tail -3 /root/keep/build.log >> "$OUT/peer.txt" 2>/dev/null
el "quantize rc $(cat /root/keep/quant.rc 2>/dev/null)"; tail -5 "$OUT/peer.txt"
if [ "$(cat /root/keep/quant.rc 2>/dev/null)" = 0 ]; then
  mkdir -p /root/keep/lb
  timeout $(( 580 - ($(date +%s) - T0) )) python3 bench/peer_llamacpp.py --llama-bench --out /root/keep/lb 2>&1 | grep -v "^+" | tee -a "$OUT/peer.txt" | tail -6
  tar czf "$OUT/lb.tgz" -C /root/keep lb
fi
el done
