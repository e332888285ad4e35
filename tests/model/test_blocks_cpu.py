"""The CPU kernels over GGUF blocks (kernels/blocks_cpu.py) against their definition.

Every kind on fresh random blocks: x @ W^T within float32 rounding of the float64
dequantize-then-multiply reference (kernels.qmatmul.ref, Blocks.dequantize = the gguf
library's dequantizer); and batch invariance byte for byte: a row alone equals the same row
in a batch of 8 (and of 70, past one tile), wherever it sits.
"""
from __future__ import annotations

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import quantize

from kernels import qmatmul
from kernels.blocks import Blocks

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

QUANT = ["Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q6_K"]


# where each kind keeps its f16 scales: byte offsets in a block
F16_AT = {"Q4_K": (0, 2), "Q6_K": (208,)}


def random_blocks(kind: str, rows: int, cols: int, seed: int) -> Blocks:
    rng = np.random.default_rng(seed)
    if kind not in F16_AT:               # the gguf library quantizes these
        w = (rng.standard_normal((rows, cols)) * rng.uniform(0.005, 0.05, (rows, 1))).astype(np.float32)
        q = quantize(w, GGMLQuantizationType[kind]).reshape(rows, -1)
        return Blocks(kind, rows, cols, np.ascontiguousarray(q))
    # K-quants it only dequantizes: random bytes are valid blocks; the f16 scales made sane
    b = Blocks(kind, rows, cols, rng.integers(0, 256, (rows, cols // 256 * {"Q4_K": 144, "Q6_K": 210}[kind]),
                                              dtype=np.uint8))
    blocks = b.data.reshape(rows, cols // 256, -1)
    for o in F16_AT[kind]:
        scale = rng.uniform(1e-4, 1e-2, blocks.shape[:2]).astype(np.float16)
        blocks[:, :, o:o + 2] = scale.view(np.uint8).reshape(*blocks.shape[:2], 2)
    return b


def dense(kind: str, rows: int, cols: int, seed: int):
    """(the kernel's uint8 rows, their float32 values) for F16 / BF16 / F32."""
    w = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32) * 0.03
    if kind == "F32":
        return w.view(np.uint8), w
    if kind == "F16":
        h = w.astype(np.float16)
        return h.view(np.uint8), h.astype(np.float32)
    bits = (w.view(np.uint32) >> 16).astype(np.uint16)
    return bits.view(np.uint8), (bits.astype(np.uint32) << 16).view(np.float32)


def close(got, want64, k):
    # float32 sums of k products: error well under sqrt(k) ulps of the magnitudes summed
    scale = np.abs(want64).max()
    assert np.abs(got.astype(np.float64) - want64).max() <= 1e-6 * np.sqrt(k) * scale + 1e-30


@pytest.mark.parametrize("kind", QUANT)
def test_kernel_matches_the_float64_definition(kind):
    from kernels.blocks_cpu import matmul
    cols = 512 if kind.endswith("_K") else 96
    for seed, rows in ((1, 40), (2, 17)):
        w = random_blocks(kind, rows, cols, seed)
        x = np.random.default_rng(seed + 10).standard_normal((5, cols)).astype(np.float32)
        want = x.astype(np.float64) @ w.dequantize().astype(np.float64).T
        close(matmul(x, w.kind, w.data), want, cols)
        close(qmatmul.cpu(x, w), want, cols)
        assert np.array_equal(qmatmul.rows(w, [3, 0, 3]), w.dequantize()[[3, 0, 3]])


@pytest.mark.parametrize("kind", ["F16", "BF16", "F32"])
def test_dense_kernels_match_the_float64_definition(kind):
    from kernels.blocks_cpu import matmul
    data, w = dense(kind, 33, 64, 3)
    x = np.random.default_rng(4).standard_normal((3, 64)).astype(np.float32)
    close(matmul(x, kind, data), x.astype(np.float64) @ w.astype(np.float64).T, 64)


@pytest.mark.parametrize("kind,cols", [("Q4_1", 576), ("Q4_0", 576), ("Q8_0", 576), ("Q6_K", 256),
                                       ("Q4_1", 1536), ("Q8_0", 1536), ("Q4_0", 1600),
                                       ("Q4_1", 704), ("Q8_0", 704)])
def test_a_row_alone_equals_the_row_in_a_batch(kind, cols):
    """Whatever tile a row meets (kernels/blocks_vec.py: 4x1 alone, 1x8 beside 7 others at
    K = 576, 2x4 at K = 1536, where 8 x rows leave L1; the last 2-9 rows in 4x2, 2x3, 2x4,
    2x5 or 2x6 tiles (2 .. 9, 10 and 11 out of L1, 17 = 8 + 9), 7-9 rows at K = 576 and 704
    in the two-loop tile2 (2x(3+4), 2x(4+4), 2x(4+5)), at K = 1536 in two passes; 1x1 for the
    rows of blocks past the tiles': 51 rows, an odd span), its bytes are the same."""
    from kernels.blocks_cpu import TILE, matmul
    w = random_blocks(kind, 51, cols, 7)
    rng = np.random.default_rng(8)
    for batch in (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 17, TILE + 6):
        x = rng.standard_normal((batch, cols)).astype(np.float32)
        full = matmul(x, w.kind, w.data)
        for i in (0, 3, batch - 1):
            alone = matmul(x[i:i + 1], w.kind, w.data)
            assert alone.tobytes() == full[i:i + 1].tobytes(), (kind, batch, i)
        other = x.copy()
        other[1:] = rng.standard_normal(other[1:].shape)        # other rows, other values
        assert matmul(other, w.kind, w.data)[0].tobytes() == full[0].tobytes()


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_real_model_on_blocks_solo_equals_concurrent(real_model, paged):
    """The default model as served on the CPU (its Q4_1 / Q8_0 blocks read by the kernels):
    a stream alone == among seven others, byte for byte, pages and windows."""
    from server.engine.probe import solo_vs_concurrent
    eng = real_model.engine
    assert isinstance(eng.weights.layers[0].wqkv, Blocks) and isinstance(eng.weights.lm_head, Blocks)
    r = solo_vs_concurrent(eng, paged=paged, steps=4, context=64)
    assert r["equal_steps"] == r["steps"], r


def test_real_model_on_blocks_paged_equals_window(real_model):
    from server.engine.probe import solo_vs_concurrent
    from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
    eng = real_model.engine
    prompt = tuple(range(100, 123))
    got = []
    for paged in (True, False):
        eng.apply(PoolStep(paged, 4 if paged else 0, 16, (eng.page_bytes(16),), 1, 64))
        eng.apply(BeginStep(0, (3, 1, 2, 0) if paged else ()))
        rows = [eng.apply(RoundStep((Chunk(0, 0, prompt[:13], False),))),
                eng.apply(RoundStep((Chunk(0, 13, prompt[13:], True),)))[0].tobytes()]
        eng.apply(EndStep(0))
        got.append(rows[1])
    assert got[0] == got[1]


@pytest.mark.parametrize("kind", ["Q4_1", "Q4_0"])
def test_nibble_table_kernels_give_the_unpacked_forms_bytes(kind):
    """kernels/blocks_vec.py picks each weight d * v from a 16-lane table by its nibble where
    AVX-512 is there (vpermps) and unpacks and multiplies elsewhere: the same products, so
    the same bytes, at every row count the kernels split differently (1, 4, 8 + 5, 6, and the
    two-loop tile2 at 7 and 9)."""
    from kernels import blocks_vec
    if not blocks_vec._avx512():
        pytest.skip("no AVX-512 here: only the unpacked form compiles")
    table, plain = blocks_vec.kernels(True), blocks_vec.kernels(False)
    w = random_blocks(kind, 37, 576, 11)
    rng = np.random.default_rng(12)
    for m in (1, 4, 13, 6, 7, 9):
        x = rng.standard_normal((m, 576)).astype(np.float32)
        xs = np.empty((m, 18), np.float32)
        blocks_vec.block_sums(x, xs)
        a = np.empty((m, 37), np.float32)
        b = np.empty((m, 37), np.float32)
        table[kind](x, xs, w.data, a)
        plain[kind](x, xs, w.data, b)
        assert a.tobytes() == b.tobytes(), (kind, m)
