"""grouped expert products at a pp512-like grouping: GMAC/s of wall and of CPU, by kind."""
import sys, time, os
import server  # noqa
import numpy as np
import kernels; kernels.init()
import numba
from kernels import kquant_cpu as KQ

def rand_stack(kind, E, N, K, rng):
    if kind == "Q8_0":
        nb = K // 32
        d = rng.integers(0, 256, (E, N, nb, 34), dtype=np.uint8)
        h = np.full((E, N, nb), 0.01, np.float16).view(np.uint8).reshape(E, N, nb, 2)
        d[..., :2] = h
        return d.reshape(E, N, nb * 34)
    nbytes = KQ.K_BYTES[kind]
    nb = K // 256
    d = rng.integers(0, 256, (E, N, nb, nbytes), dtype=np.uint8)
    h = np.full((E, N, nb), 0.01, np.float16).view(np.uint8).reshape(E, N, nb, 2)
    if kind == "Q4_K":
        d[..., 0:2] = h; d[..., 2:4] = h
    else:
        d[..., 208:210] = h
    return d.reshape(E, N, nb * nbytes)

def groups(T, E, k, rng):
    ids = np.stack([rng.choice(E, k, replace=False) for _ in range(T)])
    cnt = np.bincount(ids.ravel(), minlength=E)
    ex = np.nonzero(cnt)[0]
    offs = np.concatenate([[0], np.cumsum(cnt[ex])]).astype(np.int64)
    return ex.astype(np.int64), offs

def main():
    thr = int(sys.argv[1]); T = int(sys.argv[2]); reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    numba.set_num_threads(thr)
    rng = np.random.default_rng(0)
    E, k = 128, 8
    ex, offs = groups(T, E, k, rng)
    R = int(offs[-1])
    for kind, N, K in (("Q4_K", 768, 2048), ("Q6_K", 2048, 768) if False else ("Q6_K", 2048, 768), ("Q4_K", 2048, 768), ("Q8_0", 768, 2048), ("Q8_0", 2048, 768)):
        if kind != "Q8_0" and K % 256: continue
        st = rand_stack(kind, E, N, K, rng)
        x = rng.standard_normal((R, K)).astype(np.float32)
        if kind == "Q8_0":
            f = lambda: KQ.q80_grouped(x, st, ex, offs)
        else:
            f = lambda: KQ.grouped_matmul(x, kind, st, ex, offs)
        f()
        best = 1e9; bc = 0
        for _ in range(reps):
            t, c = time.perf_counter(), time.process_time()
            f()
            dt = time.perf_counter() - t; dc = time.process_time() - c
            if dt < best: best, bc = dt, dc
        mac = R * N * K
        print(f"{kind} N={N} K={K} rows={R} groups={len(ex)} thr={thr}: {best*1e3:8.2f} ms  {mac/best/1e9:6.1f} GMAC/s wall  {mac/bc/1e9:6.1f} GMAC/s cpu ({bc/best:.2f} cores)", flush=True)
    print("load", open("/proc/loadavg").read().strip())
if __name__ == "__main__": main()
