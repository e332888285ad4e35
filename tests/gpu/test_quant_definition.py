"""Quantized GEMMs (kernels/qmatmul_cuda.py) against their definition, on fresh random blocks.

- the device's dequantization == gguf's float32 dequantization (Blocks.dequantize) rounded to
  bf16, byte for byte, for every type;
- qdefinition (the plain kernel) == matmul_definition_cuda.definition on those bf16 weights, byte for byte
  (so the quantized path is the bf16 path's arithmetic);
- every path (qgemv in each configuration, the dispatcher's choice at decode and prefill row
  counts, the prefill's dequantize-to-Packed + tensor-core GEMM, mixed-type stacks) == the
  definition byte for byte, outputs poisoned with NaN first;
- rows alone == rows among others;
- and the result is within 4e-3 (relative, Frobenius) of float64 dequantize-then-multiply.
"""
from __future__ import annotations

import numpy as np
import pytest

cp = pytest.importorskip("cupy")
pytest.importorskip("gguf")

from kernels import common_cuda as C            # noqa: E402
from kernels import qmatmul_cuda as Q           # noqa: E402
from kernels.matmul_definition_cuda import definition   # noqa: E402
from kernels.matmul_packed_cuda import Packed    # noqa: E402
from kernels.matmul_pi_cuda import Pi            # noqa: E402
from kernels.blocks import BLOCK, Blocks   # noqa: E402

KINDS = ["Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"]


def random_blocks(kind: str, N: int, K: int, rng) -> Blocks:
    """Random codes and scales (finite float16 scales of a weight's size)."""
    blk, nb = BLOCK[kind]
    d = rng.integers(0, 256, (N, K // blk, nb), dtype=np.uint8)

    def f16(lo, scale, positive=False):
        v = rng.standard_normal((N, K // blk)) * scale
        v = (np.abs(v) if positive else v).astype(np.float16)
        d[:, :, lo:lo + 2] = v.view(np.uint8).reshape(N, K // blk, 2)
    if kind == "Q8_0":
        f16(0, 2e-4)
    elif kind == "Q4_0":
        f16(0, 4e-3)
    elif kind == "Q4_1":
        f16(0, 4e-3, True), f16(2, 3e-2)          # d >= 0, as llama.cpp writes (qblocks.cuh)
    elif kind == "Q4_K":
        f16(0, 1e-3, True), f16(2, 1e-3, True)
    elif kind == "Q6_K":
        f16(208, 2e-5)
    return Blocks(kind, N, K, d.reshape(N, -1))


def _x(M, K, rng):
    return C.as_bf16(cp.asarray(rng.standard_normal((M, K)).astype(np.float32)))


def _bits(a):
    return cp.asnumpy(a).view(np.uint32)


def _host_bf16(b: Blocks) -> np.ndarray:
    import ml_dtypes
    return b.dequantize().astype(ml_dtypes.bfloat16).view(np.uint16)


@pytest.mark.parametrize("kind", KINDS)
def test_dequant_is_gguf_rounded_to_bf16(kind):
    rng = np.random.default_rng(11)
    b = random_blocks(kind, 24, 512, rng)
    w = Q.upload(b)
    assert w.nbytes == b.nbytes
    got = cp.asnumpy(Q.dequant(w)).view(np.uint16)
    want = _host_bf16(b)
    assert (got == want).all(), f"{kind}: {(got != want).sum()} of {got.size} weights differ"
    # Packed order == matmul_packed_cuda.Packed of the same bf16 weights
    pk = Q.dequant_packed(w)
    ref = Packed(Q.dequant(w))
    assert (cp.asnumpy(pk.data).view(np.uint16) == cp.asnumpy(ref.data).view(np.uint16)).all()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("M", [1, 5, 16, 17, 33, 64])
@pytest.mark.parametrize("wide", [False, True])
def test_paths_equal_definition(kind, M, wide):
    """wide: K = 4096 (every range whole groups of 8 chunks: qgemv's unpack_g path); else
    1,280 / 1,312 (ranges cut groups and super-blocks: the unpack8 path)."""
    rng = np.random.default_rng(100 + M + 1000 * wide)
    N = 104              # not a multiple of 16 or 32: the last block of NT = 2, 4 half past N
    K = 4096 if wide else 1280 if kind in ("Q4_K", "Q6_K") else 1312
    b = random_blocks(kind, N, K, rng)
    w = Q.upload(b)
    x = _x(M, K, rng)
    bias = C.as_bf16(cp.asarray(rng.standard_normal(N).astype(np.float32)))
    for bb in (None, bias):
        want = definition(x, Q.dequant(w), bb)
        d = Q.definition(x, w, bb)
        assert (_bits(d) == _bits(want)).all(), f"{kind} M={M}: qdefinition != matmul definition"
        # (MT, NT, U[, PF, CV, MB]): CV = 1 (fconv_u's group loop) by default; CV = 0 the
        # conv_u loop; MB = 3: registers capped for 3 blocks an SM
        for cfg in [(1, 1, 1), (1, 1, 4), (1, 2, 2), (2, 1, 2), (4, 1, 2), (4, 2, 1), (1, 2, 1, 0),
                    (4, 2, 1, 0), (2, 2, 1, 0), (1, 2, 1, 0, 0), (4, 2, 1, 1, 0), (1, 4, 1, 1),
                    (1, 2, 1, 0, 1, 3), (1, 2, 1, 1, 1, 3), (1, 1, 1, 0, 1, 4)]:
            out = cp.full((M, N + 8), cp.nan, dtype=cp.float32)
            Q.gemv(x, w, bb, out=out[:, 4:4 + N], cfg=cfg)
            assert not cp.isnan(out[:, 4:4 + N]).any()
            assert cp.isnan(out[:, :4]).all() and cp.isnan(out[:, 4 + N:]).all()
            assert (_bits(out[:, 4:4 + N]) == _bits(want)).all(), f"{kind} M={M} cfg={cfg}"
        assert (_bits(Q.cuda(x, w, bb)) == _bits(want)).all()
    # float64 dequantize-then-multiply
    ref = cp.asnumpy(C.as_f32(x)).astype(np.float64) @ b.dequantize().astype(np.float64).T
    got = cp.asnumpy(Q.cuda(x, w)).astype(np.float64)
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < 4e-3, f"{kind}: relative error {err:.2e}"


@pytest.mark.parametrize("kind", ["Q8_0", "Q4_K", "Q6_K"])
def test_prefill_rows_equal_definition(kind):
    rng = np.random.default_rng(7)
    N, K, M = 512, 2048, 300
    b = random_blocks(kind, N, K, rng)
    w = Q.upload(b)
    x = _x(M, K, rng)
    want = definition(x, Q.dequant(w))
    got = Q.cuda(x, w)
    assert (_bits(got) == _bits(want)).all()
    # rows alone == rows among others (decode path and prefill path)
    for r in (0, 17, 299):
        assert (_bits(Q.cuda(x[r:r + 1], w)) == _bits(want[r:r + 1])).all()
    assert (_bits(Q.cuda(x[:64], w)) == _bits(want[:64])).all()


def test_mixed_stack():
    """q|k|v with v of another type (Q4_K_M's attn_v): per-part launches == the definition on
    the stacked bf16 weights, decode and prefill rows."""
    rng = np.random.default_rng(3)
    K = 1024
    parts = [Q.upload(random_blocks("Q4_K", 128, K, rng)), Q.upload(random_blocks("Q4_K", 32, K, rng)),
             Q.upload(random_blocks("Q6_K", 32, K, rng))]
    w = Q.stack(parts)
    assert isinstance(w, Q.QStack) and w.shape == (192, K)
    same = Q.stack(parts[:2])
    assert isinstance(same, Q.QWeight) and same.shape == (160, K)
    bias = C.as_bf16(cp.asarray(rng.standard_normal(192).astype(np.float32)))
    for M in (1, 9, 64, 200):
        x = _x(M, K, rng)
        want = definition(x, Q.dequant(w), bias)
        assert (_bits(Q.cuda(x, w, bias)) == _bits(want)).all(), f"M={M}"
        want2 = definition(x, Q.dequant(same))
        assert (_bits(Q.cuda(x, same)) == _bits(want2)).all(), f"M={M} same-type stack"


def _nat(y):
    return y.natural() if isinstance(y, Pi) else y


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K", "Q8_0", "Q4_1"])
def test_ops_quant_equal_bf16_path(kind):
    """kernels/ops with quantized weights give the bf16 path's bytes (the same file kept as
    bf16 on the device): linear, the gate|up with SwiGLU, the norm-fused sublayer input (plain
    and SwiGLU, with and without a residual), the embedding gather; decode and prefill rows."""
    from kernels.ops import backend
    ops = backend("cuda")
    rng = np.random.default_rng(5)
    D, ff = 2048, 1024
    wq = Q.upload(random_blocks(kind, 3 * D // 2, D, rng))
    gq = Q.upload(random_blocks(kind, 2 * ff, D, rng))
    wb, gb = Packed(Q.dequant(wq)), Packed(Q.dequant(gq))
    nw = C.as_bf16(cp.asarray((1 + 0.1 * rng.standard_normal(D)).astype(np.float32)))
    for M in (1, 7, 16, 64, 300):
        x = _x(M, D, rng)
        assert (_bits(ops.linear(x, wq)) == _bits(ops.linear(x, wb))).all(), f"linear M={M}"
        a, b = ops.gate_up_silu(x, gq, ff), ops.gate_up_silu(x, gb, ff)
        assert (cp.asnumpy(_nat(a)).view(np.uint16) == cp.asnumpy(_nat(b)).view(np.uint16)).all(), f"glu M={M}"
        h = cp.asarray(rng.standard_normal((M, D)).astype(np.float32))
        o = cp.asarray(rng.standard_normal((M, D)).astype(np.float32))
        for out in (None, o):
            for w1, w2, g in ((wq, wb, None), (gq, gb, ff)):
                y1, h1 = ops.norm_linear(out, h, nw, 1e-5, w1, None, g)
                y2, h2 = ops.norm_linear(out, h, nw, 1e-5, w2, None, g)
                y1, y2 = cp.asnumpy(_nat(y1)), cp.asnumpy(_nat(y2))
                assert y1.dtype == y2.dtype and (y1.view(np.uint8) == y2.view(np.uint8)).all(), \
                    f"norm_linear M={M} glu={g} residual={out is not None}"
                assert (_bits(h1) == _bits(h2)).all()
    ids = cp.asarray(rng.integers(0, 3 * D // 2, 37).astype(np.int32))
    assert (_bits(ops.embed(wq, ids)) == _bits(ops.embed(Q.dequant(wq), ids))).all()
