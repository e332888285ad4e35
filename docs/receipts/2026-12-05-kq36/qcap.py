"""In the engine: each KQ.quantize call of a pp512 prefill (after warm): shape, contiguity, time,
and the same call again (its parts: copy, quantize_rows alone)."""
import sys, time
from pathlib import Path
import server  # noqa
import numpy as np
import kernels; kernels.init()
from bench.moe_cpu import Foldserve
from kernels import kquant_cpu as KQ
f = Foldserve(Path(sys.argv[1]), 2)
inner = KQ.quantize
log = []
def cap(x):
    t = time.perf_counter(); r = inner(x); dt = time.perf_counter() - t
    log.append((x.shape, x.flags.c_contiguous, x.dtype, dt, x.copy()))
    return r
KQ.quantize = cap
f.prefill(512)
for shape, contig, dt, t0, xc in log:
    M, K = shape
    q = np.empty((M, K), np.int8); dxx = np.empty((M, K // 256), np.float32); gs = np.empty((M, K // 256, 16), np.int32)
    t = time.perf_counter(); KQ.quantize_rows(xc, q, dxx, gs); t1 = time.perf_counter() - t
    t = time.perf_counter(); inner(xc); t2 = time.perf_counter() - t
    print(shape, contig, dt, f"in-situ {t0*1e3:.2f} ms, again {t2*1e3:.2f}, rows alone one thread {t1*1e3:.2f}")
print("load", open("/proc/loadavg").read().strip())
