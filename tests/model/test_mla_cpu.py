"""kernels/mla_cpu.py (numba latent attention over pages, the family's bytes) against the
numpy definition (kernels/mla.py) and its own contracts: within float32 rounding of the
definition and of the float64 textbook form; the latent rows it stores are the definition's
bytes; and byte-equal to itself whatever the job cut (serial or parallel, any head and row
blocks), a row alone or in a round of other streams, a prompt's row reached by prefill or by
decode, pages scattered or one whole window, and a rank's heads alone (TP) or all of them."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("numba")

from kernels import mla, mla_cpu  # noqa: E402

# (H, N, R, C, V): GLM-4.7-Flash's widths cut down; DeepSeek-V3-tiny's R = 8 and V = 16
# (widths not a multiple of 16 take the plain loops); a V of 24 too
SHAPES = [(5, 32, 16, 64, 32), (4, 16, 8, 32, 16), (3, 16, 16, 32, 24), (20, 192, 64, 512, 256)]


def case(H, N, R, C, V, seed=0):
    rng = np.random.default_rng(seed)
    kv_b = rng.standard_normal((H, N + V, C), dtype=np.float32) / np.float32(np.sqrt(C))
    return SimpleNamespace(
        H=H, N=N, R=R, C=C, V=V,
        norm=(1 + 0.1 * rng.standard_normal(C)).astype(np.float32),
        w_uk=np.ascontiguousarray(kv_b[:, :N]),                      # the definition's
        w_uv_t=np.ascontiguousarray(kv_b[:, N:].transpose(0, 2, 1)),
        w_ukt=np.ascontiguousarray(kv_b[:, :N].transpose(0, 2, 1)),  # the kernel's
        w_uv=np.ascontiguousarray(kv_b[:, N:]),
        inv=(1.0 / 10000 ** (np.arange(0, R, 2) / R)).astype(np.float32),
        scale=np.float32(1 / np.sqrt(N + R)), kv_b=kv_b, rng=rng)


def inputs(k, T):
    q = k.rng.standard_normal((T, k.H, k.N + k.R), dtype=np.float32)
    ckv = (k.rng.standard_normal((T, k.C + k.R), dtype=np.float32) * 2).astype(np.float32)
    return q, ckv


def pool_of(pages, P, k):
    return np.full((pages, P, 1, k.C + k.R), np.nan, np.float32)      # NaN: a row never written


def rows_of(chunks):
    """chunks: [(table, page_rows, start, n)] -> the round's rows (positions, spans)."""
    pos, spans, cs, a = [], [], [], 0
    for table, P, start, n in chunks:
        pos += list(range(start, start + n))
        spans.append((a, a + n))
        cs.append(SimpleNamespace(table=tuple(table), page_rows=P, start=start))
        a += n
    return SimpleNamespace(pos=np.asarray(pos, np.int32), spans=spans, chunks=cs)


def run(fn, k, q, ckv, pool, rows, **kw):
    w = (k.w_uk, k.w_uv_t) if fn is mla.round_attend else (k.w_ukt, k.w_uv)
    return fn(q, ckv, k.norm, 1e-6, *w, k.N, pool, rows, k.inv, k.scale, **kw)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_within_rounding_of_the_definition(shape):
    k = case(*shape)
    T, P = 37, 8
    q, ckv = inputs(k, T)
    table = np.random.default_rng(1).permutation(6)
    rows = rows_of([(table, P, 0, T)])
    p_def, p_cpu = pool_of(6, P, k), pool_of(6, P, k)
    want = run(mla.round_attend, k, q, ckv, p_def, rows)
    got = run(mla_cpu.round_attend, k, q, ckv, p_cpu, rows)
    assert np.array_equal(p_def, p_cpu, equal_nan=True)       # the stored rows: the same bytes
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5 * np.abs(want).max())
    # and the float64 textbook form (k_nope = W_UK c, v = W_UV c)
    lat = mla.latent_rows(ckv, k.norm, 1e-6, k.C, rows.pos, k.inv)
    c, kpe = lat[:, 0, :k.C].astype(np.float64), lat[:, 0, k.C:].astype(np.float64)
    qpe = mla.rope_interleaved(q[:, :, k.N:], rows.pos, k.inv).astype(np.float64)
    got = got.reshape(T, k.H, k.V)
    for h in range(k.H):
        kb = k.kv_b[h].astype(np.float64)
        s = (q[:, h, :k.N].astype(np.float64) @ (c @ kb[:k.N].T).T + qpe[:, h] @ kpe.T) * float(k.scale)
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        w = np.exp(s - s.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        ref = w @ (c @ kb[k.N:].T)
        np.testing.assert_allclose(got[:, h], ref, rtol=1e-4, atol=2e-5 * np.abs(ref).max())


def test_the_definition_differs_in_bytes():
    """Why the docstring says the family's bytes changed: the definition's OpenBLAS products
    and this kernel's fixed chains round differently (if they ever agree, say so there)."""
    k = case(5, 32, 16, 64, 32)
    q, ckv = inputs(k, 20)
    rows = rows_of([(range(3), 8, 0, 20)])
    a = run(mla.round_attend, k, q, ckv, pool_of(3, 8, k), rows)
    b = run(mla_cpu.round_attend, k, q, ckv, pool_of(3, 8, k), rows)
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("shape", SHAPES[:3], ids=lambda s: "x".join(map(str, s)))
def test_any_job_cut_gives_the_same_bytes(shape):
    k = case(*shape)
    T = 35                                  # rows in blocks of 16: 16 + 16 + 3
    q, ckv = inputs(k, T)
    rows = rows_of([((4, 1, 3, 0, 2), 8, 0, T)])
    base = run(mla_cpu.round_attend, k, q, ckv, pool_of(5, 8, k), rows, cut_to=(1, k.H),
               parallel=False)
    for n_hb in range(1, k.H + 1):
        HB = -(-k.H // n_hb)
        for par, crew in ((False, False), (True, False), (True, True)):
            got = run(mla_cpu.round_attend, k, q, ckv, pool_of(5, 8, k), rows,
                      cut_to=(-(-k.H // HB), HB), parallel=par, crew=crew)
            assert np.array_equal(got, base), (n_hb, par, crew)
    # a decode row on the crew, its default cut and every other, == the row serial
    one = rows_of([((4, 1, 3, 0, 2), 8, T - 1, 1)])
    pool = pool_of(5, 8, k)
    run(mla_cpu.round_attend, k, q[:T - 1], ckv[:T - 1], pool, rows_of([((4, 1, 3, 0, 2), 8, 0, T - 1)]))
    want = run(mla_cpu.round_attend, k, q[T - 1:], ckv[T - 1:], pool.copy(), one, parallel=False)
    for cut in (None,) + tuple((-(-k.H // hb), hb) for hb in range(1, k.H + 1)):
        got = run(mla_cpu.round_attend, k, q[T - 1:], ckv[T - 1:], pool.copy(), one,
                  parallel=True, crew=True, cut_to=cut)
        assert np.array_equal(got, want), cut


def test_a_row_alone_equals_it_in_a_round_and_by_decode():
    """Three streams in one round (prefill chunks and a decode row) == each alone; and a
    prompt's rows prefilled at once == the same prompt fed a row at a time (decode)."""
    k = case(6, 32, 16, 64, 32, seed=3)
    P = 4
    prompts = [inputs(k, n) for n in (9, 14, 1)]
    tables = [(7, 2, 5), (0, 8, 3, 10), (1, 4, 6, 9)]
    starts = [0, 0, 0]
    alone = []
    for (q, ckv), tb, s in zip(prompts, tables, starts):
        pool = pool_of(11, P, k)
        alone.append(run(mla_cpu.round_attend, k, q, ckv, pool, rows_of([(tb, P, s, len(q))])))
    pool = pool_of(11, P, k)
    rows = rows_of([(tb, P, s, len(q)) for (q, _), tb, s in zip(prompts, tables, starts)])
    together = run(mla_cpu.round_attend, k, np.concatenate([p[0] for p in prompts]),
                   np.concatenate([p[1] for p in prompts]), pool, rows)
    assert np.array_equal(together, np.concatenate(alone))
    # stream 1 by decode steps: row by row through the same pages
    q, ckv = prompts[1]
    pool = pool_of(11, P, k)
    steps = [run(mla_cpu.round_attend, k, q[i:i + 1], ckv[i:i + 1], pool,
                 rows_of([(tables[1], P, i, 1)])) for i in range(len(q))]
    assert np.array_equal(np.concatenate(steps), alone[1])
    # and in uneven chunks (resumed)
    pool = pool_of(11, P, k)
    parts = [run(mla_cpu.round_attend, k, q[a:b], ckv[a:b], pool, rows_of([(tables[1], P, a, b - a)]))
             for a, b in ((0, 5), (5, 6), (6, 14))]
    assert np.array_equal(np.concatenate(parts), alone[1])


def test_paged_equals_window():
    k = case(5, 32, 16, 64, 32, seed=4)
    T = 45
    q, ckv = inputs(k, T)
    window = run(mla_cpu.round_attend, k, q, ckv, pool_of(1, 64, k), rows_of([((0,), 64, 0, T)]))
    for P in (4, 8, 16):
        n = -(-T // P)
        table = np.random.default_rng(P).permutation(n + 3)[:n]
        got = run(mla_cpu.round_attend, k, q, ckv, pool_of(n + 3, P, k), rows_of([(table, P, 0, T)]))
        assert np.array_equal(got, window), P


def test_a_ranks_heads_alone_equal_their_part_of_all():
    """TP: a rank holds some heads (W_UK, W_UV of those); its output is those heads' columns."""
    k = case(6, 32, 16, 64, 32, seed=5)
    T = 20
    q, ckv = inputs(k, T)
    rows = rows_of([((2, 0, 1), 8, 0, T)])
    whole = run(mla_cpu.round_attend, k, q, ckv, pool_of(3, 8, k), rows).reshape(T, k.H, k.V)
    for heads in ((0, 1, 2), (3, 4, 5), (2, 3), (5,)):
        hs = list(heads)
        part = mla_cpu.round_attend(np.ascontiguousarray(q[:, hs]), ckv, k.norm, 1e-6,
                                    k.w_ukt[hs], k.w_uv[hs], k.N, pool_of(3, 8, k), rows,
                                    k.inv, k.scale)
        assert np.array_equal(part.reshape(T, len(hs), k.V), whole[:, hs]), heads


def test_q8_0_rows_give_their_float32_values_bytes():
    """W_UK / W_UV as a GGUF's Q8_0 blocks (read as stored) == the same weights dequantized to
    float32, byte for byte (a Q8_0 value is exact in float32; the chains are the same)."""
    from gguf import GGMLQuantizationType as G
    from gguf.quants import dequantize, quantize
    for shape in ((5, 32, 16, 64, 32), (20, 192, 64, 512, 256)):
        k = case(*shape, seed=6)
        kq = quantize(k.w_ukt.reshape(-1, k.N), G.Q8_0).reshape(k.H, k.C, -1)
        vq = quantize(k.w_uv.reshape(-1, k.C), G.Q8_0).reshape(k.H, k.V, -1)
        kf = dequantize(kq.reshape(k.H * k.C, -1), G.Q8_0).reshape(k.H, k.C, k.N).astype(np.float32)
        vf = dequantize(vq.reshape(k.H * k.V, -1), G.Q8_0).reshape(k.H, k.V, k.C).astype(np.float32)
        T = 19
        q, ckv = inputs(k, T)
        rows = rows_of([((1, 0, 2), 8, 0, T)])
        a = mla_cpu.round_attend(q, ckv, k.norm, 1e-6, kq, vq, k.N, pool_of(3, 8, k), rows, k.inv, k.scale)
        b = mla_cpu.round_attend(q, ckv, k.norm, 1e-6, kf, vf, k.N, pool_of(3, 8, k), rows, k.inv, k.scale)
        assert np.array_equal(a, b), shape
        for par in (False, True):             # one decode row, serial and both cores
            got = []
            for wk, wv in ((kq, vq), (kf, vf)):
                pool = pool_of(3, 8, k)
                mla_cpu.round_attend(q[:-1], ckv[:-1], k.norm, 1e-6, wk, wv, k.N, pool,
                                     rows_of([((1, 0, 2), 8, 0, T - 1)]), k.inv, k.scale)
                got.append(mla_cpu.round_attend(q[-1:], ckv[-1:], k.norm, 1e-6, wk, wv, k.N, pool,
                                                rows_of([((1, 0, 2), 8, T - 1, 1)]), k.inv,
                                                k.scale, parallel=par))
            assert np.all(np.isfinite(got[0])) and np.array_equal(*got), (shape, par)


def test_shapes_refused_by_name():
    k = case(4, 16, 8, 32, 16)
    q, ckv = inputs(k, 3)
    with pytest.raises(ValueError, match="latent"):
        run(mla_cpu.round_attend, k, q, ckv, np.zeros((2, 4, 1, 41), np.float32),
            rows_of([((0,), 4, 0, 3)]))


def test_the_score_tiles_are_dot16s_chains():
    """dot_tile16 (TILE_Q x TILE_R chains at once, smaller tiles at the edges) == dot_rows16
    (sixteen chains at once, then one a row) byte for byte, for every count of queries and
    rows around the tiles and dot_rows16's sixteen-row blocks."""
    from numba import njit
    from kernels.vec_ir import dot_rows16

    @njit
    def tiles(qs, rows, out):
        mla_cpu.dot_tile16(qs, rows, out)

    @njit
    def one_by_one(qs, rows, out):
        for a in range(qs.shape[0]):
            dot_rows16(qs[a], rows, out[a])
    rng = np.random.default_rng(9)
    for W in (16, 48, 576):
        big = rng.standard_normal((40, W + 16), dtype=np.float32)
        for na in (1, 2, 3, 5, 9):
            for n in (1, 3, 4, 7, 9, 16, 17, 33):
                qs = rng.standard_normal((na, W), dtype=np.float32)
                rows = big[:n, :W]                    # strided rows, as a page's latent rows
                a = np.full((na, n + 2), np.nan, np.float32)
                b = np.full((na, n), np.nan, np.float32)
                tiles(qs, rows, a[:, 1:n + 1])
                one_by_one(qs, rows, b)
                assert np.array_equal(a[:, 1:n + 1], b), (W, na, n)
                assert np.isnan(a[:, 0]).all() and np.isnan(a[:, -1]).all()
                c = np.full((na, n), np.nan, np.float32)   # the rows as their bytes (uint8),
                tiles(qs, rows.view(np.uint8), c)           # as round_attend passes weights
                assert np.array_equal(c, b), (W, na, n)


def test_the_value_tiles_are_axpy_rows16s_chains():
    """axpy_heads16 (AXPY_HEADS heads x AXPY_LANES lanes at once), and vec_ir's (the GQA
    attention's: three heads at a time), == axpy_rows16 a head at a time, byte for byte, for
    head counts around the tiles."""
    from numba import njit
    from kernels.vec_ir import axpy_heads16 as gqa_heads16
    from kernels.vec_ir import axpy_rows16

    @njit
    def tiles(y, w, rows, which):          # one function for both: one compile
        if which == 0:
            mla_cpu.axpy_heads16(y, w, rows)
        else:
            gqa_heads16(y, w, rows)

    @njit
    def one_by_one(y, w, rows):
        for a in range(y.shape[0]):
            axpy_rows16(y[a], w[a], rows)
    rng = np.random.default_rng(10)
    for D in (32, 64, 512):
        big = rng.standard_normal((9, D + 64), dtype=np.float32)
        for na in (1, 3, 4, 5, 9):
            for n in (1, 5, 9):
                y0 = rng.standard_normal((na, D), dtype=np.float32)
                wbig = rng.standard_normal((na, n + 3), dtype=np.float32)
                b = y0.copy()
                one_by_one(b, np.ascontiguousarray(wbig[:, 1:n + 1]), big[:n, :D])
                for which in (0, 1):
                    a = y0.copy()
                    tiles(a, wbig[:, 1:n + 1], big[:n, :D], which)
                    assert np.array_equal(a, b), (which, D, na, n)


def test_rows_past_several_segments():
    """Prompts longer than mla_cpu.SEG keys (several segments of the online softmax, merged
    in order): within rounding of the definition; prefilled at once == in uneven chunks
    (edges on and off the segments' and blocks' edges) == a row at a time across the
    segment edges; paged == one window."""
    S = mla_cpu.SEG
    k = case(3, 16, 16, 32, 24, seed=11)
    T, P = 2 * S + 37, 8
    q, ckv = inputs(k, T)
    n = -(-T // P)
    table = np.random.default_rng(12).permutation(n + 2)[:n]
    rows = rows_of([(table, P, 0, T)])
    p_def, pool = pool_of(n + 2, P, k), pool_of(n + 2, P, k)
    want = run(mla.round_attend, k, q, ckv, p_def, rows)
    whole = run(mla_cpu.round_attend, k, q, ckv, pool, rows)
    assert np.all(np.isfinite(whole))
    np.testing.assert_allclose(whole, want, rtol=1e-4, atol=2e-5 * np.abs(want).max())
    window = run(mla_cpu.round_attend, k, q, ckv, pool_of(1, T + 3, k), rows_of([((0,), T + 3, 0, T)]))
    assert np.array_equal(window, whole)
    cuts = (0, S - 1, S, S + 1, S + 17, 2 * S - 5, 2 * S + 16, T)
    pool = pool_of(n + 2, P, k)
    parts = [run(mla_cpu.round_attend, k, q[a:b], ckv[a:b], pool, rows_of([(table, P, a, b - a)]))
             for a, b in zip(cuts[:-1], cuts[1:])]
    assert np.array_equal(np.concatenate(parts), whole)
    pool = pool_of(n + 2, P, k)
    run(mla_cpu.round_attend, k, q[:S - 2], ckv[:S - 2], pool, rows_of([(table, P, 0, S - 2)]))
    for i in range(S - 2, S + 3):              # decode rows across the first segment edge
        got = run(mla_cpu.round_attend, k, q[i:i + 1], ckv[i:i + 1], pool, rows_of([(table, P, i, 1)]))
        assert np.array_equal(got, whole[i:i + 1]), i


def test_split_over_segments_gives_the_same_bytes():
    """Split mode (a few rows' keys spread over the threads by segment, every head at once,
    merged in order) == each row's job reading its keys alone, serial or parallel: a decode
    row and a round of three streams' rows past several segments, float32 and Q8_0 W."""
    from gguf import GGMLQuantizationType as G
    from gguf.quants import quantize
    S = mla_cpu.SEG
    k = case(5, 32, 16, 64, 32, seed=13)
    lens = (2 * S + 40, S + 1, 70)
    prompts = [inputs(k, n) for n in lens]
    P = 16
    tables, pool, at = [], pool_of(200, P, k), 0
    for n in lens:
        tables.append(tuple(range(at, at + -(-(n + 1) // P))))
        at += len(tables[-1])
    for (q, ckv), tb in zip(prompts, tables):
        run(mla_cpu.round_attend, k, q[:-1], ckv[:-1], pool, rows_of([(tb, P, 0, len(q) - 1)]))
    kq = quantize(k.w_ukt.reshape(-1, k.N), G.Q8_0).reshape(k.H, k.C, -1)
    vq = quantize(k.w_uv.reshape(-1, k.C), G.Q8_0).reshape(k.H, k.V, -1)
    for w in ((k.w_ukt, k.w_uv), (kq, vq)):
        for which in ((0,), (0, 1, 2)):
            q = np.concatenate([prompts[i][0][-1:] for i in which])
            ckv = np.concatenate([prompts[i][1][-1:] for i in which])
            rows = rows_of([(tables[i], P, lens[i] - 1, 1) for i in which])
            got = [mla_cpu.round_attend(q, ckv, k.norm, 1e-6, *w, k.N, pool.copy(), rows, k.inv,
                                        k.scale, parallel=par, split=sp, cut_to=cut)
                   for par, sp, cut in ((False, False, None), (True, False, None),
                                        (True, True, None), (True, True, (5, 1)))]
            assert np.all(np.isfinite(got[0]))
            for g in got[1:]:
                assert np.array_equal(g, got[0]), which
