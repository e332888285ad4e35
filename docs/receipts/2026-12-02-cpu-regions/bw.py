import numpy as np, time, threading
from numba import njit
@njit(nogil=True, fastmath=True)
def rsum(a, lo, hi):
    s = np.zeros(16, np.float32)
    for i in range(lo, hi, 16):
        for j in range(16):
            s[j] += a[i + j]
    return s.sum()
a = np.ones(96_000_000//4, np.float32)
rsum(a, 0, 160)
def run(nt):
    n = a.shape[0]//16
    def w(k): rsum(a, 16*(k*n//nt), 16*((k+1)*n//nt))
    ts=[threading.Thread(target=w,args=(k,)) for k in range(nt)]
    t=time.perf_counter()
    for x in ts: x.start()
    for x in ts: x.join()
    return time.perf_counter()-t
for nt in (1,2):
    best=min(run(nt) for _ in range(15))
    print(nt, "threads", f"{a.nbytes/best/1e9:.1f} GB/s", f"{best*1e3:.2f} ms for 96 MB")
