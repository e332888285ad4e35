"""Every GEMM kernel's bytes equal the definition's (matmul_definition_cuda.definition: the arithmetic
run plainly on W [N, K] in natural order), for every path the dispatcher or a caller can
take: streaming (each config), tiled, split, and on sm_90 wgmma, wgmma split and the TMA
kernel; with and without bias, M off every tile. This pins the arithmetic itself, so a change
of the packed layout (or of any kernel) that moved a bit fails here even when all kernels moved
together."""
from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.conftest import bf16_round, poison_pool, rel
from tests.gpu.test_kernels import dev_bf16, host

rng = np.random.default_rng()


def _sm90() -> bool:
    import cupy as cp
    return cp.cuda.Device().compute_capability == "90"


def _case(M, N, K):
    from kernels import matmul_packed_cuda
    x = bf16_round(rng.standard_normal((M, K)).astype(np.float32))
    w = bf16_round(rng.standard_normal((N, K)).astype(np.float32) * 0.02)
    b = bf16_round(rng.standard_normal(N).astype(np.float32))
    xd, wd, bd = dev_bf16(x), dev_bf16(w), dev_bf16(b)
    return x, w, b, xd, wd, matmul_packed_cuda.pack(wd), bd


def _same(a, b) -> bool:
    return np.array_equal(host(a).view(np.uint32), host(b).view(np.uint32))


@pytest.mark.parametrize("M,N,K", [(300, 768, 1056), (130, 256, 4096), (2085, 512, 2048), (64, 1024, 768),
                                   (40, 1024, 1024), (33, 16384, 512)])
def test_every_gemm_path_equals_the_definition(M, N, K):
    from kernels import matmul_cuda, matmul_definition_cuda, matmul_mma_cuda
    x, w, b, xd, wd, wp, bd = _case(M, N, K)
    paths = ["tiled", "split"]
    if _sm90():
        from kernels import wgmma_tma_cuda
        if wgmma_tma_cuda.available(M, N, K):
            paths.append("tma")
        if wgmma_tma_cuda.split_available(M, N, K):
            paths.append("tma_split")
        if N % 256 == 0 and K % 32 == 0:
            paths += ["wgmma", "wgmma_split"]
    for bias in (None, bd):
        want = matmul_definition_cuda.definition(xd, wd, bias)
        ref = x.astype(np.float64) @ w.astype(np.float64).T + (0 if bias is None else b)
        assert rel(host(want), ref) < 1e-5
        for how in paths:
            poison_pool()
            assert _same(matmul_cuda.cuda(xd, wp, bias, force=how), want), how
        for cfg in matmul_mma_cuda.STREAM_CFG:              # decode sizes: rows alone too
            few = min(M, cfg[0])
            got = matmul_cuda.cuda(xd[:few], wp, bias, force="stream", cfg=cfg[1:])
            assert _same(got, want[:few]), cfg
        poison_pool()
        assert _same(matmul_cuda.cuda(xd, wp, bias), want), "dispatcher"


def test_tma_kernel_is_taken_for_prefill_shapes():
    """On sm_90 the dispatcher gives llama3-8b's prefill GEMMs to the TMA kernel, both tile widths;
    its decode-row GEMMs (17..64 rows) can take the split form or, for wide ones, whole tiles
    (TF_TMA_SMALL=1)."""
    if not _sm90():
        pytest.skip("the TMA GEMM needs sm_90")
    from kernels import wgmma_tma_cuda
    for M, N, K in ((2048, 6144, 4096), (2048, 4096, 14336), (512, 4096, 4096), (65, 28672, 4096)):
        assert wgmma_tma_cuda.available(M, N, K), (M, N, K)
    assert wgmma_tma_cuda.pick_bn(2048, 4096) == 256 and wgmma_tma_cuda.pick_bn(128, 4096) == 128
    assert not wgmma_tma_cuda.available(2048, 960, 576)      # K off 256: the other kernels
    for N, K in ((6144, 4096), (4096, 4096), (4096, 14336)):  # qkv, o, down at 64 rows: split
        assert wgmma_tma_cuda.split_available(64, N, K)
    assert wgmma_tma_cuda.available(64, 128256, 4096, min_tiles=96)      # the LM head: tiles


def test_tma_gemm_rows_alone_equal_rows_among_others():
    if not _sm90():
        pytest.skip("the TMA GEMM needs sm_90")
    from kernels import matmul_cuda
    _, _, _, xd, _, wp, _ = _case(2000, 1024, 1024)
    full = matmul_cuda.cuda(xd, wp, force="tma")
    for a, m in ((0, 65), (700, 77), (1900, 100), (128 * 9, 128 * 6 + 5)):
        assert _same(matmul_cuda.cuda(xd[a:a + m], wp, force="tma"), full[a:a + m]), (a, m)


@pytest.mark.parametrize("M,F,K", [(300, 1024, 1024), (2085, 1536, 512), (48, 6144, 512)])
def test_tma_gate_up_swiglu_equals_the_definition(M, F, K):
    """The TMA kernel's SwiGLU epilogue (gate|up at prefill rows) writes swiglu_cuda's bytes of
    the definition's gate and up values, with and without bias; at decode rows the streaming
    kernel's fused epilogue writes the same bytes."""
    if not _sm90():
        pytest.skip("the TMA GEMM needs sm_90")
    from kernels import matmul_cuda, matmul_definition_cuda, matmul_fused_cuda, swiglu_cuda, wgmma_tma_cuda
    _, _, _, xd, wd, wp, bd = _case(M, 2 * F, K)
    assert wgmma_tma_cuda.available(M, 2 * F, K, glu=True)
    for bias in (None, bd):
        d = matmul_definition_cuda.definition(xd, wd, bias)
        want = swiglu_cuda.cuda(d[:, :F], d[:, F:])
        poison_pool()
        got = matmul_fused_cuda.cuda_glu(xd, wp, F, bias)            # the dispatcher's choice
        assert np.array_equal(host(got).view(np.uint32), host(want).view(np.uint32))
        few = matmul_fused_cuda.cuda_glu(xd[:16], wp, F, bias, force="stream")
        assert np.array_equal(host(few).view(np.uint32), host(want[:16]).view(np.uint32))
        if M <= 64:                                     # decode rows: the TMA GLU was taken
            assert wgmma_tma_cuda.available(M, 2 * F, K, glu=True, min_tiles=matmul_cuda.WGMMA_SMALL[1])


def test_pi_order_producers_give_the_same_bytes():
    """At prefill rows the norm writes the TMA GEMM's x in pi order and the gate|up GEMM's
    SwiGLU epilogue writes the down GEMM's x so (matmul_pi_cuda.Pi: no permute launch): each
    equals the permute of the natural bytes, every GEMM path given a Pi gives the natural x's
    bytes, and a layer's norm -> gate|up -> down chain is unchanged."""
    import cupy as cp
    from kernels import matmul_cuda, matmul_fused_cuda, matmul_pi_cuda, rmsnorm_cuda
    M, K, F = 300, 1024, 1024
    h = cp.asarray(rng.standard_normal((M, K)).astype(np.float32))
    nw = dev_bf16(bf16_round(rng.standard_normal(K).astype(np.float32)))
    nat = rmsnorm_cuda.cuda(h, nw, 1e-5)
    assert not _sm90() or matmul_cuda.tma_rows(M, K, K)
    poison_pool()
    assert _same(rmsnorm_cuda.cuda(h, nw, 1e-5, pi=True), matmul_pi_cuda.permute(nat))
    if not _sm90():
        pytest.skip("the Pi paths' GEMMs need sm_90")
    _, _, _, _, _, wp, _ = _case(M, K, K)
    pi = matmul_pi_cuda.Pi(matmul_pi_cuda.permute(nat))
    want = matmul_cuda.cuda(nat, wp)
    for how in (None, "tma", "tiled"):
        poison_pool()
        assert _same(matmul_cuda.cuda(pi, wp, force=how), want), how
    few = matmul_pi_cuda.Pi(matmul_pi_cuda.permute(nat[:16]))
    assert _same(matmul_cuda.cuda(few, wp), want[:16])              # the streaming kernel
    _, _, _, _, _, gu, _ = _case(M, 2 * F, K)
    _, _, _, _, _, down, _ = _case(M, K, F)
    act = matmul_fused_cuda.cuda_glu(nat, gu, F)
    poison_pool()
    got = matmul_fused_cuda.cuda_glu(pi, gu, F, pi_out=True)
    assert isinstance(got, matmul_pi_cuda.Pi)
    assert _same(got.a, matmul_pi_cuda.permute(act)) and _same(got.natural(), act)
    y, _ = matmul_fused_cuda.cuda_norm(None, h, nw, 1e-5, gu, glu_F=F, pi_out=True)
    assert isinstance(y, matmul_pi_cuda.Pi)
    assert _same(matmul_cuda.cuda(y, down), matmul_cuda.cuda(act, down))
