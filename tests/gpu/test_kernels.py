"""Each CUDA kernel against a float64 numpy reference, fresh random inputs, outputs poisoned
first. float32 outputs: < 1e-5 relative; bf16 outputs: < 1e-2."""
from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.conftest import bf16_round, poison_pool, rel

rng = np.random.default_rng()


def dev_bf16(a):
    import cupy as cp
    from kernels.common_cuda import as_bf16
    return as_bf16(cp.asarray(bf16_round(a)))


def host(a):
    from kernels.common_cuda import as_f32
    return as_f32(a).get()


@pytest.mark.parametrize("M,D", [(1, 576), (7, 4096), (33, 64)])
def test_rmsnorm_and_add(M, D):
    import cupy as cp
    from kernels import rmsnorm_cuda
    x = rng.standard_normal((M, D)).astype(np.float32)
    r = rng.standard_normal((M, D)).astype(np.float32)
    w = bf16_round(1 + 0.1 * rng.standard_normal(D).astype(np.float32))
    eps = 1e-5

    def ref(h):
        h = h.astype(np.float64)
        return h / np.sqrt((h * h).mean(-1, keepdims=True) + eps) * w
    poison_pool()
    out = rmsnorm_cuda.cuda(cp.asarray(x), dev_bf16(w), eps)
    assert rel(host(out), ref(x)) < 1e-2
    poison_pool()
    out, h = rmsnorm_cuda.add_cuda(cp.asarray(x), cp.asarray(r), dev_bf16(w), eps)
    assert rel(host(h), x.astype(np.float64) + r) < 1e-5
    assert rel(host(out), ref(x + r)) < 1e-2


@pytest.mark.parametrize("M,H,hd", [(1, 32, 128), (19, 3, 64)])
def test_rope(M, H, hd):
    import cupy as cp
    from kernels import rope, rope_cuda
    x = rng.standard_normal((M, H, hd)).astype(np.float32)
    pos = rng.integers(0, 4000, M).astype(np.int32)
    inv = rope.inv_freq(hd, 500000.0, (8.0, 1.0, 4.0, 8192))
    poison_pool()
    out = host(rope_cuda.cuda(cp.asarray(x), cp.asarray(pos), cp.asarray(inv)))
    f = pos.astype(np.float32)[:, None] * inv[None, :]     # the float32 angle, as the model defines it
    c, s = np.cos(f.astype(np.float64))[:, None], np.sin(f.astype(np.float64))[:, None]
    x64 = x.astype(np.float64)
    ref = np.concatenate([x64[..., :hd // 2] * c - x64[..., hd // 2:] * s,
                          x64[..., hd // 2:] * c + x64[..., :hd // 2] * s], -1)
    assert rel(out, ref) < 1e-5


def test_swiglu_strided():
    import cupy as cp
    from kernels import swiglu_cuda
    M, F = 9, 1536
    gu = rng.standard_normal((M, 2 * F)).astype(np.float32) * 3
    g = cp.asarray(gu)
    poison_pool()
    out = host(swiglu_cuda.cuda(g[:, :F], g[:, F:]))
    a, b = gu[:, :F].astype(np.float64), gu[:, F:].astype(np.float64)
    assert rel(out, a / (1 + np.exp(-a)) * b) < 1e-2


@pytest.mark.parametrize("M,K,N", [(1, 576, 1728), (17, 4096, 1024), (64, 1536, 576),
                                   (200, 1000, 300), (3, 40, 20)])
def test_matmul_fp32_accumulation(M, K, N):
    """Both kernels against float64 on bf16 inputs (K and N not multiples of the tiles too)."""
    from kernels import matmul_cuda
    x = bf16_round(rng.standard_normal((M, K)).astype(np.float32))
    w = bf16_round(rng.standard_normal((N, K)).astype(np.float32) * 0.02)
    b = bf16_round(rng.standard_normal(N).astype(np.float32))
    want = x.astype(np.float64) @ w.astype(np.float64).T
    for how in ("stream", "tiled", "split"):
        poison_pool()
        out = host(matmul_cuda.cuda(dev_bf16(x), dev_bf16(w), force=how))
        assert rel(out, want) < 1e-5, how
        out = host(matmul_cuda.cuda(dev_bf16(x), dev_bf16(w), dev_bf16(b), force=how))
        assert rel(out, want + b) < 1e-5, how


@pytest.mark.parametrize("K,N", [(576, 1728), (4096, 4096), (4096, 28672), (1000, 300)])
def test_matmul_rows_are_batch_invariant(K, N):
    """A row's bytes do not depend on how many rows share the GEMM nor on which kernel runs
    (stream, tiled, split over K), nor on whether x comes as float32 (rounded on load) or bf16."""
    import cupy as cp
    from kernels import matmul_cuda
    from kernels.common_cuda import as_bf16
    x32 = cp.asarray(rng.standard_normal((300, K)).astype(np.float32))
    x = as_bf16(x32)
    w = dev_bf16(rng.standard_normal((N, K)).astype(np.float32) * 0.02)
    alone = host(matmul_cuda.cuda(x[:1], w))
    assert np.array_equal(host(matmul_cuda.cuda(x32[:1], w)), alone)
    for M in (2, 15, 16, 17, 33, 64, 65, 128, 129, 300):
        got = host(matmul_cuda.cuda(x[:M], w))
        assert np.array_equal(got[:1], alone), M
        for how in ("stream", "tiled", "split"):
            assert np.array_equal(host(matmul_cuda.cuda(x[:M], w, force=how)), got), (M, how)
    last = host(matmul_cuda.cuda(x[299:300], w))
    assert np.array_equal(host(matmul_cuda.cuda(x, w))[299:], last)
    assert np.array_equal(host(matmul_cuda.cuda(x32[250:], w))[49:], last)


STREAM_CFGS = [(1, 1, 8), (1, 4, 4), (2, 2, 4), (2, 4, 2), (4, 4, 2), (4, 2, 2), (4, 8, 1), (8, 2, 1)]


@pytest.mark.parametrize("K,N", [(576, 960), (4096, 4096), (1000, 300)])
def test_matmul_stream_configs_agree(K, N):
    """Every streaming configuration (rows a block, column groups a block, loads in flight) is
    scheduling only: the same bytes as the default choice, float32 or bf16 x, with bias."""
    import cupy as cp
    from kernels import matmul_cuda
    from kernels.common_cuda import as_bf16
    x32 = cp.asarray(rng.standard_normal((100, K)).astype(np.float32))
    w = dev_bf16(rng.standard_normal((N, K)).astype(np.float32) * 0.02)
    b = dev_bf16(rng.standard_normal(N).astype(np.float32))
    for M in (1, 17, 64, 100):
        want = host(matmul_cuda.cuda(x32[:M], w, b, force="tiled"))
        for cfg in STREAM_CFGS:
            poison_pool()
            got = host(matmul_cuda.cuda(x32[:M], w, b, force="stream", cfg=cfg))
            assert np.array_equal(got, want), (M, cfg)
            got = host(matmul_cuda.cuda(as_bf16(x32[:M]), w, b, force="stream", cfg=cfg))
            assert np.array_equal(got, want), (M, cfg, "bf16 x")


def _pools(n_pages, P, kv, hd):
    import cupy as cp
    from kernels.common_cuda import BF16
    nan = lambda: cp.full((n_pages, P, kv, hd), 0x7FC0, dtype=cp.uint16).view(BF16)  # NaN everywhere
    return nan(), nan()


def _ref_attn(q, K, V, start, scale):
    # q [n, Hq, hd], K/V [L, KV, hd] float64 -> [n, Hq, hd]
    n, hq, hd = q.shape
    g = hq // K.shape[1]
    out = np.empty((n, hq, hd))
    for i in range(n):
        L = start + i + 1
        for h in range(hq):
            s = K[:L, h // g] @ q[i, h] * scale
            p = np.exp(s - s.max())
            out[i, h] = (p / p.sum()) @ V[:L, h // g]
    return out


@pytest.mark.parametrize("hq,kv,hd,P,start,n", [
    (32, 8, 128, 16, 0, 37),      # prefill from 0, GQA 4
    (9, 3, 64, 16, 47, 1),        # decode at a page edge's far side
    (9, 3, 64, 7, 20, 30),        # a resumed chunk, odd page size
    (4, 4, 128, 32, 100, 3),      # MHA, a few decode rows
])
def test_kv_write_and_attention(hq, kv, hd, P, start, n):
    import cupy as cp
    from kernels import attention_cuda, kv_write_cuda
    L = start + n
    n_pages = -(-L // P) + 3
    table = tuple(int(t) for t in rng.permutation(n_pages)[: -(-L // P)])
    K = bf16_round(rng.standard_normal((L, kv, hd)).astype(np.float32))
    V = bf16_round(rng.standard_normal((L, kv, hd)).astype(np.float32))
    q = rng.standard_normal((n, hq, hd)).astype(np.float32)
    kp, vp = _pools(n_pages, P, kv, hd)
    kv_write_cuda.cuda(kp, vp, table, P, 0, cp.asarray(K), cp.asarray(V))
    # the written rows are exact, everything else still NaN
    kh = host(kp)
    flat = np.concatenate([kh[t] for t in table])[:L]
    assert np.array_equal(flat, K)
    unused = [p for p in range(n_pages) if p not in table]
    assert np.isnan(kh[unused]).all()
    poison_pool()
    scale = hd ** -0.5
    out = host(attention_cuda.cuda(cp.asarray(q), kp, vp, table, P, start, scale))
    ref = _ref_attn(q.astype(np.float64), K.astype(np.float64), V.astype(np.float64), start, scale)
    assert rel(out, ref) < 1e-2


@pytest.mark.parametrize("nq,kv,hd,P,starts", [(9, 3, 64, 16, [0, 5, 40]), (32, 8, 128, 16, [100, 3]),
                                               (4, 4, 128, 7, [20])])
def test_rope_kv_write_fused_equals_separate(nq, kv, hd, P, starts):
    """The fused RoPE + KV write (one launch from the qkv rows) writes the same pool bytes and
    returns the same q bytes as RoPE on q, RoPE on k and the KV write run apart; padding rows
    (position -1) write nothing; pages not in a table stay NaN."""
    import cupy as cp
    from kernels import kv_write_cuda, rope, rope_cuda
    from kernels.attention_cuda import round_map
    inv = cp.asarray(rope.inv_freq(hd, 500000.0, None))
    per = -(-(max(starts) + 4) // P)
    n_pages = per * len(starts) + 3
    perm = [int(p) for p in rng.permutation(n_pages)]
    chunks = [(tuple(perm[i * per:(i + 1) * per]), P, s, tuple(range(1 + i)), True)
              for i, s in enumerate(starts)]
    rmap = round_map(chunks, nq // kv)
    T = int(rmap.pos.shape[0])
    rmap.pos[T - 1] = -1                                   # a padding row, as graph buckets have
    qkv = cp.asarray(rng.standard_normal((T, (nq + 2 * kv) * hd + 5)).astype(np.float32))[:, 5:]
    kp1, vp1 = _pools(n_pages, P, kv, hd)
    kp2, vp2 = _pools(n_pages, P, kv, hd)
    poison_pool()
    q1 = kv_write_cuda.rope_round(qkv, nq, kv, hd, inv, kp1, vp1, rmap)
    q2 = rope_cuda.cuda(qkv[:, :nq * hd].reshape(T, nq, hd), rmap.pos, inv)
    k2 = rope_cuda.cuda(qkv[:, nq * hd:(nq + kv) * hd].reshape(T, kv, hd), rmap.pos, inv)
    kv_write_cuda.cuda_round(kp2, vp2, rmap, k2, qkv[:, (nq + kv) * hd:].reshape(T, kv, hd))
    assert np.array_equal(host(q1), host(q2))
    u16 = lambda a: a.view(cp.uint16).get()
    assert np.array_equal(u16(kp1), u16(kp2)) and np.array_equal(u16(vp1), u16(vp2))
    assert np.isnan(host(kp1)).any()                       # untouched pages stay poisoned


@pytest.mark.parametrize("K,F", [(576, 1536), (4096, 14336), (1000, 24)])
def test_gate_up_silu_fused_equals_separate(K, F):
    """The gate|up GEMM with SwiGLU in its epilogue (one launch, every stream configuration)
    gives the bytes of the GEMM followed by the SwiGLU kernel, and both are within bf16 of
    float64."""
    import cupy as cp
    from kernels import matmul_fused_cuda
    x32 = cp.asarray(rng.standard_normal((80, K)).astype(np.float32))
    wnp = bf16_round(rng.standard_normal((2 * F, K)).astype(np.float32) * 0.05)
    w = dev_bf16(wnp)
    for M in (1, 16, 33, 64, 80):
        want = host(matmul_fused_cuda.cuda_glu(x32[:M], w, F, force="tiled"))
        for cfg in STREAM_CFGS:
            poison_pool()
            got = host(matmul_fused_cuda.cuda_glu(x32[:M], w, F, force="stream", cfg=cfg))
            assert np.array_equal(got, want), (M, cfg)
        assert np.array_equal(host(matmul_fused_cuda.cuda_glu(x32[:M], w, F)), want), M
    xb = bf16_round(x32.get()).astype(np.float64)
    gu = xb @ wnp.astype(np.float64).T
    g, u = gu[:, :F], gu[:, F:]
    assert rel(want, g / (1 + np.exp(-g)) * u) < 1e-2


@pytest.mark.parametrize("D,N,glu", [(576, 960, False), (576, 3072, True), (4096, 1024, False),
                                     (200, 48, True), (1000, 300, False)])
def test_norm_fused_into_gemm_equals_separate(monkeypatch, D, N, glu):
    """The residual add + RMSNorm fused into the streaming GEMM's x load (up to 16 rows) gives
    the bytes of rmsnorm_cuda followed by the GEMM: the product (or SwiGLU) and the new
    residual h' = out + h, with and without `out` (the first layer), at 1..16 rows."""
    import cupy as cp
    from kernels import matmul_fused_cuda
    from kernels.common_cuda import as_bf16
    out = cp.asarray(rng.standard_normal((16, D)).astype(np.float32))
    h = cp.asarray(rng.standard_normal((16, D)).astype(np.float32) * 3)
    nw = as_bf16(cp.asarray(rng.standard_normal(D).astype(np.float32)))
    w = dev_bf16(rng.standard_normal((N, D)).astype(np.float32) * 0.05)
    F = N // 2 if glu else None
    monkeypatch.setattr(matmul_fused_cuda, "FUSE_NORM_MAX_K", 1 << 20)   # the fused path at every D
    for M in (1, 3, 16):
        for xo in (out[:M], None):
            poison_pool()
            y1, h1 = matmul_fused_cuda.cuda_norm(xo, h[:M], nw, 1e-5, w, glu_F=F, fuse=True)
            y2, h2 = matmul_fused_cuda.cuda_norm(xo, h[:M], nw, 1e-5, w, glu_F=F, fuse=False)
            assert np.array_equal(host(y1), host(y2)), (M, xo is None)
            assert np.array_equal(host(h1), host(h2)), (M, xo is None)
    hn = h[:1] + out[:1]
    assert np.array_equal(host(matmul_fused_cuda.cuda_norm(out[:1], h[:1], nw, 1e-5, w, glu_F=F)[1]), host(hn))
