"""The DSA indexer with pooled keys over pages (kernels/dsa.py).

- Against transformers' Glm5NextTextIndexer on seeded inputs recorded once
  (tools/refs/record_glm53.py -> tests/data/glm53/dsa_case.json): the pooled keys to float
  rounding, and every query's chosen rows as a set (pools then the tail), where no two
  candidate pools' scores are within a near-tie.
- Paged == window, byte for byte: a prompt written in uneven chunks onto out-of-order pages
  that are NaN before their rows are written, and the same prompt in one chunk on a window
  (one page of `context` rows): the same pooled keys, the same choices, the same attention.
- Ties are broken by position (the earlier pool), the tail is always in, the pass is dense
  below index_topk keys, shared layers read the previous full layer's choice; each guard
  broken alone fails here.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernels import dsa, mla
from tools.refs import glm53_cases as cases

CASE = json.loads((Path(__file__).resolve().parents[1] / "data/glm53/dsa_case.json").read_text())
C = CASE["case"]
KP, TOPK, T = C["kpool"], C["topk"], C["T"]


@pytest.fixture(scope="module")
def x():
    x = cases.dsa_inputs(C)
    assert cases.digest(x) == CASE["inputs_sha256"], "the seeded inputs changed; re-record"
    return x


def keys_and_queries(x):
    k, g = dsa.index_keys(x["h"], np.ascontiguousarray(x["wk"].T), x["k_norm_w"], x["k_norm_b"],
                          np.ascontiguousarray(x["gate"].T))
    q, w = dsa.index_query(x["q_resid"], np.ascontiguousarray(x["wq_b"].T), x["h"],
                           np.ascontiguousarray(x["weights_proj"].T), C["Hi"])
    return k, g, q, w


def new_pooled(pages, P, Di=C["Di"]):
    return np.full((pages, P, 1, Di // KP), np.nan, np.float32)


def new_ring(Di=C["Di"]):
    return np.full((KP, 2, Di), np.nan, np.float32)


def run(x, table, P, pages, chunks):
    """Write the prompt in `chunks` (sizes), choosing for each row once its chunk is written."""
    k, g, q, w = keys_and_queries(x)
    pooled, ring = new_pooled(pages, P), new_ring()
    choices, start = [], 0
    for n in chunks:
        dsa.write(pooled, ring, table, P, start, k[start:start + n], g[start:start + n], x["ape"])
        for p in range(start, start + n):
            choices.append(dsa.choose(q[p], w[p], pooled, table, P, p, TOPK, KP))
        start += n
    assert start == T
    return pooled, choices


PAGED = {"P": 8, "pages": 12, "table": [7, 2, 11, 0, 5, 9, 3, 10]}
WINDOW = {"P": 64, "pages": 1, "table": [0]}


def test_pooled_keys_match_transformers(x):
    _, choices = run(x, WINDOW["table"], WINDOW["P"], 1, [T])
    pooled = new_pooled(1, 64)
    k, g, _, _ = keys_and_queries(x)
    dsa.write(pooled, new_ring(), [0], 64, 0, k, g, x["ape"])
    got = dsa.gather_pooled(pooled, [0], 64, T // KP, KP)
    want = np.asarray(CASE["pooled_keys"], np.float32)
    assert got.shape == want.shape == (T // KP, C["Di"])
    assert np.abs(got - want).max() <= 2e-6 * max(1.0, np.abs(want).max())


def scores(x, p):
    """Every candidate pool's score for the query at p, float64 from our pooled keys."""
    k, g, q, w = keys_and_queries(x)
    n = (p + 1) // KP
    keys = np.stack([dsa.pool_key(k[m * KP:(m + 1) * KP], g[m * KP:(m + 1) * KP], x["ape"])
                     for m in range(n)]).astype(np.float64)
    s = np.maximum(q[p].astype(np.float64) @ keys.T * C["Di"] ** -0.5, 0)
    return w[p].astype(np.float64) @ s


def test_choices_match_transformers(x):
    _, choices = run(x, WINDOW["table"], WINDOW["P"], 1, [T])
    sparse = 0
    for p in range(T):
        want = sorted(i for i in CASE["topk_indices"][p] if i >= 0)
        n, K = (p + 1) // KP, TOPK // KP
        if n > K:
            sparse += 1
            s = np.sort(scores(x, p))[::-1]
            assert s[K - 1] - s[K] > 1e-4, f"a near-tie at {p}: re-seed the case"
        assert choices[p].tolist() == want, p
    assert sparse >= 30                  # most rows past the dense pass


def test_a_window_of_rows_no_multiple_of_kpool(x):
    """A window is one page of `context` rows, any count (foldserve check-pages' context is
    not a multiple of kpool): its pooled keys are a view of the page's first rows' share, the
    writes land, the choices are the paged ones."""
    wp, wc = run(x, [0], 63, 1, [T])
    pp, pc = run(x, PAGED["table"], PAGED["P"], PAGED["pages"], [T])
    n = T // KP
    assert np.array_equal(dsa.gather_pooled(wp, [0], 63, n, KP).view(np.uint32),
                          dsa.gather_pooled(pp, PAGED["table"], PAGED["P"], n, KP).view(np.uint32))
    assert all(np.array_equal(u, v) for u, v in zip(wc, pc))


@pytest.mark.parametrize("chunks", [[T], [1] * T, [3, 1, 8, 5, 13, 2, 29], [4, 4, 17, 36]])
def test_paged_equals_window_byte_for_byte(x, chunks):
    wp, wc = run(x, WINDOW["table"], WINDOW["P"], WINDOW["pages"], [T])
    pp, pc = run(x, PAGED["table"], PAGED["P"], PAGED["pages"], chunks)
    n = T // KP
    a = dsa.gather_pooled(wp, WINDOW["table"], WINDOW["P"], n, KP)
    b = dsa.gather_pooled(pp, PAGED["table"], PAGED["P"], n, KP)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))
    assert not np.isnan(a).any()
    assert all(np.array_equal(u, v) for u, v in zip(wc, pc)) and len(wc) == len(pc) == T
    # pages the stream does not own stay NaN; its last page's pools past T are unwritten
    unused = sorted(set(range(PAGED["pages"])) - set(PAGED["table"]))
    assert np.isnan(pp[unused]).all()
    # the attention over the chosen rows: the same bytes from pages and from the window
    rng = np.random.default_rng(11)
    lat = rng.standard_normal((T, 1, 20)).astype(np.float32)
    qa = rng.standard_normal((T, 3, 20)).astype(np.float32)
    wl = np.full((1, 64, 1, 20), np.nan, np.float32)
    pl = np.full((PAGED["pages"], PAGED["P"], 1, 20), np.nan, np.float32)
    mla.write(wl, WINDOW["table"], 64, 0, lat)
    s = 0
    for c in chunks:
        mla.write(pl, PAGED["table"], PAGED["P"], s, lat[s:s + c])
        s += c
    for p in range(T):
        o1 = dsa.attend(qa[p], wl, WINDOW["table"], 64, wc[p], 20, 0.2)
        o2 = dsa.attend(qa[p], pl, PAGED["table"], PAGED["P"], pc[p], 20, 0.2)
        assert np.isfinite(o1).all() and np.array_equal(o1.view(np.uint32), o2.view(np.uint32))


def test_dense_below_index_topk_and_the_tail_always_in(x):
    _, choices = run(x, WINDOW["table"], WINDOW["P"], 1, [T])
    K = TOPK // KP
    for p in range(T):
        n = (p + 1) // KP
        if n <= K:                                          # below topk + kpool - 1 rows
            assert choices[p].tolist() == list(range(p + 1))
        else:
            assert len(choices[p]) == TOPK + (p + 1) % KP
            assert choices[p][-((p + 1) % KP) or len(choices[p]):].tolist() == \
                list(range(n * KP, p + 1))[-((p + 1) % KP) or len(choices[p]):]
            assert set(range(n * KP, p + 1)) <= set(choices[p].tolist())   # the tail
            assert np.all(np.diff(choices[p]) > 0)                          # ascending
    assert p + 1 > TOPK + KP - 1


def test_ties_are_broken_by_position():
    """Equal pooled keys give equal scores: the earliest pools are chosen, not the latest nor
    numpy's argsort order; a later pool with a higher score still wins over them."""
    Di, P, n = 8, 32, 10                                     # 8 pools a page
    pooled = np.zeros((2, P, 1, Di // KP), np.float32)
    view = dsa.pooled_view(pooled, KP)
    view[:] = 1.0                                            # every pool the same key
    q, w = np.ones((2, Di), np.float32), np.ones(2, np.float32)
    p = n * KP - 1 + 2                                       # 10 complete pools and a tail of 2
    got = dsa.choose(q, w, pooled, [1, 0], P, p, TOPK, KP)
    pools = sorted({int(r) // KP for r in got[:TOPK]})
    assert pools == [0, 1, 2, 3]
    assert got[TOPK:].tolist() == [n * KP, n * KP + 1]
    view[0, 1] = 2.0                                         # pool 9: table [1, 0], slot 1
    got = dsa.choose(q, w, pooled, [1, 0], P, p, TOPK, KP)
    assert sorted({int(r) // KP for r in got[:TOPK]}) == [0, 1, 2, 9]


def test_shared_layers_read_the_previous_full_layer():
    types = ["linear_attention", "linear_attention", "linear_attention", "indexed_attention"] * 3
    idx = ["full"] * 12
    idx[7], idx[11] = "shared", "shared"
    assert dsa.choice_sources(types, idx) == {3: 3, 7: 3, 11: 3}
    idx[7] = "full"
    assert dsa.choice_sources(types, idx) == {3: 3, 7: 7, 11: 7}
    idx[3] = "shared"
    with pytest.raises(ValueError, match="layer 3 is a shared indexer layer with no full"):
        dsa.choice_sources(types, idx)


def test_the_geometry_is_checked():
    dsa.check_geometry(512, 16, 128)
    with pytest.raises(ValueError, match="page_rows = 100 is not a multiple of index_kpool"):
        dsa.check_geometry(100, 16, 128)
    with pytest.raises(ValueError, match="index_head_dim = 120"):
        dsa.check_geometry(512, 16, 120)
