import sys, time, math, numpy as np
sys.path.insert(0, "/tmp/gdnstep-exp")
import kernels; kernels.init()
from numba import njit, types
from numba.extending import intrinsic
from llvmlite import ir
from kernels.vec_ir import F32, ptr
from kernels.gdn_cpu import _exp16 as exp16
@njit(nogil=True)
def run(lo, hi, buf, out, ref):
    bad = 0; first = -1
    xb = buf.view(np.float32); ob = out.view(np.float32)
    i = lo
    while i < hi:
        for l in range(16): buf[l] = np.uint32(i + l)
        exp16(xb, ob, 0)
        for l in range(16):
            r = np.float32(math.exp(xb[l]))
            ref[0] = r
            rb = ref.view(np.uint32)[0]
            if rb != out[l] and not (r != r and ob[l] != ob[l]):
                bad += 1
                if first < 0: first = i + l
        i += 16
    return bad, first
buf = np.zeros(16, np.uint32); out = np.zeros(16, np.uint32); ref = np.zeros(1, np.float32)
t = time.time()
tot = 0
lo, hi = int(sys.argv[1]), int(sys.argv[2])
bad, first = run(lo, hi, buf, out, ref)
print("range", hex(lo), hex(hi), "bad", bad, "first", hex(first) if first >= 0 else None, f"{time.time()-t:.1f}s")
