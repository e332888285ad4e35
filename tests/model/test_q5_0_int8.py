"""kernels/kquant_cpu.py's Q5_0 against q8_0 x: Q8_0_DEF on the Q5_0 blocks' Q8_0 repack
(each block's f16 d, the values q - 16 as int8), read by the tiles as stored (22 bytes a
block, the fifth bit unpacked in registers).

- the repack (kquant_cpu.q5_0_as_q8_0, the numpy form the definition is stated on) holds
  exactly the values ggml's dequantize_row_q5_0 scales: dequantized, gguf-py's Q5_0 values
  bit for bit, on blocks with every qh bit pattern;
- q5_aux (the VNNI tiles' x side: T's start -16 sum x, the dx lanes) is a layout of q, dx;
- the vector forms (VNNI where the host has it, the portable IR everywhere) give the numpy
  definition's bytes (q80_definition on the repack) at every round shape, an odd number of
  blocks (the zero pad block), through the crew and on the caller alone;
- grouped: groups of 1..17 rows starting anywhere against experts of a stack, every row the
  definition's bytes; the experts' grouped path and gate_up (one crew round over gate's and
  up's stacks) == each row alone through qmatmul.cpu(q80=True);
- the switch: a model whose family opts in (Q8_0_X8) multiplies its Q5_0 matrices and
  experts against q8_0 x (ops.q80: a Q4_K_M file's Q5_0 fallback tensors).
Random blocks: every byte uniform (qh and nibbles: all 32 values), f16 scales in [1e-3, 1e-2]."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import qmatmul

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)


def q5_rows(rng, rows, cols):
    data = rng.integers(0, 256, (rows, cols // 32, 22), dtype=np.uint8)
    data[:, :, 0:2] = rng.uniform(1e-3, 1e-2, (rows, cols // 32, 1)).astype(np.float16).view(np.uint8)
    return np.ascontiguousarray(data.reshape(rows, -1))


def _forms():
    from kernels import kquant_cpu as KQ
    return (False, True) if KQ.VNNI else (False,)


def test_the_repack_holds_the_q5_0_values():
    """q5_0_as_q8_0: the same f16 d bytes, int8 q - 16 in [-16, 15]; dequantized (d * q) it
    equals gguf-py's Q5_0 dequantization bit for bit; qh all ones / all zeros / alternating."""
    from kernels import kquant_cpu as KQ
    from kernels.blocks import Blocks
    rng = np.random.default_rng(21)
    data = q5_rows(rng, 7, 256)
    blk = data.reshape(7, 8, 22)
    blk[0, :, 2:6] = 0xFF
    blk[1, :, 2:6] = 0
    blk[2, :, 2:6] = 0xAA
    r8 = KQ.q5_0_as_q8_0(data)
    assert r8.shape == (7, 8 * 34)
    b8 = r8.reshape(7, 8, 34)
    assert np.array_equal(b8[:, :, :2], blk[:, :, :2])
    w = b8[:, :, 2:].view(np.int8)
    assert w.min() >= -16 and w.max() <= 15 and w.min() == -16 and w.max() == 15
    assert (w[0] >= 0).all() and (w[1] < 0).all()
    got = Blocks("Q8_0", 7, 256, r8).dequantize()
    want = Blocks("Q5_0", 7, 256, data).dequantize()
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_q5_aux_is_a_layout_of_q_and_dx():
    """q5_aux: lane L < 16 of (i, p) -16 times the sum of q's 4 values of lane L of pair p
    (exact int32), lanes 16..23 dx[i, 2p]'s float32 bits, 24..31 dx[i, 2p + 1]'s."""
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(28)
    x = rng.standard_normal((5, 288)).astype(np.float32) * 30
    x[2, :32] = 0
    q, dx = KQ.quantize_q80(x)                                   # 288 -> 320 (the pad): 5 pairs
    gs = np.empty((5, 5, 32), np.int32)
    KQ.q5_aux(q, dx, gs)
    sums = q.astype(np.int32).reshape(5, 5, 16, 4).sum(axis=3)
    assert gs[:, :, :16].tobytes() == (-16 * sums).astype(np.int32).tobytes()
    lanes = np.repeat(dx.reshape(5, 5, 2), 8, axis=2)
    assert gs[:, :, 16:].view(np.float32).tobytes() == lanes.tobytes()


@pytest.mark.parametrize("vnni", _forms(), ids=lambda v: "vnni" if v else "portable")
def test_vector_forms_equal_the_definition_at_every_round_shape(vnni):
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(22)
    for K, N, sizes in ((1408, 51, (1, 2, 3, 4, 5, 6, 7, 8, 9, 70, 71)), (4096, 9, (1, 3, 4, 6)),
                        (96, 13, (1, 2, 3, 4, 5, 9)), (128, 13, (512,))):
        data = q5_rows(rng, N, K)
        x = rng.standard_normal((max(sizes), K)).astype(np.float32)
        x[1, 32:64] = 0                                        # a zero x block: dx 0
        q, dx = KQ.quantize_q80(x)
        want = KQ.q80_definition(q, dx, KQ.q80_padded(data, "Q5_0"), "Q5_0")
        for M in sizes:
            got = KQ.q80_matmul(x[:M], data, vnni=vnni, kind="Q5_0")
            assert got.tobytes() == want[:M].tobytes(), (K, M)
        for i in (0, 1, min(sizes[-1], 70) - 1):                 # a row alone == in its round
            one = KQ.q80_matmul(x[i:i + 1], data, vnni=vnni, kind="Q5_0")
            assert one.tobytes() == want[i:i + 1].tobytes(), (K, i)


@pytest.mark.parametrize("vnni", _forms(), ids=lambda v: "vnni" if v else "portable")
def test_grouped_tiles_at_every_group_start_give_the_definitions_bytes(vnni):
    """Groups of 1..17 rows starting anywhere (every tail tile: 3, 2, 1 rows past a multiple of
    4), experts repeated, K an odd number of blocks and an even one."""
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(23)
    sizes = np.array([8, 9, 3, 17, 1, 16, 7, 11, 14, 10, 12, 13, 2, 6, 5, 4])
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    experts = np.array([0, 1, 2, 3, 4, 5, 1, 3, 2, 0, 5, 4, 1, 3, 2, 0], np.int64)
    for K in (1408, 160):
        E, N = 6, 37
        stack = np.stack([q5_rows(rng, N, K) for _ in range(E)])
        x = rng.standard_normal((int(offs[-1]), K)).astype(np.float32)
        x[5, 64:96] = 0.0
        q, dx = KQ.quantize_q80(x)
        padded = KQ.q80_padded(stack, "Q5_0")
        want = np.empty((x.shape[0], N), np.float32)
        for g, e in enumerate(experts):
            a, b = offs[g], offs[g + 1]
            want[a:b] = KQ.q80_definition(q[a:b], dx[a:b], padded[e], "Q5_0")
        got = KQ.q80_grouped_q(q, dx, stack, experts, offs, vnni, kind="Q5_0")
        assert got.tobytes() == want.tobytes(), (K, vnni)


@pytest.mark.parametrize("vnni", _forms(), ids=lambda v: "vnni" if v else "portable")
def test_the_crew_and_the_caller_alone_give_the_same_bytes(vnni, monkeypatch):
    """Past blocks_vec.CREW_SERIAL_MACS the rows go to a crew (numba's threads), at 1 and 2
    threads; one x row on the caller alone (SOLO_ROWS, SOLO_BYTES) or on the crew."""
    import numba

    from kernels import blocks_vec
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(24)
    K, N = 1408, 40 * blocks_vec.CREW_CHUNKS * blocks_vec.ROWS + 5
    assert N * K > blocks_vec.CREW_SERIAL_MACS
    data = q5_rows(rng, N, K)
    x = rng.standard_normal((2, K)).astype(np.float32)
    q, dx = KQ.quantize_q80(x)
    want = KQ.q80_definition(q, dx, data, "Q5_0")
    old = numba.get_num_threads()
    try:
        for n in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(n)
            assert KQ.q80_matmul(x, data, vnni=vnni, kind="Q5_0").tobytes() == want.tobytes(), n
    finally:
        numba.set_num_threads(old)
    for solo in (1, 0):
        monkeypatch.setattr(KQ, "SOLO_ROWS", solo)
        monkeypatch.setattr(KQ, "SOLO_BYTES", data.nbytes if solo else 0)
        got = KQ.q80_matmul(x[:1], data, vnni=vnni, kind="Q5_0")
        assert got.tobytes() == want[:1].tobytes(), solo


def test_within_float32_rounding_of_the_quantized_product():
    from kernels import kquant_cpu as KQ
    from kernels.blocks import Blocks
    rng = np.random.default_rng(25)
    K, N = 1408, 40
    data = q5_rows(rng, N, K)
    x = rng.standard_normal((3, K)).astype(np.float32)
    got = KQ.q80_matmul(x, data, kind="Q5_0")
    ref = KQ.q80_ref(x, Blocks("Q5_0", N, K, data))
    assert np.abs(got - ref).max() <= 1e-5 * np.abs(ref).max()
    with pytest.raises(ValueError, match="K = 96"):
        KQ.q80_matmul(np.zeros((1, 96), np.float32), q5_rows(rng, 2, 64), kind="Q5_0")


@pytest.mark.parametrize("K", (1408, 96))
def test_the_experts_grouped_path_equals_each_row_alone(K):
    """kernels/moe_cpu.grouped_matmul / gate_up / gate_up_halves with q80 on Q5_0 stacks (and a
    Q5_0 gate beside a Q8_0 up) == each row alone through qmatmul.cpu(q80=True) against its
    expert; the float32 form differs (the switch changes the bytes)."""
    from kernels import moe_cpu
    from kernels.blocks import Blocks, ExpertStack
    from tests.model.test_q8_0_int8 import q8_rows
    rng = np.random.default_rng(26)
    E, N = 6, 40
    gate = ExpertStack([Blocks("Q5_0", N, K, q5_rows(rng, N, K)) for _ in range(E)])
    both = np.stack([q5_rows(rng, N, K) for _ in range(2 * E)])     # up's stack right after gate's
    gate2 = ExpertStack([Blocks("Q5_0", N, K, both[e]) for e in range(E)])
    up2 = ExpertStack([Blocks("Q5_0", N, K, both[E + e]) for e in range(E)])
    up8 = ExpertStack([Blocks("Q8_0", N, K, q8_rows(rng, N, K)) for _ in range(E)])
    experts = np.array([0, 2, 3, 5], np.int64)
    offs = np.array([0, 5, 6, 19, 21], np.int64)
    x = rng.standard_normal((21, K)).astype(np.float32)
    got = moe_cpu.grouped_matmul(x, gate, experts, offs, q8=True, q80=True)
    gu = moe_cpu.gate_up(x, gate, up8, experts, offs, q8=True, q80=True)
    rows = np.arange(21)
    h_g, h_u = moe_cpu.gate_up_halves(x, rows, gate2, up2, experts, offs, q8=True, q80=True)
    for g, e in enumerate(experts):
        for i in range(offs[g], offs[g + 1]):
            one = qmatmul.cpu(x[i:i + 1], gate[e], q80=True)
            assert got[i:i + 1].tobytes() == one.tobytes(), (g, i)
            assert np.ascontiguousarray(gu[i:i + 1, :N]).tobytes() == one.tobytes(), (g, i)
            two = qmatmul.cpu(x[i:i + 1], up8[e], q80=True)
            assert np.ascontiguousarray(gu[i:i + 1, N:]).tobytes() == two.tobytes(), (g, i)
            assert h_g[i:i + 1].tobytes() == qmatmul.cpu(x[i:i + 1], gate2[e], q80=True).tobytes()
            assert h_u[i:i + 1].tobytes() == qmatmul.cpu(x[i:i + 1], up2[e], q80=True).tobytes()
    flt = moe_cpu.grouped_matmul(x, gate, experts, offs, q8=True, q80=False)
    assert not np.array_equal(flt, got)


def test_a_q4_k_m_files_q5_0_products_take_q8_0_x():
    """glm4moe-tiny's Q4_K_M file (Q5_0 where Q4_K would be, Q8_0 where Q6_K): with the
    family's switch on, its Q5_0 matrices and experts multiply q8_0 x (Q8_0_DEF on the
    repack); with TF_Q8_0_X=float, float32 x."""
    from kernels import kquant_cpu as KQ
    from kernels.blocks import Blocks, ExpertGateUp
    from server.engine.engine import Engine
    from server.engine.weights import load
    from tools.refs import moe_checkpoint as mc
    ld = load(str(mc.build_once("glm4moe-tiny", ("F32", "Q8_0", "Q4_K_M"), hf=False).gguf["Q4_K_M"]),
              progress=False)
    m = Engine(ld.spec, ld.tensors.__getitem__).model
    assert m.ops.q80
    L = m.w.layers[-1]
    assert isinstance(L.wo, Blocks) and L.wo.kind == "Q5_0"
    x = np.random.default_rng(27).standard_normal((3, L.wo.cols)).astype(np.float32)
    assert m.ops.linear(x, L.wo).tobytes() == KQ.q80_matmul(x, L.wo.data, kind="Q5_0").tobytes()
    assert isinstance(L.experts_gu, ExpertGateUp) and L.experts_gu.kind == "Q5_0"
