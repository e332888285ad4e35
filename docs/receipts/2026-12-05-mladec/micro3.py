import sys, time
import server  # noqa
import numpy as np
from pathlib import Path
from bench.moe_cpu import Foldserve
import kernels; kernels.init()
from kernels import mla_cpu, mla
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path("/tmp/mla-bench/glm-4.7-flash-L4-Q8_0.gguf"), 2)
ops = f.eng.model.ops
cap = []
inner = ops.mla_attend
def grab(*a, **k):
    cap.append(a); return inner(*a, **k)
ops.mla_attend = grab
f._begin(0)
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, 100))
f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
cap.clear()
f.eng.apply(RoundStep((Chunk(0, 100, (5,)),)))
a = cap[0]
q, ckv, kv_norm, eps, w_ukt, w_uv, nope, pool, rows, inv, scale = a
print(q.shape, ckv.shape, w_ukt.shape, w_ukt.dtype, w_uv.shape, pool.shape, rows.pos)
def tm(name, fn, reps=200):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
    print(f"{name:30s} {np.median(ts)*1e6:8.1f} us  (p10 {np.percentile(ts,10)*1e6:.1f})", flush=True)
ref = mla_cpu.round_attend(*a)
tm("round_attend", lambda: mla_cpu.round_attend(*a))
tm("round_attend prange", lambda: mla_cpu.round_attend(*a, crew=False))
tm("round_attend serial", lambda: mla_cpu.round_attend(*a, parallel=False))
for hb in (1, 2, 3, 4, 5, 10):
    tm(f"crew HB={hb}", lambda: mla_cpu.round_attend(*a, cut_to=(-(-20//hb), hb), crew=True))
    assert (mla_cpu.round_attend(*a, cut_to=(-(-20//hb), hb), crew=True) == ref).all()
assert (mla_cpu.round_attend(*a, parallel=False) == ref).all()
pos = np.asarray(rows.pos, np.int64)
C = 512
tm("latent_rows", lambda: mla.latent_rows(ckv, kv_norm, eps, C, pos, inv))
tm("rope_interleaved q", lambda: mla.rope_interleaved(np.ascontiguousarray(q[:, :, nope:]), pos, inv))
lat = mla.latent_rows(ckv, kv_norm, eps, C, pos, inv)
c = rows.chunks[0]
tm("write", lambda: mla.write(pool, c.table, c.page_rows, c.start, lat))
tm("empty", lambda: None)
