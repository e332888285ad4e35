"""Gated DeltaNet (qwen3next): the op against transformers' functions and against its numba
form; one recurrence order (a chunk of n positions == n single positions, byte for byte, at
the op and through the engine, in rounds of every size and interleaved with other streams);
the KV layout's fixed part (counted by the planner, beside the pages, and the snapshot
slots beside the prompt cache's pages); solo == concurrent, paged == window; the guards (a
state's position, a kept prefix without its snapshot refused); the tiny HF
checkpoint held to its transformers references (tests/data/qwen3next/, made by
tools/refs/record_qwen3next.py) under the golden rule."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from server.engine.engine import Engine
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
from server.shapes.spec import UnsupportedModel, shape

from . import recurrent_checks as rc
from .test_moe_engine import PROMPT, engine_of, greedy

NAME = "tiny-qwen3next"
DATA = Path(__file__).resolve().parents[1] / "data" / "qwen3next" / "qwen3next-tiny.json"


def record():
    return rc.record(DATA)


def _case_inputs(params):
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "record_qwen3next", Path(__file__).resolve().parents[2] / "tools/refs/record_qwen3next.py")
    # the recorder imports torch at its top: rebuild its inputs here from the same recipe
    rng = np.random.default_rng(params["seed"])
    n, nk, nv, dk, dv, K = (params[k] for k in ("n", "nk", "nv", "dk", "dv", "K"))
    C = 2 * nk * dk + nv * dv
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    del spec
    return {"mix": f(n, C), "z": f(n, nv * dv), "b": f(n, nv), "a": f(n, nv),
            "conv_w": (f(C, K) * 0.5).astype(np.float32),
            "A_log": np.log(rng.uniform(0.5, 4.0, nv)).astype(np.float32),
            "dt_bias": (1 + 0.3 * f(nv)).astype(np.float32),
            "norm_w": (1 + 0.1 * f(dv)).astype(np.float32)}


def _run(fn, x, params, splits):
    """fn over the case's positions cut at `splits`; -> (out, state, window)."""
    nv, dk, dv, K = params["nv"], params["dk"], params["dv"], params["K"]
    C = x["mix"].shape[1]
    state = np.zeros((nv, dk, dv), np.float32)
    window = np.zeros((K - 1, C), np.float32)
    outs, a = [], 0
    for b in list(splits) + [x["mix"].shape[0]]:
        if b > a:
            outs.append(fn(x["mix"][a:b], x["z"][a:b], x["b"][a:b], x["a"][a:b], x["conv_w"],
                           x["A_log"], x["dt_bias"], x["norm_w"], params["eps"], window, state,
                           params["nk"]))
        a = b
    return np.concatenate(outs), state, window


def test_definition_matches_transformers_and_the_numba_form():
    """kernels/gdn.py (numpy) and kernels/gdn_cpu.py (numba) on the recorded case: within
    float32 rounding of transformers' recurrent gated delta rule (conv, l2norm, gated norm
    around it), and of each other."""
    from kernels import gdn, gdn_cpu
    rec = record()["gdn_case"]
    p = rec["params"]
    x = _case_inputs(p)
    want = np.array(rec["recurrent"]["out"], np.float32).reshape(p["n"], -1)
    want_s = np.array(rec["recurrent"]["state"], np.float32).reshape(p["nv"], p["dk"], p["dv"])
    for fn in (gdn.chunk, gdn_cpu.chunk):
        out, state, window = _run(fn, x, p, [])
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-6)
        np.testing.assert_allclose(state, want_s, rtol=1e-4, atol=2e-6)
        np.testing.assert_array_equal(window, x["mix"][-(p["K"] - 1):])
    a, b = _run(gdn.chunk, x, p, [])[0], _run(gdn_cpu.chunk, x, p, [])[0]
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert not np.array_equal(a, np.zeros_like(a))


@pytest.mark.parametrize("which", ["numpy", "numba"])
def test_one_recurrence_order_at_the_op(which):
    """Every cut of the positions (one call, token by token, chunks of 2..n-1, uneven cuts)
    leaves the same output, state and window bytes."""
    from kernels import gdn, gdn_cpu
    fn = gdn.chunk if which == "numpy" else gdn_cpu.chunk
    p = record()["gdn_case"]["params"]
    x = _case_inputs(p)
    n = p["n"]
    ref = _run(fn, x, p, [])
    cuts = [list(range(1, n))] + [list(range(s, n, s)) for s in range(2, n)] + [[1, 4, 5, 11], [7]]
    for c in cuts:
        got = _run(fn, x, p, c)
        for g, r in zip(got, ref):
            assert g.tobytes() == r.tobytes(), c


def test_the_crew_round_gives_the_callers_bytes(monkeypatch):
    """kernels/gdn_cpu.py's prefill chunk as a crew round of two (the conv by channel spans,
    the norms by positions, the recurrence by v heads) == the same chunk on the caller alone
    == token by token, in output, state and window bytes, from a nonzero state."""
    import numba

    from kernels import gdn, gdn_cpu
    assert numba.get_num_threads() >= 2, "needs two numba threads to run a crew"
    rng = np.random.default_rng(5)
    nk, nv, dk, dv, K, n = 2, 6, 32, 32, 4, 90
    C = 2 * nk * dk + nv * dv
    assert n * nv * dk * dv > gdn_cpu.CREW_SERIAL and C > gdn_cpu.CONV_SPAN
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    mix, z, b, a = f(n, C), f(n, nv * dv), f(n, nv), f(n, nv)
    conv_w, A_log, dt_bias, norm_w = f(C, K) * 0.5, f(nv) * 0.3, f(nv), f(dv)
    state0, window0 = f(nv, dk, dv) * 0.1, f(K - 1, C)

    def run(cuts):
        state, window = state0.copy(), window0.copy()
        outs, lo = [], 0
        for hi in list(cuts) + [n]:
            outs.append(gdn_cpu.chunk(mix[lo:hi], z[lo:hi], b[lo:hi], a[lo:hi], conv_w, A_log,
                                      dt_bias, norm_w, 1e-6, window, state, nk))
            lo = hi
        return np.concatenate(outs).tobytes(), state.tobytes(), window.tobytes()
    gdn_cpu._CREW.clear()
    crew = run([])
    assert gdn_cpu._CREW, "the chunk did not run as a crew round"
    tokens = run(range(1, n))                       # each position alone: the caller's path
    st, wi = state0.copy(), window0.copy()          # the numpy definition, within rounding
    want = gdn.chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, 1e-6, wi, st, nk)
    np.testing.assert_allclose(np.frombuffer(crew[0], np.float32).reshape(want.shape), want,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(np.frombuffer(crew[1], np.float32).reshape(st.shape), st,
                               rtol=1e-4, atol=1e-5)
    assert crew[2] == wi.tobytes()
    monkeypatch.setattr(gdn_cpu, "CREW_SERIAL", 1 << 62)
    alone = run([])
    assert crew == alone == tokens
    assert run([7, 40, 41]) == crew


@pytest.mark.parametrize("rot", [8, 24, 40])
def test_state_columns_by_block_equal_the_scalar_columns(rot):
    """kernels/gdn_cpu.py runs a head's state 32 columns at a time, then 16, then the rest one
    by one (dv 56: one block of each). A state column depends on its own v channel alone, so
    the v columns rotated by `rot` within each head (the conv's channels, the window and the
    state with them) leave the state rotated, byte for byte: each column computed once by a
    block and once by another block or the scalar tail, over every cut of the positions."""
    from kernels import gdn_cpu
    rng = np.random.default_rng(11)
    nk, nv, dk, dv, K, n = 2, 4, 16, 56, 4, 9
    C = 2 * nk * dk + nv * dv
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    mix, z, b, a = f(n, C), f(n, nv * dv), f(n, nv), f(n, nv)
    conv_w, A_log, dt_bias, norm_w = f(C, K) * 0.5, f(nv) * 0.3, f(nv), f(dv)
    state0, window0 = f(nv, dk, dv) * 0.1, f(K - 1, C)
    ch = np.arange(C)                                   # the rotated channel order
    v0 = 2 * nk * dk
    for h in range(nv):
        ch[v0 + h * dv:v0 + (h + 1) * dv] = v0 + h * dv + np.roll(np.arange(dv), -rot)

    def run(mix, conv_w, window, state, cuts):
        lo = 0
        for hi in list(cuts) + [n]:
            gdn_cpu.chunk(mix[lo:hi], z[lo:hi], b[lo:hi], a[lo:hi], conv_w, A_log, dt_bias,
                          norm_w, 1e-6, window, state, nk)
            lo = hi
        return state
    for cuts in ([], range(1, n), [2, 7]):
        want = run(mix, conv_w, window0.copy(), state0.copy(), cuts)
        got = run(np.ascontiguousarray(mix[:, ch]), np.ascontiguousarray(conv_w[ch]),
                  np.ascontiguousarray(window0[:, ch]),
                  np.ascontiguousarray(np.roll(state0, -rot, axis=2)), cuts)
        assert got.tobytes() == np.ascontiguousarray(np.roll(want, -rot, axis=2)).tobytes(), cuts
        assert not np.array_equal(want, state0)


def test_a_decode_step_walks_wide_blocks_with_the_chunks_bytes():
    """One position a call (a decode step) runs a head's state in blocks of 128 columns, then
    32, then 16 (kernels/gdn_cpu._cols_one; dv 176: one of each), a chunk of several
    positions 32 and 16 at a time (_cols16): token by token == one chunk == uneven cuts, in
    output, state and window bytes, from a nonzero state; the numpy definition within
    rounding."""
    from kernels import gdn, gdn_cpu
    rng = np.random.default_rng(13)
    nk, nv, dk, dv, K, n = 1, 2, 24, 176, 4, 6
    C = 2 * nk * dk + nv * dv
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    mix, z, b, a = f(n, C), f(n, nv * dv), f(n, nv), f(n, nv)
    conv_w, A_log, dt_bias, norm_w = f(C, K) * 0.5, f(nv) * 0.3, f(nv), f(dv)
    state0, window0 = f(nv, dk, dv) * 0.1, f(K - 1, C)

    def run(fn, cuts):
        state, window = state0.copy(), window0.copy()
        outs, lo = [], 0
        for hi in list(cuts) + [n]:
            outs.append(fn(mix[lo:hi], z[lo:hi], b[lo:hi], a[lo:hi], conv_w, A_log, dt_bias,
                           norm_w, 1e-6, window, state, nk))
            lo = hi
        return np.concatenate(outs), state, window
    one = run(gdn_cpu.chunk, range(1, n))
    for cuts in ([], [2, 3]):
        got = run(gdn_cpu.chunk, cuts)
        assert all(x.tobytes() == y.tobytes() for x, y in zip(got, one)), cuts
    want = run(gdn.chunk, [])
    for x, y in zip(one, want):
        np.testing.assert_allclose(x, y, rtol=1e-4, atol=1e-5)
    assert not np.array_equal(one[1], state0)


@pytest.fixture(scope="module")
def eng():
    return engine_of(f"dummy:{NAME}")


def test_prefill_rounds_of_every_size_equal(eng):
    """The engine: a prompt of 130 tokens in one round, in rounds of every size 2..128, and
    in uneven rounds ends in the same state bytes and the same last logits; every round's
    last row equals the one-token-a-round run's row at that position."""
    rc.assert_rounds_of_every_size_equal(eng)


def test_a_slot_reused_starts_fresh(eng):
    """A stream slot taken again (poisoned pool: the slot's state NaN until BeginStep zeroes
    it) gives what a fresh store gives."""
    fresh = greedy(eng, [PROMPT])
    eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128, poison=True))
    runs = []
    for _ in range(2):
        eng.apply(BeginStep(0, tuple(range(8))))
        lg = eng.apply(RoundStep((Chunk(0, 0, tuple(PROMPT), True),)))
        runs.append(np.asarray(lg[0]).tobytes())
        eng.apply(EndStep(0))
    assert runs == [fresh[0][0]] * 2


def test_interleaved_with_other_streams(eng):
    """Stream 0's prompt in rounds of 3 beside stream 1 (another prompt, other round
    shapes) == stream 0 alone in one round: the same logits and state bytes."""
    rc.assert_interleaved_equals_alone(eng)


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_solo_equals_concurrent(eng, paged):
    rc.assert_solo_equals_concurrent(eng, paged)


def test_paged_equals_window(eng):
    rc.assert_paged_equals_window(eng)


def test_check_pages(eng):
    rc.assert_check_pages(eng)


def test_fixed_part_in_the_layout_and_the_plan():
    """KV rows on the full layers only; the fixed part (3 linear layers' state [4, 16, 16]
    and conv window [3, 128], float32) counted a stream by the planner, split by heads."""
    from server.planner.layout import layouts
    from server.planner.plan import plan
    spec = shape(NAME)
    fixed1 = 3 * (4 * 16 * 16 + 3 * (2 * 2 * 16 + 4 * 16)) * 4
    for tp in (1, 2):
        engines = [engine_of(f"dummy:{NAME}", tp=tp, rank=r) for r in range(tp)]
        Ls = layouts(spec, tp, 4, 16)
        for e, L in zip(engines, Ls):
            assert e.kv_spec.n_layers == 1 and e.kv_spec.n_fixed_layers == 3
            assert e.bytes_per_token == 1 * 2 * e.shard.n_kv * 16 * 4 == L.bytes_per_token
            assert e.kv_spec.fixed_bytes == fixed1 // tp == L.kv_spec.fixed_bytes
        base = replace_fixed(Ls[0])
        L0 = layouts(spec, 1, 4, 16)[0]
        assert Ls[0].fixed_bytes(128, True) - base.fixed_bytes(128, True) == fixed1 // tp
    e = engine_of(f"dummy:{NAME}")
    e.apply(PoolStep(True, 8, 16, (e.page_bytes(16),), 3, 128))
    assert e.kv.nbytes == 8 * e.page_bytes(16) + 3 * fixed1
    p = plan(layouts(spec, 1, 4, 16), [64 * 2**20], 128, prompt_cache_bytes=2**20)
    # the prompt cache: half in snapshot slots of one stream's fixed part, half in pages
    assert (p.snap_slots, p.rank.snap_bytes) == (2**19 // fixed1, fixed1), p.as_dict()
    assert p.cache_pages == (2**20 - p.snap_slots * fixed1) // L0.page_bytes
    assert p.rank.prompt_cache_bytes == p.cache_pages * L0.page_bytes + p.snap_slots * fixed1
    assert p.pool_step().snaps == p.snap_slots
    assert "MiB fixed each stream" in p.kv_rows
    # a room for the floor's pages but not the fixed part too is refused with the numbers
    from server.planner.plan import NoStream
    L = layouts(spec, 1, 4, 16)[0]
    room = L.fixed_bytes(128, True) - fixed1 + 9 * L.page_bytes
    with pytest.raises(NoStream):
        plan([L], [room], 128)


def replace_fixed(L):
    from dataclasses import replace
    return replace(L, kv=L.kv_spec.with_fixed(0, ()))


def test_guards(eng):
    """A chunk that does not start where its stream's state stands, and a stream begun on a
    kept prefix without its snapshot restored, are refused by name."""
    rc.assert_guards(eng)


def test_gpu_refused_by_name():
    """(GGUF qwen3next is read: tests/model/test_qwen3next_gguf.py.)"""
    from server.engine.build import open_model
    with pytest.raises(UnsupportedModel, match="qwen3next.*CPU only"):
        open_model(f"dummy:{NAME}", device="cuda", progress=False)


def test_tp3_refused_by_name():
    with pytest.raises(ValueError, match="linear-attention key heads"):
        engine_of(f"dummy:{NAME}", tp=3, rank=0)


def test_hf_config_refusals():
    from server.engine.weights.hf_config import spec_from_config
    cfg = dict(record()["checkpoint"]["config"])
    s = spec_from_config(cfg, "x/config.json")
    assert (s.arch, s.full_attn_every, s.rot, s.lin_v_heads, s.zero_centred_norms) == \
        ("qwen3next", 4, 4, 4, True)
    eighth = ["linear_attention"] * 7 + ["full_attention"]     # every 8th: served
    assert spec_from_config({**cfg, "layer_types": eighth}, "x/config.json").full_attn_every == 8
    for key, val in (("layer_types", ["linear_attention", "full_attention", "linear_attention",
                                      "linear_attention"] * 2),
                     ("mlp_only_layers", [1]), ("attention_bias", True),
                     ("hidden_act", "gelu"), ("linear_num_value_heads", 3)):
        with pytest.raises(UnsupportedModel, match=key):
            spec_from_config({**cfg, key: val}, "x/config.json")


# ---------------------------------------------------------------- the HF checkpoint
@pytest.fixture(scope="module")
def ckpt():
    from server.engine.weights import load
    from tools.refs import next_checkpoint as nc
    rec = record()
    ld = load(str(rc.built_as_recorded(nc.build_once, rec)), progress=False)
    return rec, ld


def test_checkpoint_matches_transformers(ckpt):
    """The golden rule: greedy ids equal through exact_prefix, the first step's top-5
    logits within 1e-4 relative of transformers float32."""
    rec, ld = ckpt
    assert rec["hf_check"]["loading_problems"] == {}
    rc.assert_golden_rule(Engine(ld.spec, ld.tensors.__getitem__), rec)


def test_checkpoint_prefill_equals_decode(ckpt):
    """The checkpoint's longest prompt: one round == token by token, byte for byte."""
    rec, ld = ckpt
    rc.assert_prefill_equals_decode(Engine(ld.spec, ld.tensors.__getitem__), rec)
