#!/bin/bash
# Issue 17 on one H200, one call (run from a copy of this tree: `cd .s17 && bash bench/device/quant.sh`,
# carry .s17 .whl .peers, the copy's commit in .s17/.tree-commit; ../.whl holds gguf, ../.peers llama.cpp's tarball). In the background
# (setsid, survives the call): llama.cpp's build, the llama3-8b-shaped BF16 GGUF, then Q8_0 and
# Q4_K_M by llama-quantize. In the foreground: the quantized-GEMM definition and engine tests and
# bench/quant_bench.py; then llama-bench on both files; STAGES with `engine`: then
# bench/quant_engine_bench.py (foldserve's engine on both files; not yet run). Writes $OUT.
# STAGES=tests,bench,peer[,engine]
STAGES=${STAGES:-tests,bench,peer}
T0=$(date +%s)
el() { echo "[$(( $(date +%s) - T0 )) s] $*"; }
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site ../.whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
git -C .. log -1 --format=%H 2>/dev/null > $OUT/commit.txt; cat .tree-commit 2>/dev/null >> $OUT/commit.txt
nvidia-smi > $OUT/nvidia-smi.txt 2>&1
mkdir -p /root/keep
if [[ $STAGES == *peer* ]]; then
  python3 bench/peer_llamacpp.py --build --tgz ../.peers/llama.cpp-0c1e570.tgz 2>&1 | tee -a $OUT/peer.txt
  setsid nohup bash -c "cd $PWD && export PYTHONPATH=$PYTHONPATH && python3 bench/peer_llamacpp.py --make-gguf > /root/keep/gguf.log 2>&1; python3 bench/peer_llamacpp.py --wait 520 --quantize > /root/keep/quant.log 2>&1; echo \$? > /root/keep/quant.rc" >/dev/null 2>&1 &
fi
if [[ $STAGES == *tests* ]]; then
  el tests
  timeout ${TEST_T:-220} python3 -m pytest -q --maxfail=8 -rf tests/gpu/test_quant_definition.py tests/gpu/test_quant_engine.py 2>&1 | tee $OUT/tests.txt | tail -25
fi
if [[ $STAGES == *bench* ]]; then
  el bench
  timeout ${BENCH_T:-230} python3 bench/quant_bench.py $BENCH_ARGS 2>&1 | tee $OUT/quant_bench.txt
fi
if [[ $STAGES == *peer* ]]; then
  el "waiting for quantize"
  while [ ! -f /root/keep/quant.rc ] && [ $(( $(date +%s) - T0 )) -lt 480 ]; do sleep 5; done
  cat /root/keep/gguf.log /root/keep/quant.log >> $OUT/peer.txt 2>/dev/null
  tail -5 /root/keep/build.log >> $OUT/peer.txt 2>/dev/null
  el "quantize rc $(cat /root/keep/quant.rc 2>/dev/null)"; tail -8 $OUT/peer.txt
  if [ "$(cat /root/keep/quant.rc 2>/dev/null)" = 0 ]; then
    timeout $(( 585 - ($(date +%s) - T0) )) python3 bench/peer_llamacpp.py --llama-bench 2>&1 | tee -a $OUT/peer.txt | grep -v "^+"
  fi
  ls -la /root/keep/models 2>&1 | tail -4
fi
if [[ $STAGES == *engine* ]]; then           # foldserve's engine on the llama3-shaped files
  el engine
  timeout ${ENGINE_T:-300} python3 bench/quant_engine_bench.py /root/keep/models/l3-Q8_0.gguf \
    /root/keep/models/l3-Q4_K_M.gguf 2>&1 | tee $OUT/engine.txt | tail -8
fi
el done
