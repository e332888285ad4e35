# memory read bandwidth: a streaming xor over 2 GiB of int64 (a plain step-1 loop, which LLVM
# vectorizes), 1 thread and 2 threads (two Python threads each calling the nogil loop on its
# half), best of 4; the process's CPU share beside each
import time, threading
import kernels; kernels.init()
import numpy as np
from numba import njit

@njit(nogil=True, cache=False)
def stream(a):
    acc = np.int64(0)
    for j in range(a.shape[0]):
        acc ^= a[j]
    return acc

a = np.ones(2 << 30 >> 3, np.int64)
stream(a[:64])
n = a.shape[0]
for th in (1, 2, 1, 2):
    best = 1e9; cs = []
    for _ in range(4):
        t0 = time.perf_counter(); c0 = time.process_time()
        if th == 1:
            stream(a)
        else:
            ts = [threading.Thread(target=stream, args=(a[k * n // 2:(k + 1) * n // 2],)) for k in range(2)]
            [t.start() for t in ts]; [t.join() for t in ts]
        dt = time.perf_counter() - t0; best = min(best, dt); cs.append((time.process_time() - c0) / dt)
    print(f"stream {th} thread(s): {a.nbytes / best / 1e9:.1f} GB/s (cores {max(cs):.2f}) load {open('/proc/loadavg').read().split()[0]}", flush=True)
