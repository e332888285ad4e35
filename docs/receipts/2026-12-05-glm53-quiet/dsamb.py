# dsa_cpu.round_attend at GLM-5.3-Flash's sparse layer shape (64 heads, nope 256, latent 512,
# v 256; indexer 32 x 128 on q_lora 1536, d 4096; kpool 16, topk 2048): a decode row at
# position 40 and a 512-row prefill, both in the dense pass; best of 5 (decode) / 2 (prefill)
import sys, time
from dataclasses import dataclass
import server  # noqa (OPENBLAS_NUM_THREADS=1 first)
import kernels; kernels.init()
import numba, numpy as np
from kernels import dsa_cpu
numba.set_num_threads(1)
H, N, C, V, Hi, Di, QL, d, KP, TOPK = 64, 256, 512, 256, 32, 128, 1536, 4096, 16, 2048
f32 = np.float32; rng = np.random.default_rng(0)
@dataclass
class Ix:
    wq_t: object; wk_t: object; ln_w: object; ln_b: object; wproj_t: object; ape: object; gate_t: object
@dataclass
class Ch:
    table: list; page_rows: int; start: int; slot: int
@dataclass
class Rows:
    spans: list; chunks: list
r = lambda *s: (rng.standard_normal(s) * 0.05).astype(f32)
ix = Ix(r(QL, Hi * Di), r(d, Di), np.ones(Di, f32), np.zeros(Di, f32), r(d, Hi), r(KP, Di), r(d, Di))
w_uk, w_uv_t = r(H, N, C), r(H, C, V)
P = 512
pool = np.zeros((4, P, 1, C), f32); pooled = np.zeros((4, P, 1, Di // KP), f32); rings = np.zeros((1, KP, 2, Di), f32)
def go(T, start):
    rows = Rows([(0, T)], [Ch([0, 1, 2, 3], P, start, 0)])
    return dsa_cpu.round_attend(r(T, H, N), r(T, C), np.ones(C, f32), 1e-6, w_uk, w_uv_t, N, pool, rows, 0.05,
                                ix, r(T, d), r(T, QL), pooled, rings, Hi, TOPK, KP)
go(512, 0); go(1, 40)
for T, start, reps in ((1, 40, 7), (512, 0, 2)):
    ts = []
    for _ in range(reps):
        t = time.process_time(); go(T, start); ts.append(time.process_time() - t)
    print(f"{sys.argv[1]}: T {T}: CPU s (1 thread) best {min(ts) * 1e3:.2f} ms, median {sorted(ts)[len(ts) // 2] * 1e3:.2f} ms  load {open('/proc/loadavg').read().split()[0]}", flush=True)
