# attention cost against context and SPAN (op profile, b1)
pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
for sp in 256 128 64; do
  echo "### SPAN $sp"
  timeout 150 python3 bench/op_profile.py --M 1 --context 64,384,2048 --span $sp 2>&1 | grep -E "==|qkv_attend|ops sum"
done
