"""Snapshot slots (qwen3next, kimilinear): the prompt cache keeps a stream's recurrent states and conv
windows at the end of a kept prefix, so a conversation resumed past its prefix starts from
the kept state. Through the scheduler on the real engine: a three-turn conversation replayed
cold and from the cache gives the same replies (ids and logprobs) and the same state bytes at
every turn's end, with another stream running beside it, on pages and on windows; n > 1
choices resume from the prompt's snapshot (copied while choice 0 runs on); every slot and page
is free once the cache lets go. At the engine: the state a pending slot keeps is the state
at its page boundary, byte for byte; the guards (a slot outside the store, a restore into a
stream not open)."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from server.engine.build import open_model
from server.planner.admission import Admission
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep, SnapStep
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from server.step_driver import LocalDriver

PR, CTX, SLOTS = 4, 128, 3
P1 = [5, 17, 99, 3, 250, 41, 7, 7, 300, 12, 64]          # 11 tokens
U2 = [128, 9, 33, 411, 2]
U3 = [18, 77, 150, 6, 90, 91, 92]
OTHER = [7, 300, 9, 11, 12, 400, 5, 6, 8, 90, 91, 33, 2]


@pytest.fixture(scope="module", params=["tiny-qwen3next", "tiny-kimilinear", "glm53-tiny"])
def engine(request):
    """A Gated DeltaNet hybrid and a Kimi Delta Attention one (its full layers latent rows):
    the slots are the families' fixed parts, whatever the recurrent op. GLM-5.3-Flash's tiny
    checkpoint (tools/refs/glm53_checkpoint.py: KDA, sparse latent attention whose pooled
    keys are on the pages, index_kpool 4 = the page rows here): its slots keep the KDA states,
    not the index rings, empty at every page boundary; the conversation runs past the dense
    pass (19 rows), so resumed streams choose from pooled keys the cache kept."""
    if request.param == "glm53-tiny":
        from tools.refs import glm53_checkpoint as gc
        return open_model(str(gc.build_once()[0]), progress=False).engine
    return open_model(f"dummy:{request.param}", progress=False).engine


def state_bytes(eng, stream: int) -> bytes:
    return b"".join(np.ascontiguousarray(a[:, stream]).tobytes() for a in eng.kv.fixed)


class Recorder(LocalDriver):
    """LocalDriver that keeps each stream's state bytes as it ends, by the position its
    state stands at, and counts the snapshot steps."""

    def __init__(self, engine):
        super().__init__(engine)
        self.ended: dict[int, list] = {}
        self.snaps: list = []

    def run(self, step):
        if isinstance(step, EndStep) and step.stream in self.engine.fixed_at:
            at = self.engine.fixed_at[step.stream]
            self.ended.setdefault(at, []).append(state_bytes(self.engine, step.stream))
        if isinstance(step, SnapStep):
            self.snaps.append(step.op)
        return super().run(step)


def scheduler(eng, paged: bool, cache: int, slots: int) -> tuple[Scheduler, Recorder]:
    pages = 96 if paged else cache
    adm = Admission(paged=paged, pages=pages, page_rows=PR, streams=3, context=CTX,
                    cache_pages=cache, snap_slots=slots, poison=True)
    eng.apply(PoolStep(paged, pages, PR, (eng.page_bytes(PR),), 3, CTX, poison=True, snaps=slots))
    rec = Recorder(eng)
    return Scheduler(rec, adm, context=CTX, prefill_chunk=8).start(), rec


def greedy(n):
    return SamplingParams(max_tokens=n, temperature=0.0, logprobs=2, ignore_eos=True)


async def _one(sched, req):
    return [(e.token_id, e.logprob, e.top_logprobs, e.finish_reason, e.cached_tokens)
            async for e in sched.generate(req)]


async def _conversation(sched, beside: bool):
    """Three turns, each prompt the last one + its reply + the user's next words; with
    beside, another stream runs through all of them."""
    other = asyncio.ensure_future(_one(sched, GenRequest("other", OTHER, greedy(40)))) if beside else None
    prompt, turns = list(P1), []
    for i, more in enumerate((U2, U3, None)):
        evs = await _one(sched, GenRequest(f"turn-{i}", list(prompt), greedy(6)))
        turns.append(evs)
        if more is not None:
            prompt = prompt + [e[0] for e in evs if e[0] is not None] + list(more)
    return turns, (await other if other else None)


def _run(sched, beside):
    try:
        out = asyncio.run(_conversation(sched, beside))
        sched.adm.check_integrity()
        return out
    finally:
        sched.stop()


def _all_free(sched):
    """Every slot and page comes back once the cache lets go of its prefixes."""
    adm = sched.adm
    assert adm.running == 0 and adm.pool.held == 0
    adm.cache.evict_until_free(adm.pool.total)
    adm.check_integrity()
    assert adm.pool.free == adm.pool.total and len(adm.cache) == 0
    assert adm.cache.slots_free == tuple(range(adm.cache.snap_slots)) and not adm.cache.slots_kept


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_three_turns_resumed_equal_cold(engine, paged):
    cold, cold_rec = scheduler(engine, paged, cache=0, slots=0)
    want, want_other = _run(cold, beside=False)
    assert cold.prompt_tokens_done == sum(len(t) for t in _prompts(want))
    hot, rec = scheduler(engine, paged, cache=24, slots=SLOTS)
    got, other = _run(hot, beside=True)
    strip = lambda evs: [e[:4] for e in evs]
    assert [strip(t) for t in got] == [strip(t) for t in want]
    # turns 2 and 3 resumed past their prefix: at the last page boundary before the end of
    # the turn before (prompt + the reply's fed tokens), its snapshot restored
    prompts = _prompts(want)
    cached = [t[-1][4] for t in got]
    ends = [len(p) + 5 for p in prompts]                     # rows written: the last token never fed
    assert cached == [0, (ends[0] - 1) // PR * PR, (ends[1] - 1) // PR * PR], cached
    assert hot.prompt_tokens_done < cold.prompt_tokens_done
    assert rec.snaps.count(SnapStep.RESTORE) == 2
    # the state bytes at each turn's end equal the cold run's
    for end in ends:
        assert rec.ended[end] == cold_rec.ended[end], end
    # the stream beside them equals itself alone
    alone, _ = scheduler(engine, paged, cache=0, slots=0)
    try:
        solo = asyncio.run(_one(alone, GenRequest("other", OTHER, greedy(40))))
    finally:
        alone.stop()
    assert strip(other) == strip(solo)
    _all_free(hot)


def _prompts(turns):
    prompt, out = list(P1), []
    for evs, more in zip(turns, (U2, U3, None)):
        out.append(prompt)
        if more is not None:
            prompt = prompt + [e[0] for e in evs if e[0] is not None] + list(more)
    return out


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_choices_resume_from_the_prompts_snapshot(engine, paged):
    """n = 3: choices 1, 2 resume from the snapshot of choice 0's prompt (copied into a slot
    of its own while choice 0 decodes on), each equal to a single request on a server that
    keeps nothing."""
    prompt = P1 + U2                                         # 16 tokens: the state at 12
    params = lambda seed: SamplingParams(max_tokens=6, temperature=1.0, seed=seed, logprobs=2)
    hot, rec = scheduler(engine, paged, cache=24, slots=SLOTS)
    try:
        reqs = [GenRequest("c-0", list(prompt), params(40))]
        reqs += [GenRequest(f"c-{i}", list(prompt), params(40 + i), follows="c-0") for i in (1, 2)]

        async def all_():
            return await asyncio.gather(*(_one(hot, r) for r in reqs))
        choices = asyncio.run(all_())
        hot.adm.check_integrity()
    finally:
        hot.stop()
    assert [c[-1][4] for c in choices] == [0, 12, 12]
    assert SnapStep.COPY in rec.snaps and rec.snaps.count(SnapStep.RESTORE) == 2
    strip = lambda evs: [e[:4] for e in evs]
    for i, seed in enumerate((40, 41, 42)):
        cold, _ = scheduler(engine, paged, cache=0, slots=0)
        try:
            single = asyncio.run(_one(cold, GenRequest("s", list(prompt), params(seed))))
        finally:
            cold.stop()
        assert strip(choices[i]) == strip(single), i
    _all_free(hot)


def test_a_pending_slot_keeps_the_state_at_its_page_boundary(engine):
    """A prompt of 23 rows in rounds of 7 with a pending slot: the slot holds the state
    after 20 positions (the last page boundary b < 23, page rows 4), byte for byte the state
    of a stream fed those 20 alone; a stream restored from it and fed the rest ends where
    the whole prompt ends."""
    prompt = list(P1) + list(OTHER[:12])
    e = engine
    e.apply(PoolStep(True, 64, PR, (e.page_bytes(PR),), 3, CTX, poison=True, snaps=2))
    e.apply(BeginStep(0, tuple(range(8))))
    e.apply(SnapStep(SnapStep.PENDING, 1, stream=0))
    for a in range(0, 23, 7):
        e.apply(RoundStep((Chunk(0, a, tuple(prompt[a:a + 7]), True),)))
    whole = state_bytes(e, 0)
    e.apply(BeginStep(1, tuple(range(8, 16))))
    e.apply(RoundStep((Chunk(1, 0, tuple(prompt[:20]), True),)))
    at20 = state_bytes(e, 1)
    kept = b"".join(np.ascontiguousarray(a[:, 1]).tobytes() for a in e.kv.snaps)
    assert kept == at20 and at20 != whole
    # restored into a new stream sharing the first 5 pages, fed the last 3 rows
    e.apply(BeginStep(2, tuple(range(5)) + tuple(range(16, 19)), kept=5))
    e.apply(SnapStep(SnapStep.RESTORE, 1, stream=2, at=20))
    lg = e.apply(RoundStep((Chunk(2, 20, tuple(prompt[20:]), True),)))
    assert state_bytes(e, 2) == whole
    e.apply(EndStep(2))
    e.apply(BeginStep(2, tuple(range(16, 24))))
    ref = e.apply(RoundStep((Chunk(2, 0, tuple(prompt), True),)))
    assert np.asarray(lg[0]).tobytes() == np.asarray(ref[0]).tobytes()
    for s in (0, 1, 2):
        e.apply(EndStep(s))


def test_snapshot_guards(engine):
    e = engine
    for s in range(3):                   # whatever an earlier test left open
        e.apply(EndStep(s))
    e.apply(PoolStep(True, 16, PR, (e.page_bytes(PR),), 2, CTX, snaps=2))
    e.apply(BeginStep(0, tuple(range(8))))
    with pytest.raises(ValueError, match="snapshot slot 2 outside the store's 2 slots"):
        e.apply(SnapStep(SnapStep.PENDING, 2, stream=0))
    with pytest.raises(ValueError, match="snapshot slot -1 outside"):
        e.apply(SnapStep(SnapStep.COPY, -1, to=0))
    with pytest.raises(ValueError, match="restored into stream 1, which is not open"):
        e.apply(SnapStep(SnapStep.RESTORE, 0, stream=1, at=4))
    if e.kv.index_rings:                 # GLM-5.3: a slot keeps no index ring, empty at pool edges
        with pytest.raises(ValueError, match="restored at position 6, not an index pool boundary"):
            e.apply(SnapStep(SnapStep.RESTORE, 0, stream=0, at=6))
    e.apply(EndStep(0))
    with pytest.raises(ValueError, match="snapshot slots asked for a layout without a fixed"):
        tiny = open_model("dummy:tiny", progress=False).engine
        tiny.apply(PoolStep(True, 16, PR, (tiny.page_bytes(PR),), 2, CTX, snaps=2))


def test_glm53_slots_keep_the_states_not_the_index_rings():
    """GLM-5.3-Flash's slot: the KDA states and windows (the fixed part less its index
    rings); the plan funds slots and the prompt cache is on."""
    from server.planner.layout import layouts
    from server.planner.plan import plan
    from server.shapes.spec import shape
    Ls = layouts(shape("glm-5.3-flash"), 2, 4, 16)
    k = Ls[0].kv_spec
    assert k.rings and 0 < k.snap_bytes < k.fixed_bytes
    rings = k.n_pooled_layers * 16 * 2 * 128 * k.FIXED_BYTES          # 12 rings [16, 2, 128]
    assert k.snap_bytes == k.fixed_bytes - rings
    p = plan(Ls, [40 * 2**30] * 2, 131072, prompt_cache_bytes=2**30, kv_pages="on")
    assert p.snap_slots > 0 and not any("prompt cache off" in n for n in p.notes), p.notes
    for r in p.ranks:
        assert r.used <= r.room


def test_the_plan_funds_slots_and_says_so():
    """A recurrent family's cache: slots of one stream's fixed part and pages, said in the
    startup line; a family without a fixed part: snap_bytes 0, no slots, every cached byte on
    pages; a budget under one slot and a page: no cache, with a note."""
    from server.planner.describe import startup_line
    from server.planner.layout import layouts
    from server.planner.plan import plan
    from server.shapes.spec import shape
    Ls = layouts(shape("tiny-qwen3next"), 2, 4, 16)
    p = plan(Ls, [64 * 2**20] * 2, 128, prompt_cache_bytes=2**20, kv_pages="on")
    sb = Ls[0].kv_spec.fixed_bytes
    assert p.snap_slots == 2**19 // sb and [r.snap_bytes for r in p.ranks] == [sb, sb]
    assert f"{p.snap_slots} snapshot slots of" in startup_line(p)
    for r in p.ranks:
        assert r.used <= r.room
    w = plan(Ls, [64 * 2**20] * 2, 128, parallel=2, prompt_cache_bytes=2**20, kv_pages="off")
    assert w.snap_slots == p.snap_slots and w.cache_pages > 0
    d = plan(layouts(shape("tiny-qwen3moe"), 1, 4, 16), [64 * 2**20], 128,
             prompt_cache_bytes=2**20).as_dict()
    assert (d["snap_bytes"], d["snap_slots"]) == (0, 0)
    assert d["prompt_cache_bytes"] == d["cache_pages"] * d["page_bytes"] > 2**20 - d["page_bytes"]
    small = plan(Ls, [64 * 2**20] * 2, 128, prompt_cache_bytes=sb, kv_pages="on")
    assert (small.snap_slots, small.cache_pages) == (0, 0)
    assert any("under one snapshot slot" in n for n in small.notes), small.notes
