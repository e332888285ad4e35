pip install -q --no-deps --target /tmp/site .whl/*.whl >/dev/null 2>&1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
python3 - <<'PY'
import json
from server.engine.build import open_model
from server.engine.probe import solo_vs_concurrent
eng = open_model("dummy:smollm2-135m", device="cuda", progress=False).engine
for streams, ctx in ((6, 1024), (6, 256), (8, 1024), (8, 256)):
    for paged in (True, False):
        r = solo_vs_concurrent(eng, paged=paged, streams=streams, context=ctx, steps=12)
        print(streams, ctx, json.dumps(r), flush=True)
PY
c=bench/sampled_serve_check.py
timeout 120 python3 $c --greedy --server-args "--context 256" --out $OUT/g256 2>&1 | tail -1
