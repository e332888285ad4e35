"""The Q8_0 products against q8_0 x (kernels/kquant_cpu.Q8_0_DEF: the head of the families that
opt in, HEAD_Q8_0_X8) timed beside the float32 form of kernels/blocks_vec.py on the same
matrices: an L2-resident 512 x 2048 matrix on one thread at 1, 2, 4, 8 x rows (the kernels'
compute rate), and GLM-4.7-Flash's head (154,880 x 2048, 337 MB) at 1 and 2 x rows on 1 and
2 threads; the int8 times include x's quantization. The two forms alternate, twice.

    PYTHONPATH=$PWD python -m bench.q8_int8_gemv [--reps 5] [--threads 1,2]
"""
from __future__ import annotations

import argparse

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    import kernels
    kernels.init()
    import numba

    from bench.q8_kernels import CORES, med, q8_matrix
    from kernels import blocks_vec, kquant_cpu
    print(f"VNNI {kquant_cpu.VNNI}; numba threads {numba.get_num_threads()}")
    rng = np.random.default_rng(0)
    W = q8_matrix(rng, 512, 2048)
    x8 = rng.standard_normal((8, 2048)).astype(np.float32)
    numba.set_num_threads(1)
    for M in (1, 2, 4, 8):
        x = x8[:M]
        for name, fn in (("float32 x", lambda: blocks_vec.matmul(x, "Q8_0", W)),
                         ("q8_0 x   ", lambda: kquant_cpu.q80_matmul(x, W))) * 2:
            def go():
                for _ in range(20):
                    fn()
            m, mn = med(go, a.reps)
            print(f"L2-resident 512x2048 M={M}, 1 thread, {name}: {W.nbytes * 20 / mn / 1e9:6.2f} GB/s of blocks "
                  f"(best; median {W.nbytes * 20 / m / 1e9:.2f}), on {CORES[0]:.2f} cores")
    del W
    H = q8_matrix(rng, 154880, 2048)
    for t in (int(s) for s in a.threads.split(",")):
        numba.set_num_threads(t)
        for M in (1, 2):
            x = x8[:M]
            for name, fn in (("float32 x", lambda: blocks_vec.matmul(x, "Q8_0", H)),
                             ("q8_0 x   ", lambda: kquant_cpu.q80_matmul(x, H))) * 2:
                m, mn = med(fn, a.reps)
                print(f"head 154880x2048 M={M}, {t} thread(s), {name}: {m * 1e3:6.1f} ms median ({mn * 1e3:.1f} best), "
                      f"{H.nbytes / mn / 1e9:5.1f} GB/s best, {H.nbytes / m / 1e9:5.1f} median, on {CORES[0]:.2f} cores")


if __name__ == "__main__":
    main()
