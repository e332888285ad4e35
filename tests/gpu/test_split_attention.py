"""Attention split over keys (spans of SPAN keys, folded in order 0, 1, 2, ...): against
float64 at lengths below, at and above the span; the split mode (one block a span, then
`merge`) and the in-block mode give the same bytes; paged == window byte for byte with the
split active; a row alone == the same row among rows of other lengths and modes; chunked ==
whole across span edges; CUDA-graph replay == eager at long positions."""
from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.conftest import bf16_round, poison_pool, rel

rng = np.random.default_rng()
MODES = (None, True, False)          # chosen by shape, forced split, forced in-block


def _span():
    from kernels import attention_cuda
    return attention_cuda.SPAN


def _nan(n, rows, kv, hd):
    import cupy as cp
    from kernels.common_cuda import BF16
    return cp.full((n, rows, kv, hd), 0x7FC0, dtype=cp.uint16).view(BF16)


def _streams(lengths, kv, hd, P, spare=40):
    """Pools holding each stream's rows 0..L-1 (random bf16) through shuffled tables that
    reach `spare` pages past what the stream uses (so the map's width allows >= 2 spans)."""
    import cupy as cp
    from kernels import kv_write_cuda
    need = [-(-L // P) + spare for L in lengths]
    ids = [int(t) for t in rng.permutation(sum(need) + 3)]
    kp, vp = _nan(len(ids), P, kv, hd), _nan(len(ids), P, kv, hd)
    tables, Ks, Vs, o = [], [], [], 0
    for L, n in zip(lengths, need):
        t = tuple(ids[o:o + n])
        o += n
        K = bf16_round(rng.standard_normal((L, kv, hd)).astype(np.float32))
        V = bf16_round(rng.standard_normal((L, kv, hd)).astype(np.float32))
        kv_write_cuda.cuda(kp, vp, t, P, 0, cp.asarray(K), cp.asarray(V))
        tables.append(t)
        Ks.append(K)
        Vs.append(V)
    return kp, vp, tables, Ks, Vs


def _ref(q, K, V, start, scale):
    from tests.gpu.test_kernels import _ref_attn
    return _ref_attn(q.astype(np.float64), K.astype(np.float64), V.astype(np.float64), start, scale)


def _bytes(a):
    import cupy as cp
    return cp.asnumpy(a.view(cp.uint16))


@pytest.mark.parametrize("hq,kv,hd,P,start,n", [
    (32, 8, 128, 16, 99, 1),             # length 100: one span
    (32, 8, 128, 16, ("span", -1), 1),   # length SPAN: one full span
    (32, 8, 128, 16, ("span", 0), 1),    # length SPAN + 1: a second span of one key
    (32, 8, 128, 16, ("span", 1), 1),    # length SPAN + 2
    (32, 8, 128, 16, 4999, 1),           # length 5000
    (9, 3, 64, 7, ("span", -10), 24),    # a prefill chunk across the span edge, G = 3, odd pages
    (4, 4, 128, 16, 1500, 3),            # MHA, a few rows well past the span
])
def test_split_against_float64_and_modes_agree(monkeypatch, hq, kv, hd, P, start, n):
    import cupy as cp
    from kernels import attention_cuda
    from kernels.common_cuda import as_f32
    if isinstance(start, tuple):
        start = _span() + start[1]
    L = start + n
    kp, vp, (table,), (K,), (V,) = _streams([L], kv, hd, P)
    q = rng.standard_normal((n, hq, hd)).astype(np.float32)
    scale = hd ** -0.5
    ref = _ref(q, K, V, start, scale)
    seen = []
    for mode in MODES:
        monkeypatch.setattr(attention_cuda, "FORCE_SPLIT", mode)
        poison_pool()
        out = attention_cuda.cuda(cp.asarray(q), kp, vp, table, P, start, scale)
        err = rel(as_f32(out).get(), ref)
        assert err < 1e-2, (mode, err)
        seen.append(_bytes(out))
    for b in seen[1:]:
        assert np.array_equal(b, seen[0])


def test_paged_equals_window_bytes_with_split(monkeypatch):
    import cupy as cp
    from kernels import attention_cuda, kv_write_cuda
    hq, kv, hd, P, ctx = 32, 8, 128, 16, 1200
    S = _span()
    pages = -(-ctx // P)
    table = tuple(int(t) for t in rng.permutation(pages + 5)[:pages])
    kp, vp = _nan(pages + 5, P, kv, hd), _nan(pages + 5, P, kv, hd)
    kw, vw = _nan(2, ctx, kv, hd), _nan(2, ctx, kv, hd)
    edges = [0, S - 6, S, S + 1, 2 * S + 3, 1023, 1024, 1025, 1100, 1101, 1102, 1103]
    for a, b in zip(edges, edges[1:]):
        k = cp.asarray(rng.standard_normal((b - a, kv, hd)).astype(np.float32))
        v = cp.asarray(rng.standard_normal((b - a, kv, hd)).astype(np.float32))
        q = cp.asarray(rng.standard_normal((b - a, hq, hd)).astype(np.float32))
        kv_write_cuda.cuda(kp, vp, table, P, a, k, v)
        kv_write_cuda.cuda(kw, vw, (1,), ctx, a, k, v)
        got = []
        for mode in MODES:
            monkeypatch.setattr(attention_cuda, "FORCE_SPLIT", mode)
            got.append(_bytes(attention_cuda.cuda(q, kp, vp, table, P, a, 0.088)))
            got.append(_bytes(attention_cuda.cuda(q, kw, vw, (1,), ctx, a, 0.088)))
        for g in got[1:]:
            assert np.array_equal(g, got[0]), (a, b)


def test_solo_equals_concurrent_at_long_positions(monkeypatch):
    """A decode row at 3000 alone == the same row in a round with decode rows at 100, 699,
    5000 and a 40-row prefill chunk at 2000..2039, in every mode (with and without the key
    block prefetch) and at another table width;
    the chunk's rows == the same rows in chunks of 13 and alone."""
    import cupy as cp
    from kernels import attention_cuda
    hq, kv, hd, P = 32, 8, 128, 16
    G = hq // kv
    lengths = [3001, 101, 5001, 2040, 700]
    kp, vp, tables, _, _ = _streams(lengths, kv, hd, P)
    starts = [3000, 100, 5000, 2000, 699]
    ns = [1, 1, 1, 40, 1]
    qs = [cp.asarray(rng.standard_normal((n, hq, hd)).astype(np.float32)) for n in ns]
    chunk = lambda i, a=None, n=None: (tables[i], P, starts[i] if a is None else a,
                                       range(ns[i] if n is None else n), True)

    def run(chunks, q, width=None):
        rm = attention_cuda.round_map(chunks, G, width=width)
        return _bytes(attention_cuda.cuda_round(q, kp, vp, rm, 0.088))

    solo = {}
    monkeypatch.setattr(attention_cuda, "FORCE_SPLIT", None)
    for i in (0, 1, 2, 4):
        solo[i] = run([chunk(i)], qs[i])
    whole3 = run([chunk(3)], qs[3])
    order = [1, 3, 0, 2, 4]
    q_all = cp.concatenate([qs[i] for i in order])
    rows = np.cumsum([0] + [ns[i] for i in order])
    for mode, pf in [(m, pf) for m in MODES for pf in (True, False)]:   # prefetch: scheduling only
        monkeypatch.setattr(attention_cuda, "FORCE_SPLIT", mode)
        monkeypatch.setattr(attention_cuda, "PREFETCH", pf)
        for width in (None, 400):
            got = run([chunk(i) for i in order], q_all, width)
            for k, i in enumerate(order):
                part = got[rows[k]:rows[k + 1]]
                assert np.array_equal(part, solo[i] if i != 3 else whole3), (mode, width, i)
            assert np.array_equal(run([chunk(0)], qs[0], width), solo[0]), (mode, width)
        parts = [run([chunk(3, 2000 + a, min(13, 40 - a))], qs[3][a:a + 13]) for a in range(0, 40, 13)]
        assert np.array_equal(np.concatenate(parts), whole3), mode
        one = run([chunk(3, 2039, 1)], qs[3][39:])
        assert np.array_equal(one, whole3[39:]), mode


def test_graph_replay_equals_eager_at_long_positions(monkeypatch):
    """smollm2 shape, context 512, a 300-token prompt (rows past SPAN), 6 decode rounds:
    graph replay == eager == eager in-block == the stream among 3 others, logits bytes."""
    from kernels import attention_cuda
    from tests.gpu.test_forward import SPEC, engine, greedy, weights
    assert attention_cuda.SPAN < 300
    get = weights(SPEC)
    r = np.random.default_rng(5)
    prompts = [tuple(int(t) for t in r.integers(0, SPEC.vocab, n)) for n in (300, 40, 280, 17)]
    tables = [tuple(range(32 * i, 32 * i + 32)) for i in range(4)]
    tables[0] = tuple(reversed(tables[0]))
    e = engine("cuda", get)
    _, raw_g = greedy(e, {0: (tables[0], prompts[0])}, 6)
    assert e.model.graphs.failed is None, e.model.graphs.failed
    assert e.model.graphs.graphs, "no graph was captured"
    e2 = engine("cuda", get)
    e2.model.graphs.enabled = False
    _, raw_e = greedy(e2, {0: (tables[0], prompts[0])}, 6)
    monkeypatch.setattr(attention_cuda, "FORCE_SPLIT", False)
    e3 = engine("cuda", get)
    e3.model.graphs.enabled = False
    _, raw_i = greedy(e3, {0: (tables[0], prompts[0])}, 6)
    monkeypatch.setattr(attention_cuda, "FORCE_SPLIT", None)
    e4 = engine("cuda", get)
    _, raw_c = greedy(e4, {i: (tables[i], prompts[i]) for i in range(4)}, 6)
    assert raw_g[0] == raw_e[0]
    assert raw_i[0] == raw_e[0]
    assert raw_c[0] == raw_e[0]
