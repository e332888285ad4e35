"""Cold compile of what q8all adds to a test run: the numba quantizer (quantize_q80_rows),
then the Q8_0 rows + crew (VNNI, portable: q8x's, now reached by every Q8_0
product of the switched families). Run with NUMBA_CACHE_DIR an empty folder."""
import time

import numpy as np

import kernels

kernels.init()
from kernels import kquant_cpu as KQ  # noqa: E402

rng = np.random.default_rng(0)
d = rng.integers(0, 256, (300, 64 * 34), dtype=np.uint8)
d[:, ::34] = 0
d[:, 1::34] = 20
x = rng.standard_normal((70, 2048)).astype(np.float32)
c = time.process_time()
KQ.quantize_q80(x)
print(f"quantize_q80: first call {time.process_time() - c:.2f} CPU s")
for vnni in (True, False):
    c = time.process_time()
    KQ.q80_matmul(x[:1], d[:10], vnni=vnni)       # rows (serial)
    KQ.q80_matmul(x, d, vnni=vnni)                # the crew member
    print(f"vnni={vnni}: rows + crew first calls {time.process_time() - c:.2f} CPU s")
