"""bench/drafts.py's arithmetic over the editing set: a prompt's or the set's number is its
decode tokens over its decode seconds summed, each side (not a mean of rates), and the
geometric mean of the per-prompt ratios beside it."""
from __future__ import annotations

import importlib.util
import math
import os

import pytest

_spec = importlib.util.spec_from_file_location(
    "drafts_bench", os.path.join(os.path.dirname(__file__), "..", "..", "bench", "drafts.py"))
B = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(B)


def _reply(tokens, decode_secs, cpu_secs, text="x", accepted=0, drafts=0, draft_tokens=0):
    return {"text": text, "finish": "length", "tokens": tokens, "decode_secs": decode_secs,
            "decode_tps": (tokens - 1) / decode_secs, "cpu_secs": cpu_secs,
            "cpu_tps": tokens / cpu_secs, "accepted": accepted, "drafts": drafts,
            "draft_tokens": draft_tokens}


def test_pooled_is_total_tokens_over_total_seconds():
    a = B.pair_row(_reply(401, 4.0, 4.5), _reply(401, 2.0, 2.5, accepted=300, drafts=90,
                                                 draft_tokens=350))
    b = B.pair_row(_reply(101, 1.0, 1.2), _reply(101, 1.0, 1.2, text="x"))
    s = B.pooled([a, b])
    assert s["plain_tps"] == pytest.approx(500 / 5.0)
    assert s["drafted_tps"] == pytest.approx(500 / 3.0)
    assert s["ratio"] == pytest.approx(5.0 / 3.0)          # not the mean of 2.0 and 1.0
    assert s["cpu_ratio"] == pytest.approx(5.7 / 3.7)
    assert s["acceptance"] == pytest.approx(300 / 350)
    assert s["all_equal"] and s["tokens"] == 502


def test_pooled_sees_a_differing_reply():
    a = B.pair_row(_reply(11, 1.0, 1.0, text="a"), _reply(11, 0.5, 0.5, text="b"))
    assert not a["equal"] and not B.pooled([a])["all_equal"]


def test_geomean():
    assert B.geomean([2.0, 0.5, 1.0]) == pytest.approx(1.0)
    assert B.geomean([1.8, 3.2]) == pytest.approx(math.sqrt(1.8 * 3.2))


def _x16(tokens, seconds, cpu_secs, texts=("a", "b")):
    return {"tps": tokens / seconds, "tokens": tokens, "seconds": seconds,
            "cpu_tps": tokens / cpu_secs, "texts": list(texts), "draft_tokens": 0}


def test_pooled16_pools_the_runs_and_sees_a_differing_run():
    s = B.pooled16([_x16(1000, 3.0, 5.0), _x16(1000, 2.0, 4.0)])
    assert s["tps"] == pytest.approx(2000 / 5.0)           # not the mean of 333 and 500
    assert s["cpu_tps"] == pytest.approx(2000 / 9.0)
    assert s["texts"] == ["a", "b"] and s["runs"] == 2
    assert B.pooled16([_x16(10, 1.0, 1.0), _x16(10, 1.0, 1.0, texts=("a", "c"))])["texts"] is None
