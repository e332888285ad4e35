"""The K-quants' vector kernels (kernels/blocks_vec.py: Q4_K, Q6_K read in LLVM vector IR)
against the unpack-then-dot kernels of kernels/blocks_cpu.py they replace, byte for byte: the
same operations in the same order (the weights d*sc*q - dmin*m / d*sc*(q - 32) in float32,
a 32-lane fma chain, the fixed tree), at every tile shape the rows function picks (one x row
against 2 rows of blocks and the odd row left; 3 x rows against 1; the rows left past a
multiple of 3), and within float32 rounding of the float64 definition. Random blocks: every
byte uniform (all 6-bit scales and mins, all quants), the f16 scales set finite."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import blocks_cpu, blocks_vec, qmatmul

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

F16_AT = {"Q4_K": (0, 2), "Q6_K": (208,)}


def random_rows(rng, kind, rows, cols):
    nbytes = blocks_vec.K_BYTES[kind]
    data = rng.integers(0, 256, (rows, cols // 256, nbytes), dtype=np.uint8)
    for o in F16_AT[kind]:
        data[:, :, o:o + 2] = rng.uniform(1e-4, 1e-2, (rows, cols // 256, 1)).astype(np.float16).view(np.uint8)
    return np.ascontiguousarray(data.reshape(rows, -1))


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K"])
def test_vector_kernel_gives_the_unpacked_kernels_bytes(kind):
    rng = np.random.default_rng(len(kind) + 5)
    for rows, cols in ((37, 512), (16, 2048)):
        data = random_rows(rng, kind, rows, cols)
        for m in (1, 2, 3, 4, 7, 70):
            x = rng.standard_normal((m, cols)).astype(np.float32)
            got = blocks_vec.matmul(x, kind, data)
            want = np.empty((m, rows), np.float32)
            blocks_cpu.KERNELS[kind](x, data, blocks_cpu.F16, want)     # the unpacked form
            assert np.isfinite(got).all() and np.abs(got).max() > 0
            assert got.tobytes() == want.tobytes(), (kind, rows, cols, m)


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K"])
def test_vector_kernel_is_the_definition_and_batch_invariant(kind):
    from kernels.blocks import Blocks
    rng = np.random.default_rng(11)
    w = Blocks(kind, 21, 768, random_rows(rng, kind, 21, 768))
    x = rng.standard_normal((8, 768)).astype(np.float32)
    got = blocks_cpu.matmul(x, kind, w.data)                # the dispatch: blocks_vec
    want = x.astype(np.float64) @ w.dequantize().astype(np.float64).T
    assert np.abs(got - want).max() <= 1e-6 * np.sqrt(768) * np.abs(want).max()
    for i in range(8):                       # each row alone (the 2x1 tiles) == in the batch
        assert blocks_cpu.matmul(x[i:i + 1], kind, w.data).tobytes() == got[i:i + 1].tobytes()


def test_mxfp4_vector_kernel_gives_the_unpacked_kernels_bytes():
    """MXFP4 (gpt-oss experts) in blocks_vec's 32-element tiles (the value a nibble stands for
    looked up by pshufb, the e8m0 scale's float built from its bits) against blocks_cpu's
    deq_mxfp4 then the lane chain: the same products d * kvalue (exact), the same order. Every
    scale byte 0..255 appears (the denormal 2^-128, 2^-127 included)."""
    if "MXFP4" not in blocks_vec.VEC_BYTES:
        pytest.skip("MXFP4's vector form is x86 (pshufb) only")
    rng = np.random.default_rng(17)
    rows, cols = 45, 2880                         # gpt-oss's width: 90 blocks a row
    data = rng.integers(0, 256, (rows, cols // 32, 17), dtype=np.uint8)
    data[:, :, 0] = rng.integers(100, 140, (rows, cols // 32), dtype=np.uint8)
    data.reshape(-1, 17)[:256, 0] = np.arange(256, dtype=np.uint8)
    data = np.ascontiguousarray(data.reshape(rows, -1))
    for m in (1, 4, 8, 13):
        x = rng.standard_normal((m, cols)).astype(np.float32)
        got = blocks_vec.matmul(x, "MXFP4", data)
        want = np.empty((m, rows), np.float32)
        blocks_cpu.KERNELS["MXFP4"](x, data, blocks_cpu.F16, want)
        assert np.abs(got[np.isfinite(got)]).max() > 0
        assert got.tobytes() == want.tobytes(), m
