"""kernels/kquant_cpu.py's Q8_0 against q8_0 x (Q8_0_DEF): every Q8_0 product of the families that opt in.

- x's quantization is ggml's quantize_row_q8_0_ref (transcribed here from ggml-quants.c:
  d = amax / 127, id = 1 / d, q = roundf(x * id), d stored as float16), bit for bit, ties
  away from zero, a zero block, a NaN block;
- the vector forms (VNNI where the host has it, the portable IR everywhere) give the numpy
  definition's bytes (kquant_cpu.q80_definition) at every tile shape and pass (1..9 x rows,
  70: two passes of X_BYTES, 512), through the crew and on the caller alone, and a row's
  bytes alone == in its batch (batch invariance);
- within float32 rounding of the float64 value of x's quantized copy times the weights;
- x's quantization in numba (quantize_q80) == the numpy definition byte for byte; an odd
  number of blocks padded with a zero one; the experts' grouped path == each row alone;
- the switch: every Q8_0 product of the MoE / MLA / hybrid families takes it (ops.q80), the
  llama family and the others do not.
Random blocks: every int8 quant uniform (-128 included), f16 scales in [1e-3, 1e-2]."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kernels import qmatmul

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)


def q8_rows(rng, rows, cols):
    data = rng.integers(0, 256, (rows, cols // 32, 34), dtype=np.uint8)
    data[:, :, 0:2] = rng.uniform(1e-3, 1e-2, (rows, cols // 32, 1)).astype(np.float16).view(np.uint8)
    return np.ascontiguousarray(data.reshape(rows, -1))


def ggml_q8_0(x):
    """ggml-quants.c quantize_row_q8_0_ref, one row, transcribed: (q int8, d float32 of f16)."""
    nb = x.shape[0] // 32
    q = np.zeros(x.shape[0], np.int8)
    d = np.zeros(nb, np.float32)
    for i in range(nb):
        xb = x[32 * i:32 * i + 32]
        amax = np.float32(0)
        for v in xb:
            amax = max(amax, np.float32(abs(v)))
        dd = np.float32(amax / np.float32(127))
        idd = np.float32(np.float32(1.0) / dd) if dd else np.float32(0)
        d[i] = np.float32(np.float16(dd))
        for j in range(32):
            v = float(np.float32(xb[j] * idd))
            q[32 * i + j] = int(math.copysign(math.floor(abs(v) + 0.5), v))      # roundf
    return q, d


def test_quantization_is_ggmls_q8_0():
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 256)) * rng.uniform(1e-3, 30, (3, 1))).astype(np.float32)
    x[0, :32] = 0                                               # amax 0: d = 0, q = 0
    x[1, 32] = 127                                              # d = 1: x * id = x, ties
    x[1, 33:64] = np.arange(31) - 15.5                          # .5 exactly: away from zero
    q, dx = KQ.quantize_q8_0(x)
    for i in range(3):
        gq, gd = ggml_q8_0(x[i])
        assert np.array_equal(q[i], gq), i
        assert np.array_equal(dx[i].view(np.uint32), gd.view(np.uint32)), i
    assert q[1, 33] == -16 and q[1, 34] == -15 and q[1, 63] == 15 and q[1, 48] == -1 and q[1, 49] == 1   # -15.5, -14.5, 14.5, -0.5, 0.5
    x[2, 70] = np.nan
    q, dx = KQ.quantize_q8_0(x)
    assert np.isnan(dx[2, 2]) and not q[2, 64:96].any() and not np.isnan(dx[2, [0, 1, 3]]).any()
    with pytest.raises(ValueError, match="K = 48"):
        KQ.quantize_q8_0(np.zeros((1, 48), np.float32))


def test_the_numba_quantizer_gives_the_definitions_bytes():
    """quantize_q80 (numba, what the products use) == quantize_q8_0 (numpy, the definition)
    byte for byte, the pad block zero: ties, zero and NaN / inf blocks, scales across float16's
    range (subnormal d, rounding up to a new binade, past 65504 -> inf)."""
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(11)
    x = (rng.standard_normal((6, 320)) * rng.uniform(1e-3, 30, (6, 1))).astype(np.float32)
    x[0, :32] = 0
    x[1, 32] = 127
    x[1, 33:64] = np.arange(31) - 15.5
    x[2, 70] = np.nan
    x[2, 100] = np.inf
    x[3] *= np.float32(1e-5)                         # d below float16's normals (6.1e-5)
    x[3, 64:96] *= np.float32(1e-3)
    x[4, :32] = np.float32(127 * 65519.0)            # d rounds down to 65504
    x[4, 32:64] = np.float32(127 * 65520.0)          # d rounds to inf
    x[5] = rng.uniform(-1, 1, 320).astype(np.float32) * np.float32(127 * 2047.9)   # binade edges
    for K in (320, 288, 64):                         # 10 blocks, 9 (padded), 2
        q, dx = KQ.quantize_q8_0(x[:, :K])
        nq, ndx = KQ.quantize_q80(x[:, :K])
        assert nq.shape[1] == (K + 63) // 64 * 64
        assert np.array_equal(nq[:, :K], q) and not nq[:, K:].any(), K
        assert np.array_equal(ndx[:, :K // 32].view(np.uint32), dx.view(np.uint32)), K
        assert not ndx[:, K // 32:].any()
    many = (rng.standard_normal((64, 2048)) * np.exp(rng.uniform(-14, 12, (64, 64, 1)))
            .repeat(32, axis=2).reshape(64, 2048)).astype(np.float32)
    q, dx = KQ.quantize_q8_0(many)
    nq, ndx = KQ.quantize_q80(many)
    assert np.array_equal(nq, q) and np.array_equal(ndx.view(np.uint32), dx.view(np.uint32))


def test_quantize_q80_rows_is_its_scalar_form():
    """quantize_q80_rows (the int max over x's bits, no branch a value) == quantize_q80_rows_ref
    (the scalar loop) byte for byte: ties of |x| of both signs, a block of -0, of zeros, of
    denormals (1 / d past float32: idd inf, 0 * inf a NaN product), an inf, a NaN, x * idd on
    .5 ties; one call and quantize_q80's two halves (rows from halves.PAIR_FROM)."""
    from kernels import halves
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(80)
    M, K = max(halves.PAIR_FROM, 64) + 5, 352
    x = (rng.standard_normal((M, K)) * np.exp(rng.uniform(-20, 12, (M, K // 32, 1)))
         .repeat(32, axis=2).reshape(M, K)).astype(np.float32)
    x[0, :32] = -0.0
    x[0, 32:64] = 0.0
    x[1, :32] = np.float32(1e-45) * rng.integers(-3, 4, 32).astype(np.float32)    # denormals
    x[1, 32:64] = np.float32(2e-38) * rng.standard_normal(32).astype(np.float32)
    x[1, 40] = 0.0                                               # 0 * inf
    x[2, 5], x[2, 6] = 3.0, -3.0                                 # a tie of |x|, both signs
    x[2, :5] = 0.5
    x[3, 40] = np.inf
    x[3, 70] = -np.inf
    x[3, 100] = np.nan
    x[4, :32] = (np.arange(32) - 16).astype(np.float32) * np.float32(127 / 16) / 2   # .5 ties
    Kp = (K + 63) // 64 * 64
    want_q, want_dx = np.empty((M, Kp), np.int8), np.empty((M, Kp // 32), np.float32)
    KQ.quantize_q80_rows_ref(x, want_q, want_dx)
    got_q, got_dx = np.empty((M, Kp), np.int8), np.empty((M, Kp // 32), np.float32)
    KQ.quantize_q80_rows(x, got_q, got_dx)
    assert np.array_equal(got_q, want_q)
    assert np.array_equal(got_dx.view(np.uint32), want_dx.view(np.uint32))
    hq, hdx = KQ.quantize_q80(x)                                  # two halves where wanted
    assert np.array_equal(hq, want_q) and np.array_equal(hdx.view(np.uint32), want_dx.view(np.uint32))
    q, dx = KQ.quantize_q8_0(x[4:])                               # the numpy definition's rows
    assert np.array_equal(hq[4:, :K], q)


def _round32(f):
    """The float32 nearest the Fraction f (ties to even), by exact comparisons."""
    from fractions import Fraction
    c = np.float32(float(f))
    best = None
    for v in (np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))):
        dist = abs(Fraction(float(v)) - f)
        key = (dist, int(np.array(v).view(np.uint32)) & 1)
        if best is None or key < best[0]:
            best = (key, v)
    return best[1]


def test_fma32_rounds_once():
    """kquant_cpu.fma32 (the definition's fused multiply-add, in numpy) == a * b + c computed
    exactly and rounded once to float32, on random triples and on products that land on a
    float32 midpoint with a tiny c (where a float64 sum rounded twice would be wrong)."""
    from fractions import Fraction

    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(14)
    a = (rng.standard_normal(3000) * np.exp(rng.uniform(-20, 20, 3000))).astype(np.float32)
    b = rng.integers(-65024, 65025, 3000).astype(np.float32)              # T's range
    c = (rng.standard_normal(3000) * np.exp(rng.uniform(-30, 30, 3000))).astype(np.float32)
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: a float32 midpoint (the spacing above 1 is 2^-23)
    a = np.append(a, np.float32(1 + 2.0 ** -12) * np.ones(4, np.float32))
    b = np.append(b, np.float32(1 + 2.0 ** -12) * np.ones(4, np.float32))
    c = np.append(c, np.array([2.0 ** -60, -2.0 ** -60, 0.0, 2.0 ** -48], np.float32))
    got = KQ.fma32(a, b, c)
    naive = (a.astype(np.float64) * b + c).astype(np.float32)          # rounded twice
    assert (naive[-4:-2] != got[-4:-2]).any()                          # the midpoints tell
    for i in range(a.shape[0]):
        want = _round32(Fraction(float(a[i])) * Fraction(float(b[i])) + Fraction(float(c[i])))
        assert np.array([got[i]]).view(np.uint32)[0] == np.array([want]).view(np.uint32)[0], i


def _forms():
    from kernels import kquant_cpu as KQ
    return (False, True) if KQ.VNNI else (False,)


@pytest.mark.parametrize("vnni", _forms(), ids=lambda v: "vnni" if v else "portable")
def test_vector_forms_equal_the_definition_at_every_round_shape(vnni):
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(2)
    for K, N, sizes in ((2048, 51, (1, 2, 3, 4, 5, 6, 7, 8, 9, 70, 71)), (128, 13, (512,))):
        data = q8_rows(rng, N, K)
        x = rng.standard_normal((max(sizes), K)).astype(np.float32)
        q, dx = KQ.quantize_q8_0(x)
        want = KQ.q80_definition(q, dx, data)
        for M in sizes:
            got = KQ.q80_matmul(x[:M], data, vnni=vnni)
            assert np.array_equal(got.view(np.uint32), want[:M].view(np.uint32)), (K, M)
        for i in (0, 3, min(sizes[-1], 70) - 1):                 # a row alone == in its round
            one = KQ.q80_matmul(x[i:i + 1], data, vnni=vnni)
            assert np.array_equal(one.view(np.uint32), want[i:i + 1].view(np.uint32)), (K, i)


@pytest.mark.parametrize("vnni", _forms(), ids=lambda v: "vnni" if v else "portable")
def test_the_crew_gives_the_same_bytes(vnni):
    """Past blocks_vec.CREW_SERIAL_MACS the rows go to a crew (numba's threads); 2 x rows."""
    import numba

    from kernels import blocks_vec
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(3)
    K, N = 2048, 10 * blocks_vec.CREW_CHUNKS * blocks_vec.ROWS + 5
    assert 2 * N * K > blocks_vec.CREW_SERIAL_MACS
    data = q8_rows(rng, N, K)
    x = rng.standard_normal((2, K)).astype(np.float32)
    q, dx = KQ.quantize_q8_0(x)
    want = KQ.q80_definition(q, dx, data)
    old = numba.get_num_threads()
    try:
        for n in sorted({1, min(2, numba.config.NUMBA_NUM_THREADS)}):
            numba.set_num_threads(n)
            got = KQ.q80_matmul(x, data, vnni=vnni)
            assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), n
    finally:
        numba.set_num_threads(old)


@pytest.mark.parametrize("vnni", _forms(), ids=lambda v: "vnni" if v else "portable")
def test_one_row_solo_or_on_the_crew_gives_the_same_bytes(vnni, monkeypatch):
    """A product of one x row on the caller alone (kquant_cpu.SOLO_ROWS and SOLO_BYTES let it)
    or on the crew (SOLO_ROWS 0, or SOLO_BYTES below its weights): the same bytes, the
    definition's."""
    from kernels import blocks_vec
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(4)
    K, N = 2048, 20 * blocks_vec.CREW_CHUNKS * blocks_vec.ROWS + 5
    assert N * K > blocks_vec.CREW_SERIAL_MACS and KQ.SOLO_ROWS >= 1
    data = q8_rows(rng, N, K)
    x = rng.standard_normal((1, K)).astype(np.float32)
    q, dx = KQ.quantize_q8_0(x)
    want = KQ.q80_definition(q, dx, data)
    for solo in (1, 0):
        monkeypatch.setattr(KQ, "SOLO_ROWS", solo)
        monkeypatch.setattr(KQ, "SOLO_BYTES", data.nbytes if solo else 0)
        got = KQ.q80_matmul(x, data, vnni=vnni)
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), solo


def test_within_float32_rounding_of_the_quantized_product():
    from kernels import kquant_cpu as KQ
    from kernels.blocks import Blocks
    rng = np.random.default_rng(4)
    K, N = 2048, 40
    data = q8_rows(rng, N, K)
    w = Blocks("Q8_0", N, K, data)
    x = rng.standard_normal((3, K)).astype(np.float32)
    got = KQ.q80_matmul(x, data)
    ref = KQ.q80_ref(x, w)
    scale = np.abs(ref).max()
    assert np.abs(got - ref).max() <= 1e-5 * scale, np.abs(got - ref).max() / scale
    # against float32 x: the activations' rounding, |err| <= sum_b dx_b / 2 * sum |w_b|
    _, dx = KQ.quantize_q8_0(x)
    wf = w.dequantize().astype(np.float64)
    exact = x.astype(np.float64) @ wf.T
    bound = (dx.astype(np.float64)[:, None, :] / 2 * np.abs(wf).reshape(N, -1, 32).sum(2)[None]).sum(2)
    assert (np.abs(got - exact) <= bound * (1 + 1e-4) + 1e-6 * scale).all()
    with pytest.raises(ValueError, match="K = 96"):
        KQ.q80_matmul(np.zeros((1, 96), np.float32), q8_rows(rng, 2, 64))


@pytest.mark.parametrize("vnni", _forms(), ids=lambda v: "vnni" if v else "portable")
def test_an_odd_number_of_blocks_is_padded_with_a_zero_one(vnni):
    """K = 96 (3 blocks): the product is the definition's on x and the rows each padded with a
    zero block, at every round shape; within float32 rounding of the quantized product."""
    from kernels import kquant_cpu as KQ
    from kernels.blocks import Blocks
    rng = np.random.default_rng(12)
    K, N = 96, 21
    data = q8_rows(rng, N, K)
    x = rng.standard_normal((9, K)).astype(np.float32)
    q, dx = KQ.quantize_q80(x)
    pad = np.zeros((N, 4 * 34), np.uint8)
    pad[:, :3 * 34] = data
    want = KQ.q80_definition(q, dx, pad)
    for M in range(1, 10):
        got = KQ.q80_matmul(x[:M], data, vnni=vnni)
        assert np.array_equal(got.view(np.uint32), want[:M].view(np.uint32)), M
    ref = KQ.q80_ref(x, Blocks("Q8_0", N, K, data))
    assert np.abs(want - ref).max() <= 1e-5 * np.abs(ref).max()


@pytest.mark.parametrize("K", (2048, 96))
def test_the_experts_grouped_path_equals_each_row_alone(K):
    """kernels/moe_cpu.grouped_matmul / gate_up with q80 (one crew round over every group, x
    quantized once) == each row alone through qmatmul.cpu(q80=True) against its expert."""
    from kernels import moe_cpu
    from kernels.blocks import Blocks, ExpertStack
    rng = np.random.default_rng(13)
    E, N = 6, 40
    gate = ExpertStack([Blocks("Q8_0", N, K, q8_rows(rng, N, K)) for _ in range(E)])
    up = ExpertStack([Blocks("Q8_0", N, K, q8_rows(rng, N, K)) for _ in range(E)])
    experts = np.array([0, 2, 3, 5], np.int64)
    offs = np.array([0, 5, 6, 19, 21], np.int64)
    x = rng.standard_normal((21, K)).astype(np.float32)
    got = moe_cpu.grouped_matmul(x, gate, experts, offs, q8=True, q80=True)
    gu = moe_cpu.gate_up(x, gate, up, experts, offs, q8=True, q80=True)
    for g, e in enumerate(experts):
        for i in range(offs[g], offs[g + 1]):
            one = qmatmul.cpu(x[i:i + 1], gate[e], q80=True)
            assert np.array_equal(got[i:i + 1].view(np.uint32), one.view(np.uint32)), (g, i)
            assert np.array_equal(gu[i:i + 1, :N].view(np.uint32), one.view(np.uint32)), (g, i)
            two = qmatmul.cpu(x[i:i + 1], up[e], q80=True)
            assert np.array_equal(gu[i:i + 1, N:].view(np.uint32), two.view(np.uint32)), (g, i)
    # the float32 form is another arithmetic: the switch changes the bytes
    flt = moe_cpu.grouped_matmul(x, gate, experts, offs, q8=True, q80=False)
    assert not np.array_equal(flt, got)


def test_the_switch_is_the_familys():
    """The MoE / MLA / hybrid families multiply every Q8_0 matrix against q8_0 x (ops.q80, set
    from the family's Q8_0_X8: the head, the attention and FFN matrices, the experts); the llama
    family and the families not listed keep float32 x."""
    from kernels import kquant_cpu as KQ
    from kernels.blocks import Blocks
    from server.engine.engine import Engine
    from server.engine.weights import load
    from server.families import family
    from tools.refs import moe_checkpoint as mc
    ld = load(str(mc.build_once("qwen3moe-tiny").gguf["Q8_0"]), progress=False)
    m = Engine(ld.spec, ld.tensors.__getitem__).model
    head, L = m.w.lm_head, m.w.layers[0]
    assert m.ops.q80 and isinstance(head, Blocks) and head.kind == "Q8_0"
    x = np.random.default_rng(5).standard_normal((2, head.cols)).astype(np.float32)
    assert np.array_equal(m.ops.linear(x, head), KQ.q80_matmul(x, head.data))
    assert isinstance(L.wqkv, Blocks) and L.wqkv.kind == "Q8_0"
    assert np.array_equal(m.ops.linear(x, L.wqkv), KQ.q80_matmul(x, L.wqkv.data))
    # the MLA family serves on the "numpy" backend (no wqkv); it takes q8_0 x too
    ld = load(str(mc.build_once("glm47flash-tiny").gguf["Q8_0"]), progress=False)
    m = Engine(ld.spec, ld.tensors.__getitem__).model
    assert m.ops.name == "numpy" and m.ops.q80
    for name in ("qwen3moe", "glm4moe", "deepseek2", "qwen3next", "glm5next"):
        assert family(name).Q8_0_X8 is True, name
    for name in ("llama", "qwen3", "gptoss", "kimilinear"):
        assert not getattr(family(name), "Q8_0_X8", False), name


def test_tf_q8_0_x_float_keeps_float_x_for_every_family(monkeypatch):
    """TF_Q8_0_X=float: a family that opts in multiplies its Q8_0 matrices against float32 x
    (blocks_cpu's kernels, not Q8_0_DEF); another value is refused by name."""
    from kernels.blocks_cpu import matmul
    from server.config import ConfigError
    from server.engine.engine import Engine
    from server.engine.weights import load
    from tools.refs import moe_checkpoint as mc
    ld = load(str(mc.build_once("qwen3moe-tiny").gguf["Q8_0"]), progress=False)
    monkeypatch.setenv("TF_Q8_0_X", "float")
    m = Engine(ld.spec, ld.tensors.__getitem__).model
    assert not getattr(m.ops, "q80", False)
    head = m.w.lm_head
    x = np.random.default_rng(5).standard_normal((2, head.cols)).astype(np.float32)
    assert np.array_equal(m.ops.linear(x, head), matmul(x, head.kind, head.data))
    monkeypatch.setenv("TF_Q8_0_X", "int8")
    with pytest.raises(ConfigError, match="TF_Q8_0_X"):
        Engine(ld.spec, ld.tensors.__getitem__)
