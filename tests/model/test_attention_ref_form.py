"""kernels/attention_cpu.ref_chunk: attention.ref's own float operations over a chunk's rows in
numba (the OpenBLAS small-kernel orders of np.matmul, numpy's exp and pairwise sum), held to
attention.ref bit for bit, and NumbaOps.write_and_attend (which uses it for long chunks where
this process's numpy agrees: attention_cpu.ref_agrees) to the definition chunk by chunk,
rows past the form's bounds included."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kernels import attention, kv_write

numba = pytest.importorskip("numba")


@pytest.fixture(scope="module")
def A():
    import kernels
    kernels.init()
    from kernels import attention_cpu
    return attention_cpu


def _pools(rng, pages, P, KV, hd):
    kp = rng.standard_normal((pages, P, KV, hd)).astype(np.float32)
    return kp, rng.standard_normal(kp.shape).astype(np.float32)


# Qwen3-30B-A3B (32 q heads, 4 kv), GLM-4.5-Air (96, 8), and a small head dim
def _avx512_openblas():
    """numpy on OpenBLAS on an AVX-512 host: its sgemm small kernels are the ones the form
    follows (elsewhere ref_agrees may say no, and the engine runs attention.ref)."""
    from numpy._core._multiarray_umath import __cpu_features__ as f
    cfg = np.show_config(mode="dicts") if "mode" in np.show_config.__code__.co_varnames else {}
    blas = str(cfg.get("Build Dependencies", {}).get("blas", {}).get("name", ""))
    return bool(f.get("AVX512F")) and "openblas" in blas


@pytest.mark.parametrize("G,hd", [(8, 128), (12, 128), (4, 64)])
def test_ref_chunk_is_attention_ref(A, G, hd):
    if not A.ref_agrees(G, hd):
        assert not _avx512_openblas(), f"ref_chunk parts from attention.ref at G={G}, hd={hd}"
        pytest.skip(f"this numpy's BLAS orders (G={G}, hd={hd}) otherwise: the engine runs "
                    "attention.ref there (ref_agrees)")
    rng = np.random.default_rng(G * hd)
    KV, P = 2, 16
    for start, n in ((0, 1), (0, 40), (5, 3), (37, 160), (130, 20)):   # every L % 16 from 1
        pages = (start + n + P - 1) // P
        kp, vp = _pools(rng, pages + 3, P, KV, hd)
        table = rng.permutation(pages + 3)[:pages].astype(np.int64)
        q = (rng.standard_normal((n, KV * G, hd)) * 0.4).astype(np.float32)
        want = attention.ref(q, kp, vp, table, P, start, 0.09)
        got = np.empty(want.shape, np.float32)
        assert A.ref_rows(start, n, G, hd) == n
        A.ref_chunk(q, kp, vp, table, P, start, 0.09, got)
        assert got.tobytes() == want.tobytes(), (start, n)


def test_ref_rows_bounds(A):
    assert A.ref_rows(0, 2000, 8, 128) == 976            # 8 * 128 * 976 <= 1e6 < 8 * 128 * 977
    assert A.ref_rows(970, 10, 8, 128) == 6
    assert A.ref_rows(0, 5000, 1, 32) == A.REF_KEYS
    assert A.ref_rows(0, 10, 8, 40) == 0                 # head dim not a multiple of 16


@pytest.mark.parametrize("G,starts", [(8, (0, 900, 4)), (12, (600, 0, 9))])
def test_write_and_attend_is_the_definition(A, monkeypatch, G, starts):
    """Long chunks through the ref form (its rows past ref_rows by attention.ref), a short one
    by attention.ref, against kv_write.ref + attention.ref chunk by chunk."""
    from kernels import halves, ops_cpu
    monkeypatch.setattr(halves, "threads", lambda: 2)
    ops = ops_cpu.NumbaOps()
    rng = np.random.default_rng(G)
    P, KV, hd = 16, 2, 128
    spans = [(0, 150), (150, 155), (155, 155 + halves.PAIR_FROM)]
    chunks = [SimpleNamespace(table=np.arange(80 * i, 80 * i + 80)[::-1].copy(), page_rows=P, start=s)
              for i, s in enumerate(starts)]
    rows = SimpleNamespace(spans=spans, chunks=chunks)
    T = spans[-1][1]
    q = (rng.standard_normal((T, KV * G, hd)) * 0.4).astype(np.float32)
    k = rng.standard_normal((T, KV, hd)).astype(np.float32)
    v = rng.standard_normal((T, KV, hd)).astype(np.float32)
    pools = []
    for _ in range(2):
        kp = np.zeros((240, P, KV, hd), np.float32)
        vp = np.zeros_like(kp)
        for c in chunks:            # each stream's earlier rows
            kv_write.ref(kp, vp, c.table, P, 0, np.full((c.start, KV, hd), 0.1, np.float32),
                         np.ones((c.start, KV, hd), np.float32))
        pools.append((kp, vp))
    want = np.empty(q.shape, np.float32)
    kp, vp = pools[0]
    for (a, b), c in zip(spans, chunks):
        kv_write.ref(kp, vp, c.table, P, c.start, k[a:b], v[a:b])
        want[a:b] = attention.ref(q[a:b], kp, vp, c.table, P, c.start, 0.09)
    used = []
    form = ops._ref_form
    monkeypatch.setattr(ops, "_ref_form", lambda *a: used.append(form(*a)) or used[-1])
    got = ops.write_and_attend(q, k, v, *pools[1], rows, 0.09)
    assert got.tobytes() == want.tobytes()
    assert pools[1][0].tobytes() == kp.tobytes() and pools[1][1].tobytes() == vp.tobytes()
    if A.ref_agrees(G, hd):         # the form ran (not only the fallback)
        assert sum(used) > 0, used


def test_mixed_parts_share_one_quantized_x(A):
    """ops.linear on MixedBlocks (q|k|v of Q4_K_M: K-quant parts of two kinds) with x
    quantized once == each part's own kquant_cpu.matmul side by side, at a prefill's rows."""
    from kernels import kquant_cpu as KQ
    from kernels.blocks import Blocks, MixedBlocks
    from kernels.ops import backend
    from tests.model.test_kquant_q8 import random_rows
    cpu = backend("cpu")
    rng = np.random.default_rng(36)
    K = 512
    parts = [Blocks("Q4_K", 48, K, random_rows(rng, "Q4_K", 48, K)),
             Blocks("Q6_K", 16, K, random_rows(rng, "Q6_K", 16, K)),
             Blocks("Q4_K", 32, K, random_rows(rng, "Q4_K", 32, K))]
    for M in (3, 130):
        x = rng.standard_normal((M, K)).astype(np.float32)
        want = np.concatenate([KQ.matmul(x, p.kind, p.data) for p in parts], axis=1)
        assert cpu.linear(x, MixedBlocks(parts)).tobytes() == want.tobytes(), M


def test_np_sum_is_numpys_pairwise_sum(A):
    rng = np.random.default_rng(5)
    for n in list(range(1, 300)) + [511, 512, 777, 976, 1031, 2047, 2048, 4099]:
        a = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3, n)).astype(np.float32)
        assert np.float32(A._np_sum(a, n)).tobytes() == a.sum().tobytes(), n
    assert np.float32(A._np_sum(np.array([-0.0], np.float32), 1)).tobytes() == np.array([-0.0], np.float32).sum().tobytes()


@pytest.mark.parametrize("norms,rot", [(True, None), (False, 64), (True, 32)])
def test_qkv_attend_prep_is_the_definition(A, monkeypatch, norms, rot):
    """NumbaOps.qkv_attend (q/k norms, partial RoPE and the copies as attention_cpu.prep_rows a
    row at a time, two halves) == the numpy backend's Ops.qkv_attend (rmsnorm.ref, rope.ref,
    kv_write.ref, attention.ref), output and pools."""
    from kernels import halves, ops_cpu, rope
    from kernels.ops import backend
    monkeypatch.setattr(halves, "threads", lambda: 2)
    cpu, npy = ops_cpu.NumbaOps(), backend("numpy")
    rng = np.random.default_rng(7)
    P, nq, nkv, hd = 16, 16, 2, 128
    spans = [(0, 130), (130, 134)]
    chunks = [SimpleNamespace(table=np.arange(20 * i, 20 * i + 20)[::-1].copy(), page_rows=P, start=s)
              for i, s in enumerate((0, 40))]
    rows = SimpleNamespace(spans=spans, chunks=chunks, cpu=None)
    T = spans[-1][1]
    qkv = (rng.standard_normal((T, (nq + 2 * nkv) * hd)) * 2).astype(np.float32)
    pos = np.concatenate([np.arange(0, 130), np.arange(40, 44)])
    inv = rope.inv_freq(rot or hd, 1e6)
    nw = ((rng.standard_normal(hd) * 0.3 + 1).astype(np.float32),
          (rng.standard_normal(hd) * 0.3 + 1).astype(np.float32)) if norms else None
    got, want = [], []
    for ops, out in ((cpu, got), (npy, want)):
        kp = np.zeros((40, P, nkv, hd), np.float32)
        vp = np.zeros_like(kp)
        out.append(ops.qkv_attend(qkv, nq, nkv, hd, pos, inv, kp, vp, rows, 0.09, nw, 1e-6, rot))
        out += [kp, vp]
    for g, w in zip(got, want):
        assert g.tobytes() == w.tobytes()


def test_scale_max16_is_the_scalar_loop(A):
    """vec_ir.scale_max16 (the ref form's scale-and-max pass) == the 16-lane scalar loop it
    replaced (Python's max in lane order: a NaN passed over, of +0 / -0 the first kept)."""
    from numba import njit
    from kernels.vec_ir import scale_max16

    @njit(cache=False)
    def scalar(s, scale, n):
        mx = np.full(16, -np.inf, np.float32)
        for j0 in range(0, n, 16):
            for l in range(16):
                v = s[j0 + l] * scale
                s[j0 + l] = v
                mx[l] = max(mx[l], v)
        m = np.float32(-np.inf)
        for l in range(16):
            m = max(m, mx[l])
        return m

    @njit(cache=False)
    def vec(s, scale, n):
        return scale_max16(s, scale, n)
    rng = np.random.default_rng(16)
    cases = [rng.standard_normal(n).astype(np.float32) for n in (0, 16, 48, 512)]
    z = np.zeros(64, np.float32)
    z[::3] = -0.0
    holes = np.where(rng.random(64) < 0.3, np.nan, rng.standard_normal(64)).astype(np.float32)
    cases += [z, -z, np.full(32, np.nan, np.float32), holes]
    for x in cases:
        a, b = x.copy(), x.copy()
        ma, mb = scalar(a, np.float32(0.3), x.shape[0]), vec(b, np.float32(0.3), x.shape[0])
        assert np.float32(ma).tobytes() == np.float32(mb).tobytes() and a.tobytes() == b.tobytes()
