"""NVFP4 blocks (GLM-5.3-Flash's weights) on the CPU.

The definition is ggml's, written out in numpy below from its C source (llama.cpp at
../shared/peers: ggml/src/ggml-common.h `block_nvfp4` {uint8 d[4]; uint8 qs[32]}, QK_NVFP4 64,
QK_NVFP4_SUB 16; ggml/src/ggml-quants.c `dequantize_row_nvfp4`; ggml/src/ggml-impl.h
`ggml_ue4m3_to_fp32`): per block, for sub-block s = 0..3, d = ue4m3(d[s]) (x 0.5), and for
j = 0..7: y[16 s + j] = kvalues[qs[8 s + j] & 15] * d, y[16 s + 8 + j] = kvalues[qs[8 s + j] >> 4] * d.
No global scale lives in the blocks (llama.cpp reads a per-tensor `.scale` beside them).

Held: kernels/blocks_cpu.py's `deq_nvfp4` equal to that definition bit for bit on every
scale byte and every nibble (and to the gguf library's dequantizer, which Blocks.dequantize
uses); x @ W^T within float32 rounding of the float64 reference; a row alone == the same
row in a batch, byte for byte; a column split on a 64-element boundary only."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kernels import qmatmul
from kernels.blocks import BLOCK, BlockSplitError, Blocks

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

KVALUES_FP4 = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]   # ggml-common.h


def ggml_ue4m3_to_fp32(x: int) -> float:
    """ggml-impl.h, line for line (float32 arithmetic: ldexpf, then * 0.5f)."""
    if x == 0 or x == 0x7F:
        return 0.0
    exp = (x >> 3) & 0xF
    man = x & 0x7
    if exp == 0:
        raw = np.float32(math.ldexp(float(man), -9))
    else:
        raw = np.float32(math.ldexp(float(np.float32(1.0) + np.float32(man) / np.float32(8.0)), exp - 7))
    return float(np.float32(raw) * np.float32(0.5))


def ggml_dequantize_row_nvfp4(row: np.ndarray, k: int) -> np.ndarray:
    """ggml-quants.c's dequantize_row_nvfp4 over one row's bytes (k elements)."""
    assert k % 64 == 0
    y = np.empty(k, np.float32)
    for i in range(k // 64):
        blk = row[i * 36:(i + 1) * 36]
        d_bytes, qs = blk[:4], blk[4:]
        for s in range(4):
            d = np.float32(ggml_ue4m3_to_fp32(int(d_bytes[s])))
            for j in range(8):
                q = int(qs[s * 8 + j])
                y[i * 64 + s * 16 + j] = np.float32(KVALUES_FP4[q & 0x0F]) * d
                y[i * 64 + s * 16 + j + 8] = np.float32(KVALUES_FP4[q >> 4]) * d
    return y


def random_nvfp4(rows: int, cols: int, seed: int, scales=(40, 64)) -> Blocks:
    rng = np.random.default_rng(seed)
    data = rng.integers(0, 256, (rows, cols // 64, 36), dtype=np.uint8)
    data[:, :, :4] = rng.integers(scales[0], scales[1] + 1, (rows, cols // 64, 4), dtype=np.uint8)
    return Blocks("NVFP4", rows, cols, np.ascontiguousarray(data.reshape(rows, -1)))


def test_the_block_is_ggmls():
    assert BLOCK["NVFP4"] == (64, 36)
    from gguf.constants import GGML_QUANT_SIZES, GGMLQuantizationType
    assert GGML_QUANT_SIZES[GGMLQuantizationType.NVFP4] == (64, 36)


def test_dequantize_equals_ggml_for_every_scale_byte_and_nibble():
    from kernels.blocks_cpu import dequantize_rows
    b = random_nvfp4(64, 128, 1, scales=(0, 255))
    d = b.data.reshape(64, 2, 36)
    d[:, :, :4] = np.arange(256, dtype=np.uint8).reshape(64, 4)[:, None, :]   # each byte once
    d[:, 1, 4:] = np.arange(256, dtype=np.uint8).reshape(8, 32)[np.arange(64) % 8]  # each pair
    got = dequantize_rows("NVFP4", b.data, b.cols)
    want = np.stack([ggml_dequantize_row_nvfp4(b.data[r], b.cols) for r in range(b.rows)])
    assert got.dtype == np.float32
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # 0x7F and 0x00 read as zero, 0xFF is 240 (the top bit ignored): ggml's reading
    assert want[0x7F // 4, (0x7F % 4) * 16] == 0 and np.isfinite(want).all()
    gg = b.dequantize()                                    # gguf.quants.dequantize
    assert np.array_equal(gg.view(np.uint32), want.view(np.uint32))


def test_a_wrong_nibble_order_is_seen():
    """The guard: a kernel that put a byte's high nibble at 16 s + 2 j + 1 (interleaved) or
    read the scales after the values would differ from ggml's row."""
    b = random_nvfp4(1, 64, 7)
    want = ggml_dequantize_row_nvfp4(b.data[0], 64)
    qs = b.data[0, 4:]
    inter = np.empty(64, np.float32)
    for s in range(4):
        d = np.float32(ggml_ue4m3_to_fp32(int(b.data[0, s])))
        for j in range(8):
            inter[s * 16 + 2 * j] = KVALUES_FP4[qs[s * 8 + j] & 15] * d
            inter[s * 16 + 2 * j + 1] = KVALUES_FP4[qs[s * 8 + j] >> 4] * d
    assert not np.array_equal(inter, want)


@pytest.mark.parametrize("m", [1, 3, 70])
def test_matmul_matches_the_reference(m):
    from kernels.blocks_cpu import matmul
    w = random_nvfp4(48, 192, 2)
    x = np.random.default_rng(3).standard_normal((m, 192)).astype(np.float32)
    got = matmul(x, "NVFP4", w.data)
    deq = np.stack([ggml_dequantize_row_nvfp4(w.data[r], 192) for r in range(48)])
    want = x.astype(np.float64) @ deq.astype(np.float64).T
    assert np.abs(got - want).max() <= 1e-6 * np.sqrt(192) * np.abs(want).max()


def test_batch_invariance():
    from kernels.blocks_cpu import matmul
    w = random_nvfp4(40, 256, 4)
    x = np.random.default_rng(5).standard_normal((70, 256)).astype(np.float32)
    batch = matmul(x, "NVFP4", w.data)
    for i in (0, 13, 69):
        alone = matmul(x[i:i + 1], "NVFP4", w.data)
        assert np.array_equal(alone[0].view(np.uint32), batch[i].view(np.uint32))


def test_columns_split_on_whole_blocks_only():
    w = random_nvfp4(8, 256, 6)
    left = w.take_cols(0, 128)
    assert left.row_bytes == 72
    assert np.array_equal(left.dequantize(), w.dequantize()[:, :128])
    with pytest.raises(BlockSplitError, match="blocks of 64"):
        w.take_cols(0, 96)


def test_experts_in_one_region_equal_each_alone():
    """A MoE layer's NVFP4 experts as one ExpertStack (kernels/moe_cpu.py's grouped product,
    GLM-5.3-Flash's experts): each group's rows == matmul by its expert alone, byte for byte."""
    from kernels.blocks_cpu import matmul
    from kernels.moe_cpu import grouped_matmul
    from kernels.blocks import ExpertStack
    stack = ExpertStack([random_nvfp4(48, 128, 20 + e) for e in range(4)])
    x = np.random.default_rng(9).standard_normal((11, 128)).astype(np.float32)
    experts, offs = np.array([2, 0, 3]), np.array([0, 4, 5, 11])
    got = grouped_matmul(x, stack, experts, offs)
    for g, e in enumerate(experts):
        alone = matmul(x[offs[g]:offs[g + 1]], "NVFP4", stack[e].data)
        assert np.array_equal(got[offs[g]:offs[g + 1]].view(np.uint32), alone.view(np.uint32))
