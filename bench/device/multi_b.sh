#!/bin/bash
# Second device call, right after multi_a.sh on the same warm machine: the default model's
# GGUF rebuilt from its halves (sha256 checked); golden cases and 16 solo == concurrent at
# TP=1 (a communicator of one) and TP=2 over NCCL (bench/multi_gpu.py golden). Writes $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
git log -1 --format=%H > $OUT/commit.txt 2>/dev/null
mkdir -p $OUT/golden
cat /root/keep/gguf.part00 .keep/gguf.part01 > /root/keep/m.gguf && sha256sum /root/keep/m.gguf | tee $OUT/golden/gguf_sha256.txt
FOLDSERVE_MODEL=/root/keep/m.gguf timeout 300 python3 bench/multi_gpu.py --out $OUT/golden --tps 1,2 \
  --stages golden --golden .keep/golden.json > $OUT/golden/run.txt 2>&1
head -c 3000 $OUT/golden/run.txt
