"""The Q8_0 kernels alone on an L2-resident 512 x 2048 matrix, one thread: blocks_vec float32 x against kquant_cpu.grouped_q on a quantized x (quantization outside the timing), and quantize_q8_0 alone.
    flock /work/notes/bench.lock env PYTHONPATH=$PWD python docs/receipts/2026-12-05-q8x/l2_kernel.py
"""
import numpy as np, time
import kernels; kernels.init()
import numba
from bench.q8_kernels import med, q8_matrix, CORES
from kernels import blocks_vec, kquant_cpu as KQ
numba.set_num_threads(1)
rng = np.random.default_rng(0)
W = q8_matrix(rng, 512, 2048)
for M in (1, 2, 4):
    x = rng.standard_normal((M, 2048)).astype(np.float32)
    q, dx = KQ.quantize_q8_0(x)
    gs = np.zeros((M, 1, 16), np.int32)
    out = np.empty((M, 512), np.float32)
    offs = np.array([0, M], np.int64)
    f = lambda: [KQ.grouped_q(q, dx, gs, "Q8_0", W[None], KQ._ONE, offs, out) for _ in range(50)]
    g = lambda: [blocks_vec.matmul(x, "Q8_0", W) for _ in range(50)]
    h = lambda: [KQ.quantize_q8_0(x) for _ in range(50)]
    for name, fn in (("float", g), ("int8 kernel only", f), ("float", g), ("int8 kernel only", f)):
        m, mn = med(fn, 5)
        print(M, name, f"{W.nbytes*50/mn/1e9:.2f} GB/s")
    m, mn = med(h, 5); print(M, "quantize_q8_0 alone", f"{mn/50*1e6:.1f} us a call")
