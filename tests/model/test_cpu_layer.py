"""The numba forms of the layer's other ops on the CPU (kernels/attention_cpu.py,
kernels/rmsnorm_cpu.py) against their numpy definitions (kernels/rope.py, kv_write.py,
attention.py, rmsnorm.py, swiglu.py): RoPE'd K and V rows written byte for byte as the
definition writes them, attention and norms within float32 rounding of it, and a row's bytes
the same alone as among other chunks of a round (batch invariance by construction)."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import qmatmul

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

NQ, NKV, HD, P = 6, 2, 64, 8


def _chunks(rng, spec):
    """spec: [(start, n)] one stream each, own pages -> (RoundChunks, spans, pos, qkv, pools)."""
    from server.engine.rows import RoundChunk
    pages = 0
    chunks, spans, pos, o = [], [], [], 0
    for start, n in spec:
        need = -(-(start + n) // P)
        table = tuple(range(pages + need - 1, pages - 1, -1))      # pages out of order
        pages += need
        chunks.append(RoundChunk(table, P, start, tuple(range(n)), True))
        spans.append((o, o + n))
        pos += list(range(start, start + n))
        o += n
    qkv = rng.standard_normal((o, (NQ + 2 * NKV) * HD)).astype(np.float32)
    k_pool = rng.standard_normal((pages, P, NKV, HD)).astype(np.float32)
    v_pool = rng.standard_normal((pages, P, NKV, HD)).astype(np.float32)
    return chunks, spans, np.asarray(pos, np.int32), qkv, k_pool, v_pool


def _fast(chunks, spans, pos, qkv, k_pool, v_pool, inv, scale):
    from kernels import attention_cpu
    cpu = attention_cpu.plan(chunks, spans, pos, inv)
    out = np.empty((qkv.shape[0], NQ, HD), np.float32)
    attention_cpu.round_attend(qkv, NQ, NKV, HD, *cpu[:2], k_pool, v_pool, *cpu[2:], scale, out)
    return out


def _definition(chunks, spans, pos, qkv, k_pool, v_pool, inv, scale):
    from kernels import attention, kv_write, rope
    T = qkv.shape[0]
    q = rope.ref(np.ascontiguousarray(qkv[:, :NQ * HD].reshape(T, NQ, HD)), pos, inv)
    k = rope.ref(np.ascontiguousarray(qkv[:, NQ * HD:(NQ + NKV) * HD].reshape(T, NKV, HD)), pos, inv)
    v = np.ascontiguousarray(qkv[:, (NQ + NKV) * HD:].reshape(T, NKV, HD))
    out = np.empty((T, NQ, HD), np.float32)
    for (a, b), c in zip(spans, chunks):
        kv_write.ref(k_pool, v_pool, c.table, P, c.start, k[a:b], v[a:b])
        out[a:b] = attention.ref(q[a:b], k_pool, v_pool, c.table, P, c.start, scale)
    return out


def test_round_attention_matches_the_definition():
    from kernels import rope
    rng = np.random.default_rng(3)
    inv = rope.inv_freq(HD, 10000.0)
    args = _chunks(rng, [(0, 13), (5, 1), (20, 3)])
    chunks, spans, pos, qkv, k_pool, v_pool = args
    kd, vd = k_pool.copy(), v_pool.copy()
    want = _definition(chunks, spans, pos, qkv, kd, vd, inv, HD ** -0.5)
    got = _fast(chunks, spans, pos, qkv, k_pool, v_pool, inv, HD ** -0.5)
    assert k_pool.tobytes() == kd.tobytes() and v_pool.tobytes() == vd.tobytes()
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_a_chunk_alone_equals_the_chunk_among_others():
    from kernels import rope
    inv = rope.inv_freq(HD, 10000.0)
    rng = np.random.default_rng(4)
    chunks, spans, pos, qkv, k_pool, v_pool = _chunks(rng, [(0, 9), (17, 1), (4, 5)])
    base_k, base_v = k_pool.copy(), v_pool.copy()
    full = _fast(chunks, spans, pos, qkv, k_pool, v_pool, inv, 0.125)
    for c, (a, b) in zip(chunks, spans):
        kp, vp = base_k.copy(), base_v.copy()
        alone = _fast([c], [(0, b - a)], pos[a:b], qkv[a:b], kp, vp, inv, 0.125)
        assert alone.tobytes() == full[a:b].tobytes()


def test_norms_and_swiglu_match_the_definition_and_are_row_invariant():
    from kernels import rmsnorm, rmsnorm_cpu, swiglu
    rng = np.random.default_rng(5)
    x = rng.standard_normal((9, 576)).astype(np.float32)
    r = rng.standard_normal((9, 576)).astype(np.float32)
    w = rng.standard_normal(576).astype(np.float32)
    y = np.empty_like(x)
    rmsnorm_cpu.rms_norm(x, w, 1e-5, y)
    want = rmsnorm.ref(x, w, 1e-5)
    assert np.abs(y - want).max() <= 1e-5 * np.abs(want).max()
    y2, h = np.empty_like(x), np.empty_like(x)
    rmsnorm_cpu.add_rms_norm(x, r, w, 1e-5, y2, h)
    want2, hw = rmsnorm.add_ref(x, r, w, 1e-5)
    assert h.tobytes() == hw.tobytes()
    assert np.abs(y2 - want2).max() <= 1e-5 * np.abs(want2).max()
    one = np.empty((1, 576), np.float32)
    rmsnorm_cpu.rms_norm(x[4:5], w, 1e-5, one)
    assert one.tobytes() == y[4:5].tobytes()
    gu = rng.standard_normal((3, 64)).astype(np.float32)
    act = np.empty((3, 32), np.float32)
    rmsnorm_cpu.swiglu(gu, 32, act)
    sw = swiglu.ref(gu[:, :32], gu[:, 32:])
    assert np.abs(act - sw).max() <= 1e-6 * np.abs(sw).max()
