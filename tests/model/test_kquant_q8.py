"""kernels/kquant_cpu.py: the K-quants (Q4_K, Q6_K) against int8-quantized activations.

- x's quantization is ggml's quantize_row_q8_K_ref (transcribed here from ggml-quants.c:
  the first value of the largest |x| sets iscale = -127 / max, q = min(127, nearest_int),
  d = 1 / iscale, bsums over 16s), bit for bit;
- the vector forms (VNNI where the host has it, the portable IR everywhere) give the scalar
  reference's bytes (kquant_cpu.dot_ref, the definition in plain loops) at every tile shape and
  pass (1..9 x rows, 70: several passes of X_BYTES), through the crew and on the caller alone;
- within float32 rounding of the float64 value of x's quantized copy times the weights
  (kquant_cpu.ref), and within the activations' rounding bound of the float definition
  (sum over blocks of dx_b / 2 * sum |w|);
- dot_ref's fma (fma32_scalar, plain float64 arithmetic) is one rounding: == Q8_0_DEF's numpy
  fma32 and the exact value's nearest float32, also half an ulp from a tie;
- batch invariance: a row alone == in its batch; grouped experts == each expert's product;
  the "cpu" ops backend multiplies K-quants this way (ops.linear, MixedBlocks parts, ops.moe
  grouped == its loop), the "numpy" backend keeps the float32 kernels.
Random blocks: every byte uniform (all 6-bit scales and mins, all quants), f16 scales finite."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import qmatmul

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)

F16_AT = {"Q4_K": (0, 2), "Q6_K": (208,)}
NBYTES = {"Q4_K": 144, "Q6_K": 210}


def random_rows(rng, kind, rows, cols):
    data = rng.integers(0, 256, (rows, cols // 256, NBYTES[kind]), dtype=np.uint8)
    for o in F16_AT[kind]:
        data[:, :, o:o + 2] = rng.uniform(1e-4, 1e-2, (rows, cols // 256, 1)).astype(np.float16).view(np.uint8)
    return np.ascontiguousarray(data.reshape(rows, -1))


def ggml_q8_k(x):
    """ggml-quants.c quantize_row_q8_K_ref, one row, transcribed: (q int8, d, bsums)."""
    nb = x.shape[0] // 256
    q = np.zeros(x.shape[0], np.int8)
    d = np.zeros(nb, np.float32)
    bs = np.zeros((nb, 16), np.int32)
    for i in range(nb):
        xb = x[256 * i:256 * i + 256]
        amax, mx = np.float32(0), np.float32(0)
        for v in xb:                         # the first value of the largest |x|
            if abs(v) > amax:
                amax, mx = abs(v), v
        if amax == 0:
            continue
        iscale = np.float32(np.float32(-127.0) / mx)
        for j in range(256):
            q[256 * i + j] = min(127, int(np.rint(np.float32(iscale * xb[j]))))   # nearest_int: half to even
        bs[i] = q[256 * i:256 * i + 256].astype(np.int32).reshape(16, 16).sum(1)
        d[i] = np.float32(np.float32(1.0) / iscale)
    return q, d, bs


def test_quantization_is_ggmls_q8_k():
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 768)).astype(np.float32)
    x[1, :256] = 0.0                                   # an all-zero block
    x[2, 300] = -50.0                                  # a block whose extreme is negative
    x[3, 512:768] = np.float32(0.5) * np.arange(256, dtype=np.float32) - np.float32(64.0)
    x[3, 700] = -127.0            # the extreme: iscale = 1 exactly, so the halves are ties of rint
    q, dx, gs = KQ.quantize(x)
    for i in range(4):
        wq, wd, wb = ggml_q8_k(x[i])
        assert q[i].tobytes() == wq.tobytes(), i
        assert dx[i].tobytes() == wd.tobytes(), i
        assert gs[i].tobytes() == wb.tobytes(), i
    assert (q[1, :256] == 0).all() and dx[1, 0] == 0
    assert q[2, 300] == -127                           # (-127 / -50) * -50: the extreme is -127
    assert q[3, 512 + 1] == -64 and q[3, 512 + 3] == -62 and q[3, 512 + 129] == 0   # -63.5, -62.5, 0.5: to even
    y = x.copy()                                       # |x| ties: the first one sets the sign
    y[0, 256:512] = 0.25
    y[0, 260], y[0, 270] = -3.0, 3.0
    y[0, 512:768] = -0.0                               # a block of -0: dx 0, q 0
    q, dx, gs = KQ.quantize(y[:1])
    wq, wd, wb = ggml_q8_k(y[0])
    assert q[0].tobytes() == wq.tobytes() and dx[0].tobytes() == wd.tobytes() and gs[0].tobytes() == wb.tobytes()
    assert q[0, 260] == -127 and q[0, 270] == 127 and dx[0, 1] > 0 and dx[0, 2] == 0
    x[0, 5] = np.nan
    _, dx, _ = KQ.quantize(x[:1])
    assert np.isnan(dx[0, 0]) and not np.isnan(dx[0, 1])


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K"])
def test_vector_forms_give_the_reference_bytes(kind):
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(len(kind))
    forms = [False] + ([True] if KQ.VNNI else [])
    for rows, cols in ((37, 512), (16, 2048)):
        data = random_rows(rng, kind, rows, cols)
        for m in (1, 2, 3, 4, 5, 7, 8, 9, 70):
            x = rng.standard_normal((m, cols)).astype(np.float32)
            want = KQ.matmul_reference(x, kind, data)
            assert np.isfinite(want).all() and np.abs(want).max() > 0
            for vnni in forms:
                got = KQ.matmul(x, kind, data, vnni=vnni)
                assert got.tobytes() == want.tobytes(), (kind, rows, cols, m, vnni)


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K"])
def test_is_its_definition_and_the_activations_rounding_bounds_it(kind):
    from kernels import kquant_cpu as KQ
    from kernels.blocks import Blocks
    rng = np.random.default_rng(11)
    K = 1024
    w = Blocks(kind, 40, K, random_rows(rng, kind, 40, K))
    x = rng.standard_normal((6, K)).astype(np.float32)
    got = KQ.matmul(x, kind, w.data)
    exact_q = KQ.ref(x, w)                    # float64 of x's quantized copy times w
    assert np.abs(got - exact_q).max() <= 1e-6 * np.sqrt(K) * np.abs(exact_q).max()
    f = x.astype(np.float64) @ w.dequantize().astype(np.float64).T
    _, dx, _ = KQ.quantize(x)
    aw = np.abs(w.dequantize().astype(np.float64)).reshape(40, K // 256, 256).sum(2)     # [N, nb]
    bound = (np.abs(dx.astype(np.float64)) / 2) @ aw.T           # [M, N] (dx carries the sign of the extreme)
    assert (np.abs(got - f) <= bound + 1e-6 * np.sqrt(K) * np.abs(f).max()).all()
    assert np.abs(got - f).max() > 0          # it is not the float product


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K"])
def test_rows_alone_equal_rows_in_a_batch_and_grouped_equals_each_expert(kind):
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(5)
    K, N, E = 512, 70, 5
    stack = np.stack([random_rows(rng, kind, N, K) for _ in range(E)])
    x = rng.standard_normal((13, K)).astype(np.float32)
    experts = np.array([0, 2, 4], np.int64)
    offs = np.array([0, 1, 9, 13], np.int64)
    got = KQ.grouped_matmul(x, kind, stack, experts, offs)
    for g, e in enumerate(experts):
        a, b = offs[g], offs[g + 1]
        assert got[a:b].tobytes() == KQ.matmul(x[a:b], kind, stack[e]).tobytes(), (kind, g)
        for i in range(a, b):
            assert KQ.matmul(x[i:i + 1], kind, stack[e]).tobytes() == got[i:i + 1].tobytes(), (kind, i)


def test_the_cpu_backend_multiplies_k_quants_against_int8_x_and_numpy_keeps_float():
    from kernels import blocks_cpu
    from kernels import kquant_cpu as KQ
    from kernels.blocks import Blocks, ExpertStack, MixedBlocks
    from kernels.moe import Routing
    from kernels.ops import backend
    cpu, npy = backend("cpu"), backend("numpy")
    rng = np.random.default_rng(9)
    K = 512
    q4 = Blocks("Q4_K", 48, K, random_rows(rng, "Q4_K", 48, K))
    q6 = Blocks("Q6_K", 16, K, random_rows(rng, "Q6_K", 16, K))
    x = rng.standard_normal((5, K)).astype(np.float32)
    assert cpu.linear(x, q4).tobytes() == KQ.matmul(x, "Q4_K", q4.data).tobytes()
    assert npy.linear(x, q4).tobytes() == blocks_cpu.matmul(x, "Q4_K", q4.data).tobytes()
    assert cpu.linear(x, q4).tobytes() != npy.linear(x, q4).tobytes()
    mixed = MixedBlocks([q4, q6])
    want = np.concatenate([KQ.matmul(x, "Q4_K", q4.data), KQ.matmul(x, "Q6_K", q6.data)], axis=1)
    assert cpu.linear(x, mixed).tobytes() == want.tobytes()
    # ops.moe: the grouped experts (one crew round) == the loop of one product an expert
    E, ff, d = 8, 256, K
    gu = ExpertStack([Blocks("Q4_K", 2 * ff, d, random_rows(rng, "Q4_K", 2 * ff, d)) for _ in range(E)])
    down = ExpertStack([Blocks("Q6_K", d, ff, random_rows(rng, "Q6_K", d, ff)) for _ in range(E)])
    router = (rng.standard_normal((d, E)) * 0.1).astype(np.float32)     # float weights: [in, out]
    routing = Routing("softmax", 2, True, 1.0, 1, 1)
    xs = (rng.standard_normal((6, d)) * 0.5).astype(np.float32)
    assert cpu._grouped(gu) and cpu._grouped(down)
    grouped = cpu.moe(xs, router, None, gu, down, ff, routing)
    for i in range(6):                                      # a token alone == among the round's
        assert cpu.moe(xs[i:i + 1], router, None, gu, down, ff, routing).tobytes() == grouped[i:i + 1].tobytes()
    cpu._grouped = lambda experts: False                    # the per-expert loop
    loop = cpu.moe(xs, router, None, gu, down, ff, routing)
    assert np.isfinite(grouped).all() and grouped.tobytes() == loop.tobytes()


@pytest.mark.parametrize("kind", ["Q4_K", "Q6_K"])
def test_grouped_tiles_at_every_group_start_give_the_reference_bytes(kind):
    """Groups of 1..17 rows starting anywhere (Q4_K's packed tiles read a C-row tile's dx from
    pack_aux at the group's own tile starts): every row the scalar reference's bytes."""
    from kernels import kquant_cpu as KQ
    from kernels.blocks_cpu import F16
    rng = np.random.default_rng(17)
    K, N, E = 768, 37, 6
    stack = np.stack([random_rows(rng, kind, N, K) for _ in range(E)])
    sizes = np.array([8, 9, 3, 17, 1, 16, 7, 11, 14, 10, 12, 13, 2, 6, 5, 4])   # every tail
    offs = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    experts = np.array([0, 1, 2, 3, 4, 5, 1, 3, 2, 0, 5, 4, 1, 3, 2, 0], np.int64)
    x = rng.standard_normal((int(offs[-1]), K)).astype(np.float32)
    x[5, 256:512] = 0.0                                 # a zero block: dx 0
    q, dx, gs = KQ.quantize(x)
    want = np.empty((x.shape[0], N), np.float32)
    for g, e in enumerate(experts):
        a, b = offs[g], offs[g + 1]
        KQ.matmul_ref_rows(kind == "Q6_K", q[a:b], dx[a:b], gs[a:b], stack[e], F16, want[a:b])
    for vnni in [False] + ([True] if KQ.VNNI else []):
        got = np.empty_like(want)
        KQ.grouped_q(q, dx, gs, kind, stack, experts, offs, got, vnni)
        assert got.tobytes() == want.tobytes(), (kind, vnni)


def test_pack_aux_is_a_layout_of_gs_and_dx():
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(2)
    x = rng.standard_normal((21, 512)).astype(np.float32) * 30
    q, dx, gs = KQ.quantize(x)
    offs = np.array([0, 3, 12, 21], np.int64)
    for q6 in (False, True):
        aux = np.empty((21, 2, 32), np.int32)
        KQ.pack_aux(gs, dx, offs, 8, q6, aux)
        if q6:      # gs[L] as the int16 low half of lane L, 0 above
            halves = aux[:, :, :16].view(np.int16).reshape(21, 2, 16, 2)
            assert halves[..., 0].astype(np.int32).tobytes() == gs.tobytes() and (halves[..., 1] == 0).all()
        else:       # lane L < 8: float32(gs[2L] + gs[2L + 1]) (exact); lanes 8..15 zero
            sums = (gs[:, :, 0::2] + gs[:, :, 1::2]).astype(np.float32)
            assert aux[:, :, :8].view(np.float32).tobytes() == sums.tobytes()
            assert (aux[:, :, 8:16] == 0).all()
        # the tile starts of groups of 3, 9 and 9 rows: (row, rows) = a 3-row tile, 8 then 1
        for i, n in ((0, 3), (3, 8), (11, 1), (12, 8), (20, 1)):
            for c in range(8):
                want = dx[i + c].tobytes() if c < n else bytes(8)
                assert aux[i, :, 16 + c].view(np.float32).tobytes() == want, (i, c)
                assert aux[i, :, 24 + c].view(np.float32).tobytes() == want, (i, c)


def test_dot_refs_fma_is_one_rounding():
    """fma32_scalar (dot_ref's fma, no fma instruction) == the numpy fma32 (Q8_0_DEF's) on
    random triples, on products that land half an ulp from a float32 tie (where a float64 sum
    rounded twice would differ) and on exact cancellations; and not the unfused chain there."""
    from kernels import kquant_cpu as KQ
    rng = np.random.default_rng(11)
    n = 20000
    a = rng.standard_normal(n).astype(np.float32)
    b = (rng.integers(-2 ** 23, 2 ** 23, n)).astype(np.float32)     # float32(T): integers
    c = (rng.standard_normal(n) * 1e6).astype(np.float32)
    # ties: c + a*b with a*b exactly c's half ulp plus a tiny tail (the tie broken by the tail)
    k = n // 4
    ulp = np.spacing(np.abs(c[:k])).astype(np.float64)
    a[:k] = np.float32(1.0) + np.float32(2.0 ** -23)
    b[:k] = (ulp / 2 / (1.0 + 2.0 ** -23)).astype(np.float32)
    c[k:2 * k] = -(a[k:2 * k].astype(np.float64) * b[k:2 * k]).astype(np.float32)   # near cancellation
    want = KQ.fma32(a, b, c)
    got = np.array([KQ.fma32_scalar(a[j], b[j], c[j]) for j in range(n)], np.float32)
    assert got.tobytes() == want.tobytes()
    from fractions import Fraction

    def rounded_once(j):                    # the exact value's nearest float32, ties to even
        v = Fraction(float(a[j])) * Fraction(float(b[j])) + Fraction(float(c[j]))
        f = np.float32(float(v))
        best = None
        for g in (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))):
            key = (abs(Fraction(float(g)) - v), int(np.array(g).view(np.int32)) & 1)
            if best is None or key < best[0]:
                best = (key, g)
        return best[1]
    picks = list(range(0, 2 * k, 7)) + list(range(2 * k, n, 97))
    assert all(want[j].tobytes() == rounded_once(j).tobytes() for j in picks)
    twice = (a.astype(np.float64) * b + c).astype(np.float32)      # a float64 sum rounded twice
    assert (twice[:k].view(np.int32) != want[:k].view(np.int32)).any()   # the ties are met
    unfused = (a * b).astype(np.float32) + c
    assert (unfused.view(np.int32) != want.view(np.int32)).any()   # the unfused chain differs somewhere
