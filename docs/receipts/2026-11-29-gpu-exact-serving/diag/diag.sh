pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
c=bench/sampled_serve_check.py
timeout 120 python3 $c --greedy --out $OUT/g 2>&1 | tail -1
FOLDSERVE_CUDA_GRAPHS=0 timeout 120 python3 $c --greedy --out $OUT/g-nographs 2>&1 | tail -1
head -c 600 $OUT/g/replies.json
