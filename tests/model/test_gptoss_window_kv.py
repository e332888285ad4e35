"""The KV layout's window kind (server/shapes/kv_layout.py) on gpt-oss: the full layers' rows
on pages, each sliding layer's last rows in a ring a stream of ceil((W + P - 1) / P) pages.
The engine's bytes equal the planner's on every rank; the rings read the same bytes as the
window kept whole on pages (a twin engine with the plain MHA layout, the window then a read
rule only), for prompts and decodes that wrap the ring many times, prefilled whole or in
pieces, at several page sizes, on pages and on windows, and after a drafted round's rows
are taken back (the ring holds the verify window too); a ring one page short is caught by
that comparison; the plan counts a stream's rings once whatever the context, turns the prompt
cache off by name, and at gpt-oss-20b's shape and a 32k context holds the KV in about half
a full-attention layout's bytes; the seed's paged check holds at TP 1 and 2."""
from __future__ import annotations

import io

import pytest

from server.engine.engine import Engine
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep
from server.shapes.kv_layout import KVSpec, kv_spec
from server.shapes.shard import shard_of
from server.shapes.spec import shape

from .test_moe_engine import PROMPT, engine_of, greedy

NAME = "tiny-gptoss"
LONG = PROMPT + tuple((7 * i + 11) % 400 + 5 for i in range(30))     # 50 tokens, window 8


def cdiv(a, b):
    return -(-a // b)


def test_window_kind_bytes_on_every_rank():
    from server.planner.layout import layouts
    spec = shape(NAME)
    W, P = spec.sliding_window, 16
    for tp in (1, 2):
        engines = [engine_of(f"dummy:{NAME}", tp=tp, rank=r) for r in range(tp)]
        for r, (eng, L) in enumerate(zip(engines, layouts(spec, tp, 4, P))):
            kv = eng.kv_spec
            n_kv = shard_of(spec, tp, r).n_kv
            assert kv.kind == "window" and kv.window == W and kv.window_layers == (0, 2)
            assert kv.paged_layers == (1, 3)
            assert eng.bytes_per_token == 2 * 2 * n_kv * spec.head_dim * 4 == L.bytes_per_token
            ring = 2 * 2 * n_kv * spec.head_dim * cdiv(W + P - 1, P) * P * 4
            assert kv.ring_bytes(4, P) == ring
            eng.apply(PoolStep(True, 10, P, tuple(e.page_bytes(P) for e in engines), 3, 64))
            assert eng.kv.nbytes == 10 * eng.page_bytes(P) + 3 * ring
            assert eng.kv.K.shape == (2, 10, P, n_kv, spec.head_dim)
            assert eng.kv.rings[0].shape == (2, 3 * cdiv(W + P - 1, P), P, n_kv, spec.head_dim)


def test_mha_and_latent_unchanged():
    for name in ("tiny", "tiny-qwen3moe", "llama3-8b"):
        spec = shape(name)
        kv = kv_spec(spec, shard_of(spec, 1, 0))
        assert kv.kind == "mha" and kv.paged_layers == tuple(range(spec.n_layers))
        assert kv.ring_bytes(4, 16) == 0


@pytest.fixture
def full_pages(monkeypatch):
    """A twin engine's factory whose KV is the plain MHA layout: every layer's rows on pages
    (or windows), the sliding window a read rule only."""
    def make():
        eng = engine_of(f"dummy:{NAME}")
        full = KVSpec.mha(eng.spec.n_layers, eng.shard.n_kv, eng.spec.head_dim)
        monkeypatch.setattr(eng, "__class__", type("FullPages", (Engine,), {"kv_spec": full}))
        assert eng.kv_spec.kind == "mha"
        return eng
    return make


@pytest.mark.parametrize("page_rows", [4, 8, 16])
def test_rings_equal_the_window_kept_whole(full_pages, page_rows):
    ring, whole = engine_of(f"dummy:{NAME}"), full_pages()
    want = greedy(whole, [LONG], steps=24, page_rows=page_rows)
    assert greedy(ring, [LONG], steps=24, page_rows=page_rows) == want
    assert greedy(ring, [LONG[:3], LONG[3:21], LONG[21:]], steps=24, page_rows=page_rows) == want
    assert greedy(ring, [LONG], steps=24, page_rows=page_rows, paged=False) == want
    assert greedy(whole, [LONG], steps=24, page_rows=page_rows, paged=False) == want


def test_a_ring_one_page_short_is_caught(full_pages, monkeypatch):
    """The ring's size is what the comparison holds: a page less and a piece's writes reach
    rows its queries still read."""
    want = greedy(full_pages(), [LONG], steps=8, page_rows=4)
    short = KVSpec.ring_pages
    monkeypatch.setattr(KVSpec, "ring_pages", lambda self, P, verify=1: short(self, P, verify) - 1)
    assert greedy(engine_of(f"dummy:{NAME}"), [LONG], steps=8, page_rows=4) != want


def drafted(eng, verify: int, page_rows: int = 4, context: int = 128) -> list:
    """A stream that prefills LONG[:30], then runs a drafted round of `verify` rows of which
    only the first is kept (the rest taken back: the next round writes from position 31),
    then the rest of LONG and 8 greedy steps; every logits row's bytes."""
    per = context // page_rows
    eng.apply(PoolStep(True, per, page_rows, (eng.page_bytes(page_rows),), 1, context,
                       verify=verify))
    eng.apply(BeginStep(0, tuple(range(per))))
    rows = [eng.apply(RoundStep((Chunk(0, 0, LONG[:30], True),)))[0].tobytes()]
    junk = (LONG[30],) + tuple((13 * i + 7) % 400 + 3 for i in range(verify - 1))
    rows.append(eng.apply(RoundStep((Chunk(0, 30, junk, True),)))[0].tobytes())
    lg = eng.apply(RoundStep((Chunk(0, 31, LONG[31:], True),)))
    start = len(LONG)
    for _ in range(8):
        rows.append(lg[0].tobytes())
        lg = eng.apply(RoundStep((Chunk(0, start, (int(lg[0].argmax()),), True),)))
        start += 1
    return rows


def test_a_drafted_round_taken_back_keeps_the_ring(full_pages, monkeypatch):
    """A verify window longer than a page (V = 9 rows at P = 4, window 8): the ring of
    ceil((W - 1 + V) / P) pages reads what the twin keeping every row reads after the
    drafted rows are taken back; a ring sized without V (the page-at-a-time rule alone) is
    overwritten by the taken-back rows: caught."""
    want = drafted(full_pages(), 9)
    ring = engine_of(f"dummy:{NAME}")
    assert drafted(ring, 9) == want
    assert ring.kv.ring_k == cdiv(8 - 1 + 9, 4)
    short = KVSpec.ring_pages
    monkeypatch.setattr(KVSpec, "ring_pages", lambda self, P, verify=1: short(self, P))
    assert drafted(engine_of(f"dummy:{NAME}"), 9) != want


def test_plan_counts_the_rings_and_no_prompt_cache():
    from server.planner.layout import Layout, layouts
    from server.planner.plan import plan
    spec = shape(NAME)
    L = layouts(spec, 1, 4, 16)[0]
    mha = Layout(**{**L.__dict__, "kv": KVSpec.mha(spec.n_layers, L.n_kv, spec.head_dim)})
    for context in (64, 512):
        assert L.fixed_bytes(context, True) - mha.fixed_bytes(context, True) == \
            L.kv_spec.ring_bytes(4, 16)
    assert L.fixed_bytes(64, True, 33) - mha.fixed_bytes(64, True, 33) == \
        L.kv_spec.ring_bytes(4, 16, 33) == 2 * 2 * L.n_kv * spec.head_dim * cdiv(8 - 1 + 33, 16) * 16 * 4
    p = plan([L], [64 << 20], 256, 2, prompt_cache_bytes=1 << 20, kv_pages="on", verify_window=9)
    assert p.pool_step().verify == 9
    assert p.cache_pages == 0 and p.rank.prompt_cache_bytes == 0
    assert "no prompt cache: the window layers keep a stream's last rows only" in p.notes
    assert p.kv_rows == (f"K and V rows of 2 full layers a token, the 2 window layers' last 8 "
                         f"rows a stream, {L.bytes_per_token} bytes a token")
    assert p.rank.fixed_bytes == L.fixed_bytes(256, True, 9)


def test_gpt_oss_20b_kv_at_32k_under_60_percent_of_full_attention():
    """The issue's target, from the layouts the planner uses: one stream at 32,768 rows."""
    from server.planner.layout import layouts
    spec, ctx, P = shape("gpt-oss-20b"), 32768, 16
    for kv_bytes in (4, 2):
        L = layouts(spec, 1, kv_bytes, P)[0]
        full = KVSpec.mha(spec.n_layers, 8, 64).bytes_per_token(kv_bytes) * ctx
        window = L.bytes_per_token * ctx + L.kv_spec.ring_bytes(kv_bytes, P)
        assert L.bytes_per_token * 2 == KVSpec.mha(spec.n_layers, 8, 64).bytes_per_token(kv_bytes)
        assert window / full < 0.6, window / full


@pytest.mark.parametrize("tp", [1, 2])
def test_check_pages(tp):
    from server.check_pages import run_check
    eng = engine_of(f"dummy:{NAME}", tp=tp, rank=tp - 1)
    out = io.StringIO()
    assert run_check(eng, page_rows=8, prefill_chunk=16, decode=4, out=out) == 0, out.getvalue()
    assert out.getvalue().count("equal;") >= 5


def test_the_pool_step_carries_the_verify_window():
    from server.ranks.steps import pack, unpack
    st = PoolStep(True, 10, 16, (4096, 2048), 3, 64, True, verify=9)
    assert unpack(pack(st)) == st
    assert unpack(pack(PoolStep(False, 0, 16, (4096,), 2, 64))).verify == 1
