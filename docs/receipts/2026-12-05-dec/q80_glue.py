import server  # noqa
import time, timeit
import numpy as np
import kernels; kernels.init()
from kernels import kquant_cpu, qmatmul
from kernels.blocks import Blocks
import numba
numba.set_num_threads(2)
rng = np.random.default_rng(0)
def q8(rows, cols):
    nb = cols // 32
    data = rng.integers(-100, 100, (rows, nb, 34)).astype(np.uint8)
    data[:, :, 0:2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    return Blocks("Q8_0", rows, cols, data.reshape(rows, nb * 34))
x = rng.standard_normal((1, 2048)).astype(np.float32)
for rows in (64, 256, 1024, 2048):
    w = q8(rows, 2048)
    t = min(timeit.repeat(lambda: qmatmul.cpu(x, w, q80=True), number=300, repeat=5)) / 300
    print(rows, "rows: us", round(t * 1e6, 1))
t = min(timeit.repeat(lambda: kquant_cpu.quantize_q80(x), number=1000, repeat=5)) / 1000
print("quantize us", round(t * 1e6, 1))
q, dx = kquant_cpu.quantize_q80(x)
t = min(timeit.repeat(lambda: kquant_cpu.quantize_q80_rows(x, q, dx), number=1000, repeat=5)) / 1000
print("quantize kernel only us", round(t * 1e6, 1))
