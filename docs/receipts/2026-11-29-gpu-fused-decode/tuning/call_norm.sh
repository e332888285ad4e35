# tests after the norm fusion, profiles with and without it, engine bench b1 and smollm2
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
timeout 200 python3 -m pytest -q -x tests/gpu 2>&1 | tail -15
for f in 1 0; do echo "### FUSE_NORM $f"; timeout 100 python3 bench/op_profile.py --M 1 --fuse-norm $f 2>&1 | grep -E "==|norm_linear|ops sum|FAULT|Error" ; done
timeout 120 python3 bench/engine_bench.py --what b1,smollm 2>&1
