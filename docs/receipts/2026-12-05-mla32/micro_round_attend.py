import time, sys, numpy as np, kernels
kernels.init()
import numba
numba.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
from types import SimpleNamespace
from gguf import GGMLQuantizationType as G
from gguf.quants import quantize
from kernels import mla_cpu as M, mla
H, N, R, C, V, P = 20, 192, 64, 512, 256, 16
rng = np.random.default_rng(0)
kv_b = rng.standard_normal((H, N + V, C), dtype=np.float32) / np.float32(np.sqrt(C))
wk = quantize(np.ascontiguousarray(kv_b[:, :N].transpose(0, 2, 1)).reshape(-1, N), G.Q8_0).reshape(H, C, -1)
wv = quantize(np.ascontiguousarray(kv_b[:, N:]).reshape(-1, C), G.Q8_0).reshape(H, V, -1)
norm = (1 + 0.1 * rng.standard_normal(C)).astype(np.float32)
inv = (1.0 / 10000 ** (np.arange(0, R, 2) / R)).astype(np.float32)
scale = np.float32(1 / np.sqrt(N + R))
pool = np.zeros((64, P, 1, C + R), np.float32)
table = tuple(range(64))
q = rng.standard_normal((1, H, N + R), dtype=np.float32)
ckv = rng.standard_normal((1, C + R), dtype=np.float32)
def rows(start):
    return SimpleNamespace(pos=np.arange(start, start + 1, dtype=np.int32), spans=[(0, 1)],
                           chunks=[SimpleNamespace(table=table, page_rows=P, start=start)])
r = rows(20)
pos = np.asarray(r.pos, np.int64)
def t(name, fn, n=300):
    fn()
    ts = []
    for _ in range(n):
        a = time.perf_counter(); fn(); ts.append(time.perf_counter() - a)
    print(f"{name:30s} median {np.median(ts)*1e6:8.1f} us  best {min(ts)*1e6:8.1f} us")
t("round_attend", lambda: M.round_attend(q, ckv, norm, 1e-6, wk, wv, N, pool, r, inv, scale))
t("latent_rows", lambda: mla.latent_rows(ckv, norm, 1e-6, C, pos, inv))
lat = mla.latent_rows(ckv, norm, 1e-6, C, pos, inv)
t("write", lambda: mla.write(pool, table, P, 20, lat))
t("rope q", lambda: mla.rope_interleaved(np.ascontiguousarray(q[:, :, N:]), pos, inv))
qa = np.empty((H, C + R), np.float32); acc = np.empty(16, np.float32)
qn = np.ascontiguousarray(q[:, :, :N]); qpe = mla.rope_interleaved(np.ascontiguousarray(q[:, :, N:]), pos, inv)
wk8, wv8 = wk.view(np.uint8), wv.view(np.uint8)
t("absorb", lambda: M._absorb(qn, qpe, wk8, True, 0, 1, 0, H, qa, acc))
o3 = rng.standard_normal((1, H, C)).astype(np.float32); l = np.ones(H, np.float32)
out = np.empty((1, H * V), np.float32)
t("expand", lambda: M._expand(o3, l, wv8, True, 0, 1, 0, out, acc))
tables = np.array([table], np.int64); owner = np.zeros(1, np.int64); pr = np.array([P], np.int64)
for nhb in (1, 4):
    HB = H // nhb
    t(f"_run serial {nhb} jobs", lambda: M._run(0, 0, M._NO_CTR, nhb, nhb, HB, 1, qn, qpe, wk8, wv8, True, pool, pos, owner, tables, pr, scale, out))
import cProfile, pstats
pr_ = cProfile.Profile()
pr_.enable()
for _ in range(300):
    M.round_attend(q, ckv, norm, 1e-6, wk, wv, N, pool, r, inv, scale)
pr_.disable()
pstats.Stats(pr_).sort_stats("tottime").print_stats(18)
