# Sourced by the GPU run scripts of bench/device/: the environment of one device call.
#   - wheels carried in .whl/ (cupy, nvidia-nccl, ...) installed into /tmp/site, no index needed
#   - NCCL_NVLS_ENABLE=0 (NVLink multicast off, as the lent machines ask)
#   - $OUT (default out/) gets nvidia-smi.txt and commit.txt, so every receipt names its commit
set -u
OUT=${OUT:-out}
mkdir -p "$OUT"
if compgen -G ".whl/*.whl" > /dev/null; then
  pip install -q --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
fi
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 NCCL_NVLS_ENABLE=0
nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1; nvidia-smi topo -m >> "$OUT/nvidia-smi.txt" 2>&1
git rev-parse HEAD > "$OUT/commit.txt" 2>/dev/null || true
