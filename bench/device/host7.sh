#!/bin/bash
# Seventh stop, one H200: the prefill's host side (bench/prefill_host.py), the attention
# kernel's SASS and ncu's per-instruction stall samples of one prefill launch. Carry .whl.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
timeout 150 python3 bench/prefill_host.py > $OUT/prefill_host.txt 2>&1; head -40 $OUT/prefill_host.txt
mkdir -p /tmp/k
python3 - <<'PY'
from kernels import common_cuda, attention_cuda as a
open("/tmp/k/att.cu", "w").write("#define HD 128\n#define PF_ 1\n#define PI_ 1\n" + common_cuda.HEADER + a._SRC)
PY
nvcc -arch=sm_90 --std=c++17 -cubin -lineinfo -o /tmp/k/att.cubin /tmp/k/att.cu && cuobjdump -sass /tmp/k/att.cubin > /tmp/k/att.sass
timeout 200 ncu --clock-control none -k attend --section WarpStateStats --section SourceCounters \
  --page source --print-source sass --csv python3 bench/attn_prefill.py --once > /tmp/k/ncu_src.csv 2>&1
wc -l /tmp/k/*; tar czf $OUT/k.tgz -C /tmp k
