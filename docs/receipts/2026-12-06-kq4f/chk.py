"""Q4_K / Q6_K products (VNNI and portable, grouped, decode shapes) against dot_ref; writes
the matmul outputs to OUT (npz) to compare trees: python chk.py OUT"""
import sys
import numpy as np
import kernels
kernels.init()
from kernels import kquant_cpu as KQ
from kernels.blocks_cpu import F16
rng = np.random.default_rng(7)
res = {}
for kind, nbytes in (("Q4_K", 144), ("Q6_K", 210)):
    K, N = 768, 40
    data = rng.integers(0, 256, (N, K // 256, nbytes), dtype=np.uint8)
    for o in ((0, 2) if kind == "Q4_K" else (208,)):
        data[:, :, o:o + 2] = rng.uniform(1e-4, 1e-2, (N, K // 256, 1)).astype(np.float16).view(np.uint8)
    data = np.ascontiguousarray(data.reshape(N, -1))
    x = rng.standard_normal((21, K)).astype(np.float32)
    x[3, :256] = 0
    ref = KQ.matmul_reference(x, kind, data)
    for vnni in (True, False):
        for M in (1, 2, 3, 4, 5, 8, 9, 13, 21):
            y = KQ.matmul(x[:M], kind, data, vnni=vnni)
            bad = (y.view(np.int32) != ref[:M].view(np.int32)).sum()
            print(kind, "vnni" if vnni else "portable", M, "elements != dot_ref:", bad)
    res[kind] = KQ.matmul(x, kind, data)
    res[kind + "_f64"] = KQ.ref(x, type("W", (), {"dequantize": lambda self: None})()) if False else ref
np.savez(sys.argv[1], **res)
