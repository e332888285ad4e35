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
interleaved RoPE of k_pe: kernels/mla.latent_rows, numpy) and its write through the table,
and q's RoPE'd part (kernels/mla.rope_interleaved). Then, for each (query row t, head h),
alone (never depending on another row or head):

    qa[:C]  = q_nope . W_UK[h]        element c: one fma chain over n = 0 .. N-1 in order
    qa[C:]  = rope(q_pe)
    s_j     = qa . row_j              j = 0 .. p (p: t's position), 16 lanes (lane l: dims
                                      l, l + 16, ... in an fma chain), then a fixed tree
    w       = softmax(s * scale)      kernels.vec_ir.softmax16: max, exp_ir (one recipe of
                                      named ops, ~1 ulp), the sum 16 lanes wide, then divided
    o_lat   = sum_j w_j row_j[:C]     element c: one fma chain over j = 0 .. p in order
    out[h]  = o_lat . W_UV[h]^T       element v: one fma chain over c = 0 .. C-1 in order

(kernels.vec_ir's dot_rows16 / axpy_rows16; every float operation named, so the compiler
reorders nothing; widths not a multiple of 16 take plain loops of the same chains with an
explicit fma). A chain's order depends on p and the widths alone: not on the round, the
chunk, where the pages lie, how many heads this rank holds (TP) or how the jobs are cut.

**Both cores for one request.** The work is cut into jobs of (a block of query rows, a block
of heads): a decode row's 20 heads as 2 jobs of 10 on 2 threads, a prefill chunk's rows in blocks of 16 with
every head. A job takes its heads' W_UK once for its rows, reads each page of keys once for all
its heads (then from L1/L2), and expands its rows through its heads' W_UV. The cut changes
the speed only (tested: any cut, serial or parallel, the same bytes). Rounds of few
multiply-adds run on the calling thread (entering a parallel region costs more than they do
on a loaded machine: kernels/blocks_cpu.SERIAL_MACS).
"""
from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from kernels import mla
from kernels.blocks_cpu import SERIAL_MACS, _noalias
from kernels.vec_ir import (F32, I64, V16F, _count_loop, _row, _rows, _v16, axpy_rows16, dot_rows16,
                            fma, ptr, softmax16, splat, tree)

ROW_BLOCK = 16            # query rows a job takes when a chunk has many


@intrinsic
def fma32(typingctx, a, b, c):
    """fma(a, b, c) of three float32: one rounding (llvm.fma.f32), the chains' step where a
    width is not a multiple of 16."""
    sig = types.float32(types.float32, types.float32, types.float32)

    def codegen(context, builder, signature, args):
        return fma(builder, *args)
    return sig, codegen


def _loop_n(builder, n, body, inits):
    """for c in 0 .. n-1: states = body(c, states) (several values carried); the final states."""
    entry = builder.block
    loop = builder.append_basic_block("t_loop")
    done = builder.append_basic_block("t_done")
    builder.cbranch(builder.icmp_signed(">", n, ir.Constant(I64, 0)), loop, done)
    builder.position_at_end(loop)
    c = builder.phi(I64)
    sts = [builder.phi(v.type) for v in inits]
    new = body(c, sts)
    c2 = builder.add(c, ir.Constant(I64, 1))
    end = builder.block
    builder.cbranch(builder.icmp_signed("<", c2, n), loop, done)
    c.add_incoming(ir.Constant(I64, 0), entry)
    c.add_incoming(c2, end)
    for p, v0, v1 in zip(sts, inits, new):
        p.add_incoming(v0, entry)
        p.add_incoming(v1, end)
    builder.position_at_end(done)
    outs = []
    for v0, v1 in zip(inits, new):
        o = builder.phi(v0.type)
        o.add_incoming(v0, entry)
        o.add_incoming(v1, end)
        outs.append(o)
    return outs


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


TILE_Q, TILE_R = 2, 4


@intrinsic
def dot_tile16(typingctx, qs, rows, out):
    """out[a, b] = dot16(qs[a], rows[b]) for every a, b (2-D float32 arrays, unit-stride rows,
    the width a multiple of 16): each the same fma chain and tree as dot16's, computed
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
        na, nr = q[1], r[1]

        def over_rows(i0, TA):
            full = builder.sdiv(nr, ir.Constant(I64, TILE_R))

            def rt(c, st):
                _tile(builder, q, r, o, i0, builder.mul(c, ir.Constant(I64, TILE_R)), TA, TILE_R, chunks)
                return st
            _count_loop(builder, full, rt, ir.Constant(I64, 0))
            first = builder.mul(full, ir.Constant(I64, TILE_R))

            def r1(c, st):
                _tile(builder, q, r, o, i0, builder.add(first, c), TA, 1, chunks)
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
        return context.get_dummy_value()
    return sig, codegen


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
def _job(job, n_hb, HB, qn, qpe, w_uk, w_uv_t, pool, pos, owner, tables, page_rows, scale,
         out):
    """Rows rb*ROW_BLOCK .. of head block hb: absorb, attend over pages, expand."""
    rb = job // n_hb
    hb = job % n_hb
    T, H, N = qn.shape
    C = w_uk.shape[2]
    R = qpe.shape[2]
    W = C + R
    V = w_uv_t.shape[2]
    t0 = rb * ROW_BLOCK
    t1 = min(T, t0 + ROW_BLOCK)
    h0 = hb * HB
    h1 = min(H, h0 + HB)
    nh = h1 - h0
    if nh <= 0:
        return
    nt = t1 - t0
    qa = np.empty((nt, nh, W), np.float32)
    for hl in range(nh):                         # q_nope through W_UK[h], W_UK[h] kept warm
        wk = w_uk[h0 + hl]
        for tl in range(nt):
            y = qa[tl, hl, :C]
            for c in range(C):
                y[c] = np.float32(0.0)
            _axpy_rows(y, qn[t0 + tl, h0 + hl], wk)
            pe = qpe[t0 + tl, h0 + hl]
            for r in range(R):
                qa[tl, hl, C + r] = pe[r]
    o_lat = np.empty((nt, nh, C), np.float32)
    acc = np.empty(16, np.float32)
    Lmax = pos[t1 - 1] + 1
    for tl in range(nt):
        if pos[t0 + tl] + 1 > Lmax:
            Lmax = pos[t0 + tl] + 1
    s = np.empty((nh, (Lmax + 15) // 16 * 16), np.float32)
    for tl in range(nt):
        t = t0 + tl
        c = owner[t]
        P = page_rows[c]
        L = pos[t] + 1
        Lp = (L + 15) // 16 * 16
        j = 0
        pi = 0
        while j < L:                             # scores, a page at a time for every head
            n = min(P, L - j)
            rows = pool[tables[c, pi], :n, 0, :]
            if W % 16 == 0:
                dot_tile16(qa[tl], rows, s[:, j:j + n])
            else:
                for hl in range(nh):
                    _dot_rows(qa[tl, hl], rows, s[hl, j:j + n], acc)
            j += n
            pi += 1
        for hl in range(nh):
            for k in range(L, Lp):
                s[hl, k] = -np.inf
            softmax16(s[hl, :Lp], scale)
            ol = o_lat[tl, hl]
            for d in range(C):
                ol[d] = np.float32(0.0)
        j = 0
        pi = 0
        while j < L:                             # o_lat = sum_j w_j row_j[:C], in key order
            n = min(P, L - j)
            rows = pool[tables[c, pi], :n, 0, :C]
            if C % AXPY_LANES == 0:
                axpy_heads16(o_lat[tl], s[:, j:j + n], rows)
            else:
                for hl in range(nh):
                    _axpy_rows(o_lat[tl, hl], s[hl, j:j + n], rows)
            j += n
            pi += 1
    for hl in range(nh):                         # o_lat through W_UV[h]
        h = h0 + hl
        wv = w_uv_t[h]
        for tl in range(nt):
            y = out[t0 + tl, h * V:(h + 1) * V]
            for d in range(V):
                y[d] = np.float32(0.0)
            _axpy_rows(y, o_lat[tl, hl], wv)


@njit(cache=True, boundscheck=False)
def _serial(n_jobs, n_hb, HB, qn, qpe, w_uk, w_uv_t, pool, pos, owner, tables, page_rows,
            scale, out):
    for job in range(n_jobs):
        _job(job, n_hb, HB, qn, qpe, w_uk, w_uv_t, pool, pos, owner, tables, page_rows, scale,
             out)


@njit(cache=True, boundscheck=False, parallel=True)
def _parallel(n_jobs, n_hb, HB, qn, qpe, w_uk, w_uv_t, pool, pos, owner, tables, page_rows,
              scale, out):
    for job in prange(n_jobs):
        _job(job, n_hb, HB, qn, qpe, w_uk, w_uv_t, pool, pos, owner, tables, page_rows, scale,
             out)


def cut(T: int, H: int, threads: int) -> tuple[int, int]:
    """(head blocks, heads a block): rows in blocks of ROW_BLOCK, heads cut so the round has
    at least a job a thread where it can (a decode row: 2 jobs of 10 of 20 heads on 2; each
    job reads the stream's latent rows twice, so fewer, larger head blocks read less)."""
    n_rb = -(-T // ROW_BLOCK)
    n_hb = max(1, min(H, -(-threads // n_rb)))
    HB = -(-H // n_hb)
    return -(-H // HB), HB


def macs(T: int, H: int, N: int, C: int, R: int, V: int, pos) -> int:
    """A round's multiply-adds: absorb, scores, o_lat, expand."""
    keys = int(np.sum(np.asarray(pos, np.int64) + 1))
    return T * H * (N * C + C * V) + keys * H * (2 * C + R)


def round_attend(q, ckv, kv_norm, eps, w_uk, w_uv_t, N, pool, rows, inv, scale, cut_to=None,
                 parallel=None):
    """kernels/mla.round_attend's contract, this file's arithmetic: q [T, H, N + R] (this
    rank's heads), ckv [T, C + R] -> [T, H V]; the round's latent rows written to pool
    ([pages, P, 1, C + R]) through each chunk's table first (a row reads rows 0 .. p of its
    own stream, which no other chunk of the round writes). `cut_to` (head blocks, heads a
    block) and `parallel` override the job cut and the region choice (tests: same bytes)."""
    T, H, _ = q.shape
    C = w_uk.shape[2]
    R = q.shape[2] - N
    V = w_uv_t.shape[2]
    if pool.shape[-1] != C + R or w_uk.shape[1] != N or w_uv_t.shape[1] != C:
        raise ValueError(f"mla_cpu: pool row {pool.shape[-1]} != latent {C} + rope {R}, or "
                         f"W_UK {w_uk.shape} / W_UV^T {w_uv_t.shape} not [H, {N}, {C}] / [H, {C}, V]")
    pos = np.asarray(rows.pos, np.int64)
    lat = mla.latent_rows(ckv, kv_norm, eps, C, pos, inv)
    for (a, b), c in zip(rows.spans, rows.chunks):
        mla.write(pool, c.table, c.page_rows, c.start, lat[a:b])
    qn = np.ascontiguousarray(q[:, :, :N], dtype=np.float32)
    qpe = mla.rope_interleaved(np.ascontiguousarray(q[:, :, N:]), pos, inv)
    chunks = list(rows.chunks)
    width = max(len(c.table) for c in chunks)
    tables = np.zeros((len(chunks), width), np.int64)
    owner = np.empty(T, np.int64)
    for i, ((a, b), c) in enumerate(zip(rows.spans, chunks)):
        tables[i, :len(c.table)] = c.table
        owner[a:b] = i
        if b > a and pos[a] != c.start:
            raise ValueError(f"mla_cpu: chunk {i} starts at {c.start} but its first row's "
                             f"position is {pos[a]}")
    page_rows = np.asarray([c.page_rows for c in chunks], np.int64)
    threads = numba.get_num_threads()
    n_hb, HB = cut_to or cut(T, H, threads)
    n_jobs = -(-T // ROW_BLOCK) * n_hb
    if parallel is None:
        parallel = threads > 1 and n_jobs > 1 and macs(T, H, N, C, R, V, pos) > SERIAL_MACS
    out = np.empty((T, H * V), np.float32)
    fn = _parallel if parallel else _serial
    with _noalias():
        fn(n_jobs, n_hb, HB, qn, qpe, np.ascontiguousarray(w_uk, dtype=np.float32),
           np.ascontiguousarray(w_uv_t, dtype=np.float32), pool, pos, owner, tables, page_rows,
           np.float32(scale), out)
    return out
