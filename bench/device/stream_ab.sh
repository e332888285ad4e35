#!/bin/bash
# A/B of the streaming kernel's weight loads on one H200 (seventh stop): the GEMM definition
# tests under each variant, then bench/gemm_bench.py at decode rows for each. Carry .whl.
# A record of that call (receipt 2026-11-29-stream-loads): the TF_WLOAD switch it set was
# removed after it (WLOAD 0 kept), so on later trees only TF_STREAM_PF still changes a run.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi > $OUT/nvidia-smi.txt
for v in "0 0" "0 1" "1 1"; do
  set -- $v; export TF_WLOAD=$1 TF_STREAM_PF=$2
  echo "== TF_WLOAD=$1 TF_STREAM_PF=$2" | tee -a $OUT/ab.txt
  timeout 100 python3 -m pytest -q -x tests/gpu/test_gemm_definition.py 2>&1 | tail -2 | tee -a $OUT/ab.txt
  timeout 100 python3 bench/gemm_bench.py --rows 1,16,64 > $OUT/gemm_$1$2.txt 2>&1; tail -4 $OUT/gemm_$1$2.txt | tee -a $OUT/ab.txt
done
export TF_WLOAD=0 TF_STREAM_PF=0 TF_TMA_SMALL=0; echo "== TF_TMA_SMALL=0" | tee -a $OUT/ab.txt
timeout 100 python3 bench/gemm_bench.py --rows 64 > $OUT/gemm_notma.txt 2>&1; tail -2 $OUT/gemm_notma.txt | tee -a $OUT/ab.txt
