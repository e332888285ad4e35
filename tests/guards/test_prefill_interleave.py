"""A long prompt beside decoding streams: a round others decode in holds its prefill chunks'
attention reads (rows x keys) to the key budget, a round nobody decodes in gives the prompt
the solo chunk, and every stream's tokens stay what they are alone."""
from __future__ import annotations

import pytest

from server.planner.admission import Admission
from server.ranks.steps import RoundStep
from server.round_build import KEYS_FLOOR, prefill_take
from server.scheduler import Scheduler
from tests.guards.test_scheduler_guards import FakeDriver, expected, spin, submit, tokens


def test_prefill_take_is_the_largest_chunk_within_the_keys():
    assert prefill_take(0, 5000, 2048, None) == 2048
    assert prefill_take(0, 100, 2048, None) == 100
    # n (fed + n) <= keys, the largest such n
    for fed, keys in ((0, 2048 * 2048), (30000, 4 << 20), (1000, 300000), (5, 10 ** 9)):
        n = prefill_take(fed, 10 ** 6, 2048, keys)
        assert n * (fed + n) <= keys or n == KEYS_FLOOR
        assert n == 2048 or (n + 1) * (fed + n + 1) > keys
    assert prefill_take(30000, 10 ** 6, 2048, 4 << 20) == 139         # 139 x 30139 <= 4 Mi keys
    assert prefill_take(10 ** 6, 10 ** 6, 2048, 1000) == KEYS_FLOOR    # never below the floor
    assert prefill_take(10 ** 6, 10, 2048, 1000) == 10                 # nor above what is left
    assert prefill_take(0, 10, 8, 1000) == 8                           # nor above the cap


def _make(chunk, budget, solo=None, keys=None, streams=4, context=4096):
    adm = Admission(paged=True, pages=4096, page_rows=4, streams=streams, context=context,
                    cache_pages=0)
    drv = FakeDriver()
    return Scheduler(drv, adm, context=context, prefill_chunk=chunk, token_budget=budget,
                     solo_chunk=solo, prefill_keys=keys), drv, adm


def _rounds(drv):
    return [st for st in drv.steps if isinstance(st, RoundStep)]


def test_a_prompt_alone_takes_the_solo_chunk_and_beside_decodes_the_keys_bound():
    long = [(7 * i) % 97 for i in range(1500)]
    s, drv, adm = _make(chunk=128, budget=512, solo=512, keys=70000)
    short = submit(s, "short", [1, 2, 3], 12)
    s._drain(block=False)
    s._admit()
    s._round()                                     # short: its whole prompt, then it decodes
    big = submit(s, "long", long, 2)
    spin(s, 2000)
    assert tokens(big) == expected(long, 2) and tokens(short) == expected([1, 2, 3], 12)
    seen = []                                      # (long's chunk length, its start, others decoding)
    for r in _rounds(drv):
        mine = [c for c in r.chunks if c.stream == 1 and len(c.tokens) > 1]
        if mine:
            seen.append((len(mine[0].tokens), mine[0].start, any(c.stream == 0 for c in r.chunks)))
    beside = [(n, st) for n, st, dec in seen if dec]
    alone = [(n, st) for n, st, dec in seen if not dec]
    assert beside and alone                        # short decoded 12 tokens, then long went alone
    for n, st in beside:                           # rows x keys within the bound (or the floor)
        assert n <= 128 and (n * (st + n) <= 70000 or n == KEYS_FLOOR)
    assert any(n < 128 for n, _ in beside)         # the bound did cut chunks
    assert max(n for n, _ in alone) > 128          # alone: more than the chunk, up to solo
    assert all(n <= 512 for n, _ in alone)
    adm.check_integrity()


@pytest.mark.parametrize("keys", [None, 5000])
def test_tokens_do_not_depend_on_the_interleave(keys):
    prompts = {"a": [5, 6, 7], "b": [(3 * i) % 97 for i in range(300)], "c": [9, 8]}
    solo = {}
    for rid, p in prompts.items():
        s, _, _ = _make(chunk=16, budget=64, solo=64, keys=keys)
        sink = submit(s, rid, p, 12)
        spin(s, 500)
        solo[rid] = tokens(sink)
    s, _, adm = _make(chunk=16, budget=64, solo=64, keys=keys)
    sinks = {rid: submit(s, rid, p, 12) for rid, p in prompts.items()}
    spin(s, 500)
    for rid in prompts:
        assert tokens(sinks[rid]) == solo[rid] == expected(prompts[rid], 12), rid
    adm.check_integrity()


def test_a_key_bound_of_zero_is_none_and_a_negative_one_is_refused():
    s, _, _ = _make(chunk=8, budget=64, keys=0)
    assert s.prefill_keys is None
    with pytest.raises(ValueError):
        _make(chunk=8, budget=64, keys=-1)
