"""LLVM vector IR helpers for the CPU's numba intrinsics (kernels/blocks_vec.py,
kernels/attention_cpu.py), and two small intrinsics over float32 rows:

  dot16(a, b)      sum_k a[k] b[k], len a multiple of 16: 16 lanes, lane l = fma chain over
                   k = l, l + 16, ... in order, then the lanes in a fixed tree (l, l+8), (l, l+4),
                   (l, l+2), (0, 1)
  axpy16(y, w, x)  y[k] = fma(w, x[k], y[k]) for every k (len a multiple of 16)

Every float operation is named (fmul, the llvm.fma intrinsic, fadd), so no contraction or
reassociation is left to the compiler: the bytes are the same wherever they are inlined.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

F32 = ir.FloatType()
I32, I64 = ir.IntType(32), ir.IntType(64)
V16F = ir.VectorType(F32, 16)
V32F = ir.VectorType(F32, 32)


def fma(builder, a, b, c):
    t = a.type
    name = f"llvm.fma.v{t.count}f32" if isinstance(t, ir.VectorType) else "llvm.fma.f32"
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t, t, t]), name)
    return builder.call(fn, [a, b, c])


def half(builder, ptr):
    h = builder.load(builder.bitcast(ptr, ir.HalfType().as_pointer()), align=1)
    return builder.fpext(h, F32)


def splat(builder, v, n=16):
    t = ir.VectorType(F32, n)
    vec = builder.insert_element(ir.Constant(t, ir.Undefined), v, ir.Constant(I32, 0))
    return builder.shuffle_vector(vec, ir.Constant(t, ir.Undefined), ir.Constant(ir.VectorType(I32, n), [0] * n))


def prefetch_l2(builder, p):
    """Ask for the line at p (any pointer) to come into L2: llvm.prefetch, a read, locality 2
    (prefetcht1), the data cache. No value changes."""
    i8p = ir.IntType(8).as_pointer()
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [i8p, I32, I32, I32]), "llvm.prefetch.p0i8")
    builder.call(fn, [builder.bitcast(p, i8p), ir.Constant(I32, 0), ir.Constant(I32, 2), ir.Constant(I32, 1)])


def lanes(builder, v, lo, n):
    mask = ir.Constant(ir.VectorType(I32, n), list(range(lo, lo + n)))
    return builder.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), mask)


def ptr(context, builder, ty, val):
    return context.make_array(ty)(context, builder, val)


def tree(builder, v):
    """The lanes of v (16 or 32) added in the fixed tree: halves, then halves, ..., to one."""
    n = v.type.count // 2
    while n >= 2:
        v = builder.fadd(lanes(builder, v, 0, n), lanes(builder, v, n, n))
        n //= 2
    return builder.fadd(builder.extract_element(v, ir.Constant(I32, 0)),
                        builder.extract_element(v, ir.Constant(I32, 1)))


def _count_loop(builder, n, body, init):
    """for c in 0 .. n-1: state = body(c, state); returns the final state (init when n == 0)."""
    entry = builder.block
    loop = builder.append_basic_block("v_loop")
    done = builder.append_basic_block("v_done")
    builder.cbranch(builder.icmp_signed(">", n, ir.Constant(I64, 0)), loop, done)
    builder.position_at_end(loop)
    c = builder.phi(I64)
    st = builder.phi(init.type)
    st2 = body(c, st)
    c2 = builder.add(c, ir.Constant(I64, 1))
    end = builder.block
    builder.cbranch(builder.icmp_signed("<", c2, n), loop, done)
    c.add_incoming(ir.Constant(I64, 0), entry)
    c.add_incoming(c2, end)
    st.add_incoming(init, entry)
    st.add_incoming(st2, end)
    builder.position_at_end(done)
    out = builder.phi(init.type)
    out.add_incoming(init, entry)
    out.add_incoming(st2, end)
    return out


def _v16(builder, p, c):
    return builder.load(builder.bitcast(builder.gep(p, [builder.mul(c, ir.Constant(I64, 16))]),
                                        V16F.as_pointer()), align=4)


@intrinsic
def dot16(typingctx, a, b):
    sig = types.float32(a, b)

    def codegen(context, builder, signature, args):
        aa = ptr(context, builder, signature.args[0], args[0])
        bp = ptr(context, builder, signature.args[1], args[1]).data
        n = builder.sdiv(builder.extract_value(aa.shape, 0), ir.Constant(I64, 16))
        acc = _count_loop(builder, n, lambda c, s: fma(builder, _v16(builder, aa.data, c), _v16(builder, bp, c), s),
                          ir.Constant(V16F, [0.0] * 16))
        return tree(builder, acc)
    return sig, codegen


@intrinsic
def axpy16(typingctx, y, w, x):
    sig = types.void(y, w, x)

    def codegen(context, builder, signature, args):
        ya = ptr(context, builder, signature.args[0], args[0])
        xp = ptr(context, builder, signature.args[2], args[2]).data
        wv = splat(builder, args[1])
        n = builder.sdiv(builder.extract_value(ya.shape, 0), ir.Constant(I64, 16))

        def body(c, s):
            yp = builder.bitcast(builder.gep(ya.data, [builder.mul(c, ir.Constant(I64, 16))]), V16F.as_pointer())
            builder.store(fma(builder, wv, _v16(builder, xp, c), builder.load(yp, align=4)), yp, align=4)
            return s
        _count_loop(builder, n, body, ir.Constant(I64, 0))
        return context.get_dummy_value()
    return sig, codegen


def _rows(context, builder, ty, val):
    """A 2-D float32 array's (data as i8*, rows, row stride in bytes): rows are unit-stride."""
    a = ptr(context, builder, ty, val)
    return (builder.bitcast(a.data, ir.IntType(8).as_pointer()), builder.extract_value(a.shape, 0),
            builder.extract_value(a.strides, 0))


def _row(builder, base, r, stride):
    return builder.bitcast(builder.gep(base, [builder.mul(r, stride)]), F32.as_pointer())


def _loop_n(builder, n, body, inits):
    """for c in 0 .. n-1: state = body(c, state), state a list of LLVM values starting at
    `inits`; returns the final state (inits when n == 0)."""
    entry = builder.block
    loop = builder.append_basic_block("vn_loop")
    done = builder.append_basic_block("vn_done")
    builder.cbranch(builder.icmp_signed(">", n, ir.Constant(I64, 0)), loop, done)
    builder.position_at_end(loop)
    c = builder.phi(I64)
    st = [builder.phi(v.type) for v in inits]
    st2 = body(c, st)
    c2 = builder.add(c, ir.Constant(I64, 1))
    end = builder.block
    builder.cbranch(builder.icmp_signed("<", c2, n), loop, done)
    c.add_incoming(ir.Constant(I64, 0), entry)
    c.add_incoming(c2, end)
    for phi, v0, v in zip(st, inits, st2):
        phi.add_incoming(v0, entry)
        phi.add_incoming(v, end)
    builder.position_at_end(done)
    out = []
    for v0, v in zip(inits, st2):
        phi = builder.phi(v.type)
        phi.add_incoming(v0, entry)
        phi.add_incoming(v, end)
        out.append(phi)
    return out


def trees16(builder, accs):
    """tree(accs[k]) for 16 V16F accumulators at once, as one V16F (lane k: key k): each level
    of `tree` (halves added: 8, 4, 2 lanes, then lane 0 + lane 1) done for two accumulators in
    one vector add, their halves gathered side by side by shuffles. Every lane's adds are the
    very fadds `tree` makes (the same two operands at each level), so each lane's bytes are
    tree's."""
    v, w = list(accs), 8
    while w >= 1:
        nxt = []
        for a, b in zip(v[0::2], v[1::2]):
            # a and b hold 16 // (2w) keys each, 2w lanes a key: a key's low w lanes + its high w
            per = 16 // (2 * w)
            lo = [k * 2 * w + i for k in range(per) for i in range(w)]
            hi = [k * 2 * w + w + i for k in range(per) for i in range(w)]
            mlo = ir.Constant(ir.VectorType(I32, 16), lo + [16 + x for x in lo])
            mhi = ir.Constant(ir.VectorType(I32, 16), hi + [16 + x for x in hi])
            nxt.append(builder.fadd(builder.shuffle_vector(a, b, mlo), builder.shuffle_vector(a, b, mhi)))
        v, w = nxt, w // 2
    return v[0]


@intrinsic
def dot_rows16(typingctx, q, rows, out):
    """out[r] = dot16(q, rows[r]) for every row r of rows (2-D, its rows unit-stride, len q a
    multiple of 16): each row's the same fma chain and tree as dot16's. Sixteen rows at a time
    (each q chunk loaded once for the 16 chains, the 16 trees as one: trees16), the rest one
    by one."""
    sig = types.void(q, rows, out)

    def codegen(context, builder, signature, args):
        qa = ptr(context, builder, signature.args[0], args[0])
        base, nr, stride = _rows(context, builder, signature.args[1], args[1])
        od = ptr(context, builder, signature.args[2], args[2]).data
        n = builder.sdiv(builder.extract_value(qa.shape, 0), ir.Constant(I64, 16))
        zero = ir.Constant(V16F, [0.0] * 16)

        def block(bi, st):
            r0 = builder.mul(bi, ir.Constant(I64, 16))
            rps = [_row(builder, base, builder.add(r0, ir.Constant(I64, k)), stride) for k in range(16)]

            def chunk(c, accs):
                qv = _v16(builder, qa.data, c)
                return [fma(builder, qv, _v16(builder, rp, c), a) for rp, a in zip(rps, accs)]
            accs = _loop_n(builder, n, chunk, [zero] * 16)
            op = builder.bitcast(builder.gep(od, [r0]), V16F.as_pointer())
            builder.store(trees16(builder, accs), op, align=4)
            return st
        nb = builder.sdiv(nr, ir.Constant(I64, 16))
        _count_loop(builder, nb, block, ir.Constant(I64, 0))
        first = builder.mul(nb, ir.Constant(I64, 16))

        def row(i, st):
            r = builder.add(first, i)
            rp = _row(builder, base, r, stride)
            acc = _count_loop(builder, n, lambda c, s: fma(builder, _v16(builder, qa.data, c), _v16(builder, rp, c), s),
                              zero)
            builder.store(tree(builder, acc), builder.gep(od, [r]), align=4)
            return st
        _count_loop(builder, builder.sub(nr, first), row, ir.Constant(I64, 0))
        return context.get_dummy_value()
    return sig, codegen


V64F = ir.VectorType(F32, 64)


@intrinsic
def axpy_rows16(typingctx, y, w, rows):
    """axpy16(y, w[r], rows[r]) for r = 0, 1, ... in order (rows 2-D, unit-stride rows, len y
    a multiple of 16): each element of y the same fma chain as those calls, held in registers
    over the rows, 64 lanes at a time (then 16)."""
    sig = types.void(y, w, rows)

    def codegen(context, builder, signature, args):
        ya = ptr(context, builder, signature.args[0], args[0])
        wd = ptr(context, builder, signature.args[1], args[1]).data
        base, nr, stride = _rows(context, builder, signature.args[2], args[2])
        hd = builder.extract_value(ya.shape, 0)

        def pass_(width, first, count):
            vt = ir.VectorType(F32, width)

            def chunk(c, st):
                off = builder.add(first, builder.mul(c, ir.Constant(I64, width)))
                yp = builder.bitcast(builder.gep(ya.data, [off]), vt.as_pointer())

                def row(r, acc):
                    wv = splat(builder, builder.load(builder.gep(wd, [r]), align=4), width)
                    xp = builder.bitcast(builder.gep(_row(builder, base, r, stride), [off]), vt.as_pointer())
                    return fma(builder, wv, builder.load(xp, align=4), acc)
                builder.store(_count_loop(builder, nr, row, builder.load(yp, align=4)), yp, align=4)
                return st
            _count_loop(builder, count, chunk, ir.Constant(I64, 0))

        n64 = builder.sdiv(hd, ir.Constant(I64, 64))
        pass_(64, ir.Constant(I64, 0), n64)
        done = builder.mul(n64, ir.Constant(I64, 64))
        pass_(16, done, builder.sdiv(builder.sub(hd, done), ir.Constant(I64, 16)))
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def axpy_heads16(typingctx, y, w, rows):
    """axpy_rows16(y[a], w[a], rows) for every a (y [A, D], w [A, n], rows [n, D]: 2-D float32,
    unit-stride rows, D a multiple of 16): each y[a, d] the same fma chain over the rows in
    order as axpy_rows16's, four heads at a time where A is a multiple of 4 (a row's lanes
    loaded once for the four, 4 x 4 chains in flight at 64 lanes), else three at a time (3 x
    4 chains) and the heads past the last three one at a time. How heads are grouped changes
    no chain."""
    sig = types.void(y, w, rows)

    def codegen(context, builder, signature, args):
        yb, na, ys = _rows(context, builder, signature.args[0], args[0])
        wb, _, ws = _rows(context, builder, signature.args[1], args[1])
        rb, nr, rs = _rows(context, builder, signature.args[2], args[2])
        D = builder.extract_value(ptr(context, builder, signature.args[0], args[0]).shape, 1)

        def heads(a0, TH):
            yp = [_row(builder, yb, builder.add(a0, ir.Constant(I64, a)), ys) for a in range(TH)]
            wp = [_row(builder, wb, builder.add(a0, ir.Constant(I64, a)), ws) for a in range(TH)]

            def pass_(width, first, count):
                vt = ir.VectorType(F32, width)

                def chunk(c, st):
                    off = builder.add(first, builder.mul(c, ir.Constant(I64, width)))
                    ptrs = [builder.bitcast(builder.gep(p, [off]), vt.as_pointer()) for p in yp]

                    def row(r, acc):
                        x = builder.load(builder.bitcast(builder.gep(_row(builder, rb, r, rs), [off]),
                                                         vt.as_pointer()), align=4)
                        return [fma(builder, splat(builder, builder.load(builder.gep(wp[a], [r]), align=4), width),
                                    x, acc[a]) for a in range(TH)]
                    acc = _loop_n(builder, nr, row, [builder.load(p, align=4) for p in ptrs])
                    for p, v in zip(ptrs, acc):
                        builder.store(v, p, align=4)
                    return st
                _count_loop(builder, count, chunk, ir.Constant(I64, 0))
            n64 = builder.sdiv(D, ir.Constant(I64, 64))
            pass_(64, ir.Constant(I64, 0), n64)
            done = builder.mul(n64, ir.Constant(I64, 64))
            pass_(16, done, builder.sdiv(builder.sub(D, done), ir.Constant(I64, 16)))

        by4 = builder.icmp_signed("==", builder.srem(na, ir.Constant(I64, 4)), ir.Constant(I64, 0))
        with builder.if_else(by4) as (four, other):
            with four:
                def h4(c, st):
                    heads(builder.mul(c, ir.Constant(I64, 4)), 4)
                    return st
                _count_loop(builder, builder.sdiv(na, ir.Constant(I64, 4)), h4, ir.Constant(I64, 0))
            with other:
                full = builder.sdiv(na, ir.Constant(I64, 3))

                def h3(c, st):
                    heads(builder.mul(c, ir.Constant(I64, 3)), 3)
                    return st
                _count_loop(builder, full, h3, ir.Constant(I64, 0))
                first = builder.mul(full, ir.Constant(I64, 3))

                def h1(c, st):
                    heads(builder.add(first, c), 1)
                    return st
                _count_loop(builder, builder.sub(na, first), h1, ir.Constant(I64, 0))
        return context.get_dummy_value()
    return sig, codegen


# exp(x) in float32 as named operations (the same in a vector's lanes and in a scalar): x
# clamped to [-104, 89] (exp underflows to 0 below, overflows to inf above; a NaN stays NaN),
# n = rint(x log2 e), r = x - n ln 2 in two fused steps (ln 2 = C1 + C2, C1 exact in 9 bits),
# exp(r) = 1 + r + r^2 p(r) (p: Cephes' expf polynomial, within ~1 ulp on |r| <= ln2 / 2),
# then times 2^(n >> 1) and 2^(n - (n >> 1)), each a float built from its exponent bits (so
# 2^n for n in -208 .. 128 without an out-of-range exponent field).
_EXP_C1, _EXP_C2 = 0.693359375, -2.12194440e-4
_EXP_P = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2,
          1.6666665459e-1, 5.0000001201e-1)


def _const(t, v):
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [v] * t.count)
    return ir.Constant(t, v)


def _intrinsic1(builder, name, x):
    t = x.type
    suffix = f"v{t.count}f32" if isinstance(t, ir.VectorType) else "f32"
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(t, [t]), f"llvm.{name}.{suffix}")
    return builder.call(fn, [x])


def exp_ir(builder, x):
    """exp(x) lane by lane (x float32 or a float32 vector), by the recipe above."""
    t = x.type
    it = ir.VectorType(I32, t.count) if isinstance(t, ir.VectorType) else I32
    lo, hi = _const(t, -104.0), _const(t, 89.0)
    x = builder.select(builder.fcmp_ordered("<", x, lo), lo, x)
    x = builder.select(builder.fcmp_ordered(">", x, hi), hi, x)
    n = _intrinsic1(builder, "rint", builder.fmul(x, _const(t, 1.4426950408889634)))
    r = fma(builder, n, _const(t, -_EXP_C1), x)
    r = fma(builder, n, _const(t, -_EXP_C2), r)
    p = _const(t, _EXP_P[0])
    for c in _EXP_P[1:]:
        p = fma(builder, p, r, _const(t, c))
    y = builder.fadd(fma(builder, p, builder.fmul(r, r), r), _const(t, 1.0))
    n = builder.select(builder.fcmp_ordered("ord", n, n), n, _const(t, 0.0))   # NaN: y is NaN
    ni = builder.fptosi(n, it)
    n1 = builder.ashr(ni, _const(it, 1))
    n2 = builder.sub(ni, n1)

    def pow2(k):
        return builder.bitcast(builder.shl(builder.add(k, _const(it, 127)), _const(it, 23)), t)
    return builder.fmul(builder.fmul(y, pow2(n1)), pow2(n2))


@intrinsic
def exp32(typingctx, x):
    """exp(x) of one float32 by exp_ir's recipe (the lanes of softmax16 and swiglu16)."""
    sig = types.float32(types.float32)

    def codegen(context, builder, signature, args):
        return exp_ir(builder, args[0])
    return sig, codegen


def _max_tree(builder, v):
    n = v.type.count // 2
    while n >= 1:
        a, b = lanes(builder, v, 0, n), lanes(builder, v, n, n)
        v = builder.select(builder.fcmp_ordered(">", b, a), b, a)
        n //= 2
    return builder.extract_element(v, ir.Constant(I32, 0))


@intrinsic
def softmax16(typingctx, s, scale):
    """s (1-D float32, unit stride, len a multiple of 16; -inf where a lane is padding)
    becomes softmax(s * scale): every s[j] * scale, their max m, e_j = exp_ir(s[j] * scale -
    m), the e_j summed 16 lanes wide (lane l: j = l, l + 16, ... in order, then tree), and
    e_j / that sum. The padding's e_j are 0, which leave every lane's sum as it was."""
    sig = types.void(s, types.float32)

    def codegen(context, builder, signature, args):
        sa = ptr(context, builder, signature.args[0], args[0])
        sc = splat(builder, args[1])
        n = builder.sdiv(builder.extract_value(sa.shape, 0), ir.Constant(I64, 16))

        def at(c):
            return builder.bitcast(builder.gep(sa.data, [builder.mul(c, ir.Constant(I64, 16))]), V16F.as_pointer())

        def scaled(c, mx):
            v = builder.fmul(builder.load(at(c), align=4), sc)
            builder.store(v, at(c), align=4)
            return builder.select(builder.fcmp_ordered(">", v, mx), v, mx)
        mx = splat(builder, _max_tree(builder, _count_loop(builder, n, scaled, _const(V16F, float("-inf")))))

        def exps(c, acc):
            e = exp_ir(builder, builder.fsub(builder.load(at(c), align=4), mx))
            builder.store(e, at(c), align=4)
            return builder.fadd(acc, e)
        tot = splat(builder, tree(builder, _count_loop(builder, n, exps, _const(V16F, 0.0))))

        def norm(c, st):
            builder.store(builder.fdiv(builder.load(at(c), align=4), tot), at(c), align=4)
            return st
        _count_loop(builder, n, norm, ir.Constant(I64, 0))
        return context.get_dummy_value()
    return sig, codegen


def _silu_mul(builder, g, u):
    one = _const(g.type, 1.0)
    return builder.fmul(builder.fdiv(g, builder.fadd(one, exp_ir(builder, builder.fneg(g)))), u)


@intrinsic
def swiglu16(typingctx, g, u, out, k0, k1):
    """out[k] = g[k] / (1 + exp(-g[k])) * u[k] for k in k0 .. k1 - 1 (1-D float32 rows, unit
    stride), 16 lanes at a time from k0, the rest one at a time: the same operations (exp by
    exp_ir) whichever way an element goes."""
    sig = types.void(g, u, out, types.int64, types.int64)

    def codegen(context, builder, signature, args):
        gp, up, op = (ptr(context, builder, signature.args[i], args[i]).data for i in range(3))
        k0, k1 = args[3], args[4]
        n = builder.sdiv(builder.sub(k1, k0), ir.Constant(I64, 16))

        def at(p, k, t):
            return builder.bitcast(builder.gep(p, [k]), t.as_pointer())

        def vec(c, st):
            k = builder.add(k0, builder.mul(c, ir.Constant(I64, 16)))
            v = _silu_mul(builder, builder.load(at(gp, k, V16F), align=4), builder.load(at(up, k, V16F), align=4))
            builder.store(v, at(op, k, V16F), align=4)
            return st
        _count_loop(builder, n, vec, ir.Constant(I64, 0))
        rest = builder.add(k0, builder.mul(n, ir.Constant(I64, 16)))

        def one(c, st):
            k = builder.add(rest, c)
            v = _silu_mul(builder, builder.load(at(gp, k, F32), align=4), builder.load(at(up, k, F32), align=4))
            builder.store(v, at(op, k, F32), align=4)
            return st
        _count_loop(builder, builder.sub(k1, rest), one, ir.Constant(I64, 0))
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def prefetch_rows(typingctx, rows):
    """Ask for every 64-byte line of every row of rows (2-D float32, unit-stride rows) to
    come into L2 (llvm.prefetch, locality 2: prefetcht1; no effect on any value): a job's
    keys and values, scattered over its pages, arrive side by side instead of one miss after
    another. Into L2 rather than L1 (prefetcht0): the attention stage at one row 1.69-2.09 M
    TSC cycles a round against 2.36-2.50 M (receipt 2026-12-02-cpu-regions)."""
    sig = types.void(rows)

    def codegen(context, builder, signature, args):
        base, nr, stride = _rows(context, builder, signature.args[0], args[0])
        a = ptr(context, builder, signature.args[0], args[0])
        nbytes = builder.mul(builder.extract_value(a.shape, 1), ir.Constant(I64, 4))
        lines = builder.sdiv(builder.add(nbytes, ir.Constant(I64, 63)), ir.Constant(I64, 64))

        def row(r, st):
            rp = builder.gep(base, [builder.mul(r, stride)])

            def line(c, s):
                prefetch_l2(builder, builder.gep(rp, [builder.mul(c, ir.Constant(I64, 64))]))
                return s
            _count_loop(builder, lines, line, ir.Constant(I64, 0))
            return st
        _count_loop(builder, nr, row, ir.Constant(I64, 0))
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def chain_cols16(typingctx, q, kt, s):
    """s[g, j] = sum_d q[g, d] kt[d, j] as one fma chain over d = 0, 1, ... from 0, for every
    g and every j < 16 (W // 16) (q [G, D], kt [D, W], s [G, >= W]: 2-D float32, unit-stride
    rows, W a multiple of 16): 16 columns a vector, 32 columns and eight rows of q (then four,
    then one) at a time, each kt row's 32 loaded once for them."""
    sig = types.void(q, kt, s)

    def codegen(context, builder, signature, args):
        qb, nq, qs = _rows(context, builder, signature.args[0], args[0])
        kb, nd, ks = _rows(context, builder, signature.args[1], args[1])
        sb, _, ss = _rows(context, builder, signature.args[2], args[2])
        W = builder.extract_value(ptr(context, builder, signature.args[1], args[1]).shape, 1)
        nb = builder.sdiv(W, ir.Constant(I64, 16))
        zero = ir.Constant(V16F, [0.0] * 16)

        def heads(g0, TH):
            qp = [_row(builder, qb, builder.add(g0, ir.Constant(I64, a)), qs) for a in range(TH)]
            sp = [_row(builder, sb, builder.add(g0, ir.Constant(I64, a)), ss) for a in range(TH)]

            def blocks(j0, NB):         # NB blocks of 16 columns from j0, TH x NB chains
                def step(d, acc):
                    krow = _row(builder, kb, d, ks)
                    kv = [builder.load(builder.bitcast(builder.gep(krow, [builder.add(j0, ir.Constant(I64, 16 * b))]),
                                                       V16F.as_pointer()), align=4) for b in range(NB)]
                    out = []
                    for a in range(TH):
                        qv = splat(builder, builder.load(builder.gep(qp[a], [d]), align=4))
                        out += [fma(builder, qv, kv[b], acc[a * NB + b]) for b in range(NB)]
                    return out
                acc = _loop_n(builder, nd, step, [zero] * (TH * NB))
                for a in range(TH):
                    for b in range(NB):
                        dst = builder.gep(sp[a], [builder.add(j0, ir.Constant(I64, 16 * b))])
                        builder.store(acc[a * NB + b], builder.bitcast(dst, V16F.as_pointer()), align=4)

            pairs = builder.sdiv(nb, ir.Constant(I64, 2))

            def two(c, st):
                blocks(builder.mul(c, ir.Constant(I64, 32)), 2)
                return st
            _count_loop(builder, pairs, two, ir.Constant(I64, 0))

            def one(c, st):
                blocks(builder.mul(pairs, ir.Constant(I64, 32)), 1)
                return st
            _count_loop(builder, builder.sub(nb, builder.mul(pairs, ir.Constant(I64, 2))), one,
                        ir.Constant(I64, 0))

        done = ir.Constant(I64, 0)
        for TH in (8, 4, 1):
            cnt = builder.sdiv(builder.sub(nq, done), ir.Constant(I64, TH))
            first = done

            def grp(c, st, first=first, TH=TH):
                heads(builder.add(first, builder.mul(c, ir.Constant(I64, TH))), TH)
                return st
            _count_loop(builder, cnt, grp, ir.Constant(I64, 0))
            done = builder.add(done, builder.mul(cnt, ir.Constant(I64, TH)))
        return context.get_dummy_value()
    return sig, codegen


DOTS32_TILE = (4, 2)        # dots32's tile: x rows x w rows (2 TR TC chains of 16 lanes in flight)


def _dots32_codegen(TR, TC):
    def codegen(context, builder, signature, args):
        xb, nx, xs = _rows(context, builder, signature.args[0], args[0])
        wb, nw, ws = _rows(context, builder, signature.args[1], args[1])
        ob, _, os_ = _rows(context, builder, signature.args[2], args[2])
        K = builder.extract_value(ptr(context, builder, signature.args[0], args[0]).shape, 1)
        nk = builder.sdiv(K, ir.Constant(I64, 32))
        zero = ir.Constant(V16F, [0.0] * 16)

        def tile(i0, R, n0, C):
            xp = [_row(builder, xb, builder.add(i0, ir.Constant(I64, a)), xs) for a in range(R)]
            wp = [_row(builder, wb, builder.add(n0, ir.Constant(I64, b)), ws) for b in range(C)]

            def step(c, acc):
                k0 = builder.mul(c, ir.Constant(I64, 2))
                k1 = builder.add(k0, ir.Constant(I64, 1))
                xv = [(_v16(builder, p, k0), _v16(builder, p, k1)) for p in xp]
                out = list(acc)
                for b in range(C):
                    w0, w1 = _v16(builder, wp[b], k0), _v16(builder, wp[b], k1)
                    for a in range(R):
                        j = 2 * (a * C + b)
                        out[j] = fma(builder, w0, xv[a][0], acc[j])
                        out[j + 1] = fma(builder, w1, xv[a][1], acc[j + 1])
                return out
            acc = _loop_n(builder, nk, step, [zero] * (2 * R * C))
            for a in range(R):
                orow = _row(builder, ob, builder.add(i0, ir.Constant(I64, a)), os_)
                for b in range(C):
                    j = 2 * (a * C + b)
                    builder.store(tree(builder, builder.fadd(acc[j], acc[j + 1])),
                                  builder.gep(orow, [builder.add(n0, ir.Constant(I64, b))]), align=4)

        def rows_of(i0, R):
            done = ir.Constant(I64, 0)
            for C in (TC, 1):
                cnt = builder.sdiv(builder.sub(nw, done), ir.Constant(I64, C))
                first = done

                def cols(c, st, first=first, C=C):
                    tile(i0, R, builder.add(first, builder.mul(c, ir.Constant(I64, C))), C)
                    return st
                _count_loop(builder, cnt, cols, ir.Constant(I64, 0))
                done = builder.add(done, builder.mul(cnt, ir.Constant(I64, C)))

        done = ir.Constant(I64, 0)
        for R in (TR, 1):
            cnt = builder.sdiv(builder.sub(nx, done), ir.Constant(I64, R))
            first = done

            def rws(c, st, first=first, R=R):
                rows_of(builder.add(first, builder.mul(c, ir.Constant(I64, R))), R)
                return st
            _count_loop(builder, cnt, rws, ir.Constant(I64, 0))
            done = builder.add(done, builder.mul(cnt, ir.Constant(I64, R)))
        return context.get_dummy_value()
    return codegen


@intrinsic
def dots32(typingctx, x, w, out):
    """out[i, n] = sum_k x[i, k] w[n, k] for every row i of x and n of w (x [M, K], w [N, K],
    out [M, >= N]: 2-D float32, unit-stride rows, K a multiple of 32) in kernels/blocks_cpu's
    order for F32 rows: 32 lanes, lane l one fma chain over k = l, l + 32, ... from 0 (two
    16-lane vectors), then lane l + 16 added to lane l and the 16 in `tree`'s order ((l, l+8),
    (l, l+4), (l, l+2), (0, 1)): blocks_cpu.chunk's fixed tree. DOTS32_TILE x rows by w rows
    at a time (each x and w chunk loaded once for the tile's chains), the rest one by one; an
    element's operations depend on K alone."""
    sig = types.void(x, w, out)
    return sig, _dots32_codegen(*DOTS32_TILE)


@intrinsic
def call_f_f_loop(typingctx, addr, x, n):
    """Call a numpy ufunc's one-in one-out inner loop (`void loop(char **args, npy_intp
    *dims, npy_intp *steps, void *data)`, its address `addr` an int64: attention_cpu.np_exp_loop)
    in place on x[:n] (x 1-D float32, unit stride), data NULL: what the ufunc does on a
    contiguous float32 array, so the values are the ufunc's."""
    sig = types.void(addr, x, n)

    def codegen(context, builder, signature, args):
        fa, xa, na = args
        xd = builder.bitcast(ptr(context, builder, signature.args[1], xa).data, ir.IntType(8).as_pointer())
        i8pp = ir.IntType(8).as_pointer().as_pointer()
        argv = cgutils.alloca_once(builder, ir.IntType(8).as_pointer(), size=2)
        builder.store(xd, argv)
        builder.store(xd, builder.gep(argv, [ir.Constant(I32, 1)]))
        dims = cgutils.alloca_once(builder, I64, size=1)
        builder.store(na, dims)
        steps = cgutils.alloca_once(builder, I64, size=2)
        builder.store(ir.Constant(I64, 4), steps)
        builder.store(ir.Constant(I64, 4), builder.gep(steps, [ir.Constant(I32, 1)]))
        fty = ir.FunctionType(ir.VoidType(), [i8pp, I64.as_pointer(), I64.as_pointer(), ir.IntType(8).as_pointer()])
        fn = builder.inttoptr(fa, fty.as_pointer())
        builder.call(fn, [argv, dims, steps, ir.Constant(ir.IntType(8).as_pointer(), None)])
        return context.get_dummy_value()
    return sig, codegen


@intrinsic
def scale_max16(typingctx, s, scale, n):
    """s[j] = s[j] * scale for j < n (s 1-D float32, unit stride, n a multiple of 16), and
    their max: lane l keeps m_l = v if v > m_l else m_l over j = l, l + 16, ... in order
    (from -inf), then m = m_l if m_l > m else m over l = 0 .. 15 (from -inf): Python's max
    (numba's select on an ordered >) in that order, so a NaN is passed over and of +0 / -0
    the first stays."""
    sig = types.float32(s, scale, n)

    def codegen(context, builder, signature, args):
        sd = ptr(context, builder, signature.args[0], args[0]).data
        sc = splat(builder, args[1])
        ninf = ir.Constant(F32, float("-inf"))
        init = ir.Constant(V16F, [float("-inf")] * 16)

        def body(c, m):
            p = builder.bitcast(builder.gep(sd, [builder.mul(c, ir.Constant(I64, 16))]), V16F.as_pointer())
            v = builder.fmul(builder.load(p, align=4), sc)
            builder.store(v, p, align=4)
            return builder.select(builder.fcmp_ordered(">", v, m), v, m)
        mv = _count_loop(builder, builder.sdiv(args[2], ir.Constant(I64, 16)), body, init)
        m = ninf
        for lane in range(16):
            x = builder.extract_element(mv, ir.Constant(I32, lane))
            m = builder.select(builder.fcmp_ordered(">", x, m), x, m)
        return m
    return sig, codegen


V8F = ir.VectorType(F32, 8)


@intrinsic
def sum_leaf8(typingctx, a, o, n):
    """numpy's pairwise-sum leaf of a[o:o+n] for 8 <= n (a 1-D float32, unit stride): 8
    running sums r_k = a[o+k] + a[o+8+k] + ... in order over the first n - n % 8, then
    ((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7)), then the last n % 8 added in turn: the running sums
    as the lanes of one 8-lane vector, each lane's adds those of numpy's."""
    sig = types.float32(a, o, n)

    def codegen(context, builder, signature, args):
        ad = ptr(context, builder, signature.args[0], args[0]).data
        base = builder.gep(ad, [args[1]])
        n8 = builder.sdiv(args[2], ir.Constant(I64, 8))

        def v8(c):
            return builder.load(builder.bitcast(builder.gep(base, [builder.mul(c, ir.Constant(I64, 8))]),
                                                V8F.as_pointer()), align=4)
        first = v8(ir.Constant(I64, 0))

        def body(c, r):
            return builder.fadd(r, v8(builder.add(c, ir.Constant(I64, 1))))
        r = _count_loop(builder, builder.sub(n8, ir.Constant(I64, 1)), body, first)
        x = [builder.extract_element(r, ir.Constant(I32, k)) for k in range(8)]
        res = builder.fadd(builder.fadd(builder.fadd(x[0], x[1]), builder.fadd(x[2], x[3])),
                           builder.fadd(builder.fadd(x[4], x[5]), builder.fadd(x[6], x[7])))
        done = builder.mul(n8, ir.Constant(I64, 8))

        def tail(c, acc):
            return builder.fadd(acc, builder.load(builder.gep(base, [builder.add(done, c)]), align=4))
        return _count_loop(builder, builder.sub(args[2], done), tail, res)
    return sig, codegen
