"""A prototype, not used by the engine: the Q8_0 GEMV against int8 x (the next step the
receipt docs/receipts/2026-12-05-q8-speed names), timed against the float32 form of
kernels/blocks_vec.py on the same matrices.

    PYTHONPATH=$PWD python -m bench.q8_int8_gemv [--reps 5]

Its definition, for x row i and weight row n (K a multiple of 256): x quantized a 256-block
by kernels/kquant_cpu.quantize (q int8, dx float32); 16 float32 lanes acc, zero; for each pair
p of Q8_0 blocks (64 values) in order: T (16 int32 lanes, lane L = the sum of the 4 products
w[64p + 4L + t] * q[64p + 4L + t], exact; lanes 0-7 block 2p, 8-15 block 2p + 1), dd = d_w
(the lane's block's f16 scale) * dx[p // 4] (float32), acc = fma(dd, float32(T), acc); out =
the lanes' tree ((L, L+8), (L, L+4), (L, L+2), (0, 1)). T by one vpdpbusd: |w| (unsigned)
against q with w's sign applied.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def build():
    import kernels
    kernels.init()
    from llvmlite import ir
    from numba import njit, prange
    from numba.core import cgutils
    from numba.extending import intrinsic

    from kernels import blocks_vec as V
    from kernels.vec_ir import fma, ptr, tree

    i8, i16, i32, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
    f32 = ir.FloatType()
    v64i8, v32i8 = ir.VectorType(i8, 64), ir.VectorType(i8, 32)
    v16i32, v16f, v16i16 = ir.VectorType(i32, 16), ir.VectorType(f32, 16), ir.VectorType(i16, 16)
    R = 4

    def c(v, t=i64):
        return ir.Constant(t, v)

    @intrinsic
    def tile(typingctx, data, n, q, i, dx):
        sig = V._ret(R)(data, n, q, i, dx)

        def codegen(context, builder, signature, vals):
            da = ptr(context, builder, signature.args[0], vals[0])
            qa = ptr(context, builder, signature.args[2], vals[2])
            xa = ptr(context, builder, signature.args[4], vals[4])
            nn, ii = vals[1], vals[3]
            dstride = builder.extract_value(da.strides, 0)
            qstride = builder.extract_value(qa.strides, 0)
            xstride = builder.sdiv(builder.extract_value(xa.strides, 0), c(4))
            d0 = builder.bitcast(da.data, i8.as_pointer())
            q0 = builder.gep(builder.bitcast(qa.data, i8.as_pointer()), [builder.mul(ii, qstride)])
            x0 = builder.gep(xa.data, [builder.mul(ii, xstride)])
            ws = [builder.gep(d0, [builder.mul(builder.add(nn, c(r)), dstride)]) for r in range(R)]
            npairs = builder.sdiv(builder.extract_value(qa.shape, 1), c(64))
            dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(v16i32, [v16i32] * 3),
                                                "llvm.x86.avx512.vpdpbusd.512")
            zero = ir.Constant(v16i32, [0] * 16)
            ahead = builder.mul(dstride, c(V.PREFETCH_ROWS))

            def body(p, st):
                xq = builder.load(builder.bitcast(builder.gep(q0, [builder.mul(p, c(64))]), v64i8.as_pointer()), align=1)
                nx = builder.sub(ir.Constant(v64i8, [0] * 64), xq)
                dxs = builder.load(builder.gep(x0, [builder.sdiv(p, c(4))]))
                dxv = V._splat(builder, dxs)
                out = []
                for r in range(R):
                    b0 = builder.gep(ws[r], [builder.mul(p, c(68))])
                    V._prefetch_l2(builder, builder.gep(b0, [ahead]))
                    lo = builder.load(builder.bitcast(builder.gep(b0, [c(2)]), v32i8.as_pointer()), align=1)
                    hi = builder.load(builder.bitcast(builder.gep(b0, [c(36)]), v32i8.as_pointer()), align=1)
                    w = builder.shuffle_vector(lo, hi, ir.Constant(ir.VectorType(i32, 64), list(range(64))))
                    neg = builder.icmp_signed("<", w, ir.Constant(v64i8, [0] * 64))
                    u = builder.select(neg, builder.sub(ir.Constant(v64i8, [0] * 64), w), w)
                    s = builder.select(neg, nx, xq)
                    T = builder.call(dp, [zero, builder.bitcast(u, v16i32), builder.bitcast(s, v16i32)])
                    h0 = builder.load(builder.bitcast(b0, i16.as_pointer()), align=1)
                    h1 = builder.load(builder.bitcast(builder.gep(b0, [c(34)]), i16.as_pointer()), align=1)
                    hv = builder.insert_element(ir.Constant(v16i16, ir.Undefined), h0, ir.Constant(i32, 0))
                    hv = builder.insert_element(hv, h1, ir.Constant(i32, 1))
                    hv = builder.shuffle_vector(hv, ir.Constant(v16i16, ir.Undefined),
                                                ir.Constant(ir.VectorType(i32, 16), [0] * 8 + [1] * 8))
                    dw = builder.fpext(builder.bitcast(hv, ir.VectorType(ir.HalfType(), 16)), v16f)
                    dd = builder.fmul(dw, dxv)
                    out.append(fma(builder, dd, builder.sitofp(T, v16f), st[r]))
                return out
            st = V._loop(builder, npairs, [ir.Constant(v16f, [0.0] * 16)] * R, body)
            return V._result(context, builder, signature, [tree(builder, v) for v in st])
        return sig, codegen

    @njit(boundscheck=False, nogil=True)
    def rows(q, dx, data, out, lo, hi):
        n = lo
        while n + 4 <= hi:
            r = tile(data, n, q, 0, dx)
            for a in range(4):
                out[0, n + a] = r[a]
            n += 4

    @njit(parallel=True, boundscheck=False)
    def mm(q, dx, data, out):
        N = data.shape[0]
        for ch in prange(N // 64):
            rows(q, dx, data, out, 64 * ch, 64 * ch + 64)
    return rows, mm


def reference(q, dx, data):
    """The definition above in float64 per term (a check of the integer part and the scales;
    the fma chain in float64, so equal within rounding, not bytes)."""
    N = data.shape[0]
    nb = q.shape[1] // 32
    blk = data.reshape(N, nb, 34)
    d = blk[:, :, :2].copy().view(np.float16).reshape(N, nb).astype(np.float64)
    w = blk[:, :, 2:].view(np.int8).astype(np.int64)
    xq = q[0].reshape(nb, 32).astype(np.int64)
    T = (w * xq[None]).sum(axis=2)                       # [N, nb] exact
    dxb = np.repeat(dx[0].astype(np.float64), 8)          # a 256-block = 8 Q8_0 blocks
    return (d * dxb[None] * T).sum(axis=1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    rows, mm = build()
    import numba

    from bench.q8_kernels import CORES, med, q8_matrix
    from kernels import blocks_vec, kquant_cpu
    rng = np.random.default_rng(0)
    W = q8_matrix(rng, 512, 2048)
    x = rng.standard_normal((1, 2048)).astype(np.float32)
    q, dx, _ = kquant_cpu.quantize(x)
    out = np.empty((1, 512), np.float32)
    rows(q, dx, W, out, 0, 512)
    ref = reference(q, dx, W)
    err = np.abs(out[0] - ref).max() / np.abs(ref).max()
    print(f"int8 x: max error against the float64 sum of its terms {err:.2e} of the largest")
    flo = blocks_vec.ROW_KERNELS["Q8_0"]
    xs = np.zeros((1, 64), np.float32)
    fout = np.empty((1, 512), np.float32)

    def go_int():
        for _ in range(20):
            for lo in range(0, 512, 64):
                rows(q, dx, W, out, lo, lo + 64)

    def go_float():
        for _ in range(20):
            for lo in range(0, 512, 64):
                flo(x, xs, W, fout, lo, lo + 64)
    for name, fn in (("float32 x (blocks_vec 4x1)", go_float), ("int8 x (prototype 4x1)", go_int)) * 2:
        m, mn = med(fn, a.reps)
        print(f"L2-resident 512x2048 M=1, one thread, {name}: {W.nbytes * 20 / mn / 1e9:.2f} GB/s of blocks (best), on {CORES[0]:.2f} cores")
    del W
    H = q8_matrix(rng, 154880, 2048)
    hout = np.empty((1, 154880), np.float32)
    for _ in range(2):
        m, mn = med(lambda: blocks_vec.matmul(x, "Q8_0", H), a.reps)
        print(f"head 154880x2048 M=1, {numba.get_num_threads()} threads, float32 x: {m*1e3:.1f} ms median ({mn*1e3:.1f} best), "
              f"{H.nbytes / mn / 1e9:.1f} GB/s best, on {CORES[0]:.2f} cores")
        m, mn = med(lambda: (kquant_cpu.quantize(x), mm(q, dx, H, hout)), a.reps)
        print(f"head 154880x2048 M=1, {numba.get_num_threads()} threads, int8 x:    {m*1e3:.1f} ms median ({mn*1e3:.1f} best), "
              f"{H.nbytes / mn / 1e9:.1f} GB/s best, on {CORES[0]:.2f} cores")


if __name__ == "__main__":
    main()
