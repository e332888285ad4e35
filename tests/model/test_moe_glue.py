"""The MoE op's glue in numba (kernels/moe_cpu.py: the F32 router's product, route + grouping,
combine) against the definitions it stands for: kernels/blocks_cpu.matmul's bytes for the
router, kernels/moe.route / groups / combine for the rest (ids, groups and combine byte for
byte; weights within one float32 ulp, exp's last float64 bit being libm's here and numpy's
there), every router kind, a row's result never depending on the round's other rows."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")

from kernels import blocks_cpu, moe_cpu  # noqa: E402
from kernels.blocks import Blocks  # noqa: E402
from kernels.moe import Routing, combine, groups, route  # noqa: E402

ROUTINGS = [
    Routing("softmax", 8, True, 1.0),
    Routing("softmax", 4, False, 1.0),
    Routing("sigmoid", 8, True, 2.5),
    Routing("sigmoid", 4, True, 1.0, n_group=8, topk_group=4),
    Routing("sigmoid", 2, False, 1.0),
    Routing("topk_softmax", 4, False, 1.0),
]


def _f32(rng, n, k):
    w = rng.standard_normal((n, k)).astype(np.float32)
    return Blocks("F32", n, k, w.view(np.uint8).reshape(n, 4 * k))


@pytest.mark.parametrize("n,k", [(256, 2048), (7, 64), (128, 96)])
def test_router_product_is_blocks_cpu_bytes_at_every_batch(n, k):
    rng = np.random.default_rng(n + k)
    w = _f32(rng, n, k)
    x = rng.standard_normal((moe_cpu.ROUTER_ROWS, k)).astype(np.float32)
    full = blocks_cpu.matmul(x, "F32", w.data)
    for T in range(1, moe_cpu.ROUTER_ROWS + 1):
        assert moe_cpu.router_fits(w, x[:T])
        got = moe_cpu.router_logits(x[:T], w)
        assert got.tobytes() == blocks_cpu.matmul(x[:T], "F32", w.data).tobytes()
        assert got.tobytes() == full[:T].tobytes()            # a row alone == in the round
    for serial in (0, 1 << 30):                                # the crew round and the caller alone
        old = moe_cpu.ROUTER_SERIAL_BYTES
        moe_cpu.ROUTER_SERIAL_BYTES = serial
        try:
            assert moe_cpu.router_logits(x[:1], w).tobytes() == full[:1].tobytes()
        finally:
            moe_cpu.ROUTER_SERIAL_BYTES = old
    if k % 32:
        assert not moe_cpu.router_fits(w, np.zeros((moe_cpu.ROUTER_ROWS + 1, k), np.float32))


@pytest.mark.parametrize("n,k", [(128, 2048), (7, 64), (130, 96), (3, 4096), (9, 32)])
def test_router_prompt_rounds_are_blocks_cpu_bytes(n, k):
    """A prompt's round (x-row pieces, vec_ir.dots32's tiles of x rows by W rows and every
    tail of both): blocks_cpu.matmul's bytes at every row count past ROUTER_ROWS, on the crew
    and on one thread, a row's bytes those of the row alone; zeros, a -0 and an inf too."""
    import numba
    rng = np.random.default_rng(n * 7 + k)
    w = _f32(rng, n, k)
    x = rng.standard_normal((moe_cpu.ROUTER_ROWS + 40, k)).astype(np.float32)
    x[3] = 0.0
    x[4, 5] = -0.0
    x[5, 1] = np.inf
    full = blocks_cpu.matmul(x, "F32", w.data)
    for T in list(range(moe_cpu.ROUTER_ROWS + 1, x.shape[0] + 1, 3)) + [x.shape[0]]:
        assert moe_cpu.router_fits(w, x[:T])
        got = moe_cpu.router_logits(x[:T], w)
        assert got.tobytes() == full[:T].tobytes()
    old = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        assert moe_cpu.router_logits(x, w).tobytes() == full.tobytes()
    finally:
        numba.set_num_threads(old)
    one = moe_cpu.router_logits(x[7:8], w)                    # the decode form, one row
    assert one.tobytes() == full[7:8].tobytes()


def _ulps(a, b):
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


@pytest.mark.parametrize("routing", ROUTINGS, ids=lambda r: f"{r.kind}-{r.k}-{r.n_group}")
@pytest.mark.parametrize("E", [64, 256])
def test_route_group_is_the_definition(routing, E):
    rng = np.random.default_rng(E + routing.k)
    bias = (rng.standard_normal(E) * 0.1).astype(np.float32)
    for T in (1, 2, 3, 9):
        logits = (rng.standard_normal((T, E)) * 2).astype(np.float32)
        if T == 9:
            logits[1, :] = logits[1, 0]                          # all tied: the lower ids
            logits[2, 5:9] = logits[2].max() + 1                 # a tie at the top
        got = moe_cpu.route_group(logits, routing, bias)
        assert got is not None
        ids, w, rows, slots, experts, offs, pos = got
        rid, rw = route(logits, routing, bias)
        assert ids.tolist() == rid.tolist()
        assert w.dtype == np.float32 and _ulps(w, rw).max() <= 1
        g = groups(rid)
        assert experts.tolist() == [e for e, _, _ in g]
        assert rows.tolist() == np.concatenate([r for _, r, _ in g]).tolist()
        assert slots.tolist() == np.concatenate([s for _, _, s in g]).tolist()
        assert offs.tolist() == np.cumsum([0] + [len(r) for _, r, _ in g]).tolist()
        assert (rows[pos] == np.arange(T)[:, None]).all()
        assert (slots[pos] == np.arange(routing.k)[None, :]).all()
        for t in range(T):                                       # a row alone: its own result
            one = moe_cpu.route_group(logits[t:t + 1], routing, bias)
            assert one[0].tolist() == ids[t:t + 1].tolist()
            assert one[1].tobytes() == w[t:t + 1].tobytes()


def test_route_group_leaves_a_non_finite_logit_to_the_definition():
    logits = np.zeros((2, 16), np.float32)
    logits[1, 3] = np.nan
    assert moe_cpu.route_group(logits, Routing("softmax", 2, True, 1.0)) is None
    logits[1, 3] = np.inf
    assert moe_cpu.route_group(logits, Routing("sigmoid", 2, True, 1.0)) is None


@pytest.mark.parametrize("T,k", [(1, 8), (3, 4), (5, 1)])
def test_combine_grouped_is_combine_bytes(T, k):
    rng = np.random.default_rng(T * 10 + k)
    logits = rng.standard_normal((T, 32)).astype(np.float32)
    ids, w, rows, slots, experts, offs, pos = moe_cpu.route_group(logits, Routing("softmax", k, True, 1.0))
    yd = rng.standard_normal((rows.shape[0], 96)).astype(np.float32)
    y = np.zeros((T, k, 96), np.float32)
    y[rows, slots] = yd
    assert moe_cpu.combine_grouped(yd, pos, w).tobytes() == combine(y, w).tobytes()


def _q8_rows(rng, rows, cols):
    data = rng.integers(0, 256, (rows, cols // 32, 34), dtype=np.uint8)
    data[:, :, 0:2] = rng.uniform(1e-3, 1e-2, (rows, cols // 32, 1)).astype(np.float16).view(np.uint8)
    return np.ascontiguousarray(data.reshape(rows, -1))


@pytest.mark.parametrize("adjacent", [True, False])
@pytest.mark.parametrize("K", [2048, 96])
def test_gate_up_halves_is_gate_up_bytes(adjacent, K):
    """x's rows quantized once and gathered, and (up's stack right after gate's) both stacks in
    one crew round: gate_up's bytes on x[rows]; refused to one round when not adjacent or an
    odd number of blocks a row (K 96)."""
    from kernels.blocks import ExpertGateUp
    rng = np.random.default_rng(K + adjacent)
    E, N = 6, 40
    if adjacent:
        buf = np.stack([_q8_rows(rng, N, K) for _ in range(2 * E)])
        gates, ups = buf[:E], buf[E:]
    else:
        gates = np.stack([_q8_rows(rng, N, K) for _ in range(E)])
        ups = np.stack([_q8_rows(rng, N, K) for _ in range(E)])
    gu = ExpertGateUp([Blocks("Q8_0", N, K, gates[e]) for e in range(E)],
                      [Blocks("Q8_0", N, K, ups[e]) for e in range(E)])
    assert (moe_cpu._pair(gu.gate.data, gu.up.data) is not None) == (adjacent and K == 2048)
    x = rng.standard_normal((4, K)).astype(np.float32)
    logits = rng.standard_normal((4, E)).astype(np.float32)
    ids, w, rows, slots, experts, offs, pos = moe_cpu.route_group(logits, Routing("softmax", 3, True, 1.0))
    g, u = moe_cpu.gate_up_halves(x, rows, gu.gate, gu.up, experts, offs, q8=True, q80=True)
    want = moe_cpu.gate_up(x[rows], gu.gate, gu.up, experts, offs, q8=True, q80=True)
    assert g.tobytes() == np.ascontiguousarray(want[:, :N]).tobytes()
    assert u.tobytes() == np.ascontiguousarray(want[:, N:]).tobytes()
    g, u = moe_cpu.gate_up_halves(x, rows, gu.gate, gu.up, experts, offs, q8=True, q80=False)
    want = moe_cpu.gate_up(x[rows], gu.gate, gu.up, experts, offs, q8=True, q80=False)
    assert g.tobytes() == np.ascontiguousarray(want[:, :N]).tobytes()
    assert u.tobytes() == np.ascontiguousarray(want[:, N:]).tobytes()


def test_swiglu_in_one_buffer_is_the_written_formula():
    from kernels import swiglu
    rng = np.random.default_rng(3)
    gu = (rng.standard_normal((9, 2 * 1000)) * 6).astype(np.float32)
    gu[0, :4] = [np.inf, -np.inf, 100.0, -100.0]
    g, u = gu[:, :1000], gu[:, 1000:]
    with np.errstate(over="ignore", invalid="ignore"):
        want = (g / (np.float32(1.0) + np.exp(-g)) * u).astype(np.float32)
        got = swiglu.ref(g, u)
    assert got.dtype == np.float32 and got.tobytes() == want.tobytes()
