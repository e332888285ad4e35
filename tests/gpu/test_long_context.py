"""Long contexts keep the definition: rows at page and span edges up to 131,072 keys (llama3-8b
heads, pages shuffled) give every bit of `reference` in each mode, alone and in one round
with others (split decode rows folded by `fold_spans`); a 131,072-key row is near float64;
and at 32k paged == window byte for byte, at the kernel and through the engine (a 32,000-token
prompt in chunks, then decode rounds through CUDA graphs)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.test_split_attention import MODES, _bytes

rng = np.random.default_rng()
HQ, KV, HD, P = 32, 8, 128, 16
CTX = 131072


def _take(pool, idx, kvh=None):
    """pool[idx] (or pool[idx, :, kvh]) of a bf16 pool, contiguous, gathered as uint16 words."""
    import cupy as cp
    u = pool.view(cp.uint16)[idx]
    if kvh is not None:
        u = u[:, :, kvh]
    return cp.ascontiguousarray(u).view(pool.dtype)


def _pools(rows, pages_spare=64):
    """One stream's rows 0..rows-1 (random bf16, made on the device) on shuffled pages."""
    import cupy as cp
    from kernels.common_cuda import as_bf16
    pages = -(-rows // P)
    n = pages + pages_spare
    table = tuple(int(t) for t in rng.permutation(n)[:pages])
    kp = as_bf16(cp.random.standard_normal((n, P, KV, HD), dtype=cp.float32))
    vp = as_bf16(cp.random.standard_normal((n, P, KV, HD), dtype=cp.float32))
    return kp, vp, table


# (first position, rows): single rows whose key counts end at a span or page edge, just
# past one, at 32k, 64k and the last position of a 131,072 context; a chunk across both
EDGES = [(32767, 1), (32768, 1), (65535, 1), (65536, 1), (CTX - 64, 1), (CTX - 63, 1),
         (CTX - 17, 1), (CTX - 16, 1), (CTX - 1, 1), (CTX - 80, 80)]


@pytest.fixture(scope="module")
def long_pools():
    return _pools(CTX)


@pytest.mark.parametrize("start,n", EDGES)
def test_long_rows_every_bit_equals_the_definition(monkeypatch, long_pools, start, n):
    import cupy as cp
    from kernels import attention_cuda
    kp, vp, table = long_pools
    q = cp.random.standard_normal((n, HQ, HD), dtype=cp.float32)
    want = _bytes(attention_cuda.reference(q, kp, vp, table, P, start, HD ** -0.5))
    assert not np.isnan(want.view(np.uint16).astype(np.float32)).any()
    for mode in MODES:
        monkeypatch.setattr(attention_cuda, "FORCE_SPLIT", mode)
        got = _bytes(attention_cuda.cuda(q, kp, vp, table, P, start, HD ** -0.5))
        diff = int((got != want).sum())
        assert diff == 0, (mode, f"{diff} of {got.size} words differ")


def test_a_round_of_long_rows_equals_the_definition_row_by_row(long_pools):
    """Decode rows of several long lengths on one table, a prefill chunk at the end and
    padding, in one launch (split mode, then fold_spans), each row == the definition's."""
    import cupy as cp
    from kernels import attention_cuda
    kp, vp, table = long_pools
    rows = [(CTX - 1, 1), (65536, 1), (100, 1), (CTX - 40, 40), (32768, 1), (70001, 1)]
    chunks = [(table, P, s, range(n), True) for s, n in rows]
    qs = [cp.random.standard_normal((n, HQ, HD), dtype=cp.float32) for _, n in rows]
    rm = attention_cuda.round_map(chunks, HQ // KV)
    got = _bytes(attention_cuda.cuda_round(cp.concatenate(qs), kp, vp, rm, 0.088))
    o = 0
    for (s, n), q in zip(rows, qs):
        want = _bytes(attention_cuda.reference(q, kp, vp, table, P, s, 0.088))
        assert np.array_equal(got[o:o + n], want), s
        o += n


def test_decode_rows_of_a_graph_bucket_split_at_131072():
    """The plan of a graph bucket of up to 16 decode rows at a 131,072-key table splits (the
    decode scratch bound), and the fold runs: a padded 16-row bucket == the definition."""
    import cupy as cp
    from kernels import attention_cuda
    W = CTX // P
    for B in (1, 4, 16):
        split, z, spans = attention_cuda.plan(B, HQ, HD, KV, B, W * P)
        assert split and spans == CTX // attention_cuda.SPAN, B
    kp, vp, table = _pools(CTX // 4)
    B, real = 16, [CTX // 4 - 1, 12345, 64, 63, 20000]
    tables = np.zeros((B, W), np.int32)
    tables[:len(real), :len(table)] = table
    pos = np.full(B, -1, np.int32)
    pos[:len(real)] = real
    rm = attention_cuda.RoundMap(cp.asarray(tables), cp.arange(B, dtype=cp.int32),
                                 cp.asarray(pos), cp.arange(B, dtype=cp.int32),
                                 cp.ones(B, dtype=cp.int32), P)
    q = cp.random.standard_normal((B, HQ, HD), dtype=cp.float32)
    got = _bytes(attention_cuda.cuda_round(q, kp, vp, rm, 0.088))
    for i, p in enumerate(real):
        want = _bytes(attention_cuda.reference(q[i:i + 1], kp, vp, table, P, p, 0.088))
        assert np.array_equal(got[i:i + 1], want), p
    assert not got[len(real):].any()


def test_a_131072_key_row_is_near_float64(long_pools):
    import cupy as cp
    from kernels import attention_cuda
    from kernels.common_cuda import as_f32
    kp, vp, table = long_pools
    q = cp.random.standard_normal((1, HQ, HD), dtype=cp.float32)
    got = as_f32(attention_cuda.cuda(q, kp, vp, table, P, CTX - 1, HD ** -0.5))
    idx = cp.asarray(table)
    G = HQ // KV
    for kvh in (0, KV - 1):
        K = as_f32(_take(kp, idx, kvh)).reshape(-1, HD)[:CTX].astype(cp.float64)
        V = as_f32(_take(vp, idx, kvh)).reshape(-1, HD)[:CTX].astype(cp.float64)
        for h in range(kvh * G, kvh * G + G):
            s = K @ q[0, h].astype(cp.float64) * HD ** -0.5
            w = cp.exp(s - s.max())
            ref = (w / w.sum()) @ V
            err = float(cp.linalg.norm(got[0, h] - ref) / cp.linalg.norm(ref))
            assert err < 1e-2, (h, err)


def test_paged_equals_window_bytes_at_32k():
    """The same 32,768 rows as shuffled pages of 16 and as one window: decode rows at the
    last positions, a chunk across the last span edge and a mixed round, equal bytes."""
    import cupy as cp
    from kernels import attention_cuda
    ctx = 32768
    kp, vp, table = _pools(ctx)
    idx = cp.asarray(table)
    kw = _take(kp, idx).reshape(1, ctx, KV, HD)
    vw = _take(vp, idx).reshape(1, ctx, KV, HD)
    for s, n in ((ctx - 1, 1), (32000, 1), (ctx - 65, 65), (ctx - 2048, 2048)):
        q = cp.random.standard_normal((n, HQ, HD), dtype=cp.float32)
        a = _bytes(attention_cuda.cuda(q, kp, vp, table, P, s, 0.088))
        b = _bytes(attention_cuda.cuda(q, kw, vw, (0,), ctx, s, 0.088))
        assert np.array_equal(a, b), (s, n)


def test_engine_paged_equals_window_at_32k():
    """Through the engine (smollm2's shape, dummy weights): a 32,000-token prompt in chunks
    of 2,048, then decode rounds (CUDA graphs), on pages and on a window: equal logits."""
    from server.engine.build import open_model
    from server.engine.probe import _digest
    from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
    eng = open_model("dummy:smollm2-135m", device="cuda", progress=False).engine
    ctx, prompt_n, chunk = 32768, 32000, 2048
    vocab = eng.spec.vocab
    prompt = [int(t) for t in np.random.default_rng(7).integers(10, vocab - 10, prompt_n)]
    seen = {}
    for paged in (True, False):
        pages = ctx // P
        eng.apply(PoolStep(paged, pages if paged else 0, P, (eng.page_bytes(P),), 1, ctx))
        table = tuple(int(t) for t in np.random.default_rng(3).permutation(pages)) if paged else ()
        eng.apply(BeginStep(0, table))
        digests = []
        for a in range(0, prompt_n, chunk):
            b = min(prompt_n, a + chunk)
            lg = eng.apply(RoundStep((Chunk(0, a, tuple(prompt[a:b]), b == prompt_n),)))
        pos = prompt_n
        for _ in range(4):
            row = np.asarray(lg[0], dtype=np.float32)
            digests.append(_digest(row))
            lg = eng.apply(RoundStep((Chunk(0, pos, (int(np.argmax(row)),), True),)))
            pos += 1
        digests.append(_digest(np.asarray(lg[0], dtype=np.float32)))
        eng.apply(EndStep(0))
        seen[paged] = digests
    assert seen[True] == seen[False]
