"""Multi-head latent attention over pages on the CPU in numba: what the deepseek2 family runs
where numba loads (kernels.ops.mla_attend). The numpy definition is kernels/mla.py; this is
the same absorbed form for every position, in its own fixed arithmetic.

**Which bytes.** Not the definition's: the definition multiplies through OpenBLAS
(kernels/matmul.ref, 4-row tiles) whose summation order is its own, so no numba code can be
its byte twin. The family's bytes are this kernel's; its numbers are held to the definition
within float32 rounding (tests/model/test_mla_cpu.py) and the family to its recorded
references under the golden rule (tests/model/test_moe_golden.py), with paged == window,
solo == concurrent, resumed == fresh and TP 2 / 3 == TP 1 tested on these bytes
(tests/model/test_mla_engine.py, tests/ranks/test_moe_tp.py). Where numba does not load,
ops.mla_attend runs the definition instead (other bytes, the same numbers within rounding).

What is the definition's, byte for byte: the latent row a token stores (rmsnorm of c_kv,
interleaved RoPE of k_pe: kernels/mla.latent_rows) and its write through the table, and q's
RoPE'd part (kernels/mla.rope_interleaved): numpy's operations, here in one numba call a
round (_prep: the norm in numpy's summation order, rmsnorm_cpu._np_norm_row; each RoPE
product and sum one float32 operation; cos / sin numpy's, made once a round). Then, for each (query row t, head h),
alone (never depending on another row or head):

    qa[c]   = q_nope . W_UK[h][:, c]  a dot16: 16 lanes (lane l: n = l, l + 16, ... in an
                                      fma chain), then the fixed tree (l, l + 8), (l, l + 4),
                                      (l, l + 2), (0, 1)
    qa[C:]  = rope(q_pe)
    s_j     = qa . row_j              j = 0 .. p (p: t's position), a dot16 over C + R

then **one pass over the latent rows** (an online softmax; the rows a block reads stay in
L1/L2 from its scores to its values), in **segments** of SEG = 256 keys and **blocks** of
KB = 16 keys, both counted from key 0 (absolute: a row's cuts depend on p alone):

    a segment, from m = -inf, lv = 0 (16 lanes), o = 0 (C):
      each block:  v_j = s_j * scale; m' = max(m, max_j v_j) (a fixed max tree); alpha =
                   exp_ir(m - m'); e_j = exp_ir(v_j - m') (kernels.vec_ir: one recipe of
                   named ops, ~1 ulp; 0 past p); lv = fma(lv, alpha, e) lane j mod 16;
                   o = o * alpha (skipped where alpha is 1: the same bytes); then
                   o[c] = fma(e_j, row_j[c], o[c]) over the block's keys in order
      its l = lv's lanes in the fixed tree
    the segments merged in order (_merge): the first taken as it is; then M' = max(M, m),
      a = exp_ir(M - M'), b = exp_ir(m - M'), L = fma(l, b, L a), O = fma(o, b, O a)
    o_lat   = O / L
    out[v]  = o_lat . W_UV[h][v, :]   a dot16 over C

(dot16 and axpy16 are kernels/vec_ir.py's chains; here computed several at a time,
dot_tile16 / dot_tile_q8 / axpy_heads16, which keep each chain as it is; every float
operation named, so the compiler reorders nothing; widths not a multiple of 16 take plain
loops of the same chains with an explicit fma). A chain's order depends on p and the widths
alone: not on the round, the chunk, where the pages lie (a block across pages is copied
first), how many heads this rank holds (TP) or how the jobs are cut, so prefill and decode
are one arithmetic.

W_UK and W_UV are read as [H, C, N] and [H, V, C] rows (llama.cpp's attn_k_b / attn_v_b):
float32, or a GGUF's Q8_0 blocks as stored, dequantized in registers (f16 scale x int8 is
exact in float32), so a Q8_0 file's products are the bytes of its float32 values and a
decode step reads 3.8x fewer weight bytes.

**Both cores for one request.** The work is cut into jobs of (a block of query rows, a block
of heads): a prefill chunk's rows in blocks of 16 with every head (a block's scores one tile
of its 16 rows x heads queries against each 16-key block). A job takes its heads' W_UK once
for its rows, reads each key block once for all its rows and heads, and expands its rows
through its heads' W_UV. A round of at most 16 rows whose keys span several segments (decode
at depth) runs in **split mode** (_run's mode 2): absorb by (rows, head block) jobs, then each
(rows, segment) job reads its segment's latent rows once for every head (the 2 threads
take half the keys each), then (rows, head block) jobs merge each row's segments in order
and expand: the same functions in the same order, so the same bytes (tested). The cut
changes the speed only (tested: any cut, serial or parallel, split or not, the same bytes).
Rounds of few multiply-adds run on the calling thread (entering a parallel region costs more
than they do on a loaded machine: kernels/blocks_cpu.SERIAL_MACS). A parallel round that is
not split runs on a **crew** (kernels/team_cpu.Crew; _run's mode 3): the caller and a helper
take jobs one at a time from a counter (heads cut into at least CREW_JOBS jobs a thread), and
the caller never waits at a barrier for a helper that has taken none. A parallel region
(prange, libgomp's static schedule) waits for every thread: on the shared 2-core host, with
other processes runnable, a decode step's latent attention measured 8.6-9.7 ms a layer
instead of 0.55 (its second thread queued behind them for a time slice); on the crew 1.0 ms
there, and 0.64 against the region's 0.57 when the host is quieter (receipt
2026-12-05-mladec). Split mode keeps the region (its three stages would each wait).
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from kernels import mla
from kernels.blocks_cpu import SERIAL_MACS, _noalias
from kernels.rmsnorm_cpu import _np_norm_row
from kernels.rmsnorm_cpu import _stack as _norm_stack
from kernels.team_cpu import finish, next_piece, wait
from kernels.vec_ir import (F32, I64, V16F, _count_loop, _loop_n, _max_tree, _row, _rows, _v16, axpy_rows16,
                            dot_rows16, exp32, exp_ir, fma, half, ptr, splat, tree)

ROW_BLOCK = 16            # query rows a job takes when a chunk has many


@intrinsic
def fma32(typingctx, a, b, c):
    """fma(a, b, c) of three float32: one rounding (llvm.fma.f32), the chains' step where a
    width is not a multiple of 16."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):
        return fma(builder, *args)
    return sig, codegen


def _tile(builder, q, r, o, i0, r0, TA, TR, chunks):
    """out[i0 + a, r0 + b] = dot16(q[i0 + a], rows[r0 + b]) for a < TA, b < TR: TA x TR
    independent 16-lane fma chains side by side (each the chain dot16 runs), then each its tree."""
    (qb, _, qs), (rb, _, rs), (ob, _, os_) = q, r, o
    qp = [_row(builder, qb, builder.add(i0, ir.Constant(I64, a)), qs) for a in range(TA)]
    rp = [_row(builder, rb, builder.add(r0, ir.Constant(I64, b)), rs) for b in range(TR)]

    def body(c, acc):
        qv = [_v16(builder, p, c) for p in qp]
        rv = [_v16(builder, p, c) for p in rp]
        return [fma(builder, qv[a], rv[b], acc[a * TR + b]) for a in range(TA) for b in range(TR)]
    acc = _loop_n(builder, chunks, body, [ir.Constant(V16F, [0.0] * 16)] * (TA * TR))
    for a in range(TA):
        orow = _row(builder, ob, builder.add(i0, ir.Constant(I64, a)), os_)
        for b in range(TR):
            builder.store(tree(builder, acc[a * TR + b]),
                          builder.gep(orow, [builder.add(r0, ir.Constant(I64, b))]), align=4)


TILE_Q, TILE_R = 4, 4          # dot_tile16: 16 chains in flight, 8 loads a 16-lane step
Q8_TILE_Q, Q8_TILE_R = 4, 2    # dot_tile_q8: a dequantized block used by 4 queries
TILE_R1 = 8                    # rows side by side for a query left over (a decode row's
                               # absorb and expand: 8 chains in flight, not 2)


@intrinsic
def dot_tile16(typingctx, qs, rows, out):
    """out[a, b] = dot16(qs[a], rows[b]) for every a, b (2-D arrays, unit-stride rows, the
    width a multiple of 16; qs and out float32, rows float32 or uint8 bytes read as float32): each the same fma chain and tree as dot16's, computed
    TILE_Q queries x TILE_R rows at a time (8 chains in flight instead of one: dot16's single
    chain waits on each fma's latency), remainders in smaller tiles. The bytes of every
    out[a, b] are dot16's whatever the tile."""
    sig = types.void(qs, rows, out)

    def codegen(context, builder, signature, args):
        q = _rows(context, builder, signature.args[0], args[0])
        r = _rows(context, builder, signature.args[1], args[1])
        o = _rows(context, builder, signature.args[2], args[2])
        qa = ptr(context, builder, signature.args[0], args[0])
        chunks = builder.sdiv(builder.extract_value(qa.shape, 1), ir.Constant(I64, 16))
        _tiles(builder, q, r, o, lambda i0, r0, TA, TR: _tile(builder, q, r, o, i0, r0, TA, TR, chunks),
               TILE_Q, TILE_R)
        return context.get_dummy_value()
    return sig, codegen


def _tile_q8(builder, q, r, o, i0, r0, TA, TR, blocks):
    """_tile's chains over rows of Q8_0 blocks: each block's 32 values dequantized exactly
    (f16 scale x int8, a float32 product with no rounding: the value the float32 matrix holds)
    as two 16-lane halves, each fma'd in dot16's order (lane l: k = l, l + 16, ...)."""
    (qb, _, qs), (rb, _, rs), (ob, _, os_) = q, r, o
    i8 = ir.IntType(8)
    v16i8 = ir.VectorType(i8, 16)
    qp = [_row(builder, qb, builder.add(i0, ir.Constant(I64, a)), qs) for a in range(TA)]
    rp = [builder.gep(rb, [builder.mul(builder.add(r0, ir.Constant(I64, b)), rs)]) for b in range(TR)]

    def body(c, acc):
        x = [(_v16(builder, p, builder.mul(c, ir.Constant(I64, 2))),
              _v16(builder, p, builder.add(builder.mul(c, ir.Constant(I64, 2)), ir.Constant(I64, 1))))
             for p in qp]
        out = list(acc)
        for b in range(TR):
            blk = builder.gep(rp[b], [builder.mul(c, ir.Constant(I64, 34))])
            d = splat(builder, half(builder, blk))
            lo = builder.load(builder.bitcast(builder.gep(blk, [ir.Constant(I64, 2)]), v16i8.as_pointer()), align=1)
            hi = builder.load(builder.bitcast(builder.gep(blk, [ir.Constant(I64, 18)]), v16i8.as_pointer()), align=1)
            wl = builder.fmul(d, builder.sitofp(lo, V16F))
            wh = builder.fmul(d, builder.sitofp(hi, V16F))
            for a in range(TA):
                k = a * TR + b
                out[k] = fma(builder, x[a][1], wh, fma(builder, x[a][0], wl, out[k]))
        return out
    acc = _loop_n(builder, blocks, body, [ir.Constant(V16F, [0.0] * 16)] * (TA * TR))
    for a in range(TA):
        orow = _row(builder, ob, builder.add(i0, ir.Constant(I64, a)), os_)
        for b in range(TR):
            builder.store(tree(builder, acc[a * TR + b]),
                          builder.gep(orow, [builder.add(r0, ir.Constant(I64, b))]), align=4)


@intrinsic
def dot_tile_q8(typingctx, qs, rows, out):
    """dot_tile16 over rows of Q8_0 blocks (rows: uint8 [n, K / 32 * 34]; qs float32 [A, K],
    K a multiple of 32): out[a, b] the bytes dot16(qs[a], the row dequantized) gives."""
    sig = types.void(qs, rows, out)

    def codegen(context, builder, signature, args):
        q = _rows(context, builder, signature.args[0], args[0])
        r = _rows(context, builder, signature.args[1], args[1])
        o = _rows(context, builder, signature.args[2], args[2])
        qa = ptr(context, builder, signature.args[0], args[0])
        blocks = builder.sdiv(builder.extract_value(qa.shape, 1), ir.Constant(I64, 32))
        _tiles(builder, q, r, o, lambda i0, r0, TA, TR: _tile_q8(builder, q, r, o, i0, r0, TA, TR, blocks),
               Q8_TILE_Q, Q8_TILE_R)
        return context.get_dummy_value()
    return sig, codegen


def _tiles(builder, q, r, o, tile, TILE_Q, TILE_R):
    """tile(i0, r0, TA, TR) over every query and row: TILE_Q x TILE_R, then the edges (the
    rows one at a time; the queries left over one at a time, TILE_R1 rows side by side)."""
    na, nr = q[1], r[1]

    def over_rows(i0, TA):
        TR = TILE_R if TA > 1 else TILE_R1
        full = builder.sdiv(nr, ir.Constant(I64, TR))

        def rt(c, st):
            tile(i0, builder.mul(c, ir.Constant(I64, TR)), TA, TR)
            return st
        _count_loop(builder, full, rt, ir.Constant(I64, 0))
        first = builder.mul(full, ir.Constant(I64, TR))

        def r1(c, st):
            tile(i0, builder.add(first, c), TA, 1)
            return st
        _count_loop(builder, builder.sub(nr, first), r1, ir.Constant(I64, 0))

    fq = builder.sdiv(na, ir.Constant(I64, TILE_Q))

    def qt(c, st):
        over_rows(builder.mul(c, ir.Constant(I64, TILE_Q)), TILE_Q)
        return st
    _count_loop(builder, fq, qt, ir.Constant(I64, 0))
    firstq = builder.mul(fq, ir.Constant(I64, TILE_Q))

    def q1(c, st):
        over_rows(builder.add(firstq, c), 1)
        return st
    _count_loop(builder, builder.sub(na, firstq), q1, ir.Constant(I64, 0))


AXPY_HEADS, AXPY_LANES = 4, 32


@intrinsic
def axpy_heads16(typingctx, y, w, rows):
    """axpy_rows16(y[a], w[a], rows) for every a (y [A, D], w [A, n], rows [n, D]: 2-D float32,
    unit-stride rows, D a multiple of 32): each y[a, d] the same fma chain over the rows in
    order, AXPY_HEADS heads x AXPY_LANES lanes held in registers at a time, so a row's lanes
    are loaded once for those heads (then one head at a time for the remainder)."""
    sig = types.void(y, w, rows)

    def codegen(context, builder, signature, args):
        yb, na, ys = _rows(context, builder, signature.args[0], args[0])
        wb, _, ws = _rows(context, builder, signature.args[1], args[1])
        rb, nr, rs = _rows(context, builder, signature.args[2], args[2])
        ya = ptr(context, builder, signature.args[0], args[0])
        D = builder.extract_value(ya.shape, 1)
        vt = ir.VectorType(F32, AXPY_LANES)
        chunks = builder.sdiv(D, ir.Constant(I64, AXPY_LANES))

        def heads(a0, TH):
            yp = [_row(builder, yb, builder.add(a0, ir.Constant(I64, a)), ys) for a in range(TH)]
            wp = [_row(builder, wb, builder.add(a0, ir.Constant(I64, a)), ws) for a in range(TH)]

            def chunk(c, st):
                off = builder.mul(c, ir.Constant(I64, AXPY_LANES))
                ptrs = [builder.bitcast(builder.gep(p, [off]), vt.as_pointer()) for p in yp]

                def row(r, acc):
                    x = builder.load(builder.bitcast(builder.gep(_row(builder, rb, r, rs), [off]),
                                                     vt.as_pointer()), align=4)
                    return [fma(builder, splat(builder, builder.load(builder.gep(wp[a], [r]), align=4),
                                               AXPY_LANES), x, acc[a]) for a in range(TH)]
                acc = _loop_n(builder, nr, row, [builder.load(p, align=4) for p in ptrs])
                for p, v in zip(ptrs, acc):
                    builder.store(v, p, align=4)
                return st
            _count_loop(builder, chunks, chunk, ir.Constant(I64, 0))

        full = builder.sdiv(na, ir.Constant(I64, AXPY_HEADS))

        def hg(c, st):
            heads(builder.mul(c, ir.Constant(I64, AXPY_HEADS)), AXPY_HEADS)
            return st
        _count_loop(builder, full, hg, ir.Constant(I64, 0))
        first = builder.mul(full, ir.Constant(I64, AXPY_HEADS))

        def h1(c, st):
            heads(builder.add(first, c), 1)
            return st
        _count_loop(builder, builder.sub(na, first), h1, ir.Constant(I64, 0))
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True, boundscheck=False, nogil=True)
def _dot_rows(q, rows, out, acc):
    """out[r] = q . rows[r]: dot_rows16's order (lane l: dims l, l + 16, ...; a last partial
    group in lanes 0 .. W % 16 - 1; then the tree (l, l + 8), (l, l + 4), (l, l + 2), (0, 1))."""
    W = q.shape[0]
    if W % 16 == 0:
        dot_rows16(q, rows, out)
        return
    for r in range(rows.shape[0]):
        row = rows[r]
        for l in range(16):
            acc[l] = np.float32(0.0)
        for d in range(0, W, 16):
            for l in range(min(16, W - d)):
                acc[l] = fma32(q[d + l], row[d + l], acc[l])
        for l in range(8):
            acc[l] = acc[l] + acc[l + 8]
        for l in range(4):
            acc[l] = acc[l] + acc[l + 4]
        for l in range(2):
            acc[l] = acc[l] + acc[l + 2]
        out[r] = acc[0] + acc[1]


@njit(cache=True, boundscheck=False, nogil=True)
def _axpy_rows(y, w, rows):
    """y[d] = fma(w[r], rows[r, d], y[d]) for r = 0, 1, ... in order: axpy_rows16's chains."""
    if y.shape[0] % 16 == 0:
        axpy_rows16(y, w, rows)
        return
    for r in range(rows.shape[0]):
        row = rows[r]
        wr = w[r]
        for d in range(y.shape[0]):
            y[d] = fma32(wr, row[d], y[d])


@njit(cache=True, boundscheck=False, nogil=True)
def _rows_dot(qs, rows, out, quant, acc):
    """out[a, b] = dot16(qs[a], rows[b]): rows are uint8 bytes, Q8_0 blocks when quant, else
    float32 values (4 bytes each; dot_tile16 reads a row's bytes as float32 as they lie). One
    type for both, so the kernels compile once for a float32 and a Q8_0 model."""
    if quant:
        dot_tile_q8(qs, rows, out)
    elif qs.shape[1] % 16 == 0:
        dot_tile16(qs, rows, out)
    else:
        rf = rows.view(np.float32)
        for a in range(qs.shape[0]):
            _dot_rows(qs[a], rf, out[a], acc)


SEG = 256                 # keys a segment: its own online softmax, then merged in order
KB = 16                   # keys a block of the online softmax (absolute: 0, 16, 32, ...)


@intrinsic
def online16(typingctx, s, m, lv, alpha, scale):
    """One block of the online softmax for every query q (s [Q, 16] float32 scores of the
    block's keys, -inf where a key is padding or past q's position; m [Q] the running max of
    scaled scores, lv [Q, 16] the running lane sums, alpha [Q] out): v = s[q] * scale, m' =
    max(m[q], the max of v by _max_tree), alpha = exp_ir(m[q] - m'), s[q] becomes e =
    exp_ir(v - m') (0 at the padding), lv[q] = fma(lv[q], alpha, e) lane by lane, m[q] = m'.
    Every operation named: a query's bytes depend on its own scores alone."""
    sig = types.void(s, m, lv, alpha, scale)

    def codegen(context, builder, signature, args):
        sb, nq, ss = _rows(context, builder, signature.args[0], args[0])
        lb, _, ls = _rows(context, builder, signature.args[2], args[2])
        mp = ptr(context, builder, signature.args[1], args[1]).data
        ap = ptr(context, builder, signature.args[3], args[3]).data
        sc = splat(builder, args[4])

        def body(qi, st):
            sp = builder.bitcast(_row(builder, sb, qi, ss), V16F.as_pointer())
            v = builder.fmul(builder.load(sp, align=4), sc)
            bm = _max_tree(builder, v)
            mq = builder.gep(mp, [qi])
            mo = builder.load(mq, align=4)
            mn = builder.select(builder.fcmp_ordered(">", bm, mo), bm, mo)
            a = exp_ir(builder, builder.fsub(mo, mn))
            e = exp_ir(builder, builder.fsub(v, splat(builder, mn)))
            builder.store(e, sp, align=4)
            lp = builder.bitcast(_row(builder, lb, qi, ls), V16F.as_pointer())
            builder.store(fma(builder, builder.load(lp, align=4), splat(builder, a), e), lp, align=4)
            builder.store(mn, mq, align=4)
            builder.store(a, builder.gep(ap, [qi]), align=4)
            return st
        _count_loop(builder, nq, body, ir.Constant(I64, 0))
        return context.get_dummy_value()
    return sig, codegen


@njit(cache=True, boundscheck=False, nogil=True)
def _lane_sum(v, acc):
    """v's 16 lanes added in kernels.vec_ir.tree's order: (l, l + 8), (l, l + 4), (l, l + 2),
    (0, 1)."""
    for l in range(8):
        acc[l] = v[l] + v[l + 8]
    for l in range(4):
        acc[l] = acc[l] + acc[l + 4]
    for l in range(2):
        acc[l] = acc[l] + acc[l + 2]
    return acc[0] + acc[1]


@njit(cache=True, boundscheck=False, nogil=True)
def _absorb(qn, qpe, w_ukt, quant, t0, t1, h0, h1, qa, acc):
    """qa[tl * nh + hl] = [q_nope . W_UK[h]^T's rows | rope(q_pe)] for rows t0 .. t1 - 1 and
    heads h0 .. h1 - 1 (nh = h1 - h0; W_UK[h] read once for the rows)."""
    nh = h1 - h0
    W = qa.shape[1]
    R = qpe.shape[2]
    C = W - R
    for hl in range(nh):
        _rows_dot(qn[t0:t1, h0 + hl], w_ukt[h0 + hl], qa[hl::nh, :C], quant, acc)
        for tl in range(t1 - t0):
            pe = qpe[t0 + tl, h0 + hl]
            for r in range(R):
                qa[tl * nh + hl, C + r] = pe[r]


@njit(cache=True, boundscheck=False, nogil=True)
def _segment(sg, g0, g1, t0, nh, qa, pos, c, P, pool, tables, scale, m, lv, al, sc, seg, kbuf,
             acc):
    """Segment sg (keys sg * SEG .. ) of the online softmax for the queries of rows g0 .. g1 - 1
    (one chunk's rows, ascending positions, local to t0; query tl * nh + hl): from a fresh
    state (m -inf, lv 0, seg 0), blocks of KB keys from sg * SEG: scores (dot16's chains),
    online16, seg rescaled by alpha where alpha != 1, then seg += e_j row_j[:C] (one fma chain
    a lane over the keys in order). A row past whose position the segment starts is left as
    it was. Returns the first row that read the segment."""
    W = qa.shape[1]
    C = seg.shape[1]
    Lg = pos[t0 + g1 - 1] + 1
    k_lo = sg * SEG
    k_hi = min(k_lo + SEG, Lg)
    q1 = g1 * nh
    ninf = np.float32(-np.inf)
    one = np.float32(1.0)
    fs = g0
    while pos[t0 + fs] < k_lo:
        fs += 1
    for qi in range(fs * nh, q1):
        m[qi] = ninf
        for l in range(16):
            lv[qi, l] = np.float32(0.0)
        for d in range(C):
            seg[qi, d] = np.float32(0.0)
    f = fs
    k0 = k_lo
    while k0 < k_hi:
        n = min(KB, k_hi - k0)
        while pos[t0 + f] < k0:
            f += 1
        qb = f * nh
        r0 = k0 % P
        if r0 + n <= P:
            blk = pool[tables[c, k0 // P], r0:r0 + n, 0, :]
        else:                                    # a block across pages: its rows copied
            for j in range(n):
                src = pool[tables[c, (k0 + j) // P], (k0 + j) % P, 0]
                for d in range(W):
                    kbuf[j, d] = src[d]
            blk = kbuf[:n]
        if W % 16 == 0:
            dot_tile16(qa[qb:q1], blk, sc[qb:q1, :n])
        else:
            for qi in range(qb, q1):
                _dot_rows(qa[qi], blk, sc[qi, :n], acc)
        for tl in range(f, g1):
            nv = min(n, pos[t0 + tl] + 1 - k0)
            for qi in range(tl * nh, (tl + 1) * nh):
                for j in range(nv, KB):
                    sc[qi, j] = ninf
        online16(sc[qb:q1], m[qb:q1], lv[qb:q1], al[qb:q1], scale)
        for qi in range(qb, q1):
            a = al[qi]
            if a != one:
                for d in range(C):
                    seg[qi, d] = seg[qi, d] * a
        for tl in range(f, g1):
            nv = min(n, pos[t0 + tl] + 1 - k0)
            if C % AXPY_LANES == 0:
                axpy_heads16(seg[tl * nh:(tl + 1) * nh], sc[tl * nh:(tl + 1) * nh, :nv], blk[:nv, :C])
            else:
                for qi in range(tl * nh, (tl + 1) * nh):
                    _axpy_rows(seg[qi], sc[qi, :nv], blk[:nv, :C])
        k0 += n
    return fs


@njit(cache=True, boundscheck=False, nogil=True)
def _merge(first, ms, ls, srow, mrun, lrun, orow, qi):
    """Fold a segment (max ms, denominator ls, sum srow) into query qi's state, segments in
    order: the first is taken as it is; then M = max, a = exp(M_old - M), b = exp(ms - M),
    L = fma(ls, b, L a), O = fma(srow, b, O a) element by element."""
    if first:
        mrun[qi] = ms
        lrun[qi] = ls
        for d in range(orow.shape[0]):
            orow[d] = srow[d]
        return
    mn = ms if ms > mrun[qi] else mrun[qi]
    a = exp32(mrun[qi] - mn)
    b = exp32(ms - mn)
    lrun[qi] = fma32(ls, b, lrun[qi] * a)
    mrun[qi] = mn
    for d in range(orow.shape[0]):
        orow[d] = fma32(srow[d], b, orow[d] * a)


@njit(cache=True, boundscheck=False, nogil=True)
def _expand(o3, lrun, w_uv, quant, t0, t1, h0, out, acc):
    """o_lat = O / L, then o_lat . W_UV[h]'s rows (W_UV[h] read once for the rows)."""
    nt, nh, C = o3.shape
    V = w_uv.shape[1]
    for tl in range(nt):
        for hl in range(nh):
            lq = lrun[tl * nh + hl]
            for d in range(C):
                o3[tl, hl, d] = o3[tl, hl, d] / lq
    for hl in range(nh):
        h = h0 + hl
        _rows_dot(o3[:, hl], w_uv[h], out[t0:t1, h * V:(h + 1) * V], quant, acc)


@njit(cache=True, boundscheck=False, nogil=True)
def _job(job, n_hb, HB, qn, qpe, w_ukt, w_uv, quant, pool, pos, owner, tables, page_rows,
         scale, out):
    """Rows rb*ROW_BLOCK .. of head block hb: absorb, attend over pages in one pass (every
    segment of a row's keys, merged as it ends), expand."""
    rb = job // n_hb
    hb = job % n_hb
    T, H, N = qn.shape
    W = pool.shape[3]
    C = W - qpe.shape[2]
    t0 = rb * ROW_BLOCK
    t1 = min(T, t0 + ROW_BLOCK)
    h0 = hb * HB
    h1 = min(H, h0 + HB)
    nh = h1 - h0
    if nh <= 0:
        return
    nt = t1 - t0
    Q = nt * nh                           # query q = (row tl, head hl): tl * nh + hl
    acc = np.empty(16, np.float32)
    qa = np.empty((Q, W), np.float32)
    _absorb(qn, qpe, w_ukt, quant, t0, t1, h0, h1, qa, acc)
    o3 = np.empty((nt, nh, C), np.float32)      # the merged state's sum, then o_lat
    o = o3.reshape((Q, C))
    seg = np.empty((Q, C), np.float32)
    mrun = np.empty(Q, np.float32)
    lrun = np.empty(Q, np.float32)
    m = np.empty(Q, np.float32)
    lv = np.empty((Q, 16), np.float32)
    al = np.empty(Q, np.float32)
    sc = np.empty((Q, KB), np.float32)
    kbuf = np.empty((KB, W), np.float32)
    g1 = np.int64(0)       # not the literal 0: _segment would compile for it too
    while g1 < nt:                               # groups: a chunk's rows (ascending positions)
        g0 = g1
        c = owner[t0 + g0]
        while g1 < nt and owner[t0 + g1] == c:
            g1 += 1
        Lg = pos[t0 + g1 - 1] + 1
        for sg in range((Lg + SEG - 1) // SEG):
            fs = _segment(sg, g0, g1, t0, nh, qa, pos, c, page_rows[c], pool, tables, scale, m,
                          lv, al, sc, seg, kbuf, acc)
            for qi in range(fs * nh, g1 * nh):
                _merge(sg == 0, m[qi], _lane_sum(lv[qi], acc), seg[qi], mrun, lrun, o[qi], qi)
    _expand(o3, lrun, w_uv, quant, t0, t1, h0, out, acc)


@njit(cache=True, boundscheck=False, nogil=True)
def _split_seg(job, nseg, qa_all, pos, owner, tables, page_rows, pool, scale, pm, pl, po):
    """Split mode, a (row block, segment) job over every head: the segment's state of each of
    the block's rows that reads it, into pm / pl / po [T, nseg, H(, C)]."""
    rb = job // nseg
    sg = job % nseg
    T, _, H = pm.shape
    W = qa_all.shape[1]
    C = po.shape[3]
    t0 = rb * ROW_BLOCK
    t1 = min(T, t0 + ROW_BLOCK)
    nt = t1 - t0
    Q = nt * H
    qa = qa_all[t0 * H:t1 * H]
    acc = np.empty(16, np.float32)
    seg = np.empty((Q, C), np.float32)
    m = np.empty(Q, np.float32)
    lv = np.empty((Q, 16), np.float32)
    al = np.empty(Q, np.float32)
    sc = np.empty((Q, KB), np.float32)
    kbuf = np.empty((KB, W), np.float32)
    g1 = np.int64(0)       # not the literal 0: _segment would compile for it too
    while g1 < nt:
        g0 = g1
        c = owner[t0 + g0]
        while g1 < nt and owner[t0 + g1] == c:
            g1 += 1
        if pos[t0 + g1 - 1] < sg * SEG:
            continue
        fs = _segment(sg, g0, g1, t0, H, qa, pos, c, page_rows[c], pool, tables, scale, m, lv,
                      al, sc, seg, kbuf, acc)
        for tl in range(fs, g1):
            for h in range(H):
                qi = tl * H + h
                pm[t0 + tl, sg, h] = m[qi]
                pl[t0 + tl, sg, h] = _lane_sum(lv[qi], acc)
                for d in range(C):
                    po[t0 + tl, sg, h, d] = seg[qi, d]


@njit(cache=True, boundscheck=False, parallel=True, nogil=True)
def _run(mode, m, ctr, n_jobs, n_hb, HB, nseg, qn, qpe, w_ukt, w_uv, quant, pool, pos, owner,
         tables, page_rows, scale, out):
    """The round's jobs, one compiled function for every mode (numba compiles the whole tree
    of functions again for each caller, so one caller, not four): mode 0 serial (_job after
    _job on the calling thread: no parallel region entered), mode 1 parallel (_job by
    prange), mode 2 split, mode 3 a crew member (kernels/team_cpu.Crew: member m takes the
    next job nobody has taken from ctr's stage 0 until none is left; member 0, the caller,
    then waits for the jobs in flight; a helper that finds none left returns at once: no
    barrier, so a helper the machine has descheduled holds up only a job in its hands).

    Split mode (few rows, long contexts: both cores on one row's keys): absorb every
    (row block, head block); each (row block, segment) job's state over all heads, the
    latent rows read once for every head; then each (row block, head block) merges its
    rows' segments in order and expands. The same functions and order as _job: the same
    bytes."""
    if mode == 3:
        job = next_piece(ctr, 0)
        while job < n_jobs:
            _job(job, n_hb, HB, qn, qpe, w_ukt, w_uv, quant, pool, pos, owner, tables,
                 page_rows, scale, out)
            finish(ctr, 0)
            job = next_piece(ctr, 0)
        if m == 0:
            wait(ctr, 0, n_jobs)
        return
    if mode == 0:
        for job in range(n_jobs):
            _job(job, n_hb, HB, qn, qpe, w_ukt, w_uv, quant, pool, pos, owner, tables,
                 page_rows, scale, out)
        return
    if mode == 1:
        for job in prange(n_jobs):
            _job(np.int64(job), n_hb, HB, qn, qpe, w_ukt, w_uv, quant, pool, pos, owner, tables,
                 page_rows, scale, out)
        return
    T, H, N = qn.shape
    W = pool.shape[3]
    C = W - qpe.shape[2]
    n_rb = -(-T // ROW_BLOCK)
    qa_all = np.empty((T * H, W), np.float32)
    for job in prange(n_jobs):
        rb = job // n_hb
        hb = job % n_hb
        t0 = rb * ROW_BLOCK
        t1 = min(T, t0 + ROW_BLOCK)
        h0 = hb * HB
        h1 = min(H, h0 + HB)
        if h1 > h0:
            acc = np.empty(16, np.float32)
            qa = np.empty(((t1 - t0) * (h1 - h0), W), np.float32)
            _absorb(qn, qpe, w_ukt, quant, t0, t1, h0, h1, qa, acc)
            for tl in range(t1 - t0):
                for hl in range(h1 - h0):
                    for d in range(W):
                        qa_all[(t0 + tl) * H + h0 + hl, d] = qa[tl * (h1 - h0) + hl, d]
    pm = np.empty((T, nseg, H), np.float32)
    pl = np.empty((T, nseg, H), np.float32)
    po = np.empty((T, nseg, H, C), np.float32)
    for job in prange(n_rb * nseg):
        _split_seg(np.int64(job), nseg, qa_all, pos, owner, tables, page_rows, pool, scale, pm, pl, po)
    for job in prange(n_jobs):
        rb = job // n_hb
        hb = job % n_hb
        t0 = rb * ROW_BLOCK
        t1 = min(T, t0 + ROW_BLOCK)
        h0 = hb * HB
        h1 = min(H, h0 + HB)
        nh = h1 - h0
        if nh > 0:
            acc = np.empty(16, np.float32)
            o3 = np.empty((t1 - t0, nh, C), np.float32)
            o = o3.reshape(((t1 - t0) * nh, C))
            mrun = np.empty((t1 - t0) * nh, np.float32)
            lrun = np.empty((t1 - t0) * nh, np.float32)
            for tl in range(t1 - t0):
                for hl in range(nh):
                    qi = tl * nh + hl
                    for sg in range(pos[t0 + tl] // SEG + 1):
                        _merge(sg == 0, pm[t0 + tl, sg, h0 + hl], pl[t0 + tl, sg, h0 + hl],
                               po[t0 + tl, sg, h0 + hl], mrun, lrun, o[qi], qi)
            _expand(o3, lrun, w_uv, quant, t0, t1, h0, out, acc)


def cut(T: int, H: int, threads: int) -> tuple[int, int]:
    """(head blocks, heads a block): rows in blocks of ROW_BLOCK, heads cut so the round has
    at least a job a thread where it can (a decode row: 2 jobs of 10 of 20 heads on 2; each
    job reads the stream's latent rows once, so fewer, larger head blocks read less; split
    mode cuts a long context's keys instead)."""
    n_rb = -(-T // ROW_BLOCK)
    n_hb = max(1, min(H, -(-threads // n_rb)))
    HB = -(-H // n_hb)
    return -(-H // HB), HB


def macs(T: int, H: int, N: int, C: int, R: int, V: int, keys: int) -> int:
    """A round's multiply-adds: absorb, scores, o_lat, expand (keys: the keys its rows read,
    the sum of their positions + 1)."""
    return T * H * (N * C + C * V) + keys * H * (2 * C + R)


SPLIT_BYTES = 1 << 26     # split mode's segment states at most (64 MiB)


CREW_JOBS = 2             # a crew round's jobs a thread at least, where heads allow (heads cut
                          # finer than cut's: a member the machine descheduled holds up one
                          # job, not half the round; finer still measured slower at a decode
                          # row: each job reads its rows' latent rows and scratch again)


def crew_cut(T: int, H: int, threads: int) -> tuple[int, int]:
    """(head blocks, heads a block) of a crew round: at least CREW_JOBS jobs a thread where
    the heads allow (each job reads its rows' latent rows once: cheap at the contexts that are
    not split)."""
    n_rb = -(-T // ROW_BLOCK)
    n_hb = max(1, min(H, -(-CREW_JOBS * threads // n_rb)))
    HB = -(-H // n_hb)
    return -(-H // HB), HB


_CREW = []                # the latent attention's Crew (team_cpu), made on first use


def _member(m, n, ctr, *args):
    """A crew member's call (Crew.run's member(m, n, *args)): _run's mode 3; compiled, where
    it first compiles, with noalias as on the caller's thread (blocks_cpu._noalias is a
    thread's own flag)."""
    with _noalias():
        _run(3, m, ctr, *args)


def _crew():
    if not _CREW:
        from kernels.team_cpu import Crew
        _CREW.append(Crew(_member))
    return _CREW[0]


def _plan(rows, T: int) -> dict:
    """The round's own arrays, made once a round and kept on `rows` (every layer of a round
    passes the same rows object; a round's chunks do not change between its layers): pos
    [T] int64, the chunks' tables [chunks, width], each row's chunk, each chunk's page rows,
    the round's keys (the sum of pos + 1); the positions checked to run c.start, c.start + 1,
    ... within each chunk. Also the RoPE tables made for it (_cos_sin)."""
    got = getattr(rows, "_mla_plan", None)
    if got is not None and got["T"] == T:
        return got
    pos = np.ascontiguousarray(np.asarray(rows.pos, np.int64))
    chunks = list(rows.chunks)
    width = max(len(c.table) for c in chunks)
    tables = np.zeros((len(chunks), width), np.int64)
    owner = np.empty(T, np.int64)
    for i, ((a, b), c) in enumerate(zip(rows.spans, chunks)):
        tables[i, :len(c.table)] = c.table
        owner[a:b] = i
        if b > a and (pos[a] != c.start or np.any(np.diff(pos[a:b]) != 1)):
            raise ValueError(f"mla_cpu: chunk {i} starts at {c.start}: its rows' positions "
                             f"must be {c.start}, {c.start} + 1, ... (got {pos[a:b][:4]}...)")
    page_rows = np.asarray([c.page_rows for c in chunks], np.int64)
    plan = {"T": T, "base": (pos, tables, owner, page_rows, int(np.sum(pos + 1))), "rope": []}
    try:
        rows._mla_plan = plan
    except AttributeError:          # a rows type that takes no attribute: made each call
        pass
    return plan


def _cos_sin(plan: dict, pos, inv):
    """kernels/rope.cos_sin(pos, inv) (numpy's float32 cos and sin: their bytes), kept in
    the round's plan for each inv array it met (the family's frequencies; kimilinear's NoPE
    layers pass zeros)."""
    for i, c, s in plan["rope"]:
        if i is inv:
            return c, s
    from kernels.rope import cos_sin
    c, s = cos_sin(pos, inv)
    c, s = np.ascontiguousarray(c), np.ascontiguousarray(s)
    plan["rope"].append((inv, c, s))
    return c, s


@njit(cache=True, boundscheck=False, nogil=True)
def _prep(q, ckv, kv_norm, eps, cos, sin, pool, tables, page_rows, owner, pos, qn, qpe):
    """The round's latent rows written to the pool and q split, as kernels/mla.py computes
    them, byte for byte: row t's latent row = [rmsnorm(ckv[t, :C]) (rmsnorm.ref's bytes:
    rmsnorm_cpu._np_norm_row) | interleaved RoPE of ckv[t, C:]] into its chunk's page at its
    position (mla.write's address); qn = q[:, :, :N]; qpe = the interleaved RoPE of q[:, :,
    N:] (mla.rope_interleaved: a * cos - b * sin and b * cos + a * sin, each product and sum
    one float32 operation, as numpy rounds them)."""
    T, H, N = qn.shape
    R = qpe.shape[2]
    C = pool.shape[3] - R
    half = R // 2
    st = _norm_stack()
    for t in range(T):
        c = owner[t]
        p = pos[t]
        P = page_rows[c]
        row = pool[tables[c, p // P], p % P, 0]
        _np_norm_row(ckv[t, :C], kv_norm, eps, row[:C], st)
        for i in range(half):
            a = ckv[t, C + 2 * i]
            b = ckv[t, C + 2 * i + 1]
            row[C + 2 * i] = a * cos[t, i] - b * sin[t, i]
            row[C + 2 * i + 1] = b * cos[t, i] + a * sin[t, i]
        for h in range(H):
            for n in range(N):
                qn[t, h, n] = q[t, h, n]
            for i in range(half):
                a = q[t, h, N + 2 * i]
                b = q[t, h, N + 2 * i + 1]
                qpe[t, h, 2 * i] = a * cos[t, i] - b * sin[t, i]
                qpe[t, h, 2 * i + 1] = b * cos[t, i] + a * sin[t, i]


def round_attend(q, ckv, kv_norm, eps, w_ukt, w_uv, N, pool, rows, inv, scale, cut_to=None,
                 parallel=None, split=None, crew=None):
    """kernels/mla.round_attend's contract, this file's arithmetic: q [T, H, N + R] (this
    rank's heads), ckv [T, C + R], W_UK transposed [H, C, N] and W_UV [H, V, C] (float32, or
    uint8 rows of Q8_0 blocks: [H, C, N / 32 * 34], [H, V, C / 32 * 34], the same bytes out as
    their float32 values) -> [T, H V]; the round's latent rows written to pool ([pages, P, 1,
    C + R]) through each chunk's table first (a row reads rows 0 .. p of its own stream, which
    no other chunk of the round writes). `cut_to` (head blocks, heads a block) and `parallel`
    override the job cut and the region choice, `split` the split mode's, `crew` whether a
    parallel round that is not split runs on a crew (kernels/team_cpu.Crew: jobs handed out
    one at a time, the caller never waiting for a helper that has no job; the default) or as
    a parallel region (prange) (tests: the same bytes). Split mode where a round's rows are one row block on several threads and a row
    reads more than one segment: the segments of its keys spread over the threads, every
    head at once, then merged in order (_run's mode 2)."""
    T, H, _ = q.shape
    C = pool.shape[-1] - (q.shape[2] - N)
    R = q.shape[2] - N
    quant = w_ukt.dtype == np.uint8
    if not quant:
        w_ukt = np.ascontiguousarray(w_ukt, dtype=np.float32)
        w_uv = np.ascontiguousarray(w_uv, dtype=np.float32)
    V = w_uv.shape[1]
    if quant:
        ok = (N % 32 == 0 and C % 32 == 0 and w_ukt.shape[1:] == (C, N // 32 * 34)
              and w_uv.shape[2] == C // 32 * 34)
    else:
        ok = w_ukt.shape[1:] == (C, N) and w_uv.shape[2] == C
    if not ok or w_ukt.shape[0] != H or w_uv.shape[0] != H:
        raise ValueError(f"mla_cpu: pool row {pool.shape[-1]} (latent C + rope {R}), q's {H} "
                         f"heads of nope {N}: W_UK^T {w_ukt.shape} / W_UV {w_uv.shape} "
                         f"({w_ukt.dtype}) are not [H, C, N] / [H, V, C]"
                         + (" of Q8_0 rows" if quant else ""))
    plan = _plan(rows, T)
    pos, tables, owner, page_rows, keys = plan["base"]
    cos, sin = _cos_sin(plan, pos, inv)
    if (q.dtype == ckv.dtype == kv_norm.dtype == pool.dtype == cos.dtype == np.float32
            and kv_norm.shape == (C,)):
        qn = np.empty((T, H, N), np.float32)
        qpe = np.empty((T, H, R), np.float32)
        _prep(np.ascontiguousarray(q), np.ascontiguousarray(ckv), np.ascontiguousarray(kv_norm),
              np.float32(eps), cos, sin, pool, tables, page_rows, owner, pos, qn, qpe)
    else:                                       # kernels/mla.py's numpy, as it is
        lat = mla.latent_rows(ckv, kv_norm, eps, C, pos, inv)
        for (a, b), c in zip(rows.spans, rows.chunks):
            mla.write(pool, c.table, c.page_rows, c.start, lat[a:b])
        qn = np.ascontiguousarray(q[:, :, :N], dtype=np.float32)
        qpe = mla.rope_interleaved(np.ascontiguousarray(q[:, :, N:]), pos, inv)
    threads = numba.get_num_threads()
    nseg = int(pos.max()) // SEG + 1 if T else 1
    if parallel is None:
        n_hb, _ = cut_to or cut(T, H, threads)
        parallel = (threads > 1 and -(-T // ROW_BLOCK) * n_hb > 1
                    and macs(T, H, N, C, R, V, keys) > SERIAL_MACS)
    if split is None:
        split = (parallel and T <= ROW_BLOCK and nseg > 1
                 and T * nseg * H * C * 4 <= SPLIT_BYTES)
    if crew is None:
        crew = True
    crew = parallel and not split and crew
    n_hb, HB = cut_to or (crew_cut if crew else cut)(T, H, threads)
    n_jobs = -(-T // ROW_BLOCK) * n_hb
    out = np.empty((T, H * V), np.float32)
    # the weights as their bytes (float32 or Q8_0 alike: one compiled signature for both)
    w_ukt = np.ascontiguousarray(w_ukt).view(np.uint8)
    w_uv = np.ascontiguousarray(w_uv).view(np.uint8)
    args = (n_jobs, n_hb, HB, nseg, qn, qpe, w_ukt, w_uv, quant, pool, pos, owner, tables,
            page_rows, np.float32(scale), out)
    if crew:
        from kernels.team_cpu import WIDTH
        _crew().run(min(threads, 16), (np.zeros((2, WIDTH), np.int64),) + args)
        return out
    with _noalias():
        _run(2 if split else 1 if parallel else 0, 0, _NO_CTR, *args)
    return out


_NO_CTR = np.zeros((2, 32), np.int64)     # _run's counters where no crew runs (unread)
