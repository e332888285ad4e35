pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 120 python3 bench/op_profile.py --shapes llama3-8b --M 64 --sync 2>&1 | grep -v "^  File\|^cupy_backends\|Exception ignored\|^Traceback\|^$" | head -30
timeout 200 python3 -m pytest -q tests/gpu -x 2>&1 | tail -15
timeout 150 python3 bench/op_profile.py --M 1 2>&1 | tail -30
timeout 150 python3 bench/engine_bench.py --what b1,smollm,b64 2>&1
