"""Cold compile of the Q8_0 rows + crew (VNNI and portable): run with NUMBA_CACHE_DIR an empty folder."""
import time, numpy as np, sys
import kernels; kernels.init()
from kernels import kquant_cpu as KQ
rng = np.random.default_rng(0)
d = rng.integers(0, 256, (300, 64 * 34), dtype=np.uint8); d[:, ::34] = 0; d[:, 1::34] = 20
x = rng.standard_normal((70, 2048)).astype(np.float32)
for vnni in (True, False):
    c = time.process_time()
    KQ.q80_matmul(x[:1], d[:10], vnni=vnni)       # rows (serial)
    KQ.q80_matmul(x, d, vnni=vnni)                # the crew member
    print(f"vnni={vnni}: first calls {time.process_time() - c:.2f} CPU s")
