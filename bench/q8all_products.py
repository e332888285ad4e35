"""Q8_0 products against q8_0 x (kernels/kquant_cpu.Q8_0_DEF) beside float32 x
(kernels/blocks_vec.py), at the shapes of the Q8_0 bench files, decode and prefill:

    PYTHONPATH=$PWD python -m bench.q8all_products [--threads 2] [--reps 5] [--what dense,experts]

dense: x [M, K] times one Q8_0 matrix (ops.linear's product: qmatmul.cpu), M = 1 and 512:
  Qwen3-30B-A3B's wqkv 5120 x 2048 and o 2048 x 4096, GLM-4.7-Flash's q_b 5120 x 768.
experts: a MoE layer's grouped products (kernels/moe_cpu.gate_up and grouped_matmul, as
  ops.moe runs them), Qwen3-30B-A3B (128 experts, 768 x 2048, top-8) and Qwen3.5-35B-A3B
  (256 experts, 512 x 2048, top-8): decode (1 token: 8 groups of 1 row) and a pp512 round
  (4096 rows over the experts, the group sizes a seeded multinomial).
Each line: the median (best) of --reps calls after one warm call, x's quantization included,
the weights' GB/s and GMAC/s, and int8 / float time ratio. Random weights.
"""
from __future__ import annotations

import argparse

import numpy as np

from bench.q8_kernels import med, q8_matrix   # random Q8_0 blocks; median (best) of reps


def line(name, tf, ti, nbytes, macs):
    print(f"{name:44s} float {tf[0] * 1e3:8.3f} ms ({tf[1] * 1e3:8.3f})  int8 {ti[0] * 1e3:8.3f} ms "
          f"({ti[1] * 1e3:8.3f})  {nbytes / ti[0] / 1e9:5.1f} vs {nbytes / tf[0] / 1e9:5.1f} GB/s  "
          f"{macs / ti[0] / 1e9:6.1f} vs {macs / tf[0] / 1e9:6.1f} GMAC/s  x{tf[0] / ti[0]:.2f}",
          flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--what", default="dense,experts")
    ap.add_argument("--sizes", default="1,512")
    a = ap.parse_args()
    import kernels
    kernels.init()
    import numba
    numba.set_num_threads(a.threads)
    from kernels import kquant_cpu, moe_cpu, qmatmul
    from kernels.blocks import Blocks, ExpertStack
    rng = np.random.default_rng(0)
    what = a.what.split(",")
    sizes = [int(s) for s in a.sizes.split(",")]
    print(f"threads {a.threads}; loadavg {open('/proc/loadavg').read().split()[:3]}")
    if "dense" in what:
        for name, n, k in (("qwen3 wqkv", 5120, 2048), ("qwen3 o", 2048, 4096),
                           ("glm47flash q_b", 5120, 768)):
            w = Blocks("Q8_0", n, k, q8_matrix(rng, n, k))
            for M in sizes:
                x = rng.standard_normal((M, k)).astype(np.float32)
                tf = med(lambda: qmatmul.cpu(x, w, q8=True), a.reps)
                ti = med(lambda: qmatmul.cpu(x, w, q8=True, q80=True), a.reps)
                line(f"dense {name} {n}x{k} M={M}", tf, ti, w.data.nbytes, M * n * k)
            xq = rng.standard_normal((512, k)).astype(np.float32)
            tq = med(lambda: kquant_cpu.quantize_q80(xq), a.reps)
            print(f"  quantize_q80 512 x {k}: {tq[0] * 1e6:.0f} us "
                  f"(1 x {k}: {med(lambda: kquant_cpu.quantize_q80(xq[:1]), a.reps)[0] * 1e6:.1f} us)")
    if "experts" in what:
        for name, E, ff, k in (("qwen3-30b", 128, 768, 2048), ("qwen3.5-35b", 256, 512, 2048)):
            gate = ExpertStack([Blocks("Q8_0", ff, k, q8_matrix(rng, ff, k)) for _ in range(E)])
            up = ExpertStack([Blocks("Q8_0", ff, k, q8_matrix(rng, ff, k)) for _ in range(E)])
            down = ExpertStack([Blocks("Q8_0", k, ff, q8_matrix(rng, k, ff)) for _ in range(E)])
            for T in sizes:
                if T == 1:
                    experts = np.sort(rng.choice(E, 8, replace=False)).astype(np.int64)
                    counts = np.ones(8, np.int64)
                else:
                    counts = rng.multinomial(T * 8, np.ones(E) / E)
                    experts = np.nonzero(counts)[0].astype(np.int64)
                    counts = counts[experts]
                offs = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
                R = int(offs[-1])
                x = rng.standard_normal((R, k)).astype(np.float32)
                h = rng.standard_normal((R, ff)).astype(np.float32)
                used = len(experts)
                tf = med(lambda: moe_cpu.gate_up(x, gate, up, experts, offs, True, False), a.reps)
                ti = med(lambda: moe_cpu.gate_up(x, gate, up, experts, offs, True, True), a.reps)
                line(f"experts {name} gate|up T={T} ({used} used)", tf, ti,
                     2 * used * gate.data[0].nbytes, 2 * R * ff * k)
                tf = med(lambda: moe_cpu.grouped_matmul(h, down, experts, offs, True, False), a.reps)
                ti = med(lambda: moe_cpu.grouped_matmul(h, down, experts, offs, True, True), a.reps)
                line(f"experts {name} down T={T} ({used} used)", tf, ti,
                     used * down.data[0].nbytes, R * ff * k)


if __name__ == "__main__":
    main()
