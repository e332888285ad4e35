import server  # noqa
import time, threading
import numpy as np
import kernels; kernels.init()
from kernels import blocks_cpu
rng = np.random.default_rng(0)
data = rng.standard_normal((256 * 8, 2048)).astype(np.float32).view(np.uint8)   # 8 routers' rows, 16 MB
x = rng.standard_normal((1, 2048)).astype(np.float32)
mm = blocks_cpu.KERNELS["F32"].serial
out = np.empty((1, 2048), np.float32)
def run(k=50):
    for i in range(k):
        blocks_cpu.matmul(x, "F32", data[(i % 8) * 256:(i % 8 + 1) * 256])
t = time.perf_counter(); run(); t0 = time.perf_counter() - t
# a Python loop on the main thread beside it
stop = [False]; cnt = [0]
def spin():
    while not stop[0]: cnt[0] += 1
th = threading.Thread(target=run); t = time.perf_counter(); th.start()
while th.is_alive(): cnt[0] += 1
t1 = time.perf_counter() - t
print(f"alone {t0 / 50 * 1e3:.3f} ms a call; beside a Python loop {t1 / 50 * 1e3:.3f} ms; loop iterations {cnt[0]}")
print(mm.signatures, getattr(mm, 'targetoptions', None))
run(20)
t = time.perf_counter(); run(); t0 = time.perf_counter() - t
c = 0; t = time.perf_counter()
while time.perf_counter() - t < t0: c += 1
print(f"warm alone {t0 / 50 * 1e3:.3f} ms a call; loop alone in that time {c}")
cnt[0] = 0
th = threading.Thread(target=run); t = time.perf_counter(); th.start()
while th.is_alive(): cnt[0] += 1
t1 = time.perf_counter() - t
print(f"beside {t1 / 50 * 1e3:.3f} ms a call; loop iterations {cnt[0]}")
