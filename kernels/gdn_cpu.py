"""Gated DeltaNet on the CPU, one numba call a stream's chunk (kernels/gdn.py is the
definition: the same steps, see its doc).

One fixed arithmetic per position: the conv's taps summed in tap order, each reduction (the
l2 norms, S^T k, S^T q, the gated norm's mean) a sequential sum in index order, scalar exp /
log1p of libm; position t's work reads only the stream's window and state as position t - 1
left them. So a chunk of n positions and n single-position calls give the same bytes
(tests/model/test_qwen3next.py), and a row's bytes never depend on other streams or the round.
No fastmath: LLVM may vectorize the loops over v dims (independent lanes), never reassociate.

Loop order: the conv and the q/k norms position by position, then the recurrence a v head at
a time over the chunk's positions. A prefill chunk runs as one crew round (both cores: the
conv's channels, the norms' positions and the v heads are independent pieces, each computed
by the same code whoever takes it); a chunk under CREW_SERIAL on the caller alone. A head's
state depends on no other head, and a state column on no other column (S^T k, the delta and
S^T q of column j read column j alone), so a head runs 32 columns at a time over the
chunk's positions (_cols16: the block's [dk, 32], 16 KiB at dk 128, in L1, its two sums in
registers, and the walk that adds position t's k delta^T also applying position t + 1's
decay and summing its S^T k). That is the position-major order's arithmetic element for
element: a single position (decode) runs the same code, and a chunk of any size ends in the
same bytes (tests/model/test_qwen3next.py: every cut, the crew against the caller).
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import math
import struct

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from kernels.vec_ir import F32, I32, I64, _loop_n, _row, _rows, ptr
from kernels.vec_ir import splat as _splat

import numba

from kernels.team_cpu import WIDTH, Crew, finish, next_piece, wait


CONV_SPAN = 256         # channels a piece of the conv stage
NORM_SPAN = 8           # positions a piece of the q/k norm stage
CREW_SERIAL = 1 << 18   # at most this many state elements x positions: the caller alone


# ---- expf, 16 lanes: glibc's expf (sysdeps/ieee754/flt-32/e_expf.c, its x86-64 FMA build, the
# one the loader picks on a CPU with FMA) operation for operation, so each lane's bits are
# math.exp's (numba's float32 exp calls libm's expf). In double: kd = fma(N/ln2, x, SHIFT),
# r = fma(N/ln2, x, -(kd - SHIFT)), s = T[k % 32] + k << 47, z = fma(r, C0, C1),
# y = fma(z, r * r, fma(r, C2, 1)), (float)(y * s); the edges as libm's (NaN: x + x, above
# 0x1.62e42ep6: inf, below -0x1.9fe368p6: 0, below -0x1.9d1d9ep6: 2^-149). Checked against
# this host's math.exp at every float32 (docs/receipts/2026-12-05-gdnstep) and against the
# algorithm in exact arithmetic (tests/model/test_gdn_expf.py).
_T = [0x3ff0000000000000, 0x3fefd9b0d3158574, 0x3fefb5586cf9890f, 0x3fef9301d0125b51, 0x3fef72b83c7d517b, 0x3fef54873168b9aa, 0x3fef387a6e756238, 0x3fef1e9df51fdee1, 0x3fef06fe0a31b715, 0x3feef1a7373aa9cb, 0x3feedea64c123422, 0x3feece086061892d, 0x3feebfdad5362a27, 0x3feeb42b569d4f82, 0x3feeab07dd485429, 0x3feea47eb03a5585, 0x3feea09e667f3bcd, 0x3fee9f75e8ec5f74, 0x3feea11473eb0187, 0x3feea589994cce13, 0x3feeace5422aa0db, 0x3feeb737b0cdc5e5, 0x3feec49182a3f090, 0x3feed503b23e255d, 0x3feee89f995ad3ad, 0x3feeff76f2fb5e47, 0x3fef199bdd85529c, 0x3fef3720dcef9069, 0x3fef5818dcfba487, 0x3fef7c97337b9b5f, 0x3fefa4afa2a490da, 0x3fefd0765b6e4540]
EXPF_C = (0x40471547652b82fe, 0x4338000000000000, 0x3ebc6af84b912394, 0x3f2ebfce50fac4f3,
          0x3f962e42ff0c52d6)         # N/ln2, SHIFT, C0, C1, C2 (double bits)
EXPF_EDGES = (88.72283172607422, -103.97207641601562, -103.27892303466797)


def _d(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def _expf_ir(builder, x, n=16):
    """<n x float> x -> expf lane by lane (see above)."""
    DT = ir.DoubleType()
    DV, IV, FV = ir.VectorType(DT, n), ir.VectorType(I64, n), ir.VectorType(F32, n)
    c = lambda v: ir.Constant(DV, [v] * n)
    fma = cgutils.get_or_insert_function(builder.module, ir.FunctionType(DV, [DV, DV, DV]),
                                         f"llvm.fma.v{n}f64")
    gv = builder.module.globals.get("gdn_expf_tab")
    if gv is None:
        at = ir.ArrayType(I64, 32)
        gv = ir.GlobalVariable(builder.module, at, "gdn_expf_tab")
        gv.global_constant = True
        gv.linkage = "internal"
        gv.initializer = ir.Constant(at, _T)
    inv, sh, c0, c1, c2 = (c(_d(b)) for b in EXPF_C)
    xd = builder.fpext(x, DV)
    kd = builder.call(fma, [inv, xd, sh])
    ki = builder.bitcast(kd, IV)
    kd = builder.fsub(kd, sh)
    r = builder.call(fma, [inv, xd, builder.fmul(kd, c(-1.0))])
    idx = builder.and_(ki, ir.Constant(IV, [31] * n))
    tv = ir.Constant(IV, [0] * n)
    for i in range(n):
        e = builder.extract_element(idx, ir.Constant(I32, i))
        tv = builder.insert_element(tv, builder.load(builder.gep(gv, [ir.Constant(I64, 0), e])),
                                    ir.Constant(I32, i))
    s = builder.bitcast(builder.add(tv, builder.shl(ki, ir.Constant(IV, [47] * n))), DV)
    z = builder.call(fma, [r, c0, c1])
    y = builder.call(fma, [z, builder.fmul(r, r), builder.call(fma, [r, c2, c(1.0)])])
    y = builder.fptrunc(builder.fmul(y, s), FV)
    fc = lambda v: ir.Constant(FV, [v] * n)
    hi, lo, lo2 = EXPF_EDGES
    y = builder.select(builder.fcmp_ordered("<", x, fc(lo2)), fc(struct.unpack("<f", struct.pack("<I", 1))[0]), y)
    y = builder.select(builder.fcmp_ordered("<", x, fc(lo)), fc(0.0), y)
    y = builder.select(builder.fcmp_ordered(">", x, fc(hi)), fc(float("inf")), y)
    return builder.select(builder.fcmp_unordered("uno", x, x), builder.fadd(x, x), y)


def _vec(builder, base, j):
    return builder.bitcast(builder.gep(base, [j]), ir.VectorType(F32, 16).as_pointer())


@intrinsic
def _exp16(typingctx, src, dst, j):
    """dst[j:j+16] = expf(src[j:j+16]) (1-D float32, unit stride): _expf_ir's lanes."""
    sig = types.void(src, dst, j)

    def codegen(context, builder, signature, args):
        s = ptr(context, builder, signature.args[0], args[0]).data
        d = ptr(context, builder, signature.args[1], args[1]).data
        builder.store(_expf_ir(builder, builder.load(_vec(builder, s, args[2]), align=4)),
                      _vec(builder, d, args[2]), align=4)
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _silu16(typingctx, row, c0, m):
    """row[c0 + 16 i + l] = v / (1 + expf(-v)) for i < m (1-D float32, unit stride, in
    place): the scalar form's float32 operations lane by lane."""
    sig = types.void(row, c0, m)

    def codegen(context, builder, signature, args):
        base = ptr(context, builder, signature.args[0], args[0]).data
        FV = ir.VectorType(F32, 16)
        one, neg = ir.Constant(FV, [1.0] * 16), ir.Constant(FV, [-1.0] * 16)

        def body(i, st):
            p = _vec(builder, base, builder.add(args[1], builder.mul(i, ir.Constant(I64, 16))))
            v = builder.load(p, align=4)
            e = _expf_ir(builder, builder.fmul(v, neg))
            builder.store(builder.fdiv(v, builder.fadd(one, e)), p, align=4)
            return st
        _loop_n(builder, args[2], body, [ir.Constant(I64, 0)])
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def _gate16(typingctx, o, z, w, rr, m):
    """o[16 i + l] = ((o * rr) * w) * (z / (1 + expf(-z))) for i < m (o, z, w 1-D float32,
    unit stride; o in place): the gated norm's scalar float32 operations lane by lane."""
    sig = types.void(o, z, w, rr, m)

    def codegen(context, builder, signature, args):
        ob, zb, wb = (ptr(context, builder, signature.args[i], args[i]).data for i in (0, 1, 2))
        FV = ir.VectorType(F32, 16)
        one, neg = ir.Constant(FV, [1.0] * 16), ir.Constant(FV, [-1.0] * 16)
        r = _splat(builder, args[3], 16)

        def body(i, st):
            j = builder.mul(i, ir.Constant(I64, 16))
            po = _vec(builder, ob, j)
            zz = builder.load(_vec(builder, zb, j), align=4)
            sz = builder.fdiv(zz, builder.fadd(one, _expf_ir(builder, builder.fmul(zz, neg))))
            ow = builder.fmul(builder.fmul(builder.load(po, align=4), r),
                              builder.load(_vec(builder, wb, j), align=4))
            builder.store(builder.fmul(ow, sz), po, align=4)
            return st
        _loop_n(builder, args[4], body, [ir.Constant(I64, 0)])
        return context.get_dummy_value()
    return sig, codegen



@njit(cache=True, boundscheck=False, nogil=True)
def _conv(mix, conv_t, window, y, c0, c1):
    """1. the short causal convolution of channels [c0, c1) over [window | mix] (conv_t
    [K, C]: the taps transposed), position by position, each channel's taps summed in tap
    order from 0.0, then silu; the window becomes the last K - 1 rows of [window | mix].
    Channels are independent: any split of them gives the same bytes. The taps read the
    rows in place (no window moved a position), a tap's products over the channels a
    vector loop; the sums' order is the definition's."""
    n = mix.shape[0]
    K = conv_t.shape[0]
    one = np.float32(1.0)
    for t in range(n):
        yt = y[t]
        if K == 4:                           # the models' kernel: the four taps in one pass
            x0 = mix[t - 3] if t >= 3 else window[t]
            x1 = mix[t - 2] if t >= 2 else window[t + 1]
            x2 = mix[t - 1] if t >= 1 else window[t + 2]
            x3 = mix[t]
            w0, w1, w2, w3 = conv_t[0], conv_t[1], conv_t[2], conv_t[3]
            for c in range(c0, c1):
                yt[c] = (((np.float32(0.0) + w0[c] * x0[c]) + w1[c] * x1[c]) + w2[c] * x2[c]) + w3[c] * x3[c]
        else:
            for j in range(K):
                s = t + j - (K - 1)
                src = mix[s] if s >= 0 else window[t + j]
                wj = conv_t[j]
                if j == 0:
                    for c in range(c0, c1):
                        yt[c] = np.float32(0.0) + wj[c] * src[c]
                else:
                    for c in range(c0, c1):
                        yt[c] += wj[c] * src[c]
        m = (c1 - c0) // 16                  # silu 16 lanes at a time (libm's expf bits)
        _silu16(yt, c0, m)
        for c in range(c0 + 16 * m, c1):
            acc = yt[c]
            yt[c] = acc / (one + np.float32(math.exp(-acc)))
    for j in range(K - 1):                   # ascending: row n + j > j is not yet overwritten
        s = n + j - (K - 1)
        for c in range(c0, c1):
            window[j, c] = mix[s, c] if s >= 0 else window[n + j, c]


@njit(cache=True, boundscheck=False, nogil=True)
def _norms(y, nk, dk, q, k, t0, t1):
    """2. q, k of positions [t0, t1): l2-normed per head (a sequential sum), q scaled."""
    one = np.float32(1.0)
    scale = np.float32(1.0) / np.float32(math.sqrt(dk))
    l2eps = np.float32(1e-6)
    for t in range(t0, t1):
        for h in range(nk):
            sq = np.float32(0.0)
            sk = np.float32(0.0)
            for i in range(dk):
                vq = y[t, h * dk + i]
                vk = y[t, nk * dk + h * dk + i]
                sq += vq * vq
                sk += vk * vk
            iq = one / np.float32(math.sqrt(sq + l2eps))
            ik = one / np.float32(math.sqrt(sk + l2eps))
            for i in range(dk):
                q[t, h, i] = (y[t, h * dk + i] * iq) * scale
                k[t, h, i] = y[t, nk * dk + h * dk + i] * ik


def _cols_ir(builder, S, ss, k, ks, q, qs, v, vs, dec, bet, o, os_, n, dk, j0, w):
    """The recurrence of w (16 or 32) state columns [j0, j0 + w) over the chunk's n >= 1
    positions (_cols16's doc), each float operation named (fmul, fadd, fsub: no fma, no
    reassociation), so every lane's arithmetic is the scalar form's element for element."""
    VT = ir.VectorType(F32, w)
    z16 = ir.Constant(VT, [0.0] * w)

    def splat(builder, x):
        return _splat(builder, x, w)

    def col(base, stride, r):                          # <w x float>* at row r, column j0
        return builder.bitcast(builder.gep(_row(builder, base, r, stride), [j0]), VT.as_pointer())

    def scal(base, stride, t, i):                      # base[t, i] (a float32 row-major view)
        return builder.load(builder.gep(_row(builder, base, t, stride), [i]), align=4)

    def gate(p, t):
        return splat(builder, builder.load(builder.gep(p, [t]), align=4))

    def pass_a(t):                                     # S *= decay_t;  kv = S^T k_t
        dv = gate(dec, t)

        def body(i, st):
            sp = col(S, ss, i)
            sd = builder.fmul(builder.load(sp, align=4), dv)
            builder.store(sd, sp, align=4)
            return [builder.fadd(st[0], builder.fmul(sd, splat(builder, scal(k, ks, t, i))))]
        return _loop_n(builder, dk, body, [z16])[0]

    def delta(t, kv):                                  # (v_t - kv) * beta_t
        vv = builder.load(col(v, vs, t), align=4)
        return builder.fmul(builder.fsub(vv, kv), gate(bet, t))

    one = ir.Constant(I64, 1)
    kv0 = pass_a(ir.Constant(I64, 0))

    def position(t, st):
        # S += k_t d^T, o_t = S^T q_t, then position t + 1's decay and S^T k in the same walk
        d = delta(t, st[0])
        t1 = builder.add(t, one)
        dn = gate(dec, t1)

        def body(i, acc):
            sp = col(S, ss, i)
            su = builder.fadd(builder.load(sp, align=4), builder.fmul(splat(builder, scal(k, ks, t, i)), d))
            oo = builder.fadd(acc[0], builder.fmul(su, splat(builder, scal(q, qs, t, i))))
            sd = builder.fmul(su, dn)
            builder.store(sd, sp, align=4)
            return [oo, builder.fadd(acc[1], builder.fmul(sd, splat(builder, scal(k, ks, t1, i))))]
        oo, kv = _loop_n(builder, dk, body, [z16, z16])
        builder.store(oo, col(o, os_, t), align=4)
        return [kv]
    last = builder.sub(n, one)
    kv = _loop_n(builder, last, position, [kv0])[0]
    d = delta(last, kv)

    def body(i, acc):
        sp = col(S, ss, i)
        su = builder.fadd(builder.load(sp, align=4), builder.fmul(splat(builder, scal(k, ks, last, i)), d))
        builder.store(su, sp, align=4)
        return [builder.fadd(acc[0], builder.fmul(su, splat(builder, scal(q, qs, last, i))))]
    builder.store(_loop_n(builder, dk, body, [z16])[0], col(o, os_, last), align=4)


@intrinsic
def _cols16(typingctx, S, k, q, v, dec, bet, o):
    """For every column j of S in the blocks of 32, then of 16 (S [dk, dv] float32, one v
    head's state; the columns past the last whole 16 are left to the caller): over positions t = 0 .. n-1 of
    k, q [n, dk] (the head's k head), v [n, >= dv] (its v), dec, bet [n] (its decay, beta),

        S[:, j] *= dec[t];  kv = sum_i S[i, j] k[t, i]          (i in order, from 0.0)
        d = (v[t, j] - kv) * bet[t]
        S[:, j] += k[t] d;  o[t, j] = sum_i S[i, j] q[t, i]       (i in order, from 0.0)

    A state column depends on no other column, so this is the scan's arithmetic (kernels/
    gdn.py) element for element; a block's [dk, 32] (16 KiB at dk 128) stays in L1 over the
    positions, its kv and o sums in registers, and the walk that adds position t's k d^T also
    applies position t + 1's decay and sums its S^T k (one walk a position). Every array 2-D
    or 1-D float32 with unit-stride rows."""
    sig = types.void(S, k, q, v, dec, bet, o)

    def codegen(context, builder, signature, args):
        Sb, dk, ss = _rows(context, builder, signature.args[0], args[0])
        dv = builder.extract_value(ptr(context, builder, signature.args[0], args[0]).shape, 1)
        kb, n, ks = _rows(context, builder, signature.args[1], args[1])
        qb, _, qs = _rows(context, builder, signature.args[2], args[2])
        vb, _, vs = _rows(context, builder, signature.args[3], args[3])
        dec = ptr(context, builder, signature.args[4], args[4]).data
        bet = ptr(context, builder, signature.args[5], args[5]).data
        ob, _, os_ = _rows(context, builder, signature.args[6], args[6])

        def block(c, st):                              # 32 columns at a time (16 KiB at dk 128)
            _cols_ir(builder, Sb, ss, kb, ks, qb, qs, vb, vs, dec, bet, ob, os_, n, dk,
                     builder.mul(c, ir.Constant(I64, 32)), 32)
            return st
        n32 = builder.sdiv(dv, ir.Constant(I64, 32))
        _loop_n(builder, n32, block, [ir.Constant(I64, 0)])
        j0 = builder.mul(n32, ir.Constant(I64, 32))

        def block16(c, st):                            # then 16 if 16 are left
            _cols_ir(builder, Sb, ss, kb, ks, qb, qs, vb, vs, dec, bet, ob, os_, n, dk, j0, 16)
            return st
        _loop_n(builder, builder.sdiv(builder.sub(dv, j0), ir.Constant(I64, 16)), block16,
                [ir.Constant(I64, 0)])
        return context.get_dummy_value()
    return sig, codegen


def _one_ir(builder, S, ss, k, q, v, dec, bet, o, dk, j0, w):
    """One position (a decode step) over w state columns [j0, j0 + w) (w a multiple of 16: 128
    keeps eight 16-lane sums in flight, where 32 columns over several positions keep two):
    _cols_ir's arithmetic for n = 1 element for element (the decay applied where S is read,
    S*decay recomputed, not stored, between the two walks: the same fmul, the same bits)."""
    VT = ir.VectorType(F32, w)
    z = ir.Constant(VT, [0.0] * w)
    dv_, bt = _splat(builder, dec, w), _splat(builder, bet, w)

    def col(i):
        return builder.bitcast(builder.gep(_row(builder, S, i, ss), [j0]), VT.as_pointer())

    def at(p, i):
        return _splat(builder, builder.load(builder.gep(p, [i]), align=4), w)

    def pass_a(i, st):                                 # kv = sum_i (S[i] * decay) k[i]
        sd = builder.fmul(builder.load(col(i), align=4), dv_)
        return [builder.fadd(st[0], builder.fmul(sd, at(k, i)))]
    kv = _loop_n(builder, dk, pass_a, [z])[0]
    vv = builder.load(builder.bitcast(builder.gep(v, [j0]), VT.as_pointer()), align=4)
    d = builder.fmul(builder.fsub(vv, kv), bt)         # (v - kv) * beta

    def pass_b(i, st):                                 # S[i] = S[i] decay + k[i] d; o += S[i] q[i]
        sp = col(i)
        su = builder.fadd(builder.fmul(builder.load(sp, align=4), dv_), builder.fmul(at(k, i), d))
        builder.store(su, sp, align=4)
        return [builder.fadd(st[0], builder.fmul(su, at(q, i)))]
    oo = _loop_n(builder, dk, pass_b, [z])[0]
    builder.store(oo, builder.bitcast(builder.gep(o, [j0]), VT.as_pointer()), align=4)


@intrinsic
def _cols_one(typingctx, S, k, q, v, dec, bet, o):
    """One position of v head's state S [dk, dv] (unit-stride rows): k, q [dk], v, o [>= dv]
    1-D contiguous float32, dec and bet float32 scalars; _cols16's arithmetic for n = 1
    (_one_ir), the columns in blocks of 128, then 32, then 16 (the columns past the last whole
    16 are left to the caller)."""
    sig = types.void(S, k, q, v, dec, bet, o)

    def codegen(context, builder, signature, args):
        Sb, dk, ss = _rows(context, builder, signature.args[0], args[0])
        dv = builder.extract_value(ptr(context, builder, signature.args[0], args[0]).shape, 1)
        kb, qb, vb, ob = (ptr(context, builder, signature.args[i], args[i]).data for i in (1, 2, 3, 6))
        j = ir.Constant(I64, 0)
        for w in (128, 32, 16):
            def block(c, st, w=w, j=j):
                _one_ir(builder, Sb, ss, kb, qb, vb, args[4], args[5], ob, dk,
                        builder.add(j, builder.mul(c, ir.Constant(I64, w))), w)
                return st
            nb = builder.sdiv(builder.sub(dv, j), ir.Constant(I64, w))
            _loop_n(builder, nb, block, [ir.Constant(I64, 0)])
            j = builder.add(j, builder.mul(nb, ir.Constant(I64, w)))
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True, boundscheck=False, nogil=True)
def _head(h, y, z, b, a, A_log, dt_bias, norm_w, eps, state, nk, q, k, out):
    """3. v head h's recurrence over the chunk's positions, then its gated norm (a head's
    state depends on no other head, nor a state column on another: the position-major
    order's arithmetic element for element, the head's state kept in cache over the chunk,
    16 columns at a time in L1 (_cols16); the columns past the last 16 in the same order
    here)."""
    n = y.shape[0]
    nv, dk, dv = state.shape
    r = nv // nk
    one = np.float32(1.0)
    v0 = 2 * nk * dk
    kh = h // r
    A = np.float32(math.exp(A_log[h]))
    S = state[h]
    o = out[:, h * dv:(h + 1) * dv]          # S^T q here, then the gated norm in place
    kk = k[:, kh, :]
    qq = q[:, kh, :]
    vv = y[:, v0 + h * dv:v0 + (h + 1) * dv]
    j0 = dv - dv % 16
    if n == 1 and j0 == dv:                  # a decode step: one walk pair, 128 columns at once
        x = a[0, h] + dt_bias[h]
        sp = x if x > np.float32(20.0) else np.float32(math.log1p(math.exp(x)))
        _cols_one(S, kk[0], qq[0], vv[0], np.float32(math.exp(-(A * sp))),
                  one / (one + np.float32(math.exp(-b[0, h]))), o[0])
        _gated_norm(h, o, z, norm_w, eps, out)
        return
    dec = np.empty(n, np.float32)
    bet = np.empty(n, np.float32)
    for t in range(n):
        x = a[t, h] + dt_bias[h]
        sp = x if x > np.float32(20.0) else np.float32(math.log1p(math.exp(x)))
        dec[t] = np.float32(math.exp(-(A * sp)))
        bet[t] = one / (one + np.float32(math.exp(-b[t, h])))
    if n > 0:
        _cols16(S, kk, qq, vv, dec, bet, o)
    if j0 < dv:
        kv = np.empty(dv, np.float32)
        d = np.empty(dv, np.float32)
        for t in range(n):
            decay = dec[t]
            for j in range(j0, dv):
                kv[j] = np.float32(0.0)
            for i in range(dk):
                ki = kk[t, i]
                for j in range(j0, dv):
                    sd = S[i, j] * decay
                    S[i, j] = sd
                    kv[j] += sd * ki
            for j in range(j0, dv):
                d[j] = (vv[t, j] - kv[j]) * bet[t]
                o[t, j] = np.float32(0.0)
            for i in range(dk):
                ki = kk[t, i]
                qi = qq[t, i]
                for j in range(j0, dv):
                    su = S[i, j] + ki * d[j]
                    S[i, j] = su
                    o[t, j] += su * qi
    _gated_norm(h, o, z, norm_w, eps, out)


@njit(cache=True, boundscheck=False, nogil=True)
def _gated_norm(h, o, z, norm_w, eps, out):
    """v head h's gated RMSNorm of its S^T q rows o [n, dv] (a view of out's head columns,
    overwritten in place): a sequential sum of squares, then ((o * rr) * w) * silu(z)."""
    one = np.float32(1.0)
    dv = o.shape[1]
    for t in range(o.shape[0]):
        ss = np.float32(0.0)
        for j in range(dv):
            ss += o[t, j] * o[t, j]
        rr = one / np.float32(math.sqrt(ss / np.float32(dv) + eps))
        m = dv // 16                         # 16 lanes at a time (libm's expf bits), the rest below
        _gate16(out[t, h * dv:(h + 1) * dv], z[t, h * dv:(h + 1) * dv], norm_w, rr, m)
        for j in range(16 * m, dv):
            zz = z[t, h * dv + j]
            out[t, h * dv + j] = ((o[t, j] * rr) * norm_w[j]) * (zz / (one + np.float32(math.exp(-zz))))


@njit(cache=True, boundscheck=False, nogil=True)
def _member(m, nm, ctr, mix, z, b, a, conv_t, A_log, dt_bias, norm_w, eps, window, state, nk,
            y, q, k, out):
    """Member m of a crew of nm (kernels/team_cpu.py): the conv's channel spans (stage 0),
    the norms' position spans (stage 1), the v heads (stage 2), each stage's pieces taken
    from its counter and waited for as a whole before the next. A piece's bytes depend on
    the piece alone, so any crew (one member included) gives the same bytes."""
    n, C = mix.shape
    nv, dk, _ = state.shape
    P0 = (C + CONV_SPAN - 1) // CONV_SPAN
    p = next_piece(ctr, 0)
    while p < P0:
        _conv(mix, conv_t, window, y, p * CONV_SPAN, min(C, (p + 1) * CONV_SPAN))
        finish(ctr, 0)
        p = next_piece(ctr, 0)
    wait(ctr, 0, P0)
    P1 = (n + NORM_SPAN - 1) // NORM_SPAN
    p = next_piece(ctr, 1)
    while p < P1:
        _norms(y, nk, dk, q, k, p * NORM_SPAN, min(n, (p + 1) * NORM_SPAN))
        finish(ctr, 1)
        p = next_piece(ctr, 1)
    wait(ctr, 1, P1)
    p = next_piece(ctr, 2)
    while p < nv:
        _head(p, y, z, b, a, A_log, dt_bias, norm_w, eps, state, nk, q, k, out)
        finish(ctr, 2)
        p = next_piece(ctr, 2)
    wait(ctr, 2, nv)


_CREW = []
_CONV_T = {}         # id(conv_w) -> (conv_w, its taps transposed [K, C]): made once a layer


def _taps(conv_w):
    """conv_w [C, K] as [K, C] (a tap's weights a row), kept for the array's life (a layer's
    weight: the same object every round)."""
    got = _CONV_T.get(id(conv_w))
    if got is None or got[0] is not conv_w:
        got = _CONV_T[id(conv_w)] = (conv_w, np.ascontiguousarray(conv_w.T))
    return got[1]


def _f32(x):
    """x as a C-contiguous float32 array (itself where it is one: a decode row's slices)."""
    return x if x.dtype == np.float32 and x.flags.c_contiguous else np.ascontiguousarray(x, np.float32)


def chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk: int):
    """kernels/gdn.chunk's contract, in numba: out [n, nv dv]; window and state in place
    (both must be C-contiguous float32 views of the stream's fixed part). A chunk of more
    than CREW_SERIAL state elements x positions runs as one crew round of numba's thread
    count (kernels/team_cpu.Crew: the conv by channels, the norms by positions, the
    recurrence by v heads); the same pieces on the caller alone below it: the same bytes."""
    n, C = mix.shape
    nv, dk, dv = state.shape
    out = np.empty((n, nv * dv), np.float32)
    y = np.empty((n, C), np.float32)
    q = np.empty((n, nk, dk), np.float32)
    k = np.empty((n, nk, dk), np.float32)
    c = _f32
    ctr = np.zeros((4, WIDTH), np.int64)                 # three stages, the abort row
    args = (ctr, c(mix), c(z), c(b), c(a), _taps(conv_w), A_log, dt_bias, norm_w,
            np.float32(eps), window, state, nk, y, q, k, out)
    if n * nv * dk * dv <= CREW_SERIAL or (nm := min(numba.get_num_threads(), 16)) == 1:
        _member(0, 1, *args)                             # a decode step: the caller alone
        return out
    if not _CREW:
        _CREW.append(Crew(_member))
    _CREW[0].run(nm, args)
    return out
