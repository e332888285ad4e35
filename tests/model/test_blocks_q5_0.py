"""Q5_0 blocks (ggml's block_q5_0: f16 d, 4 bytes qh of fifth bits, 16 bytes of nibbles; what
llama-quantize's Q4_K_M writes for rows not a multiple of 256) read as stored on the CPU:

- the definition: a numpy dequantization written line for line from ggml-quants.c's
  dequantize_row_q5_0 equals gguf-py's dequantize (Blocks.dequantize) and kernels/
  blocks_cpu.deq_q5_0 bit for bit, on random blocks with every qh bit pattern;
- kernels/blocks_vec.py's vector kernel gives the unpack-then-dot kernel's bytes (blocks_cpu's
  `chunk` over deq_q5_0: the same d * q, the same 32-lane fma chain and tree) at every tile
  shape, is within float32 rounding of the float64 definition, and a row alone == in a batch;
- a MoE layer's experts (kernels/moe_cpu.grouped_matmul over an ExpertStack of Q5_0) give
  each row the bytes of its own expert's one product."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import blocks_cpu, blocks_vec, qmatmul
from kernels.blocks import Blocks, ExpertStack

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)


def ggml_dequantize_q5_0(data: np.ndarray) -> np.ndarray:
    """ggml-quants.c dequantize_row_q5_0, transcribed: for each block, d = fp16 d,
    qh = memcpy'd uint32 (little-endian), for j < 16:
      xh_0 = ((qh >> (j + 0)) << 4) & 0x10;  xh_1 = ((qh >> (j + 12))) & 0x10;
      x0 = ((qs[j] & 0x0F) | xh_0) - 16;     x1 = ((qs[j] >> 4) | xh_1) - 16;
      y[j] = x0 * d;  y[j + 16] = x1 * d  (int * float in float32)."""
    rows = data.shape[0]
    blk = data.reshape(rows, -1, 22)
    d = blk[:, :, 0:2].copy().view(np.float16).astype(np.float32)          # [rows, nb, 1]
    qh = blk[:, :, 2:6].copy().view("<u4").astype(np.uint32)                # [rows, nb, 1]
    qs = blk[:, :, 6:22].astype(np.uint32)                                  # [rows, nb, 16]
    j = np.arange(16, dtype=np.uint32)
    xh_0 = ((qh >> (j + 0)) << 4) & 0x10
    xh_1 = (qh >> (j + 12)) & 0x10
    x0 = ((qs & 0x0F) | xh_0).astype(np.int32) - 16
    x1 = ((qs >> 4) | xh_1).astype(np.int32) - 16
    y = np.concatenate([x0.astype(np.float32) * d, x1.astype(np.float32) * d], axis=2)
    return y.reshape(rows, -1)


def random_q5_0(rng, rows, cols):
    data = rng.integers(0, 256, (rows, cols // 32, 22), dtype=np.uint8)
    data[:, :, 0:2] = rng.uniform(1e-3, 2e-2, (rows, cols // 32, 1)).astype(np.float16).view(np.uint8)
    data[0, 0, 2:6] = 0xFF                   # all fifth bits set, and none, somewhere
    data[-1, -1, 2:6] = 0x00
    return np.ascontiguousarray(data.reshape(rows, -1))


def test_the_definition_is_ggmls_and_gguf_pys():
    rng = np.random.default_rng(50)
    data = random_q5_0(rng, 9, 320)
    want = ggml_dequantize_q5_0(data)
    assert want.shape == (9, 320) and np.abs(want).max() > 0
    assert want[0, :32].min() >= 0 and want[-1, -32:].max() <= 0     # qh all ones / all zeros
    got = Blocks("Q5_0", 9, 320, data).dequantize()                    # gguf-py's
    assert got.tobytes() == want.tobytes()
    assert blocks_cpu.dequantize_rows("Q5_0", data, 320).tobytes() == want.tobytes()
    # the vector IR's weights: a one-hot x reads one column's weight back exactly
    x = np.eye(32, 320, 32 * 3, dtype=np.float32)
    assert blocks_vec.matmul(x, "Q5_0", data).T.tobytes() == \
        np.ascontiguousarray(want[:, 96:128]).tobytes()


def test_fifth_bit_order_is_ggmls():
    """One block: qh bit j set alone gives element j the value 16 + nibble - 16 = nibble."""
    for bit in (0, 7, 15, 16, 23, 31):
        blk = np.zeros((1, 22), np.uint8)
        blk[0, 0:2] = np.array([1.0], np.float16).view(np.uint8)
        blk[0, 2:6] = np.array([1 << bit], "<u4").view(np.uint8)
        w = Blocks("Q5_0", 1, 32, blk).dequantize()[0]
        want = np.full(32, -16.0, np.float32)
        want[bit] = 0.0
        assert w.tolist() == want.tolist(), bit
        assert ggml_dequantize_q5_0(blk)[0].tolist() == want.tolist()


def test_vector_kernel_gives_the_unpacked_kernels_bytes():
    rng = np.random.default_rng(51)
    for rows, cols in ((37, 1408), (16, 256), (5, 32)):
        data = random_q5_0(rng, rows, cols)
        for m in (1, 2, 3, 4, 5, 8, 9, 70):
            x = rng.standard_normal((m, cols)).astype(np.float32)
            got = blocks_vec.matmul(x, "Q5_0", data)
            want = np.empty((m, rows), np.float32)
            blocks_cpu.KERNELS["Q5_0"](x, data, blocks_cpu.F16, want)     # the unpacked form
            assert np.isfinite(got).all() and np.abs(got).max() > 0
            assert np.array_equal(got, want), (rows, cols, m)


def test_vector_kernel_is_the_definition_and_batch_invariant():
    rng = np.random.default_rng(52)
    w = Blocks("Q5_0", 21, 1408, random_q5_0(rng, 21, 1408))
    x = rng.standard_normal((9, 1408)).astype(np.float32)
    got = blocks_cpu.matmul(x, "Q5_0", w.data)                # the dispatch: blocks_vec
    want = x.astype(np.float64) @ ggml_dequantize_q5_0(w.data).astype(np.float64).T
    assert np.abs(got - want).max() <= 1e-6 * np.sqrt(1408) * np.abs(want).max()
    for i in range(9):                       # each row alone == in the batch
        assert blocks_cpu.matmul(x[i:i + 1], "Q5_0", w.data).tobytes() == got[i:i + 1].tobytes()
    assert qmatmul.cpu(x, w).tobytes() == got.tobytes()


@pytest.mark.parametrize("crew", [True, False])
def test_expert_stack_grouped_is_each_experts_own_product(crew, monkeypatch):
    from kernels import moe_cpu
    monkeypatch.setattr(blocks_vec, "CREW", crew)
    rng = np.random.default_rng(53)
    stack = ExpertStack([Blocks("Q5_0", 48, 1408, random_q5_0(rng, 48, 1408)) for _ in range(6)])
    assert moe_cpu.fits(stack)
    experts = np.array([4, 0, 5], np.int64)
    offs = np.array([0, 3, 4, 11], np.int64)
    x = rng.standard_normal((11, 1408)).astype(np.float32)
    got = moe_cpu.grouped_matmul(x, stack, experts, offs)
    for g, e in enumerate(experts):
        a, b = offs[g], offs[g + 1]
        assert got[a:b].tobytes() == blocks_cpu.matmul(x[a:b], "Q5_0", stack[e].data).tobytes()
        for i in range(a, b):                # a row alone == in its group
            assert got[i:i + 1].tobytes() == blocks_cpu.matmul(x[i:i + 1], "Q5_0", stack[e].data).tobytes()
