"""The head GEMV (GLM-4.7-Flash 154,880 x 2048 Q8_0, 337 MB, random blocks) at 1-3 x rows: blocks_vec float32 x against kquant_cpu.q80_matmul (q8_0 x, quantization included), alternated, 1 and 2 threads.
    flock /work/notes/bench.lock env PYTHONPATH=$PWD python docs/receipts/2026-12-05-q8x/head.py
"""
import numpy as np, sys
import kernels; kernels.init()
import numba
from bench.q8_kernels import med, q8_matrix, CORES
from kernels import blocks_vec, kquant_cpu as KQ
rng = np.random.default_rng(0)
H = q8_matrix(rng, 154880, 2048)
x8 = rng.standard_normal((3, 2048)).astype(np.float32)
for t, M in ((1, 1), (2, 1), (1, 2), (1, 3)):
    numba.set_num_threads(t)
    x = x8[:M]
    for name, fn in (("float32 x", lambda: blocks_vec.matmul(x, "Q8_0", H)), ("q8_0 x", lambda: KQ.q80_matmul(x, H))) * 3:
        m, mn = med(fn, 7)
        print(f"head M={M} {t} thread(s) {name:9s} {m*1e3:6.2f} ms median {mn*1e3:6.2f} best  {H.nbytes/mn/1e9:5.1f} GB/s best, {H.nbytes/m/1e9:5.1f} median, on {CORES[0]:.2f} cores")
