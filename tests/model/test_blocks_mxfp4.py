"""MXFP4 blocks (gpt-oss experts) on the CPU: kernels/blocks_cpu.py's `deq_mxfp4` equal, bit
for bit, to the gguf library's dequantizer on random blocks (every scale byte, every nibble);
x @ W^T within float32 rounding of the float64 reference (kernels.qmatmul.ref); and batch
invariance byte for byte (a row alone == the same row in a batch of 70)."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import qmatmul
from kernels.blocks import Blocks

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)


def random_mxfp4(rows: int, cols: int, seed: int, scales=(118, 126)) -> Blocks:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (rows, cols // 32, 17), dtype=np.uint8)
    data[:, :, 0] = rng.integers(scales[0], scales[1] + 1, (rows, cols // 32), dtype=np.uint8)
    return Blocks("MXFP4", rows, cols, np.ascontiguousarray(data.reshape(rows, -1)))


def test_dequantize_equals_gguf_for_every_scale_byte():
    from kernels.blocks_cpu import dequantize_rows
    b = random_mxfp4(256, 64, 1, scales=(0, 255))
    b.data.reshape(256, 2, 17)[:, 0, 0] = np.arange(256, dtype=np.uint8)   # each byte once
    got = dequantize_rows("MXFP4", b.data, b.cols)
    want = b.dequantize()                                  # gguf.quants.dequantize
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("m", [1, 3, 70])
def test_matmul_matches_the_reference(m):
    from kernels.blocks_cpu import matmul
    w = random_mxfp4(48, 96, 2)
    x = np.random.default_rng(3).standard_normal((m, 96)).astype(np.float32)
    got = matmul(x, "MXFP4", w.data)
    want = x.astype(np.float64) @ w.dequantize().astype(np.float64).T
    assert np.abs(got - want).max() <= 1e-6 * np.sqrt(96) * np.abs(want).max()


def test_batch_invariance():
    from kernels.blocks_cpu import matmul
    w = random_mxfp4(40, 128, 4)
    x = np.random.default_rng(5).standard_normal((70, 128)).astype(np.float32)
    batch = matmul(x, "MXFP4", w.data)
    for i in (0, 13, 69):
        alone = matmul(x[i:i + 1], "MXFP4", w.data)
        assert np.array_equal(alone[0].view(np.uint32), batch[i].view(np.uint32))
