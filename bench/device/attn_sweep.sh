#!/bin/bash
# One device call (fifth stop): attention launch settings side by side (bench/attn_sweep.py),
# then where a llama3-8b decode step goes at 64 and 1 rows (bench/op_profile.py). Writes $OUT.
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 200 python3 bench/attn_sweep.py 2>&1 | tee $OUT/attn_sweep.txt
timeout 200 python3 bench/op_profile.py --shapes llama3-8b --M 64,1 --context 576 2>&1 | tee $OUT/op_profile.txt | tail -40
