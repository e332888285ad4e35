"""kernels/moe_cpu.py's one parallel region for all of a round's experts, for every block kind
a stack can hold (the 32-element kinds of kernels/blocks_vec.py and the K-quants and float
rows of kernels/blocks_cpu.py, as a Q4_K_M file's experts are): each group's rows equal the
one-expert product (kernels.ops.linear, what ops.moe's loop runs) byte for byte, and a row
alone equals it in a batch. Random blocks: quants uniform bytes, f16 scales set finite."""
from __future__ import annotations

import numpy as np
import pytest

from kernels.blocks import Blocks, ExpertStack
from kernels.moe_cpu import fits, grouped_matmul
from kernels.ops import backend

ops = backend("numpy")      # its products over Blocks: each as stored (kernels/qmatmul.py)

# block bytes, values a block, where the f16 scales sit (byte offsets)
KINDS = {"Q8_0": (34, 32, (0,)), "Q4_0": (18, 32, (0,)), "Q4_1": (20, 32, (0, 2)),
         "Q4_K": (144, 256, (0, 2)), "Q6_K": (210, 256, (208,)), "F16": (2, 1, ()),
         "BF16": (2, 1, ()), "F32": (4, 1, ())}


def random_blocks(rng, kind, rows, cols) -> Blocks:
    nbytes, per, scales = KINDS[kind]
    if kind in ("F16", "BF16", "F32"):
        x = rng.standard_normal((rows, cols)).astype(np.float32) * 0.05
        data = {"F16": x.astype(np.float16).view(np.uint8),
                "BF16": (x.view(np.uint32) >> 16).astype(np.uint16).view(np.uint8),
                "F32": x.view(np.uint8)}[kind]
        return Blocks(kind, rows, cols, np.ascontiguousarray(data))
    nb = cols // per
    data = rng.integers(0, 256, (rows, nb, nbytes), dtype=np.uint8)
    for off in scales:
        data[:, :, off:off + 2] = (rng.uniform(1e-4, 2e-3, (rows, nb, 1))).astype(np.float16).view(np.uint8)
    return Blocks(kind, rows, cols, data.reshape(rows, nb * nbytes))


@pytest.mark.parametrize("kind", list(KINDS))
def test_grouped_equals_one_product_an_expert(kind):
    rng = np.random.default_rng(len(kind))
    E, N, K = 6, 40, 512                     # N not a multiple of the 16-row chunks
    stack = ExpertStack([random_blocks(rng, kind, N, K) for _ in range(E)])
    assert fits(stack)
    x = rng.standard_normal((11, K)).astype(np.float32)
    experts = np.array([0, 2, 3, 5], np.int64)
    offs = np.array([0, 1, 5, 6, 11], np.int64)            # groups of 1, 4, 1, 5 rows
    got = grouped_matmul(x, stack, experts, offs)
    assert np.isfinite(got).all() and np.abs(got).max() > 0
    for g, e in enumerate(experts):
        a, b = offs[g], offs[g + 1]
        want = ops.linear(np.ascontiguousarray(x[a:b]), stack[e])
        assert got[a:b].tobytes() == want.tobytes(), (kind, int(e))
        for i in range(a, b):                                # a row alone == in its group
            alone = grouped_matmul(x[i:i + 1], stack, np.array([e], np.int64), np.array([0, 1], np.int64))
            assert alone.tobytes() == got[i:i + 1].tobytes(), (kind, i)


def test_grouped_is_the_definition_up_to_rounding():
    """Against the float64 definition (kernels.qmatmul.ref) of a K-quant: not a tautology of
    the kernel with itself."""
    from kernels import qmatmul
    rng = np.random.default_rng(7)
    for kind in ("Q4_K", "Q6_K"):
        stack = ExpertStack([random_blocks(rng, kind, 32, 512) for _ in range(3)])
        x = rng.standard_normal((3, 512)).astype(np.float32)
        got = grouped_matmul(x, stack, np.array([0, 1, 2], np.int64), np.array([0, 1, 2, 3], np.int64))
        for e in range(3):
            want = qmatmul.ref(x[e:e + 1], stack[e])
            np.testing.assert_allclose(got[e:e + 1], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_mixed_kinds_matrix_is_its_parts_side_by_side():
    """q|k|v of mixed kinds (Q4_K_M: Q4_K q, k beside a Q6_K v) kept as MixedBlocks on the CPU:
    ops.linear is each part's product as stored, side by side (+ bias), a row alone equal to
    it in a batch, and within float32 rounding of the float64 definition of the whole."""
    from kernels import qmatmul
    from kernels.blocks import MixedBlocks
    rng = np.random.default_rng(3)
    parts = [random_blocks(rng, "Q4_K", 48, 512), random_blocks(rng, "Q4_K", 16, 512),
             random_blocks(rng, "Q6_K", 16, 512)]
    w = MixedBlocks(parts)
    assert w.rows == 80 and w.nbytes == sum(p.nbytes for p in parts)
    x = rng.standard_normal((5, 512)).astype(np.float32)
    bias = rng.standard_normal(80).astype(np.float32)
    got = ops.linear(x, w, bias)
    want = np.concatenate([ops.linear(x, p) for p in parts], axis=1) + bias
    assert got.shape == (5, 80) and got.tobytes() == want.tobytes()
    for i in range(5):
        assert ops.linear(x[i:i + 1], w, bias).tobytes() == got[i:i + 1].tobytes()
    ref = np.concatenate([qmatmul.ref(x, p) for p in parts], axis=1) + bias
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


@pytest.mark.parametrize("kind", ["F32", "Q4_K"])
def test_small_products_on_the_calling_thread_give_the_parallel_bytes(kind):
    """kernels/blocks_cpu.matmul runs products of <= SERIAL_MACS on the calling thread (a MoE
    router at decode): the parallel kernel's bytes."""
    from kernels import blocks_cpu as B
    rng = np.random.default_rng(11)
    w = random_blocks(rng, kind, 128, 512)
    x = rng.standard_normal((2, 512)).astype(np.float32)
    assert 2 * 128 * 512 <= B.SERIAL_MACS
    small = B.matmul(x, kind, w.data)
    par = np.empty_like(small)
    B.KERNELS[kind](x, w.data, B.F16, par)
    assert small.tobytes() == par.tobytes()
    np.testing.assert_allclose(small, __import__("kernels.qmatmul", fromlist=["ref"]).ref(x, w),
                               rtol=1e-4, atol=1e-4 * np.abs(small).max())


def test_mixed_blocks_merge_neighbours_of_one_kind():
    """The CPU engine keeps q|k|v of Q4_K, Q4_K, Q6_K as two parts (q|k as one Blocks): the
    same rows, so ops.linear's bytes are unchanged by the merge."""
    from kernels.blocks import MixedBlocks
    rng = np.random.default_rng(5)
    parts = [random_blocks(rng, "Q4_K", 32, 512), random_blocks(rng, "Q4_K", 16, 512),
             random_blocks(rng, "Q6_K", 16, 512)]
    w = MixedBlocks(parts)
    m = w.merged()
    assert [(p.kind, p.rows) for p in m] == [("Q4_K", 48), ("Q6_K", 16)]
    x = rng.standard_normal((3, 512)).astype(np.float32)
    assert ops.linear(x, m).tobytes() == ops.linear(x, w).tobytes()
