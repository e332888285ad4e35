import kernels; kernels.init()
import numpy as np, time, sys
from kernels import kquant_cpu as KQ
from kernels.blocks import Blocks
rng = np.random.default_rng(0)
def q5_rows(rng, rows, cols):
    d = rng.integers(0, 256, (rows, cols // 32, 22), dtype=np.uint8)
    d[:, :, 0:2] = rng.uniform(1e-3, 1e-2, (rows, cols // 32, 1)).astype(np.float16).view(np.uint8)
    return np.ascontiguousarray(d.reshape(rows, -1))
for K, N in ((1408, 37), (96, 9), (4096, 20)):
    data = q5_rows(rng, N, K)
    # repack check against gguf dequantize
    w = Blocks("Q5_0", N, K, data)
    r8 = KQ.q5_0_as_q8_0(data)
    assert np.array_equal(Blocks("Q8_0", N, K, r8).dequantize(), w.dequantize())
    x = rng.standard_normal((11, K)).astype(np.float32)
    q, dx = KQ.quantize_q80(x)
    want = KQ.q80_definition(q, dx, KQ.q80_padded(data, "Q5_0"), "Q5_0")
    for vnni in (False, True):
        for M in range(1, 12):
            got = KQ.q80_matmul(x[:M], data, vnni=vnni, kind="Q5_0")
            assert np.array_equal(got.view(np.uint32), want[:M].view(np.uint32)), (K, M, vnni, np.abs(got-want[:M]).max())
    ref = KQ.q80_ref(x, w)
    print(K, "ok", np.abs(want - ref).max() / np.abs(ref).max())
