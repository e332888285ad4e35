"""Fingerprints: the first differing field, the rank and both values, on every rank."""
from __future__ import annotations

import json

import pytest

import server
from rank_procs import HOST, run
from server.shapes.shard import shard_for
from server.ranks import fingerprint as fpm
from server.ranks.rank_errors import FingerprintMismatch

HASH_A = "ab12" + "0" * 60
HASH_B = "cd34" + "0" * 60
MODEL = {"architecture": "llama", "config": {"n_heads": 9, "n_kv": 3, "d_ff": 1536},
         "tensors": [["blk.0.attn_q.weight", [576, 576], "bf16"]], "content_hash": HASH_A}


def fp(rank=0, world=3, **over):
    args = dict(rank=rank, model=MODEL, tp=world, shard=str(shard_for(9, 3, 1536, world, rank)),
                kv_pages="on", kv_poison=False, page_rows=16, page_bytes=[1024, 1024, 512][:world],
                kv_dtype="bfloat16", context=4096, parallel=4, prefill_chunk=256,
                prompt_cache_gib=0.0, verify_window=1, seed_salt=0)
    args.update(over)
    return json.loads(json.dumps(fpm.make(**args)))           # as gathered: through JSON


def fps(world=3, per_rank=None):
    """per_rank: {rank: {field: value}}"""
    return [fp(r, world, **(per_rank or {}).get(r, {})) for r in range(world)]


def test_identical_ranks_agree():
    assert fpm.compare(fps()) is None


def test_tf_kv_pages_message():
    assert fpm.compare(fps(2, {1: dict(kv_pages="off")})) == (
        "ranks disagree on TF_KV_PAGES: rank 0 resolved on, rank 1 resolved off; "
        "set it the same on every host")


def test_page_rows_message():
    assert fpm.compare(fps(3, {2: dict(page_rows=32)})) == (
        "ranks disagree on page rows: rank 0 has 16, rank 2 has 32; "
        "start every rank with the same --page-rows")


def test_context_message():
    assert fpm.compare(fps(3, {2: dict(context=2048)})) == (
        "ranks disagree on context: rank 0 has 4096, rank 2 has 2048; "
        "start every rank with the same --context")


def test_model_hash_message():
    other = dict(MODEL, content_hash=HASH_B)
    assert fpm.compare(fps(2, {1: dict(model=other)})) == (
        "ranks disagree on model content hash: rank 0 has ab1200000000.., rank 1 has cd3400000000..; "
        "every rank must load the same model file")


def test_a_cut_value_still_shows_where_it_differs():
    late = "0" * 40 + "ff" + "0" * 22
    other = dict(MODEL, content_hash=late)
    msg = fpm.compare([fp(0, 2, model=dict(MODEL, content_hash="0" * 64)), fp(1, 2, model=other)])
    assert "rank 1 has " + "0" * 40 + "ff00.." in msg


def test_first_field_in_order_wins():
    # rank 1 differs on context, rank 2 on TF_KV_PAGES: TF_KV_PAGES comes first
    msg = fpm.compare(fps(3, {1: dict(context=2048), 2: dict(kv_pages="off")}))
    assert msg.startswith("ranks disagree on TF_KV_PAGES: rank 0 resolved on, rank 2 resolved off")


def test_the_version_is_checked_first(monkeypatch):
    a = fp(0, 2, context=1)
    monkeypatch.setattr(server, "__version__", "9.9.9")
    b = fp(1, 2)
    assert fpm.compare([a, b]) == (f"ranks disagree on foldserve version: rank 0 has "
                                   f"{a['version']}, rank 1 has 9.9.9; "
                                   f"run the same foldserve version on every host")


def test_shards_differ_by_design_but_must_follow_the_rule():
    good = fps()
    rule = [str(shard_for(9, 3, 1536, 3, r)) for r in range(3)]
    assert fpm.compare(good, rule) is None
    bad = fps(3, {1: dict(shard=rule[2])})
    msg = fpm.compare(bad, rule)
    assert msg.startswith(f"rank 1 holds shard {rule[2]}, but the shard rule gives rank 1 {rule[1]}")


def test_tp_size_must_match_the_ranks_that_joined():
    two = [fp(r, 3) for r in range(2)]
    assert fpm.compare(two) == "TP size is 3 but 2 ranks joined; start every rank with --tp 2"


def test_large_model_values_travel_as_digests():
    f = fp()
    assert f["model.config"].startswith("sha256:") and f["model.tensors"].startswith("sha256:")
    assert f["model.architecture"] == "llama"


# -- every rank stops, as real processes ----------------------------------------------

def check_with_context(rank, world, port, odd_rank):
    from server.ranks.comm import HostComm
    from server.ranks.rendezvous import join
    comm = HostComm(join(rank, world, HOST, port, 10.0), timeout_s=10)
    mine = fp(rank, world, context=2048 if rank == odd_rank else 4096)
    fpm.exchange_and_check(comm, mine)
    return "agreed"


def test_every_rank_stops_with_the_same_message():
    res = run(check_with_context, 3, 2, deadline_s=30)
    assert res.left_behind == []
    want = ("ranks disagree on context: rank 0 has 4096, rank 2 has 2048; "
            "start every rank with the same --context")
    for o in res.outcomes.values():
        assert (o.error, o.message, o.exitcode) == ("FingerprintMismatch", want, 1), o
        assert o.seconds < 30


def test_agreeing_ranks_pass():
    res = run(check_with_context, 3, -1, deadline_s=30)
    assert [o.value for o in res.outcomes.values()] == ["agreed"] * 3
