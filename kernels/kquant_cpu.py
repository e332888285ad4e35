"""The K-quants (Q4_K, Q6_K) against int8 activations on the CPU: integer dot products over
the blocks as stored, as llama.cpp's ggml_vec_dot_q4_K_q8_K / q6_K_q8_K do, in one fixed
order per output element.

Why: the float32 form (kernels/blocks_vec.py's ktile: each weight formed as a float32 and a
32-lane fma chain) spends its time forming weights and on 8 multiply-adds an instruction; a
prefill of a Q4_K_M file ran at about half of llama.cpp's pp512 (receipt 2026-12-05-glm45air-cpu).
Here an x row is first quantized (`quantize_rows`, once a product), and then a byte times a
byte is summed 4 at a time into int32 lanes (AVX-512 VNNI's vpdpbusd where the host has it; a
portable vector form elsewhere, the same integers), 64 multiply-adds an instruction.

The definition, for x row i and weight row n:

  x's quantization, per block b of 256 (ggml's quantize_row_q8_K_ref): amax = max |x|, mx the
  first x of that |x|; amax == 0: dx = 0, q = 0; else iscale = -127 / mx (float32),
  q[j] = min(127, rint(iscale * x[j])) (int8), dx = 1 / iscale; gs[g] = the sum of q over
  values 16 g .. 16 g + 15 (int32). A NaN in the block makes dx NaN.

  One output element: 16 float32 lanes acc, all zero; for each block b in order:
      T[L] (int32, L = 0..15) = sum over c = 0..3 of  S_c[L] * sum_{t<4} u[64c + 4L + t] * q[64c + 4L + t]
          u: the block's unsigned quants at the 256 positions (Q4_K: the nibble of run j,
             positions 32 j .. 32 j + 31; Q6_K: the 6-bit value q + 32, ggml's layout as
             kernels/blocks_cpu.deq_q6_k reads it), q the x block's int8
          S_c[L]: Q4_K the 6-bit scale of the run position 64c + 4L lies in (sc_{2c} for
             L < 8, else sc_{2c+1}); Q6_K the int8 scale of its 16 (sc[4c + L // 4])
      Q6_K: T[L] -= 32 * sc_L * gs[L]             (lane L takes the -32 of group L; exact)
      Q4_K: Mv[L] (int32) = m_L * (gs[2L] + gs[2L+1]) for L < 8 (the 6-bit mins), 0 for L >= 8
      dd = d * dx_b  (float32; d the block's f16 scale widened);  Q4_K: ndm = -(dmin * dx_b)
          (the float32 product, its sign flipped)
      both:  acc[L] = fma(dd, float32(T[L]), acc[L])         (one rounding: a fused multiply-add)
      Q4_K, then: acc[L] = fma(ndm, float32(Mv[L]), acc[L])  (every lane, Mv = 0 in 8..15)
  out = tree(acc), the lanes (L, L+8) added, then (L, L+4), (L, L+2), (0, 1).

  fma(a, b, c) is a * b + c rounded once to float32 (IEEE fusedMultiplyAdd): the tiles'
  llvm.fma.v16f32 (vfmadd / vfnmadd here), dot_ref's fma32_scalar (float64 product, sum rounded
  to odd, then to float32; no fma instruction).

The integer sums are exact whatever order computes them (every |T| < 2^31: 256 * 15 * 127 *
63 for Q4_K, 256 * 63 * 127 * 128 for Q6_K), so the VNNI form (vpmaddubsw's pairs, then
vpdpwssd with the scales: T's lanes directly), the portable form and the scalar reference
(`dot_ref`) give the same int32s; the float operations are the ones above,
named one by one in the vector IR (each fma an llvm.fma call; no other contraction, no
reassociation). With VNNI the tiles read
x's gs and dx as pack_aux lays them out (Q4_K: gs's pair sums as float32; Q6_K: gs as int16,
ready for vpmaddwd; a tile's 8 dx side by side, so the 8 products d * dx_c (and dmin * dx_c, then negated) of a block are one vector multiply, each
lane the scalar product): the same integers and float operations. An element's bytes
depend on its weight row and its x row alone: batch invariance by construction, decode rows
== prefill rows, a row alone == in its group (tests/model/test_kquant_q8.py).

What it computes is x's quantized copy, dx_b * q, times the weights d * sc * q - dmin * m
(Q4_K), d * sc * (q - 32) (Q6_K), up to float32 rounding of the per-block terms: `ref`
is that definition in float64. The activations' rounding (|error| <= dx_b / 2 an element,
relative 1/254 of the block's largest) is what llama.cpp's CPU kernels do for these kinds.

Q8_0 weights against x quantized to ggml's q8_0 blocks (32 int8 and an f16 scale) have their own
definition, Q8_0_DEF (below, `q80_matmul`, `q80_grouped`; `q80_definition` its numpy form,
`quantize_q8_0` the numpy form of x's quantization, `quantize_q80` its numba form): the same
rows / crew drivers over a tile of its own; Q5_0 weights take the same definition on their
Q8_0 repack (`q5_0_as_q8_0`; tiles reading the Q5_0 blocks as stored). The ops backends take
it for every Q8_0 and Q5_0 product of the families that opt in (their Q8_0_X8:
kernels/ops_cpu.Ops.q80), the others keep float32 x (kernels/blocks_vec.py).
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import math  # noqa: E402

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
import numba as _numba  # noqa: E402
from numba import njit  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

from kernels import blocks_vec as V  # noqa: E402
from kernels import halves  # noqa: E402
# the crew member's helpers as module globals, not as closure cells of _make_crew: numba keys a
# cached closure by its cells pickled, and a dispatcher pickles with a uuid drawn afresh in each
# process, so the member missed the cache in every new process and compiled again (~1.3 s a kind)
from kernels.team_cpu import WIDTH as _WIDTH  # noqa: E402
from kernels.team_cpu import finish as _finish, region_piece as _region_piece, wait as _wait  # noqa: E402
from kernels.vec_ir import half as _halfload, prefetch_l2 as _prefetch_l2, ptr as _ptr  # noqa: E402
from kernels.vec_ir import splat as _splat, tree as _tree  # noqa: E402

QK = 256
K_BYTES = {"Q4_K": 144, "Q6_K": 210}
KINDS = tuple(K_BYTES)

_i8, _i32, _i64 = ir.IntType(8), ir.IntType(32), ir.IntType(64)
_f32 = ir.FloatType()
_v64i8, _v32i8, _v16i8 = ir.VectorType(_i8, 64), ir.VectorType(_i8, 32), ir.VectorType(_i8, 16)
_v16i32, _v8i32 = ir.VectorType(_i32, 16), ir.VectorType(_i32, 8)
_v32i16 = ir.VectorType(ir.IntType(16), 32)
_v8f = ir.VectorType(ir.FloatType(), 8)
_v16f = ir.VectorType(_f32, 16)
_v64i32 = ir.VectorType(_i32, 64)


def _host_vnni() -> bool:
    """numba compiles for this host (no NUMBA_CPU_NAME) and it has AVX-512 VNNI + BW."""
    from numba.core import config
    if config.CPU_NAME:
        return False
    import llvmlite.binding as ll
    try:
        f = ll.get_host_cpu_features()
        return bool(f.get("avx512vnni") and f.get("avx512bw") and f.get("avx512f"))
    except Exception:
        return False


VNNI = _host_vnni()


def _host_gfni() -> bool:
    """The host has GFNI (gf2p8affineqb) at 512 bits: the Q6_K unpack of _q6k_gfni."""
    from numba.core import config
    if config.CPU_NAME:
        return False
    import llvmlite.binding as ll
    try:
        f = ll.get_host_cpu_features()
        return bool(f.get("gfni") and f.get("avx512bw"))
    except Exception:
        return False


GFNI = _host_gfni()
# gf2p8affineqb's matrix a qword: result bit i = parity(x & byte (7 - i)); _HI_NIB: x >> 4
_HI_NIB = 0x1020408000000000


# ---------------------------------------------------------------- x -> int8 blocks
@njit(cache=True, boundscheck=False, nogil=True)
def quantize_rows(x, q, dx, gs):
    """x [M, K] float32 -> q [M, K] int8, dx [M, K/256] float32, gs [M, K/256, 16] int32 (the
    definition above). A block's largest |x| is found as the largest of x's bits with the sign
    cleared (an int32 max: it vectorizes; for non-NaN floats the same order), a NaN as bits above
    inf's, and mx as the first x whose |x| has those bits (the first of the largest |x|)."""
    M, K = x.shape
    xi = x.view(np.int32)
    for i in range(M):
        for b in range(K // 256):
            o = 256 * b
            m = np.int32(0)
            for j in range(256):
                m = max(m, xi[i, o + j] & np.int32(0x7FFFFFFF))
            if m > np.int32(0x7F800000) or m == 0:      # a NaN in the block, or every |x| zero
                dx[i, b] = np.float32(np.nan) if m != 0 else np.float32(0.0)
                for j in range(256):
                    q[i, o + j] = 0
                for g in range(16):
                    gs[i, b, g] = 0
                continue
            mx = np.float32(0.0)
            for j in range(256):
                if (xi[i, o + j] & np.int32(0x7FFFFFFF)) == m:
                    mx = x[i, o + j]
                    break
            iscale = np.float32(np.float32(-127.0) / mx)
            for j in range(256):
                t = np.int32(np.rint(np.float32(iscale * x[i, o + j])))
                q[i, o + j] = np.int8(min(t, np.int32(127)))
            dx[i, b] = np.float32(np.float32(1.0) / iscale)
            for g in range(16):
                s = np.int32(0)
                for j in range(16):
                    s += np.int32(q[i, o + 16 * g + j])
                gs[i, b, g] = s


def quantize(x: np.ndarray):
    """(q, dx, gs) of x [M, K] float32 (K a multiple of 256)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    M, K = x.shape
    if K % QK:
        raise ValueError(f"kquant_cpu: K = {K} is not a multiple of {QK}")
    q = np.empty((M, K), np.int8)
    dx = np.empty((M, K // QK), np.float32)
    gs = np.empty((M, K // QK, 16), np.int32)
    if halves.wanted(M):            # a row's quantization is its own: two halves, two threads
        halves.pair(lambda a, b: quantize_rows(x[a:b], q[a:b], dx[a:b], gs[a:b]), M // 2, M)
    else:
        quantize_rows(x, q, dx, gs)
    return q, dx, gs


# ---------------------------------------------------------------- the scalar reference
@njit(cache=True, boundscheck=False, nogil=True)
def _q4k_sm(blk):
    s = np.empty(8, np.int64)
    m = np.empty(8, np.int64)
    sc = blk[4:16]
    for j in range(8):
        if j < 4:
            s[j] = np.int64(sc[j]) & 63
            m[j] = np.int64(sc[j + 4]) & 63
        else:
            s[j] = (np.int64(sc[j + 4]) & 15) | ((np.int64(sc[j - 4]) >> 6) << 4)
            m[j] = (np.int64(sc[j + 4]) >> 4) | ((np.int64(sc[j]) >> 6) << 4)
    return s, m


@njit(cache=True, boundscheck=False, nogil=True)
def _u(kind6, blk, p):
    """The unsigned quant at position p of a block (Q4_K nibble; Q6_K q + 32)."""
    if not kind6:
        c = p // 64
        j = p - 64 * c
        v = np.int64(blk[16 + 32 * c + (j & 31)])
        return (v & 15) if j < 32 else (v >> 4)
    h = p // 128
    r = p - 128 * h
    g = r // 32
    l = r - 32 * g
    a = np.int64(blk[64 * h + l + (32 if (g & 1) else 0)])
    hh = np.int64(blk[128 + 32 * h + l])
    low = (a & 15) if g < 2 else (a >> 4)
    return low | (((hh >> (2 * g)) & 3) << 4)


@njit(cache=True, boundscheck=False, nogil=True)
def dot_ref(kind6, wrow, q, dx, gs, f16):
    """One output element by the definition, in scalar loops (the reference the vector forms
    are held to byte for byte): kind6 False for Q4_K, True for Q6_K; wrow the weight row's
    bytes, q / dx / gs one x row's quantization."""
    nbytes = 210 if kind6 else 144
    nb = q.shape[0] // 256
    accf = np.zeros(16, np.float32)
    T = np.zeros(16, np.int64)
    for b in range(nb):
        blk = wrow[b * nbytes:(b + 1) * nbytes]
        xq = q[256 * b:256 * b + 256]
        if kind6:
            d = f16[np.int64(blk[208]) | (np.int64(blk[209]) << 8)]
            sc6 = blk[192:208].view(np.int8)
        else:
            d = f16[np.int64(blk[0]) | (np.int64(blk[1]) << 8)]
            dmin = f16[np.int64(blk[2]) | (np.int64(blk[3]) << 8)]
            s, m = _q4k_sm(blk)
        for L in range(16):
            T[L] = 0
        for c in range(4):
            for L in range(16):
                acc = np.int64(0)
                for t in range(4):
                    p = 64 * c + 4 * L + t
                    acc += _u(kind6, blk, p) * np.int64(xq[p])
                if kind6:
                    S = np.int64(sc6[4 * c + L // 4])
                else:
                    S = s[2 * c] if L < 8 else s[2 * c + 1]
                T[L] += S * acc
        dd = np.float32(d * dx[b])
        if kind6:
            for L in range(16):
                T[L] -= 32 * np.int64(sc6[L]) * np.int64(gs[b, L])
            for L in range(16):
                accf[L] = fma32_scalar(dd, np.float32(np.int32(T[L])), accf[L])
        else:
            ndm = -np.float32(dmin * dx[b])
            for L in range(16):
                mv = m[L] * (np.int64(gs[b, 2 * L]) + np.int64(gs[b, 2 * L + 1])) if L < 8 else np.int64(0)
                a = fma32_scalar(dd, np.float32(np.int32(T[L])), accf[L])
                accf[L] = fma32_scalar(ndm, np.float32(np.int32(mv)), a)
    return _tree_ref(accf, 16)


@intrinsic
def _f64_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], _i64)
    return _numba.types.int64(_numba.types.float64), codegen


@intrinsic
def _bits_f64(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return _numba.types.float64(_numba.types.int64), codegen


@njit(cache=True, boundscheck=False, nogil=True)
def fma32_scalar(a, b, c):
    """a * b + c of three float32 rounded once to float32 (an IEEE fused multiply-add), in plain
    float64 arithmetic (fma32's method, one element): the product exact in float64, the sum's
    error by TwoSum, the float64 sum rounded to odd (its last bit set where the sum was inexact
    and it is even), then to float32: with 53 >= 24 + 2 bits the double rounding is the single
    one. No fma instruction: the reference the tiles' llvm.fma are held to."""
    p = np.float64(a) * np.float64(b)
    cc = np.float64(c)
    s = p + cc
    bp = s - cc
    err = (p - bp) + (cc - (s - bp))
    if err != 0.0 and math.isfinite(s):
        bits = _f64_bits(s)
        if (bits & 1) == 0:        # s != 0 here (a zero sum is exact); step toward the error
            bits = bits + 1 if (err > 0.0) == (s > 0.0) else bits - 1
            s = _bits_f64(bits)
    return np.float32(s)


@njit(cache=True, boundscheck=False, nogil=True)
def _tree_ref(v, n):
    a = v.copy()
    h = n // 2
    while h >= 2:
        for L in range(h):
            a[L] = np.float32(a[L] + a[L + h])
        h //= 2
    return np.float32(a[0] + a[1])


@njit(cache=True, boundscheck=False, nogil=True)
def matmul_ref_rows(kind6, q, dx, gs, data, f16, out):
    for i in range(q.shape[0]):
        for n in range(data.shape[0]):
            out[i, n] = dot_ref(kind6, data[n], q[i], dx[i], gs[i], f16)


# ---------------------------------------------------------------- the vector form
def _c(v, t=_i32):
    return ir.Constant(t, v)


def _bvec(v, n=64):
    return ir.Constant(ir.VectorType(_i8, n), [v] * n)


def _load(builder, base, off, ty):
    p = builder.gep(base, [off if isinstance(off, ir.Value) else _c(off, _i64)])
    return builder.load(builder.bitcast(p, ty.as_pointer()), align=1)


def _concat(builder, a, b):
    n = a.type.count
    return builder.shuffle_vector(a, b, ir.Constant(ir.VectorType(_i32, 2 * n), list(range(2 * n))))


def _scaled_dot(builder, T, w, x, s16, s32, vnni):
    """T + (16 int32 lanes, lane L = s * sum_{t<4} w[4L + t] (unsigned) * x[4L + t] (signed)),
    the scale s constant over a lane's 4 bytes: s16 <32 x i16> a pair of bytes, s32 <16 x
    i32> a lane. VNNI: vpmaddubsw (pairs, within int16: 2 * 63 * 127 at most) then vpdpwssd
    (pairs of pairs times the scale, added to T); elsewhere the same integers in plain ops."""
    if vnni:
        mad = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v32i16, [_v64i8, _v64i8]),
                                             "llvm.x86.avx512.pmaddubs.w.512")
        dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16i32, [_v16i32] * 3),
                                            "llvm.x86.avx512.vpdpwssd.512")
        pairs = builder.call(mad, [w, x])
        return builder.call(dp, [T, builder.bitcast(pairs, _v16i32), builder.bitcast(s16, _v16i32)])
    p = builder.mul(builder.zext(w, _v64i32), builder.sext(x, _v64i32))
    parts = [builder.shuffle_vector(p, ir.Constant(_v64i32, ir.Undefined),
                                    ir.Constant(_v16i32, [4 * L + t for L in range(16)])) for t in range(4)]
    dp4 = builder.add(builder.add(parts[0], parts[1]), builder.add(parts[2], parts[3]))
    return builder.add(T, builder.mul(dp4, s32))


def _dpwssd(builder, T, a, b):
    """T + (lane L: a.lo16 * b.lo16 + a.hi16 * b.hi16, int16 products summed in int32):
    AVX-512 VNNI's vpdpwssd."""
    dp = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16i32, [_v16i32] * 3),
                                        "llvm.x86.avx512.vpdpwssd.512")
    return builder.call(dp, [T, a, b])


def _q4k_weights(builder, base):
    """A Q4_K block's (W_c for c < 4: <64 x i8> unsigned nibbles in position order, S_c
    <16 x i32> run scales a lane, m <8 x i32> the mins, d, dmin)."""
    d = _halfload(builder, base)
    dmin = _halfload(builder, builder.gep(base, [_c(2, _i64)]))
    # the 12 bytes as three 32-bit words, unpacked 4 scales or mins at a time (ggml's kmask
    # steps: s0..3 = u0 & 63, s4..7 = (u2 & 15) | (u0 >> 6) << 4, m0..3 = u1 & 63,
    # m4..7 = (u2 >> 4) | (u1 >> 6) << 4, byte by byte)
    u = [_load(builder, base, 4 + 4 * k, _i32) for k in range(3)]
    k1, k2, k3 = _c(0x3F3F3F3F), _c(0x0F0F0F0F), _c(0x03030303)
    s_lo = builder.and_(u[0], k1)
    s_hi = builder.or_(builder.and_(u[2], k2), builder.shl(builder.and_(builder.lshr(u[0], _c(6)), k3), _c(4)))
    m_lo = builder.and_(u[1], k1)
    m_hi = builder.or_(builder.and_(builder.lshr(u[2], _c(4)), k2), builder.shl(builder.and_(builder.lshr(u[1], _c(6)), k3), _c(4)))
    v8i8 = ir.VectorType(_i8, 8)
    sb = builder.bitcast(V._vec(builder, [s_lo, s_hi], _i32), v8i8)
    mb = builder.bitcast(V._vec(builder, [m_lo, m_hi], _i32), v8i8)
    sv = builder.zext(sb, _v8i32)
    mv = builder.shuffle_vector(builder.zext(mb, _v8i32), ir.Constant(_v8i32, [0] * 8),
                                ir.Constant(_v16i32, list(range(8)) + [8] * 8))     # lanes 8..15: 0
    W, S = [], []
    for c in range(4):
        qv = _load(builder, base, 16 + 32 * c, _v32i8)
        W.append(_concat(builder, builder.and_(qv, _bvec(15, 32)), builder.lshr(qv, _bvec(4, 32))))
        S.append(builder.shuffle_vector(sv, ir.Constant(_v8i32, ir.Undefined),
                                        ir.Constant(_v16i32, [2 * c] * 8 + [2 * c + 1] * 8)))
    sv16 = builder.zext(sb, ir.VectorType(ir.IntType(16), 8))
    S16 = [builder.shuffle_vector(sv16, ir.Constant(sv16.type, ir.Undefined),
                                  ir.Constant(ir.VectorType(_i32, 32), [2 * c] * 16 + [2 * c + 1] * 16))
           for c in range(4)]
    return W, S, S16, mv, d, dmin


def _q6k_gfni(builder, base):
    """A Q6_K block's W_c (as _q6k_weights) with GFNI: per half h, AB = its 64 ql bytes, hh its
    32 qh bytes in both halves of a vector; W = (AB & 15) | H01 and (AB >> 4) | H23, H the qh
    bit pair of each quarter moved to bits 4-5 by one gf2p8affineqb (a matrix a half)."""
    gf = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v64i8, [_v64i8, _v64i8, _i8]),
                                        "llvm.x86.vgf2p8affineqb.512")

    def mat(lo, hi):
        return builder.bitcast(ir.Constant(ir.VectorType(_i64, 8), [lo] * 4 + [hi] * 4), _v64i8)
    pair = [(1 << (2 * k)) << 24 | (1 << (2 * k + 1)) << 16 for k in range(4)]   # bits 2k, 2k+1 -> 4, 5
    W = []
    for h in range(2):
        ab = _load(builder, base, 64 * h, _v64i8)
        hh = _load(builder, base, 128 + 32 * h, _v32i8)
        both = _concat(builder, hh, hh)
        h01 = builder.call(gf, [both, mat(pair[0], pair[1]), _c(0, _i8)])
        h23 = builder.call(gf, [both, mat(pair[2], pair[3]), _c(0, _i8)])
        hi = builder.call(gf, [ab, mat(_HI_NIB, _HI_NIB), _c(0, _i8)])
        W += [builder.or_(builder.and_(ab, _bvec(15)), h01), builder.or_(hi, h23)]
    return W


def _q6k_weights(builder, base, gfni=False):
    """A Q6_K block's (W_c: <64 x i8> unsigned q + 32 in position order, S_c <16 x i32>, the
    16 scales <16 x i32>, d). gfni: the unpack by _q6k_gfni (the same bytes; fewer instructions
    in the one-x-row tiles, more in the 2x4 loop as LLVM schedules it: used where C == 1)."""
    d = _halfload(builder, builder.gep(base, [_c(208, _i64)]))
    scv = builder.sext(_load(builder, base, 192, _v16i8), _v16i32)

    def k(v):
        return _bvec(v, 32)
    S = [builder.shuffle_vector(scv, ir.Constant(_v16i32, ir.Undefined),
                                ir.Constant(_v16i32, [4 * c + L // 4 for L in range(16)])) for c in range(4)]
    sc16 = builder.trunc(scv, ir.VectorType(ir.IntType(16), 16))
    S16 = [builder.shuffle_vector(sc16, ir.Constant(sc16.type, ir.Undefined),
                                  ir.Constant(ir.VectorType(_i32, 32), [4 * c + l // 8 for l in range(32)]))
           for c in range(4)]
    W = []
    if gfni:
        return _q6k_gfni(builder, base), S, S16, scv, d
    for h in range(2):
        a, b, hh = (_load(builder, base, 64 * h, _v32i8), _load(builder, base, 64 * h + 32, _v32i8),
                    _load(builder, base, 128 + 32 * h, _v32i8))
        u = [builder.or_(builder.and_(a, k(15)), builder.shl(builder.and_(hh, k(3)), k(4))),
             builder.or_(builder.and_(b, k(15)), builder.shl(builder.and_(builder.lshr(hh, k(2)), k(3)), k(4))),
             builder.or_(builder.lshr(a, k(4)), builder.shl(builder.and_(builder.lshr(hh, k(4)), k(3)), k(4))),
             builder.or_(builder.lshr(b, k(4)), builder.shl(builder.lshr(hh, k(6)), k(4)))]
        W += [_concat(builder, u[0], u[1]), _concat(builder, u[2], u[3])]
    return W, S, S16, scv, d


ONE_ROW_FORM = True
try:            # the inline asm of _opaque / _dpwssd_asm: numba's JIT parses it with this
    import llvmlite.binding as _llb
    _llb.initialize_native_asmparser()
except Exception:               # no parser: the forms without asm (_make_tile's body)
    ONE_ROW_FORM = False


def _opaque(builder, v):
    """v through an empty asm (the same register): LLVM cannot see that it is a splat, so a
    vector multiply by it stays one vmulps (not a scalar multiply and a broadcast)."""
    return builder.asm(ir.FunctionType(v.type, [v.type]), "", "=v,0", [v], False)


def _pmaddwd(builder, a, b):
    """lane L: a.lo16 * b.lo16 + a.hi16 * b.hi16 (int16 products summed in int32): vpmaddwd."""
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16i32, [_v32i16, _v32i16]),
                                        "llvm.x86.avx512.pmaddw.d.512")
    return builder.call(fn, [builder.bitcast(a, _v32i16), builder.bitcast(b, _v32i16)])


def _dpwssd_asm(builder, T, a, b):
    """T + pmaddwd(a, b) as one vpdpwssd in inline asm (the same int32s as _dpwssd): LLVM's
    tuning for this host otherwise splits a vpdpwssd chain into vpmaddwd + vpaddd."""
    return builder.asm(ir.FunctionType(_v16i32, [_v16i32] * 3), "vpdpwssd $3, $2, $0", "=v,0,v,v",
                       [T, builder.bitcast(a, _v16i32), builder.bitcast(b, _v16i32)], False)


def _store_opaque(builder, v, slot):
    """*slot = v (a <16 x float> on the stack) by an asm store: LLVM neither forwards the lanes
    to later loads nor keeps them in registers, so each lane's later splat is a broadcast load
    folded into its multiply (vmulps m32{1to16}: no shuffle, no extra multiply)."""
    builder.asm(ir.FunctionType(ir.VoidType(), [v.type, slot.type]), "vmovups $0, ($1)",
                "v,r,~{memory}", [v, slot], True)


def _fma(builder, a, b, c):
    """a * b + c of <16 x float> lanes, each rounded once (llvm.fma.v16f32: vfmadd on the
    hosts with FMA, a correctly rounded library fma elsewhere)."""
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16f, [_v16f] * 3), "llvm.fma.v16f32")
    return builder.call(fn, [a, b, c])


def _one_row_body(builder, q6, wts, qps, xps, gps, b, out, packed=False, dslot=None):
    """One block of the R weight rows (their unpacked `wts`) against the C x rows of qps / xps
    / gps (VNNI; R == 1 or C == 1): the definition's integers and float operations, each
    lane's as in _make_tile's body, in fewer instructions: T's chain as vpmaddwd then vpdpwssd
    (asm), d * dx_b as one vector multiply of d's and dx_b's splats (each lane the scalar
    product), Q4_K's mins as one vpmaddwd (lanes 8..15: the pair (0, 0) times gs: 0).
    packed (Q4_K): gps point at `aux` rows (pack_aux: the int16 pairs of gs a block, and at a
    tile's first row the C rows' dx); dslot (with packed, 2 <= C <= 8): the products d * dx_c and
    dmin * dx_c of a block formed by one vector multiply (each lane the scalar product
    the definition names), stored, and read back as the broadcast operand of each pair's
    multiply."""
    mad = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v32i16, [_v64i8, _v64i8]),
                                         "llvm.x86.avx512.pmaddubs.w.512")
    C = len(qps)
    rs = []
    for wt in wts:
        r = {"W": wt[0], "S16": wt[2], "dv": _opaque(builder, _splat(builder, wt[4], 16))}
        if q6:
            r["scv"] = wt[3]
            if packed:      # lane L: the int16 -32 sc_L in its low half, 0 in its high half
                r["scp"] = builder.and_(builder.mul(wt[3], ir.Constant(_v16i32, [-32] * 16)),
                                        ir.Constant(_v16i32, [0xFFFF] * 16))
        else:
            r["mpair"] = builder.or_(wt[3], builder.shl(wt[3], ir.Constant(_v16i32, [16] * 16)))
            if packed:      # the mins as float32 (0 in lanes 8..15): exact
                r["mwf"] = builder.sitofp(wt[3], _v16f)
            r["dmv"] = _opaque(builder, _splat(builder, wt[5], 16))
        rs.append(r)
    out = list(out)
    gblk = 32 if packed else 16
    if dslot is not None:           # [d x 8 | dmin x 8] * [dx_0..7 | dx_0..7] (Q6_K: d twice), lane by lane
        r = rs[0]
        dw = r["dv"] if q6 else builder.shuffle_vector(r["dv"], r["dmv"], ir.Constant(_v16i32, [0] * 8 + [16] * 8))
        dxp = builder.bitcast(builder.gep(gps[0], [builder.add(builder.mul(b, _c(gblk, _i64)), _c(16, _i64))]),
                              _v16f.as_pointer())
        prod = builder.fmul(dw, builder.load(dxp, align=4))
        if not q6:      # lanes 8..15: -(dmin * dx_c), the sign flipped after the product (as the other forms)
            prod = builder.bitcast(builder.xor(builder.bitcast(prod, _v16i32),
                                               ir.Constant(_v16i32, [0] * 8 + [-0x80000000] * 8)), _v16f)
        _store_opaque(builder, prod, dslot)
        dsf = builder.bitcast(dslot, _f32.as_pointer())
    for c in range(C):
        X = [_load(builder, qps[c], builder.add(builder.mul(b, _c(256, _i64)), _c(64 * k, _i64)), _v64i8)
             for k in range(4)]
        if dslot is None:
            dxv = _splat(builder, builder.load(builder.gep(xps[c], [b])), 16)
        g = builder.load(builder.bitcast(builder.gep(gps[c], [builder.mul(b, _c(gblk, _i64))]),
                                         _v16i32.as_pointer()), align=4)
        if packed:
            gw = g
        elif not q6:
            g16 = builder.bitcast(builder.trunc(g, ir.VectorType(ir.IntType(16), 16)), _v8i32)
            gw = builder.shuffle_vector(g16, ir.Constant(_v8i32, [0] * 8), ir.Constant(_v16i32, list(range(16))))
        for ri, r in enumerate(rs):
            W, S16 = r["W"], r["S16"]
            if q6 and packed:       # -32 sc_L gs[L] by one vpmaddwd (gs's low half, 0 above)
                T = _pmaddwd(builder, g, r["scp"])
                T = _dpwssd_asm(builder, T, builder.call(mad, [W[0], X[0]]), S16[0])
            elif q6:
                T = builder.sub(ir.Constant(_v16i32, [0] * 16),
                                builder.shl(builder.mul(r["scv"], g), ir.Constant(_v16i32, [5] * 16)))
                T = _dpwssd_asm(builder, T, builder.call(mad, [W[0], X[0]]), S16[0])
            else:
                T = _pmaddwd(builder, builder.call(mad, [W[0], X[0]]), S16[0])
            for k in range(1, 4):
                T = _dpwssd_asm(builder, T, builder.call(mad, [W[k], X[k]]), S16[k])
            e = ri * C + c
            if dslot is not None:   # dd, and -dm (lanes 8..15 hold -(dmin) * dx_c = -(dmin * dx_c))
                dd = _splat(builder, builder.load(builder.gep(dsf, [_c(c, _i64)])), 16)
                ndm = None if q6 else _splat(builder, builder.load(builder.gep(dsf, [_c(8 + c, _i64)])), 16)
            else:
                dd = builder.fmul(r["dv"], dxv)
                ndm = builder.fneg(builder.fmul(r["dmv"], dxv)) if not q6 else None
            a = _fma(builder, dd, builder.sitofp(T, _v16f), out[e])
            if not q6 and packed:   # float32(Mv) = m_L * (gs[2L] + gs[2L+1]) as a float product: exact (< 2^24)
                mf = builder.fmul(r["mwf"], builder.bitcast(gw, _v16f))
            elif not q6:
                mf = builder.sitofp(_pmaddwd(builder, gw, r["mpair"]), _v16f)
            if not q6:
                a = _fma(builder, ndm, mf, a)
            out[e] = a
    return out


def _make_tile(kind, R, C, vnni, packed=False):
    """tile(data, n, q, i, dx, gs): R rows of blocks (data[n .. n+R-1]) times C quantized x
    rows (q[i .. i+C-1]) -> R*C elements, r-major, each by the definition above. A weight
    block is unpacked once for the C x rows; each x block is loaded once for the R rows.
    packed (VNNI): gs is pack_aux's [M, nb, 32] (the same integers, laid out for the tile;
    in the one-row tiles of 2 <= C <= 8 also the tile's dx, so `dx` is not read)."""
    nbytes = K_BYTES[kind]
    q6 = kind == "Q6_K"
    packed = packed and vnni
    one = vnni and R == 1 and ONE_ROW_FORM     # the forms of _one_row_body (measured: no gain at C == 1, R == 4)
    gblk = 32 if packed else 16

    def typer(data, n, q, i, dx, gs):
        sig = V._ret(R * C)(data, n, q, i, dx, gs)

        def codegen(context, builder, signature, vals):
            da = _ptr(context, builder, signature.args[0], vals[0])
            qa = _ptr(context, builder, signature.args[2], vals[2])
            xa = _ptr(context, builder, signature.args[4], vals[4])
            ga = _ptr(context, builder, signature.args[5], vals[5])
            nn, ii = vals[1], vals[3]
            dstride = builder.extract_value(da.strides, 0)
            qstride = builder.extract_value(qa.strides, 0)
            xstride = builder.sdiv(builder.extract_value(xa.strides, 0), _c(4, _i64))
            gstride = builder.sdiv(builder.extract_value(ga.strides, 0), _c(4, _i64))
            d0 = builder.bitcast(da.data, _i8.as_pointer())
            q0 = builder.bitcast(qa.data, _i8.as_pointer())
            ws = [builder.gep(d0, [builder.mul(builder.add(nn, _c(r, _i64)), dstride)]) for r in range(R)]
            rowi = [builder.add(ii, _c(c, _i64)) for c in range(C)]
            qps = [builder.gep(q0, [builder.mul(r, qstride)]) for r in rowi]
            xps = [builder.gep(xa.data, [builder.mul(r, xstride)]) for r in rowi]
            gps = [builder.gep(ga.data, [builder.mul(r, gstride)]) for r in rowi]
            nb = builder.sdiv(builder.extract_value(qa.shape, 1), _c(256, _i64))
            ahead = builder.mul(nb, _c(nbytes * V.PREFETCH_ROWS, _i64))
            zf = ir.Constant(_v16f, [0.0] * 16)
            inits = [zf] * (R * C)
            zi = ir.Constant(_v16i32, [0] * 16)
            dslot = cgutils.alloca_once(builder, _v16f) if (packed and one and 2 <= C <= 8) else None

            def body(b, st):
                out = list(st)
                bases = [builder.gep(wp, [builder.mul(b, _c(nbytes, _i64))]) for wp in ws]
                if V.PREFETCH_ROWS:
                    for base in bases:
                        for off in range(0, nbytes, 64):
                            _prefetch_l2(builder, builder.gep(base, [builder.add(ahead, _c(off, _i64))]))
                wts = [_q6k_weights(builder, base, GFNI and C == 1) if q6 else _q4k_weights(builder, base)
                       for base in bases]
                if one:
                    return _one_row_body(builder, q6, wts, qps, xps, gps, b, out, packed, dslot)
                if vnni and not q6:     # lane L < 8: the int16 pair (m_L, m_L); 8..15: 0
                    mpair = [builder.or_(w[3], builder.shl(w[3], ir.Constant(_v16i32, [16] * 16))) for w in wts]
                for c in range(C):
                    X = [_load(builder, qps[c], builder.add(builder.mul(b, _c(256, _i64)), _c(64 * k, _i64)), _v64i8)
                         for k in range(4)]
                    dxb = builder.load(builder.gep(xps[c], [b]))
                    g = builder.load(builder.bitcast(builder.gep(gps[c], [builder.mul(b, _c(gblk, _i64))]),
                                                     _v16i32.as_pointer()), align=4)
                    if packed and not q6:
                        gw = g
                    elif vnni and not q6:     # lane L < 8: the int16 pair (gs[2L], gs[2L+1]); 8..15: 0
                        g16 = builder.bitcast(builder.trunc(g, ir.VectorType(ir.IntType(16), 16)), _v8i32)
                        gw = builder.shuffle_vector(g16, ir.Constant(_v8i32, [0] * 8),
                                                    ir.Constant(_v16i32, list(range(16))))
                    elif not q6:        # gs[2L] + gs[2L+1] in lanes 0..7, 0 in 8..15
                        zg = ir.Constant(_v16i32, [0] * 16)
                        g2 = builder.add(
                            builder.shuffle_vector(g, zg, ir.Constant(_v16i32, [2 * j for j in range(8)] + [16] * 8)),
                            builder.shuffle_vector(g, zg, ir.Constant(_v16i32, [2 * j + 1 for j in range(8)] + [16] * 8)))
                    for r in range(R):
                        W, S, S16 = wts[r][0], wts[r][1], wts[r][2]
                        e = r * C + c
                        if q6 and packed:   # -32 sc_L gs[L]: gs's low half times -32 sc_L (int16)
                            scv, d = wts[r][3], wts[r][4]
                            T = _pmaddwd(builder, g, builder.and_(builder.mul(scv, ir.Constant(_v16i32, [-32] * 16)),
                                                                  ir.Constant(_v16i32, [0xFFFF] * 16)))
                        elif q6:
                            scv, d = wts[r][3], wts[r][4]
                            T = builder.sub(zi, builder.shl(builder.mul(scv, g), ir.Constant(_v16i32, [5] * 16)))
                        else:
                            mv, d, dmin = wts[r][3], wts[r][4], wts[r][5]
                            T = zi
                        for k in range(4):
                            T = _scaled_dot(builder, T, W[k], X[k], S16[k], S[k], vnni)
                        dd = builder.fmul(d, dxb)
                        a = _fma(builder, _splat(builder, dd, 16), builder.sitofp(T, _v16f), out[e])
                        if not q6:
                            ndm = builder.fneg(builder.fmul(dmin, dxb))
                            if packed:  # float32 m_L times float32 (gs[2L] + gs[2L+1]): exact (< 2^24)
                                mf = builder.fmul(builder.sitofp(mv, _v16f), builder.bitcast(gw, _v16f))
                            elif vnni:  # m_L gs[2L] + m_L gs[2L+1] in one vpdpwssd (exact)
                                mf = builder.sitofp(_dpwssd(builder, zi, gw, mpair[r]), _v16f)
                            else:
                                mf = builder.sitofp(builder.mul(mv, g2), _v16f)
                            a = _fma(builder, _splat(builder, ndm, 16), mf, a)
                        out[e] = a
                return out
            st = V._loop_n(builder, nb, body, inits)
            return V._result(context, builder, signature, [_tree(builder, st[e]) for e in range(R * C)])
        return sig, codegen

    @intrinsic
    def tile(typingctx, data, n, q, i, dx, gs):
        return typer(data, n, q, i, dx, gs)
    if packed:
        return V.stable_pickle(tile, "q8tile", kind, R, C, vnni, "packed")
    return V.stable_pickle(tile, "q8tile", kind, R, C, vnni)


# ---------------------------------------------------------------- Q8_0 against q8_0 x
def _make_tile_q80(R, C, vnni, kind="Q8_0"):
    """The Q8_0 tile (Q8_0_DEF): R weight rows (data[n .. n+R-1]) times C x rows (q[i ..
    i+C-1], dx their block scales; gs unused) -> R*C elements, r-major. Per pair p of blocks
    (64 values): a weight row's 64 int8 loaded once for the C x rows, an x row's once for the
    R weight rows; T by one vpdpbusd of x + 128 (unsigned) against w (signed) started from
    -128 * (w's 4 a lane, one vpdpbusd a weight row), one instruction an (r, c) (VNNI), or
    sign-extended products summed 4 a lane (portable): the same int32s.

    kind "Q5_0" (Q5_0 rows, Q8_0_DEF with w = q - 16, the block's f16 d as dw): a pair's 44
    bytes unpacked in registers, no copy of the weights: the 2 x 16 nibble bytes as 64
    nibbles in position order (low nibbles of a block's 16 bytes, then its high ones), the
    fifth bits (the 2 little-endian qh as one 64-bit mask, bit k = position k) added as 16
    (a byte-masked add), u = q in 0..31 unsigned; T by one vpdpbusd of u against x (signed)
    started from gs[i + c, p, :16] (q5_aux: -16 * x's 4 a lane, formed once a product): sum
    (u - 16) x, the same int32s as the portable form's sign-extended products of w = u - 16;
    the pair's 16 dx lanes read as laid out in gs[i + c, p, 16:] (the same float32s as dx's,
    no shuffle). The portable form reads dx, not gs."""
    q5 = kind == "Q5_0"
    pb = 44 if q5 else 68           # a pair's bytes
    vp = ir.VectorType(_i32, 64)
    v16i16 = ir.VectorType(ir.IntType(16), 16)
    v2f = ir.VectorType(_f32, 2)
    halves = ir.Constant(_v16i32, [0] * 8 + [1] * 8)

    def typer(data, n, q, i, dx, gs):
        sig = V._ret(R * C)(data, n, q, i, dx, gs)

        def codegen(context, builder, signature, vals):
            da = _ptr(context, builder, signature.args[0], vals[0])
            qa = _ptr(context, builder, signature.args[2], vals[2])
            xa = _ptr(context, builder, signature.args[4], vals[4])
            nn, ii = vals[1], vals[3]
            if q5 and vnni:         # gs: q5_aux's int32 [M, pairs, 32]
                ga = _ptr(context, builder, signature.args[5], vals[5])
                gstride = builder.extract_value(ga.strides, 0)
                g0 = builder.bitcast(ga.data, _i8.as_pointer())
            dstride = builder.extract_value(da.strides, 0)
            qstride = builder.extract_value(qa.strides, 0)
            xstride = builder.sdiv(builder.extract_value(xa.strides, 0), _c(4, _i64))
            d0 = builder.bitcast(da.data, _i8.as_pointer())
            q0 = builder.bitcast(qa.data, _i8.as_pointer())
            ws = [builder.gep(d0, [builder.mul(builder.add(nn, _c(r, _i64)), dstride)]) for r in range(R)]
            rowi = [builder.add(ii, _c(c, _i64)) for c in range(C)]
            qps = [builder.gep(q0, [builder.mul(r, qstride)]) for r in rowi]
            xps = [builder.gep(xa.data, [builder.mul(r, xstride)]) for r in rowi]
            npairs = builder.sdiv(builder.extract_value(qa.shape, 1), _c(64, _i64))
            ahead = builder.mul(dstride, _c(V.PREFETCH_ROWS, _i64))
            zi = ir.Constant(_v16i32, [0] * 16)
            fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16f, [_v16f] * 3),
                                                 "llvm.fma.v16f32")
            b80 = ir.Constant(_v64i8, [-128] * 64)
            b80i = builder.bitcast(b80, _v16i32)
            if vnni:
                dpbusd = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16i32, [_v16i32] * 3),
                                                        "llvm.x86.avx512.vpdpbusd.512")

            def weights(p, r):
                """Weight row r's pair p: (its 64 values, dw: the 2 f16 scales widened, 8 lanes each)."""
                b0 = builder.gep(ws[r], [builder.mul(p, _c(pb, _i64))])
                if V.PREFETCH_ROWS:     # the pair's bytes: both lines they may touch
                    _prefetch_l2(builder, builder.gep(b0, [ahead]))
                    _prefetch_l2(builder, builder.gep(b0, [builder.add(ahead, _c(pb - 4, _i64))]))
                if q5:
                    w = _q5_pair(builder, b0)
                    h0 = _load(builder, b0, 0, ir.IntType(16))
                    h1 = _load(builder, b0, 22, ir.IntType(16))
                else:
                    w = _concat(builder, _load(builder, b0, 2, _v32i8), _load(builder, b0, 36, _v32i8))
                    h0 = _load(builder, b0, 0, ir.IntType(16))
                    h1 = _load(builder, b0, 34, ir.IntType(16))
                hv = builder.insert_element(ir.Constant(v16i16, ir.Undefined), h0, _c(0))
                hv = builder.insert_element(hv, h1, _c(1))
                hv = builder.shuffle_vector(hv, ir.Constant(v16i16, ir.Undefined), halves)
                return w, builder.fpext(builder.bitcast(hv, ir.VectorType(ir.HalfType(), 16)), _v16f)

            def body_q5(p, st):
                """The Q5_0 VNNI form: the R rows unpacked, then x row by x row (its q, T's
                start and dx lanes read once for the R rows, none held across x rows)."""
                out = list(st)
                U, DW = [], []
                for r in range(R):
                    u, dw = weights(p, r)
                    U.append(builder.bitcast(u, _v16i32))
                    DW.append(dw)
                for c in range(C):
                    xq = builder.bitcast(_load(builder, qps[c], builder.mul(p, _c(64, _i64)), _v64i8), _v16i32)
                    gp = builder.gep(g0, [builder.add(builder.mul(rowi[c], gstride), builder.mul(p, _c(128, _i64)))])
                    for r in range(R):
                        T = builder.call(dpbusd, [_load(builder, gp, 0, _v16i32), U[r], xq])
                        dd = builder.fmul(DW[r], _load(builder, gp, 64, _v16f))
                        e = r * C + c
                        out[e] = builder.call(fma, [dd, builder.sitofp(T, _v16f), out[e]])   # one rounding
                return out

            def body(p, st):
                out = list(st)
                X, NX, DX = [], [], []
                for c in range(C):
                    xq = _load(builder, qps[c], builder.mul(p, _c(64, _i64)), _v64i8)
                    X.append(xq)
                    if vnni:            # x + 128 as unsigned bytes (x in -127..127: 1..255)
                        NX.append(builder.xor(xq, b80))
                    d2 = _load(builder, builder.bitcast(xps[c], _i8.as_pointer()), builder.mul(p, _c(8, _i64)), v2f)
                    DX.append(builder.shuffle_vector(d2, ir.Constant(v2f, ir.Undefined), halves))
                for r in range(R):
                    w, dw = weights(p, r)   # Q5_0 (the portable form here): u in 0..31
                    if vnni:            # -128 sum_{t<4} w (a lane), once for the C x rows
                        wv = builder.bitcast(w, _v16i32)
                        corr = builder.sub(zi, builder.call(dpbusd, [zi, b80i, wv]))
                    else:
                        wi = builder.sext(builder.sub(w, _bvec(16)) if q5 else w, vp)
                    for c in range(C):
                        if vnni:        # sum (x + 128) w - 128 sum w: the same int32s
                            T = builder.call(dpbusd, [corr, builder.bitcast(NX[c], _v16i32), wv])
                        else:
                            pr = builder.mul(wi, builder.sext(X[c], vp))
                            parts = [builder.shuffle_vector(pr, ir.Constant(vp, ir.Undefined),
                                                            ir.Constant(_v16i32, [4 * L + t for L in range(16)]))
                                     for t in range(4)]
                            T = builder.add(builder.add(parts[0], parts[1]), builder.add(parts[2], parts[3]))
                        e = r * C + c
                        dd = builder.fmul(dw, DX[c])
                        out[e] = builder.call(fma, [dd, builder.sitofp(T, _v16f), out[e]])   # one rounding
                return out
            st = V._loop_n(builder, npairs, body_q5 if (q5 and vnni) else body,
                           [ir.Constant(_v16f, [0.0] * 16)] * (R * C))
            return V._result(context, builder, signature, [_tree(builder, st[e]) for e in range(R * C)])
        return sig, codegen

    @intrinsic
    def tile(typingctx, data, n, q, i, dx, gs):
        return typer(data, n, q, i, dx, gs)
    return V.stable_pickle(tile, "q8tile", kind, R, C, vnni)


def _q5_pair(builder, b0):
    """A Q5_0 pair's (two blocks at b0, 44 bytes) 64 values q in 0..31 as <64 x i8>, position
    order: per block its 16 bytes' low nibbles (values 0..15) then their high ones (16..31),
    each + 16 where the block's qh (little-endian uint32 after d) has bit j of value j."""
    v = _concat(builder, _load(builder, b0, 6, _v16i8), _load(builder, b0, 28, _v16i8))   # 32 bytes
    lo = builder.and_(v, _bvec(15, 32))
    hi = builder.bitcast(builder.lshr(builder.bitcast(v, ir.VectorType(ir.IntType(16), 16)),
                                      ir.Constant(ir.VectorType(ir.IntType(16), 16), [4] * 16)), _v32i8)
    hi = builder.and_(hi, _bvec(15, 32))
    nib = builder.shuffle_vector(lo, hi, ir.Constant(_v64i32, list(range(16)) + list(range(32, 48))
                                                     + list(range(16, 32)) + list(range(48, 64))))
    qh0 = builder.zext(_load(builder, b0, 2, _i32), _i64)
    qh1 = builder.zext(_load(builder, b0, 24, _i32), _i64)
    m = builder.bitcast(builder.or_(qh0, builder.shl(qh1, _c(32, _i64))), ir.VectorType(ir.IntType(1), 64))
    return builder.select(m, builder.add(nib, _bvec(16)), nib)


X_BYTES = 1 << 17     # int8 x bytes a pass of `rows` (x rows against every weight row of its span)


def _make_passes(kind, vnni):
    """passes(q, dx, gs, data, out, lo, hi, M4): out[:M4, lo:hi] for the first M4 (a multiple
    of 4) quantized x rows, in passes of x rows whose int8 stay in L2, each pass 4 x rows
    against 2 rows of blocks (then 1) through the kind's tiles (_make_tile_any: the K-quant
    definition or Q8_0_DEF): the main loop of _make_rows and _make_rows_q80, inlined into
    each."""
    t24, t14 = _make_tile_any(kind, 2, 4, vnni), _make_tile_any(kind, 1, 4, vnni)

    @njit(inline="always", boundscheck=False, nogil=True)     # into each rows' own body
    def passes(q, dx, gs, data, out, lo, hi, M4):
        K = q.shape[1]
        xb = max(4, (X_BYTES // K) // 4 * 4)        # x rows a pass: their int8 stay in L2
        for i0 in range(0, M4, xb):
            i1 = min(i0 + xb, M4)
            n = lo
            while n + 2 <= hi:
                for i in range(i0, i1, 4):
                    r = t24(data, n, q, i, dx, gs)
                    for a in range(2):
                        for c in range(4):
                            out[i + c, n + a] = r[4 * a + c]
                n += 2
            if n < hi:
                for i in range(i0, i1, 4):
                    r = t14(data, n, q, i, dx, gs)
                    for c in range(4):
                        out[i + c, n] = r[c]
    return V.stable_pickle(passes, "q8passes", kind, vnni)


def _make_rows(kind, vnni):
    """rows(q, dx, gs, data, out, lo, hi): out[:, lo:hi] = the quantized x rows times rows
    lo..hi-1 of the matrix, every element through `tile`'s one definition (tiles: 4 x rows
    against 2 rows of blocks, then 1; the rows left past a multiple of 4 one at a time against
    4 rows of blocks, then 1): the tile shapes change the speed only."""
    passes = V._made("q8passes", kind, vnni)
    t41, t11 = _make_tile(kind, 4, 1, vnni), _make_tile(kind, 1, 1, vnni)

    @njit(cache=True, boundscheck=False, nogil=True)
    def rows(q, dx, gs, data, out, lo, hi):
        M = q.shape[0]
        M4 = M - M % 4
        passes(q, dx, gs, data, out, lo, hi, M4)
        i = M4
        while i < M:
            n = lo
            while n + 4 <= hi:
                r = t41(data, n, q, i, dx, gs)
                for a in range(4):
                    out[i, n + a] = r[a]
                n += 4
            while n < hi:
                out[i, n] = t11(data, n, q, i, dx, gs)
                n += 1
            i += 1
    return V.stable_pickle(rows, "q8rows", kind, vnni)


# x rows of the main one-weight-row tile, by kind (8: pack_aux's dx lanes; Q6_K at 8 rather than
# 4 reads each weight block's unpack for twice the x rows)
ONE_ROW_C = {"Q4_K": 8, "Q6_K": 8}
# int8 x bytes a pass of the one-weight-row `rows`: the pass's x rows stay in L1 while the
# span's weight rows (73 KB of Q4_K at K = 2048) stream from L2, each read once a tile of x rows
# (an x pass of 128 KB read x from L2 at every weight row: Q4_K 768 x 2048 at 32 rows 63.7 ->
# 70.7 GMAC/s a core with 32 KB)
X_BYTES_ONE = 1 << 15


def _make_rows_one(kind):
    """rows (as _make_rows: the same signature and elements) from one-weight-row tiles in the
    VNNI forms (_one_row_body): the x rows in tiles of ONE_ROW_C[kind] against each weight row
    (its blocks unpacked once for them), then 4 of those left, then 3 or 2 against each weight
    row, a last single row against 4 weight rows, then 1 (a decode round's groups of 1-3 rows
    read each weight row once)."""
    C = ONE_ROW_C[kind]
    pk = kind in PACKED_KINDS       # gs is pack_aux's aux (every tile here reads it so)
    tm, t14 = _make_tile(kind, 1, C, True, pk), _make_tile(kind, 1, 4, True, pk)
    t13, t12 = _make_tile(kind, 1, 3, True, pk), _make_tile(kind, 1, 2, True, pk)
    t41, t11 = _make_tile(kind, 4, 1, True, pk), _make_tile(kind, 1, 1, True, pk)

    @njit(cache=True, boundscheck=False, nogil=True)
    def rows(q, dx, gs, data, out, lo, hi):
        M, K = q.shape
        MC = M - M % C
        xb = max(C, (X_BYTES_ONE // K) // C * C)    # x rows a pass: their int8 stay in L1
        for i0 in range(0, MC, xb):
            i1 = min(i0 + xb, MC)
            for n in range(lo, hi):
                for i in range(i0, i1, C):
                    r = tm(data, n, q, i, dx, gs)
                    for c in range(C):
                        out[i + c, n] = r[c]
        i = MC
        if M - i >= 4:
            for n in range(lo, hi):
                r = t14(data, n, q, i, dx, gs)
                for c in range(4):
                    out[i + c, n] = r[c]
            i += 4
        left = M - i
        if left == 3:
            for n in range(lo, hi):
                r = t13(data, n, q, i, dx, gs)
                for c in range(3):
                    out[i + c, n] = r[c]
        elif left == 2:
            for n in range(lo, hi):
                r = t12(data, n, q, i, dx, gs)
                for c in range(2):
                    out[i + c, n] = r[c]
        elif left == 1:
            n = lo
            while n + 4 <= hi:
                r = t41(data, n, q, i, dx, gs)
                for a in range(4):
                    out[i, n + a] = r[a]
                n += 4
            while n < hi:
                out[i, n] = t11(data, n, q, i, dx, gs)
                n += 1
    return V.stable_pickle(rows, "q8rows", kind, True)


# x rows of the Q5_0 rows' main tile (2 weight rows, each pair unpacked once for Q5_C x rows;
# 0: the Q8_0 rows). One thread, 128 experts at a pp512 grouping (4096 rows), N 4096, K 1408:
# 2 x 8 with q5_aux 54.6 GMAC/s (Q8_0's 2 x 4 beside it 54.0; 1 x 8 46-49; the float32 form 32)
Q5_C = 8
X_BYTES_Q5 = 1 << 14     # int8 x bytes a pass of the Q5_0 rows (with q5_aux's 2x: in L1)


def _make_rows_q5(vnni):
    """The Q5_0 rows (as _make_rows_q80: the same signature and elements): the x rows in tiles
    of Q5_C against 2 weight rows (each pair's 5-bit unpack once for them; a last odd row
    alone), then 4 of those left against 2 weight rows (then 1), then the Q8_0 rows' tail for
    the last 1-3 (_make_tail_q80)."""
    C = Q5_C
    kind = "Q5_0"
    tm = _make_tile_q80(1, C, vnni, kind)
    t2m = _make_tile_q80(2, C, vnni, kind)
    t24, t14 = _make_tile_q80(2, 4, vnni, kind), _make_tile_q80(1, 4, vnni, kind)
    tail = V._made("q8tail", kind, vnni)

    @njit(cache=True, boundscheck=False, nogil=True)
    def rows(q, dx, gs, data, out, lo, hi):
        M, K = q.shape
        MC = M - M % C
        xb = max(C, (X_BYTES_Q5 // K) // C * C)     # x rows a pass: their int8 stay in L1
        for i0 in range(0, MC, xb):
            i1 = min(i0 + xb, MC)
            n = lo
            while n + 2 <= hi:
                for i in range(i0, i1, C):
                    r = t2m(data, n, q, i, dx, gs)
                    for a in range(2):
                        for c in range(C):
                            out[i + c, n + a] = r[C * a + c]
                n += 2
            if n < hi:
                for i in range(i0, i1, C):
                    r = tm(data, n, q, i, dx, gs)
                    for c in range(C):
                        out[i + c, n] = r[c]
        i = MC
        if M - i >= 4:
            n = lo
            while n + 2 <= hi:
                r = t24(data, n, q, i, dx, gs)
                for a in range(2):
                    for c in range(4):
                        out[i + c, n + a] = r[4 * a + c]
                n += 2
            if n < hi:
                r = t14(data, n, q, i, dx, gs)
                for c in range(4):
                    out[i + c, n] = r[c]
            i += 4
        tail(q, dx, gs, data, out, lo, hi, i)
    return V.stable_pickle(rows, "q8rows", kind, vnni)


def _make_tail_q80(kind, vnni):
    """tail(q, dx, gs, data, out, lo, hi, i): out[i:M, lo:hi] for the M - i < 4 x rows past
    the Q8_0 / Q5_0 rows' main tiles (M = q's rows), every element through Q8_0_DEF's one
    chain: 3 of them against 2 rows of blocks (then 1), 2 against 4 (then 1), 1 against 4
    (then 1): a decode round of 1-3 reads the weights once. Shared by _make_rows_q80 and
    _make_rows_q5."""
    t41, t11 = _make_tile_q80(4, 1, vnni, kind), _make_tile_q80(1, 1, vnni, kind)
    t42, t12 = _make_tile_q80(4, 2, vnni, kind), _make_tile_q80(1, 2, vnni, kind)
    t23, t13 = _make_tile_q80(2, 3, vnni, kind), _make_tile_q80(1, 3, vnni, kind)

    @njit(inline="always", boundscheck=False, nogil=True)     # into each rows' own body
    def tail(q, dx, gs, data, out, lo, hi, i):
        left = q.shape[0] - i
        n = lo
        if left == 3:
            while n + 2 <= hi:
                r = t23(data, n, q, i, dx, gs)
                for a in range(2):
                    for c in range(3):
                        out[i + c, n + a] = r[3 * a + c]
                n += 2
            while n < hi:
                r = t13(data, n, q, i, dx, gs)
                for c in range(3):
                    out[i + c, n] = r[c]
                n += 1
        elif left == 2:
            while n + 4 <= hi:
                r = t42(data, n, q, i, dx, gs)
                for a in range(4):
                    for c in range(2):
                        out[i + c, n + a] = r[2 * a + c]
                n += 4
            while n < hi:
                r = t12(data, n, q, i, dx, gs)
                for c in range(2):
                    out[i + c, n] = r[c]
                n += 1
        elif left == 1:
            while n + 4 <= hi:
                r = t41(data, n, q, i, dx, gs)
                for a in range(4):
                    out[i, n + a] = r[a]
                n += 4
            while n < hi:
                out[i, n] = t11(data, n, q, i, dx, gs)
                n += 1
    return V.stable_pickle(tail, "q8tail", kind, vnni)


def _make_rows_q80(vnni, kind="Q8_0"):
    """The Q8_0 rows (as _make_rows: the same signature, every element through Q8_0_DEF's one
    chain) with tiles for the rows past a multiple of 4 (_make_tail_q80): 2 of them against 4
    rows of blocks (then 1), 3 against 2 (then 1), 1 against 4 (then 1): a decode round of 2
    or 3 reads the weights once. kind: the weights' kind (Q80_KINDS: Q8_0, or Q5_0 as its Q8_0 repack)."""
    passes, tail = V._made("q8passes", kind, vnni), V._made("q8tail", kind, vnni)

    @njit(cache=True, boundscheck=False, nogil=True)
    def rows(q, dx, gs, data, out, lo, hi):
        M4 = q.shape[0] - q.shape[0] % 4
        passes(q, dx, gs, data, out, lo, hi, M4)
        tail(q, dx, gs, data, out, lo, hi, M4)
    return V.stable_pickle(rows, "q8rows", kind, vnni)


# Kinds whose one-weight-row `rows` (VNNI) read x's gs as pack_aux lays it out (Q4_K: the
# mins' pair sums as float32, so float32(Mv) is one exact multiply, not a vpmaddwd and a
# convert; Q6_K: gs[L] as the int16 low half of lane L, so -32 sc_L gs[L]
# is one vpmaddwd, not a vpmulld and a shift; both: a C = 8 tile's dx side by side). One thread,
# 128 experts at a pp512 grouping, bytes == before: Q4_K 2048x768 49.5-54.2 -> 60.1-62.7 GMAC/s,
# 768x2048 52.5-53.1 -> 59.9-67.4 (receipt 2026-12-05-kq36)
PACKED_KINDS = ("Q4_K", "Q6_K")


@njit(cache=True, boundscheck=False, nogil=True)
def pack_aux(gs, dx, offs, C, q6, aux):
    """aux [M, nb, 32] int32 for the packed tiles, from x's gs and dx grouped by offs: Q4_K
    (q6 False): lanes 0..7 of (i, b) the float32 bits of gs[i, b, 2L] + gs[i, b, 2L + 1]
    (|sum| <= 32 * 127: exact, and m_L times it < 2^24: float32(Mv[L]) is their float product,
    exactly), lanes 8..15 zero; Q6_K: lane L (< 16) gs[i, b, L] as an int16 in its low half
    (|gs| <= 16 * 127), 0 in its high half; both: at each row i where `rows` starts a tile of
    n x rows within group g (from offs[g]: tiles of C, then one of 4, then one of the rest),
    lanes 16 + c and 24 + c the float32 bits of dx[i + c, b] (c < n <= 8), 0 elsewhere. The same integers and scales as gs
    and dx: a layout only."""
    M, nb = dx.shape
    auxf = aux.view(np.float32)
    for i in range(M):
        for b in range(nb):
            if q6:
                for L in range(16):
                    aux[i, b, L] = np.int32(gs[i, b, L]) & np.int32(0xFFFF)
            else:
                for L in range(8):
                    auxf[i, b, L] = np.float32(np.int32(gs[i, b, 2 * L]) + np.int32(gs[i, b, 2 * L + 1]))
                for L in range(8, 16):
                    aux[i, b, L] = 0
            for L in range(16, 32):
                aux[i, b, L] = 0
    dxi = dx.view(np.int32)
    for g in range(offs.shape[0] - 1):
        a = offs[g]
        e = offs[g + 1]
        i = a
        while i < e:                # the C-row tiles, then `rows`' tail tiles (4, then 3 or 2)
            n = C if e - i >= C else (4 if e - i >= 4 else e - i)
            for b in range(nb):
                for c in range(n):
                    aux[i, b, 16 + c] = dxi[i + c, b]
                    aux[i, b, 24 + c] = dxi[i + c, b]
            i += n


def _aux(kind, vnni, gs, dx, offs):
    """gs as the kind's `rows` reads it: pack_aux's aux for the packed kinds, else gs."""
    if kind in PACKED_KINDS and vnni and ONE_ROW_FORM:
        aux = np.empty((gs.shape[0], gs.shape[1], 32), np.int32)
        pack_aux(gs, np.ascontiguousarray(dx), offs, ONE_ROW_C[kind], kind == "Q6_K", aux)
        return aux
    return gs


def _make_rows_any(kind, vnni):
    if kind == "Q5_0" and Q5_C:
        return _make_rows_q5(vnni)
    if kind in Q80_KINDS:
        return _make_rows_q80(vnni, kind)
    return _make_rows_one(kind) if vnni and ONE_ROW_FORM else _make_rows(kind, vnni)


def _make_crew(kind, vnni):
    rows = V._made("q8rows", kind, vnni)
    span = V.CREW_CHUNKS * V.ROWS

    @njit(cache=True, boundscheck=False, nogil=True)
    def member(m, n, ctr, q, dx, gs, stack, experts, offs, out):
        """Member m of a crew of n (kernels/blocks_vec.crew_grouped's pieces and order):
        out[offs[g]:offs[g+1]] = rows offs[g]:offs[g+1] of the quantized x times
        stack[experts[g]]^T for every group g."""
        N = stack.shape[1]
        per_g = (N + span - 1) // span
        P = experts.shape[0] * per_g
        per = (P + n - 1) // n
        for k in range(n):
            r = (m + k) % n
            p = _region_piece(ctr, 0, r, per, k > 0)
            while p >= 0:
                if p < P:
                    g = p // per_g
                    lo = (p - g * per_g) * span
                    a = offs[g]
                    b = offs[g + 1]
                    rows(q[a:b], dx[a:b], gs[a:b], stack[experts[g]], out[a:b], lo, min(lo + span, N))
                    _finish(ctr, 0)
                p = _region_piece(ctr, 0, r, per, k > 0)
        _wait(ctr, 0, P)
    return V.stable_pickle(member, "q8crew", kind, vnni)


def _make_tile_any(kind, R, C, vnni, packed=False):
    return _make_tile_q80(R, C, vnni, kind) if kind in Q80_KINDS else _make_tile(kind, R, C, vnni, bool(packed))


V.MAKERS.update(q8tile=_make_tile_any, q8rows=_make_rows_any, q8crew=_make_crew,
                q8tail=_make_tail_q80, q8passes=_make_passes)
_CREWS: dict = {}
_ONE = np.zeros(1, np.int64)


def _cpu_vendor() -> str:
    """The host's CPU vendor as /proc/cpuinfo names it ("AuthenticAMD", "GenuineIntel"), or ""."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("vendor_id"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


# A product of at most SOLO_ROWS x rows (a decode step at batch 1: a weight read for one dot
# each) against at most SOLO_BYTES of weights runs on the calling thread alone: it is bound by
# memory, so whether a helper pays depends on how much of the host's bandwidth one core reaches.
# AMD (the Zen 4 guest): one core streams ~33 of the ~35 GB/s both reach (receipt
# 2026-12-05-mladec), and the layers' matrices measured the same or 5-15% faster alone; only
# the LM head keeps the crew: 128 MiB. Elsewhere (the Intel guest): one core streams ~15-20 GB/s
# of the ~30 both reach; one-row products of 8.9-27 MB took 0.6-0.73x the time on the crew and
# those of 4.5 MB or less 1.1-1.5x in isolation (receipt 2026-12-05-hyb33), but a whole
# GLM-4.7-Flash-shaped decode step took 0.90x the time with every product past 4 MiB on the crew
# and 0.87x with all of them (receipt 2026-12-05-mla32): 0, every one-row product on the crew.
# The crew's caller never waits for a helper that has taken no piece (kernels/team_cpu.Crew), so
# a descheduled helper costs little. The cut changes no byte (one chain an element).
SOLO_ROWS = 1
SOLO_BYTES = 1 << 27 if _cpu_vendor() == "AuthenticAMD" else 0


def grouped_q(q, dx, gs, kind, stack, experts, offs, out, vnni=None):
    """out[offs[g]:offs[g+1]] = quantized x rows offs[g]:offs[g+1] times stack[experts[g]]^T
    (stack uint8 [E, N, row bytes] of `kind`), one crew round of numba's thread count (the
    caller alone at most blocks_vec.CREW_SERIAL_MACS, or at most SOLO_ROWS x rows against at
    most SOLO_BYTES of weights)."""
    vnni = VNNI if vnni is None else vnni
    gs = _aux(kind, vnni, gs, dx, offs)
    key = (kind, vnni)
    member = _MEMBERS.get(key)
    if member is None:
        member = _MEMBERS[key] = V._made("q8crew", kind, vnni)
    args = (np.zeros((2, _WIDTH), np.int64), q, dx, gs, stack, experts, offs, out)
    n = min(_numba.get_num_threads(), 16)
    if (n == 1 or (q.shape[0] <= SOLO_ROWS and stack.shape[1] * stack.shape[2] <= SOLO_BYTES)
            or q.shape[0] * stack.shape[1] * q.shape[1] <= V.CREW_SERIAL_MACS):
        member(0, 1, *args)
        return out
    crew = _CREWS.get(key)
    if crew is None:
        from kernels.team_cpu import Crew
        crew = _CREWS[key] = Crew(member)
    crew.run(n, args)
    return out


_MEMBERS: dict = {}      # (kind, vnni) -> the compiled crew member (V._made's, looked up once)


def matmul(x: np.ndarray, kind: str, data: np.ndarray, out: np.ndarray | None = None,
           vnni: bool | None = None) -> np.ndarray:
    """x [M, K] float32 times the [N, K] matrix whose rows are `data` (uint8 [N, row bytes]) of
    `kind` (Q4_K, Q6_K) -> [M, N] float32, by the definition above (x quantized to int8 a
    block of 256). vnni: the VNNI form (default: where the host has it) or the portable one;
    the same bytes."""
    if kind not in K_BYTES:
        raise ValueError(f"kquant_cpu: kind {kind!r} is not one of {', '.join(K_BYTES)}")
    q, dx, gs = quantize(x)
    if out is None:
        out = np.empty((q.shape[0], data.shape[0]), np.float32)
    return grouped_q(q, dx, gs, kind, data[None], _ONE, np.array([0, q.shape[0]], np.int64), out, vnni)


def grouped_matmul(x: np.ndarray, kind: str, stack: np.ndarray, experts: np.ndarray,
                   offs: np.ndarray) -> np.ndarray:
    """x [R, K] (rows grouped by expert: group g = rows offs[g]:offs[g+1], expert experts[g])
    times stack uint8 [E, N, row bytes] -> [R, N]; every row's bytes those of
    matmul(x_row, kind, stack[e])."""
    q, dx, gs = quantize(x)
    out = np.empty((q.shape[0], stack.shape[1]), np.float32)
    return grouped_q(q, dx, gs, kind, stack, np.ascontiguousarray(experts, np.int64),
                     np.ascontiguousarray(offs, np.int64), out)


def grouped_quantized(q, dx, gs, kind: str, stack: np.ndarray, experts, offs) -> np.ndarray:
    """grouped_matmul of x rows already quantized (quantize's q, dx, gs; grouped as there):
    one quantized x serves several stacks (a MoE layer's gate and up)."""
    out = np.empty((q.shape[0], stack.shape[1]), np.float32)
    return grouped_q(q, dx, gs, kind, stack, np.ascontiguousarray(experts, np.int64),
                     np.ascontiguousarray(offs, np.int64), out)


def matmul_reference(x: np.ndarray, kind: str, data: np.ndarray) -> np.ndarray:
    """The scalar loops of the definition (dot_ref): slow; what the tests hold the vector
    forms to byte for byte."""
    from kernels.blocks_cpu import F16
    q, dx, gs = quantize(x)
    out = np.empty((q.shape[0], data.shape[0]), np.float32)
    matmul_ref_rows(kind == "Q6_K", q, dx, gs, data, F16, out)
    return out


def ref(x: np.ndarray, w) -> np.ndarray:
    """The float64 value the definition rounds: x's quantized copy (dx_b * q) times w's
    dequantized weights (kernels.blocks.Blocks.dequantize), in float64, to float32 once."""
    q, dx, _ = quantize(x)
    xq = (q.astype(np.float64).reshape(q.shape[0], -1, QK) * dx.astype(np.float64)[:, :, None]).reshape(q.shape)
    return (xq @ w.dequantize().astype(np.float64).T).astype(np.float32)


# ---------------------------------------------------------------- Q8_0 weights, q8_0 x
Q8_0_DEF = """Q8_0 weights against x quantized as ggml's q8_0 activations (Q8_0_DEF):

  x's quantization, per block b of 32 (ggml-quants.c quantize_row_q8_0_ref): amax = max |x|
  (float32), d = amax / 127 (float32), id = 1 / d (0 where d == 0), q[j] = roundf(x[j] * id)
  (float32 product; half away from zero), dx_b = d as ggml stores it: rounded to float16
  (nearest even), widened. A block whose amax is not finite (a NaN or an inf in it): q = 0,
  dx_b = NaN (the outputs it reaches are NaN). (ggml's AVX2 quantize_row_q8_0 takes id =
  127 / amax and rounds half to even: a q may differ by one at rare ties; the reference is the
  definition here.)

  A K of an odd number of blocks: x and every weight row get one zero block more (q = 0,
  dx = 0; quants 0, scale 0), so K is a whole number of pairs (the pad adds dd = 0 times T = 0).

  One output element, x row i and weight row n (K a multiple of 64): 16 float32 lanes acc,
  zero; for each pair p of blocks (values 64 p .. 64 p + 63) in order:
      T[L] (int32) = sum_{t<4} w[64p + 4L + t] * q[64p + 4L + t]      (exact in any order)
      dd[L] = dw_b * dx_b (float32; b = 2p for L < 8, 2p + 1 for L >= 8; dw_b the weight
              block's f16 scale widened)
      acc[L] = fma(dd[L], float32(T[L]), acc[L])      (one rounding: a fused multiply-add)
  out = tree(acc): (L, L+8), then (L, L+4), (L, L+2), (0, 1).

Q5_0 weights (ggml's block_q5_0: f16 d, 32 fifth bits qh, 16 bytes of nibbles) take the same
definition on their Q8_0 repack (`q5_0_as_q8_0`: each block the same f16 d and the 32 integers
q - 16 in [-16, 15] as int8, 34 bytes): dw_b = d, w = q - 16, exactly the values ggml's
dequantize_row_q5_0 scales; llama.cpp multiplies Q5_0 against q8_0 x too (ggml_vec_dot_q5_0_q8_0).
The tiles read the Q5_0 blocks as stored (22 bytes, unpacked in registers: no repack kept).

An element's bytes depend on its weight row and its x row alone: every tile shape (4x1, 1x1
for one x row; 2x4, 1x4 for four) computes this one chain, so a row's bytes are the same
whatever the round holds (batch invariance; tests/model/test_q8_0_int8.py,
tests/model/test_q5_0_int8.py)."""
# the weight kinds Q8_0_DEF multiplies (their block bytes); the ops backends' q80 switch takes
# every product of these kinds
Q80_BLOCK = {"Q8_0": 34, "Q5_0": 22}
Q80_KINDS = tuple(Q80_BLOCK)


def q5_0_as_q8_0(data: np.ndarray) -> np.ndarray:
    """Q5_0 rows (uint8 [..., nb * 22]) as Q8_0 rows (uint8 [..., nb * 34]): each block the same
    f16 d (its 2 bytes), then the 32 values q - 16 (q = nibble | fifth bit << 4, ggml's
    dequantize_row_q5_0 order) as int8. The numpy form Q8_0_DEF's Q5_0 reading is defined by."""
    nb = data.shape[-1] // 22
    blk = np.ascontiguousarray(data).reshape(-1, nb, 22)
    qh = blk[:, :, 2:6].copy().view("<u4").astype(np.int64)            # [rows, nb, 1]
    qs = blk[:, :, 6:22].astype(np.int64)                              # [rows, nb, 16]
    j = np.arange(16)
    lo = (qs & 15) | (((qh >> j) & 1) << 4)
    hi = (qs >> 4) | (((qh >> (j + 16)) & 1) << 4)
    out = np.empty((blk.shape[0], nb, 34), np.uint8)
    out[:, :, :2] = blk[:, :, :2]
    out[:, :, 2:] = (np.concatenate([lo, hi], axis=2) - 16).astype(np.int8).view(np.uint8)
    return out.reshape(data.shape[:-1] + (nb * 34,))


def quantize_q8_0(x: np.ndarray):
    """(q int8 [M, K], dx float32 [M, K/32]) of x [M, K] float32 by Q8_0_DEF (numpy: the
    definition itself; no numba)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    M, K = x.shape
    if K % 32:
        raise ValueError(f"kquant_cpu.quantize_q8_0: K = {K} is not a multiple of 32")
    b = x.reshape(M, K // 32, 32)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        amax = np.abs(b).max(axis=2)
        bad = ~np.isfinite(amax)
        d = (amax / np.float32(127)).astype(np.float32)
        idd = np.where(d != 0, np.float32(1) / np.where(d != 0, d, np.float32(1)), np.float32(0)).astype(np.float32)
        idd[bad] = 0
        v = np.where(bad[:, :, None], np.float32(0), b * idd[:, :, None]).astype(np.float32)
    t = np.trunc(v)
    f = v - t                                         # exact: the fraction of a float32
    t = t + (f >= np.float32(0.5)).astype(np.float32) - (f <= np.float32(-0.5)).astype(np.float32)
    q = t.astype(np.int8).reshape(M, K)
    dx = d.astype(np.float16).astype(np.float32)
    dx[bad] = np.float32(np.nan)
    return q, dx


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c of float32 arrays rounded once to float32 (an IEEE fused multiply-add), in
    numpy: a * b is exact in float64, the sum's error exact by TwoSum, the float64 sum rounded
    to odd (its last bit set where the sum was inexact and it is even), then to float32: with
    53 >= 24 + 2 bits the double rounding is the single one."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c = c.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s = p + c
        bp = s - c
        err = (p - bp) + (c - (s - bp))
        fix = np.isfinite(s) & (err != 0) & ((s.view(np.int64) & 1) == 0)
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def q80_definition(q: np.ndarray, dx: np.ndarray, data: np.ndarray, kind: str = "Q8_0") -> np.ndarray:
    """Q8_0_DEF's element chain in numpy float32 (each operation rounded as the definition
    names it), for quantized x rows (q, dx) times Q8_0 rows `data` (uint8 [N, K/32*34]; kind
    "Q5_0": Q5_0 rows [N, K/32*22], read as their Q8_0 repack) -> [M, N]: what the tests hold
    the numba forms to byte for byte."""
    if kind == "Q5_0":
        data = q5_0_as_q8_0(data)
    M, K = q.shape
    N = data.shape[0]
    nb = K // 32
    if K % 64 or data.shape[1] != nb * 34:
        raise ValueError(f"kquant_cpu.q80_definition: K = {K} (a multiple of 64) and rows of "
                         f"{nb * 34} bytes wanted, rows are {data.shape[1]}")
    blk = data.reshape(N, nb, 34)
    dw = blk[:, :, :2].copy().view(np.float16).reshape(N, nb).astype(np.float32)
    w = blk[:, :, 2:].copy().view(np.int8).astype(np.int32)              # [N, nb, 32]
    out = np.empty((M, N), np.float32)
    for i in range(M):
        T = (w * q[i].reshape(nb, 32).astype(np.int32)[None]).reshape(N, nb, 8, 4).sum(axis=3)  # [N, nb, 8]
        T = T.reshape(N, nb // 2, 16).astype(np.float32)                  # lanes of pair p
        dd = (dw * dx[i][None]).astype(np.float32)                        # [N, nb]
        ddl = np.repeat(dd.reshape(N, nb // 2, 2), 8, axis=2)             # [N, nb/2, 16]
        acc = np.zeros((N, 16), np.float32)
        for p in range(nb // 2):
            acc = fma32(ddl[:, p], T[:, p], acc)                          # one rounding
        h = 8
        while h >= 2:
            acc = acc[:, :h] + acc[:, h:2 * h]
            h //= 2
        out[i] = acc[:, 0] + acc[:, 1]
    return out


@njit(cache=True, boundscheck=False, nogil=True)
def quantize_q80_rows(x, q, dx):
    """x [M, K] float32 -> q [M, Kp] int8, dx [M, Kp/32] float32 by Q8_0_DEF's quantization
    (quantize_q8_0's bytes); Kp >= K (a multiple of 64): the blocks past K are the zero pad
    (q = 0, dx = 0). A block's largest |x| is the largest of x's bits with the sign cleared
    (an int32 max: it vectorizes; for finite floats the same order as |x|'s), a bits value
    from inf's up meaning an inf or a NaN in the block; each q the same float32 product
    rounded half away from zero as quantize_q80_rows_ref's, by its exact fraction in float32
    (no float64, no branch a value)."""
    M, K = x.shape
    nb = q.shape[1] // 32
    xi = x.view(np.int32)
    bits = np.empty(1, np.int32)
    amaxf = bits.view(np.float32)
    for i in range(M):
        for b in range(nb):
            o = 32 * b
            if o >= K:
                for j in range(32):
                    q[i, o + j] = 0
                dx[i, b] = np.float32(0.0)
                continue
            m = np.int32(0)
            for j in range(32):
                m = max(m, xi[i, o + j] & np.int32(0x7FFFFFFF))
            if m >= np.int32(0x7F800000):                  # an inf or a NaN in the block
                for j in range(32):
                    q[i, o + j] = 0
                dx[i, b] = np.float32(np.nan)
                continue
            bits[0] = m
            amax = amaxf[0]
            d = np.float32(amax / np.float32(127.0))
            idd = np.float32(np.float32(1.0) / d) if d != 0 else np.float32(0.0)
            for j in range(32):
                v = np.float32(x[i, o + j] * idd)
                t = np.float32(np.trunc(v))
                f = v - t                                      # exact: v's fraction
                # roundf: half away from zero
                r = t + (np.float32(1.0) if f >= np.float32(0.5) else np.float32(0.0)) \
                    - (np.float32(1.0) if f <= np.float32(-0.5) else np.float32(0.0))
                q[i, o + j] = np.int8(r)
            # d rounded to the nearest float16 (ties to even), widened; past 65504 inf: exact
            # in float64 (d = m 2^e, m in [0.5, 1): float16's spacing there 2^(e - 11), 2^-24
            # for its subnormals)
            r = np.float64(0.0)
            if d != 0:
                mm, e = math.frexp(np.float64(d))
                quantum = math.ldexp(1.0, max(e - 11, -24))
                r = np.rint(np.float64(d) / quantum) * quantum
            dx[i, b] = np.float32(np.inf) if r > 65504.0 else np.float32(r)


@njit(cache=True, boundscheck=False, nogil=True)
def quantize_q80_rows_ref(x, q, dx):
    """quantize_q80_rows' scalar form (a branch a value: the largest |x| and the finite check
    as float compares): what tests/model/test_q8_0_int8.py holds quantize_q80_rows to byte for
    byte, beside the numpy definition quantize_q8_0."""
    M, K = x.shape
    nb = q.shape[1] // 32
    for i in range(M):
        for b in range(nb):
            o = 32 * b
            if o >= K:
                for j in range(32):
                    q[i, o + j] = 0
                dx[i, b] = np.float32(0.0)
                continue
            amax = np.float32(0.0)
            bad = False
            for j in range(32):
                v = x[i, o + j]
                if not np.isfinite(v):
                    bad = True
                a = abs(v)
                if a > amax:
                    amax = a
            if bad:
                for j in range(32):
                    q[i, o + j] = 0
                dx[i, b] = np.float32(np.nan)
                continue
            d = np.float32(amax / np.float32(127.0))
            idd = np.float32(np.float32(1.0) / d) if d != 0 else np.float32(0.0)
            for j in range(32):
                v = np.float64(np.float32(x[i, o + j] * idd))
                t = np.floor(abs(v) + 0.5)                     # roundf: half away from zero
                q[i, o + j] = np.int8(t if v >= 0 else -t)
            # d rounded to the nearest float16 (ties to even), widened; past 65504 inf: exact
            # in float64 (d = m 2^e, m in [0.5, 1): float16's spacing there 2^(e - 11), 2^-24
            # for its subnormals)
            r = np.float64(0.0)
            if d != 0:
                m, e = math.frexp(np.float64(d))
                quantum = math.ldexp(1.0, max(e - 11, -24))
                r = np.rint(np.float64(d) / quantum) * quantum
            dx[i, b] = np.float32(np.inf) if r > 65504.0 else np.float32(r)


def quantize_q80(x: np.ndarray):
    """(q int8 [M, Kp], dx float32 [M, Kp/32]) of x [M, K] float32 (K a multiple of 32) by
    Q8_0_DEF, in numba (quantize_q8_0's bytes), zero-padded to Kp = K rounded up to 64 (a
    whole number of pairs: the pad block adds exactly 0 to every lane it reaches)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    M, K = x.shape
    if K % 32:
        raise ValueError(f"kquant_cpu.quantize_q80: K = {K} is not a multiple of 32")
    Kp = (K + 63) // 64 * 64
    q = np.empty((M, Kp), np.int8)
    dx = np.empty((M, Kp // 32), np.float32)
    if halves.wanted(M):            # a row's quantization is its own: two halves, two threads
        halves.pair(lambda a, b: quantize_q80_rows(x[a:b], q[a:b], dx[a:b]), M // 2, M)
    else:
        quantize_q80_rows(x, q, dx)
    return q, dx


_PADDED: dict = {}       # id(data) -> (data, its rows with one zero block more)


def q80_padded(data: np.ndarray, kind: str = "Q8_0") -> np.ndarray:
    """Q8_0 (Q5_0) rows (uint8 [..., nb * 34 (22)]) as Q8_0_DEF reads them: nb even, as they
    are; nb odd, one zero block (scale 0, quants 0: Q5_0's values -16, times the pad's x 0)
    appended to each row (a copy, made once an array and kept: only shapes whose width is an
    odd number of blocks, the tiny test shapes; every width of the served models is a
    multiple of 64)."""
    bb = Q80_BLOCK[kind]
    nb = data.shape[-1] // bb
    if nb % 2 == 0:
        return data
    got = _PADDED.get(id(data))
    if got is not None and got[0] is data:
        return got[1]
    pad = np.zeros(data.shape[:-1] + ((nb + 1) * bb,), np.uint8)
    pad[..., :nb * bb] = data
    _PADDED[id(data)] = (data, pad)
    return pad


@njit(cache=True, boundscheck=False, nogil=True)
def q5_aux(q, dx, gs):
    """gs [M, Kp/64, 32] int32 for the Q5_0 tiles (VNNI), a layout of x's q and dx: lane L < 16
    of (i, p) -16 * (q[i, 64 p + 4 L] + ... + q[i, 64 p + 4 L + 3]) (T's start: sum u x - 16
    sum x = sum (q - 16) x over a lane's 4 values), lanes 16 + L the float32 bits of dx[i, 2 p]
    (L < 8) and dx[i, 2 p + 1] (L >= 8): once an x row and pair rather than once a tile."""
    M, Kp = q.shape
    dxi = dx.view(np.int32)
    for i in range(M):
        for p in range(Kp // 64):
            for L in range(16):
                o = 64 * p + 4 * L
                gs[i, p, L] = np.int32(-16) * (np.int32(q[i, o]) + np.int32(q[i, o + 1])
                                               + np.int32(q[i, o + 2]) + np.int32(q[i, o + 3]))
            for L in range(8):
                gs[i, p, 16 + L] = dxi[i, 2 * p]
                gs[i, p, 24 + L] = dxi[i, 2 * p + 1]


def _q80_gs(q, dx, kind):
    """The tiles' gs: Q5_0's q5_aux; Q8_0 reads none (zeros, one row's worth)."""
    if kind == "Q5_0":
        gs = np.empty((q.shape[0], q.shape[1] // 64, 32), np.int32)
        q5_aux(q, np.ascontiguousarray(dx), gs)
        return gs
    return np.zeros((q.shape[0], 1, 16), np.int32)


def q80_grouped_q(q, dx, stack: np.ndarray, experts, offs, vnni=None, kind: str = "Q8_0") -> np.ndarray:
    """Quantized x rows (quantize_q80's q, dx; grouped: group g = rows offs[g]:offs[g+1])
    times the Q8_0 (kind Q5_0: Q5_0) stack uint8 [E, N, nb * 34 (22)] -> [R, N]: every row's
    bytes those of q80_matmul(x_row, stack[experts[g]], kind=kind). One quantized x serves
    several stacks (a MoE layer's gate and up)."""
    data = q80_padded(stack, kind)
    M, Kp = q.shape
    if data.shape[-1] != Kp // 32 * Q80_BLOCK[kind]:
        raise ValueError(f"kquant_cpu.q80_grouped_q: x of {Kp} values (padded) against rows of "
                         f"{stack.shape[-1]} bytes")
    out = np.empty((M, data.shape[1]), np.float32)
    gs = _q80_gs(q, dx, kind)
    return grouped_q(q, dx, gs, kind, data, np.ascontiguousarray(experts, np.int64),
                     np.ascontiguousarray(offs, np.int64), out, vnni)


def q80_grouped(x: np.ndarray, stack: np.ndarray, experts, offs, vnni=None, kind: str = "Q8_0") -> np.ndarray:
    """x [R, K] (rows grouped by expert) times the Q8_0 (Q5_0) stack [E, N, K/32*34 (22)] ->
    [R, N], by Q8_0_DEF (x quantized once)."""
    q, dx = quantize_q80(x)
    return q80_grouped_q(q, dx, stack, experts, offs, vnni, kind)


def q80_matmul(x: np.ndarray, data: np.ndarray, out: np.ndarray | None = None,
               vnni: bool | None = None, kind: str = "Q8_0") -> np.ndarray:
    """x [M, K] float32 times the Q8_0 matrix whose rows are `data` (uint8 [N, K/32*34]; kind
    "Q5_0": Q5_0 rows [N, K/32*22]) -> [M, N] float32 by Q8_0_DEF (x quantized to q8_0 by
    quantize_q80; an odd number of blocks padded with a zero one on both sides). vnni: the
    VNNI form (default: where the host has it) or the portable one; the same bytes."""
    q, dx = quantize_q80(x)
    M, Kp = q.shape
    if data.shape[1] != x.shape[1] // 32 * Q80_BLOCK[kind]:
        raise ValueError(f"kquant_cpu.q80_matmul: K = {x.shape[1]} against rows of "
                         f"{data.shape[1]} bytes")
    data = q80_padded(data, kind)
    if out is None:
        out = np.empty((M, data.shape[0]), np.float32)
    got = _Q80_AUX.get(M)
    if got is None:          # gs (unused by the Q8_0 tiles: zeros, never written) and offs
        got = (np.zeros((M, 1, 16), np.int32), np.array([0, M], np.int64))
        if M <= 64:
            _Q80_AUX[M] = got
    gs = _q80_gs(q, dx, kind) if kind == "Q5_0" else got[0]
    return grouped_q(q, dx, gs, kind, data[None], _ONE, got[1], out, vnni)


_Q80_AUX: dict = {}      # M -> (gs, offs) of q80_matmul's M-row products, M <= 64


def q80_ref(x: np.ndarray, w) -> np.ndarray:
    """The float64 value Q8_0_DEF rounds: x's q8_0 copy (dx_b * q) times w's dequantized
    weights, in float64, to float32 once."""
    q, dx = quantize_q8_0(x)
    xq = (q.astype(np.float64).reshape(q.shape[0], -1, 32) * dx.astype(np.float64)[:, :, None]).reshape(q.shape)
    return (xq @ w.dequantize().astype(np.float64).T).astype(np.float32)
