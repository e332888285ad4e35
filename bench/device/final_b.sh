#!/bin/bash
# One device call right after final_a.sh on the same machine: the default model's GGUF
# rebuilt from its two halves (sha256 checked), the golden cases and solo == concurrent on it,
# then speed through the server (b1, 64 concurrent 512/256 on the llama3-8b shape) and
# transformers' generate_batch on the same requests. Writes under $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
mkdir -p $OUT/golden $OUT/speed
cat /root/keep/gguf.part00 .keep/gguf.part01 > /root/keep/m.gguf && sha256sum /root/keep/m.gguf | tee $OUT/golden/gguf_sha256.txt
FOLDSERVE_MODEL=/root/keep/m.gguf timeout 150 python3 bench/multi_gpu.py --out $OUT/golden --tps 1 --stages golden --golden .keep/golden.json > $OUT/golden/golden.txt 2>&1; head -3 $OUT/golden/golden.txt
timeout 300 python3 bench/multi_gpu.py --out $OUT/speed --tps 1 --stages speed --golden .keep/golden.json > $OUT/speed/speed.txt 2>&1; tail -6 $OUT/speed/speed.txt
timeout 150 python3 bench/hf_batch.py > $OUT/hf_batch.txt 2>&1; tail -4 $OUT/hf_batch.txt
