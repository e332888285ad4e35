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


def _chunks(rng, spec, hd=HD):
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
    qkv = rng.standard_normal((o, (NQ + 2 * NKV) * hd)).astype(np.float32)
    k_pool = rng.standard_normal((pages, P, NKV, hd)).astype(np.float32)
    v_pool = rng.standard_normal((pages, P, NKV, hd)).astype(np.float32)
    return chunks, spans, np.asarray(pos, np.int32), qkv, k_pool, v_pool


def _fast(chunks, spans, pos, qkv, k_pool, v_pool, inv, scale, form=None):
    from kernels import attention_cpu
    hd = k_pool.shape[-1]
    cpu = attention_cpu.plan(chunks, spans, pos, inv)
    out = np.empty((qkv.shape[0], NQ, hd), np.float32)
    if form is None:
        attention_cpu.round_attend(qkv, NQ, NKV, hd, *cpu[:2], k_pool, v_pool, *cpu[2:], scale, out)
    else:
        form(qkv, NQ, NKV, hd, *cpu[:2], k_pool, v_pool, *cpu[2:], np.float32(scale), out)
    return out


def _definition(chunks, spans, pos, qkv, k_pool, v_pool, inv, scale):
    from kernels import attention, kv_write, rope
    T, hd = qkv.shape[0], k_pool.shape[-1]
    q = rope.ref(np.ascontiguousarray(qkv[:, :NQ * hd].reshape(T, NQ, hd)), pos, inv)
    k = rope.ref(np.ascontiguousarray(qkv[:, NQ * hd:(NQ + NKV) * hd].reshape(T, NKV, hd)), pos, inv)
    v = np.ascontiguousarray(qkv[:, (NQ + NKV) * hd:].reshape(T, NKV, hd))
    out = np.empty((T, NQ, hd), np.float32)
    for (a, b), c in zip(spans, chunks):
        kv_write.ref(k_pool, v_pool, c.table, P, c.start, k[a:b], v[a:b])
        out[a:b] = attention.ref(q[a:b], k_pool, v_pool, c.table, P, c.start, scale)
    return out


@pytest.mark.parametrize("hd", [HD, 24])       # 24: head dims not a multiple of 16 (plain loops)
def test_round_attention_matches_the_definition(hd):
    from kernels import rope
    rng = np.random.default_rng(3)
    inv = rope.inv_freq(hd, 10000.0)
    args = _chunks(rng, [(0, 13), (5, 1), (20, 3)], hd)
    chunks, spans, pos, qkv, k_pool, v_pool = args
    kd, vd = k_pool.copy(), v_pool.copy()
    want = _definition(chunks, spans, pos, qkv, kd, vd, inv, hd ** -0.5)
    got = _fast(chunks, spans, pos, qkv, k_pool, v_pool, inv, hd ** -0.5)
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


def test_a_wide_round_is_both_cores_and_equals_its_chunks_alone_on_one():
    """A round that `wide` sends over both cores (a prefill beside decodes) gives every chunk
    the bytes it gets alone on one core (a decode row alone is one job short of JOBS_FROM),
    and the two forms agree on the whole round."""
    from kernels import attention_cpu, rope
    inv = rope.inv_freq(HD, 10000.0)
    rng = np.random.default_rng(6)
    chunks, spans, pos, qkv, k_pool, v_pool = _chunks(rng, [(0, 40), (300, 1), (90, 7), (33, 1)])
    cpu = attention_cpu.plan(chunks, spans, pos, inv)
    assert attention_cpu.wide(cpu[2], cpu[3], NQ, NKV)
    base_k, base_v = k_pool.copy(), v_pool.copy()
    full = _fast(chunks, spans, pos, qkv, k_pool, v_pool, inv, 0.125)
    kp, vp = base_k.copy(), base_v.copy()
    serial = _fast(chunks, spans, pos, qkv, kp, vp, inv, 0.125, attention_cpu._attend_serial)
    assert serial.tobytes() == full.tobytes() and kp.tobytes() == k_pool.tobytes()
    for c, (a, b) in zip(chunks, spans):
        kp, vp = base_k.copy(), base_v.copy()
        one = attention_cpu.plan([c], [(0, b - a)], pos[a:b], inv)
        if b - a == 1:
            assert not attention_cpu.wide(one[2], one[3], NQ, NKV)
        alone = _fast([c], [(0, b - a)], pos[a:b], qkv[a:b], kp, vp, inv, 0.125)
        assert alone.tobytes() == full[a:b].tobytes()


@pytest.mark.parametrize("hd", [HD, 24])
@pytest.mark.parametrize("n", [9, 17, 3])
def test_a_chunks_rows_equal_each_row_alone(n, hd):
    """A chunk of n rows (a verify chunk, a prompt chunk: its row groups share each key read,
    attention_cpu.row_groups) gives every row the bytes that row gets as a one-row chunk at
    its position (a decode row), on both forms; the chunk starts mid-page."""
    from kernels import attention_cpu, rope
    from server.engine.rows import RoundChunk
    inv = rope.inv_freq(hd, 10000.0)
    rng = np.random.default_rng(7 + n)
    chunks, spans, pos, qkv, k_pool, v_pool = _chunks(rng, [(45, n)], hd)
    assert attention_cpu.row_groups(np.asarray(spans, np.int64)).shape[0] == -(-n // 8)
    full = _fast(chunks, spans, pos, qkv, k_pool, v_pool, inv, hd ** -0.5)
    kp, vp = k_pool.copy(), v_pool.copy()
    serial = _fast(chunks, spans, pos, qkv, kp, vp, inv, hd ** -0.5, attention_cpu._attend_serial)
    assert serial.tobytes() == full.tobytes()
    c = chunks[0]
    for r in range(n):
        one = RoundChunk(c.table, P, c.start + r, (0,), True)
        alone = _fast([one], [(0, 1)], pos[r:r + 1], qkv[r:r + 1], k_pool.copy(),
                      v_pool.copy(), inv, hd ** -0.5)
        assert alone.tobytes() == full[r:r + 1].tobytes(), r


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
    row = np.empty((1, 32), np.float32)            # one row (serial) == among rows (prange)
    rmsnorm_cpu.swiglu(gu[1:2], 32, row)
    assert rmsnorm_cpu.SWIGLU_PARALLEL_FROM <= 3 and row.tobytes() == act[1:2].tobytes()
