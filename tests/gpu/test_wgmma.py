"""The Hopper wgmma GEMM (kernels/wgmma_cuda.py) keeps matmul_cuda's arithmetic: its bytes
equal the tiled and streaming kernels' for every row, whatever the row count (M off the tile
too), with and without bias, and it is within 1e-5 of float64. Skipped off sm_90, where the
dispatcher never picks it."""
from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.conftest import bf16_round, poison_pool, rel
from tests.gpu.test_kernels import dev_bf16, host

rng = np.random.default_rng()


def _sm90():
    import cupy as cp
    return cp.cuda.Device().compute_capability == "90"


@pytest.fixture
def wg():
    if not _sm90():
        pytest.skip("wgmma needs sm_90")
    from kernels import wgmma_cuda
    assert wgmma_cuda._compile() is not None, "wgmma kernel failed to compile/load on sm_90"
    return wgmma_cuda


@pytest.mark.parametrize("M,N,K", [(2085, 512, 4096), (300, 768, 1056), (128, 256, 32), (1, 256, 2048)])
def test_wgmma_equals_tiled_and_float64(wg, M, N, K):
    from kernels import matmul_cuda, matmul_packed_cuda
    x = bf16_round(rng.standard_normal((M, K)).astype(np.float32))
    w = bf16_round(rng.standard_normal((N, K)).astype(np.float32) * 0.02)
    b = bf16_round(rng.standard_normal(N).astype(np.float32))
    xd, wd, bd = dev_bf16(x), matmul_packed_cuda.pack(dev_bf16(w)), dev_bf16(b)
    want = x.astype(np.float64) @ w.astype(np.float64).T
    for bias, ref in ((None, want), (bd, want + b)):
        poison_pool()
        got = host(matmul_cuda.cuda(xd, wd, bias, force="wgmma"))
        assert rel(got, ref) < 1e-5
        assert np.array_equal(got.view(np.uint32), host(matmul_cuda.cuda(xd, wd, bias, force="tiled")).view(np.uint32))
        few = min(M, 16)
        assert np.array_equal(got[:few].view(np.uint32),
                              host(matmul_cuda.cuda(xd[:few], wd, bias, force="stream")).view(np.uint32))


def test_wgmma_rows_alone_equal_rows_among_others(wg):
    """A row's bytes do not depend on the rows beside it (tiles, groups, the last partial tile)."""
    from kernels import matmul_cuda, matmul_packed_cuda
    K, N = 1024, 1024
    x = dev_bf16(rng.standard_normal((2000, K)).astype(np.float32))
    w = matmul_packed_cuda.pack(dev_bf16(rng.standard_normal((N, K)).astype(np.float32) * 0.02))
    full = host(matmul_cuda.cuda(x, w, force="wgmma"))
    for a, m in ((0, 1), (0, 129), (700, 77), (1999, 1), (128 * 9, 128 * 6 + 5)):
        part = host(matmul_cuda.cuda(x[a:a + m], w, force="wgmma"))
        assert np.array_equal(part.view(np.uint32), full[a:a + m].view(np.uint32)), (a, m)


def test_dispatch_picks_wgmma_for_prefill_shapes(wg):
    """llama3-8b's prefill GEMMs at 2,048 rows run it; decode rows and off-shape N do not."""
    assert wg.available(2048, 4096, 4096) and wg.available(2048, 28672, 4096)
    assert wg.available(2048, 4096, 14336) and wg.available(2048, 6144, 4096)
    assert not wg.available(2048, 960, 576)            # N off 256
    assert not wg.available(64, 4096, 4096)            # too few blocks: the tiled / split kernels


def test_wgmma_gate_up_at_decode_rows_equals_fused_stream(wg):
    """At 17..64 rows a wide gate|up GEMM may take the wgmma kernel then swiglu_cuda: the bytes
    of the streaming launch with SwiGLU in its epilogue, and of the tiled kernel + swiglu."""
    import cupy as cp
    from kernels import matmul_cuda, matmul_fused_cuda, matmul_packed_cuda
    K, F = 1024, 12288
    x = cp.asarray(rng.standard_normal((64, K)).astype(np.float32))
    w = matmul_packed_cuda.pack(dev_bf16(rng.standard_normal((2 * F, K)).astype(np.float32) * 0.05))
    assert wg.available(64, 2 * F, K, matmul_cuda.WGMMA_SMALL[1])
    for M in (17, 32, 64):
        poison_pool()
        got = matmul_fused_cuda.cuda_glu(x[:M], w, F)                # the dispatcher's choice
        fused = matmul_fused_cuda.cuda_glu(x[:M], w, F, force="stream")
        via = matmul_fused_cuda.cuda_glu(x[:M], w, F, force="wgmma")
        u16 = lambda a: a.view(cp.uint16).get()
        assert np.array_equal(u16(got), u16(fused)) and np.array_equal(u16(via), u16(fused)), M


@pytest.mark.parametrize("N,K", [(1024, 4096), (768, 1056)])
def test_wgmma_range_split_equals_tiled(wg, N, K):
    """Few rows: one block a (tile, K range), the ranges folded by fold_parts: the tiled
    kernel's bytes, with and without bias, and the dispatcher's choice at 17..64 rows."""
    import cupy as cp
    from kernels import matmul_cuda, matmul_packed_cuda
    x = cp.asarray(rng.standard_normal((64, K)).astype(np.float32))
    w = matmul_packed_cuda.pack(dev_bf16(rng.standard_normal((N, K)).astype(np.float32) * 0.02))
    b = dev_bf16(rng.standard_normal(N).astype(np.float32))
    u32 = lambda a: host(a).view(np.uint32)
    for M in (1, 17, 33, 64):
        for bias in (None, b):
            poison_pool()
            want = u32(matmul_cuda.cuda(x[:M], w, bias, force="tiled"))
            assert np.array_equal(u32(matmul_cuda.cuda(x[:M], w, bias, force="wgmma_split")), want), M
            assert np.array_equal(u32(matmul_cuda.cuda(x[:M], w, bias)), want), M
    assert wg.split_available(64, 4096, 4096, matmul_cuda.WGMMA_SMALL[1])
    assert wg.split_available(64, 4096, 14336, matmul_cuda.WGMMA_SMALL[1])
