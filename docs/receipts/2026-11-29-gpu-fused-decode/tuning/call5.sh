# tests, per-op profile (b1, and llama3 at 64 rows), engine bench
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 200 python3 -m pytest -q tests/gpu -x 2>&1 | tail -15
timeout 100 python3 bench/op_profile.py --M 1 2>&1 | grep -v "^  File\|^cupy_backends\|Exception ignored\|^$" | tail -30
timeout 60 python3 bench/op_profile.py --M 64 --shapes llama3-8b --sync 2>&1 | grep -v "^  File\|^cupy_backends\|Exception ignored\|^$" | head -14
timeout 180 python3 bench/engine_bench.py 2>&1
