pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
c=bench/sampled_serve_check.py
timeout 120 python3 $c --greedy --noise greedy --out $OUT/gg 2>&1 | tail -1
timeout 120 python3 $c --greedy --noise none --out $OUT/gn 2>&1 | tail -1
timeout 120 python3 $c --greedy --noise none --server-args "--parallel 1" --out $OUT/gp1 2>&1 | tail -1
