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
    from server.engine.weights.blocks import Blocks
    rng = np.random.default_rng(11)
    w = Blocks(kind, 21, 768, random_rows(rng, kind, 21, 768))
    x = rng.standard_normal((8, 768)).astype(np.float32)
    got = blocks_cpu.matmul(x, kind, w.data)                # the dispatch: blocks_vec
    want = x.astype(np.float64) @ w.dequantize().astype(np.float64).T
    assert np.abs(got - want).max() <= 1e-6 * np.sqrt(768) * np.abs(want).max()
    for i in range(8):                       # each row alone (the 2x1 tiles) == in the batch
        assert blocks_cpu.matmul(x[i:i + 1], kind, w.data).tobytes() == got[i:i + 1].tobytes()
