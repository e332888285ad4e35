"""Q8_0 x float32 products on the CPU against the machine's memory read bandwidth.

    PYTHONPATH=$PWD python -m bench.q8_kernels [--threads 2] [--reps 5] [--what bw,head,experts,gemm]

bw: a streaming sum over a 2 GB float32 array (numba prange, the threads given), GB/s.
head: x [M, 2048] times a 154,880 x 2048 Q8_0 matrix (GLM-4.7-Flash's head, 337 MB), M = 1, 8:
  GB/s of the matrix bytes and the fraction of bw.
experts: Qwen3-30B-A3B's 8 chosen experts at b1 (gate|up 1536 x 2048, down 2048 x 768, one
  grouped product each, as kernels/moe_cpu.grouped_matmul runs them): us a call, GB/s.
gemm: 512 x rows against 2048 x 2048 and 1536 x 2048 Q8_0: GMAC/s.
Times: the median of --reps calls after one warm call.
"""
from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import numpy as np


def q8_matrix(rng, n, k):
    nb = k // 32
    d = (rng.random((n, nb), np.float32) * 0.01 + 0.001).astype(np.float16)
    q = rng.integers(-127, 128, (n, nb, 32), dtype=np.int8)
    blk = np.empty((n, nb, 34), np.uint8)
    blk[:, :, :2] = d.view(np.uint8).reshape(n, nb, 2)
    blk[:, :, 2:] = q.view(np.uint8)
    return blk.reshape(n, nb * 34)


CORES = [0.0]       # the process's CPU seconds over wall seconds in the last med() (its share)


def med(fn, reps):
    fn()
    ts = []
    c0, w0 = time.process_time(), time.perf_counter()
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    CORES[0] = (time.process_time() - c0) / (time.perf_counter() - w0)
    return float(np.median(ts)), float(min(ts))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--what", default="bw,l2,head,experts,gemm")
    a = ap.parse_args()
    import kernels
    kernels.init()
    import numba
    from numba import njit, prange
    numba.set_num_threads(a.threads)
    from kernels import blocks_vec, moe_cpu
    rng = np.random.default_rng(0)
    what = a.what.split(",")
    bw = None
    if "bw" in what:
        # numpy's max over uint8 (SIMD, the GIL released) on each thread's half of 2 GiB:
        # the bytes stream from memory and the loop costs little (numba's prange sum loops
        # came out at 2-9 GB/s: not vectorized, latency-bound)
        from concurrent.futures import ThreadPoolExecutor
        v = np.ones(2 << 30, np.uint8)
        parts = np.array_split(v, a.threads)
        pool = ThreadPoolExecutor(a.threads)

        def stream():
            return list(pool.map(np.max, parts))
        m, mn = med(stream, a.reps)
        bw = v.nbytes / mn / 1e9
        print(f"bw: stream sum 2 GiB, {a.threads} threads: {v.nbytes / m / 1e9:.1f} GB/s median, {bw:.1f} best, on {CORES[0]:.2f} cores")
        del v
    if "head" in what:
        W = q8_matrix(rng, 154880, 2048)
        for M in (1, 2, 3, 8):
            x = rng.standard_normal((M, 2048)).astype(np.float32)
            m, mn = med(lambda: blocks_vec.matmul(x, "Q8_0", W), a.reps)
            gbs = W.nbytes / m / 1e9
            print(f"head 154880x2048 M={M}: {m*1e3:.1f} ms median ({mn*1e3:.1f} best), {gbs:.2f} GB/s"
                  + (f", {gbs / bw:.2f} of bw" if bw else "") + f", {M*W.shape[0]*2048/m/1e9:.2f} GMAC/s, on {CORES[0]:.2f} cores")
        del W
    if "l2" in what:
        # the kernel's compute ceiling: a matrix that stays in one core's L2 (512 x 2048, 1.1 MB
        # of blocks; 1M multiply-adds a call: blocks_vec runs it on the calling thread alone)
        W = q8_matrix(rng, 512, 2048)
        for M in (1, 2, 3, 4, 8):
            x = rng.standard_normal((M, 2048)).astype(np.float32)
            out = np.empty((M, 512), np.float32)
            rows = blocks_vec.ROW_KERNELS["Q8_0"]
            xs = np.zeros((M, 64), np.float32)

            def go():
                for _ in range(20):            # spans of 64 rows, as a crew's pieces
                    for lo in range(0, 512, 64):
                        rows(x, xs, W, out, lo, lo + 64)
            m, mn = med(go, a.reps)
            print(f"L2-resident 512x2048 M={M}, one thread: {W.nbytes*20/mn/1e9:.2f} GB/s of blocks (best), "
                  f"{20*M*512*2048/mn/1e9:.2f} GMAC/s, on {CORES[0]:.2f} cores")
    if "experts" in what:
        E = 128
        gu = SimpleNamespace(kind="Q8_0", data=np.stack([q8_matrix(rng, 1536, 2048) for _ in range(E)]))
        dn = SimpleNamespace(kind="Q8_0", data=np.stack([q8_matrix(rng, 2048, 768) for _ in range(E)]))
        for M in (1, 8):
            # b1: one token, 8 experts; b8: 8 tokens, random top-8 each -> grouped
            picks = np.sort(np.concatenate([rng.choice(E, 8, replace=False) for _ in range(M)]))
            experts, counts = np.unique(picks, return_counts=True)
            offs = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            R = int(offs[-1])
            x = rng.standard_normal((R, 2048)).astype(np.float32)
            h = rng.standard_normal((R, 768)).astype(np.float32)
            ex = experts.astype(np.int64)
            m1, _ = med(lambda: moe_cpu.grouped_matmul(x, gu, ex, offs), a.reps * 4)
            m2, _ = med(lambda: moe_cpu.grouped_matmul(h, dn, ex, offs), a.reps * 4)
            by1 = len(ex) * gu.data[0].nbytes
            by2 = len(ex) * dn.data[0].nbytes
            print(f"experts M={M} ({len(ex)} experts, {R} rows): gate|up {m1*1e6:.0f} us {by1/m1/1e9:.2f} GB/s;"
                  f" down {m2*1e6:.0f} us {by2/m2/1e9:.2f} GB/s" + (f" ({by1/m1/1e9/bw:.2f}, {by2/m2/1e9/bw:.2f} of bw)" if bw else ""))
        del gu, dn
    if "gemm" in what:
        for n, k in ((2048, 2048), (1536, 2048), (2048, 768)):
            W = q8_matrix(rng, n, k)
            x = rng.standard_normal((512, k)).astype(np.float32)
            m, mn = med(lambda: blocks_vec.matmul(x, "Q8_0", W), a.reps)
            print(f"gemm 512 x {n}x{k}: {m*1e3:.1f} ms median ({mn*1e3:.1f} best), {512*n*k/m/1e9:.2f} GMAC/s ({512*n*k/mn/1e9:.2f} best), on {CORES[0]:.2f} cores")


if __name__ == "__main__":
    main()
