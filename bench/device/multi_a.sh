#!/bin/bash
# (A record: bench/device/attn_tc_proto.sh and its .cu were removed after the kernel was adopted; see git 7b0d4ab.)
# First of two device calls on an nvidia-h200-x2 machine (fifth stop): keeps the GGUF's first
# half in /root/keep for multi_b.sh; runs the tensor-core attention prototype; then on two GPU
# ranks with dummy weights: the fingerprint mismatch, the pool step with other rooms, the NCCL
# all-reduce time and speed TP=1 vs TP=2 (bench/multi_gpu.py); then the GPU tests. Writes $OUT.
mkdir -p /root/keep && cp .keep/gguf.part00 /root/keep/
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > $OUT/nvidia-smi.txt; nvidia-smi topo -m >> $OUT/nvidia-smi.txt 2>&1
git log -1 --format=%H > $OUT/commit.txt 2>/dev/null
OUT=$OUT timeout 150 bash bench/device/attn_tc_proto.sh > /dev/null 2>&1; cat $OUT/attn_tc_proto.txt | cut -c1-220 | tail -40
mkdir -p $OUT/multi
FOLDSERVE_MODEL=dummy:smollm2-135m timeout 280 python3 bench/multi_gpu.py --out $OUT/multi --tps 1,2 \
  --stages mismatch,rooms,allreduce,speed --golden .keep/golden.json > $OUT/multi/run.txt 2>&1
grep -E "^(mismatch|rooms|allreduce|speed):" $OUT/multi/run.txt
python3 - $OUT/multi/results.json <<'PY'
import json, sys
R = json.load(open(sys.argv[1]))
for k, v in R.items():
    if isinstance(v, dict) and "output_throughput" in v:
        print(k, "tok/s %.1f" % v["output_throughput"], "tpot p50 %.2f" % v["tpot_ms"]["median"], "ttft p50 %.0f" % v["ttft_ms"]["median"], "failed", v["failed"])
    elif k.startswith(("mismatch", "rooms", "allreduce")) or k.endswith("_ok"):
        print(k, str(v)[:600])
PY
timeout 100 python3 -m pytest -q -x tests/gpu 2>&1 | tail -4 | tee $OUT/tests.txt
