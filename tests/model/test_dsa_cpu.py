"""The DSA's numba form (kernels/dsa_cpu.py) against its numpy definition (kernels/dsa.py):
the same pages written (latent rows and pooled keys byte for byte: the definition's writes),
the same choices, the attention within float32 rounding; and its own fixed order: paged ==
window, a prompt in any chunks == in one, two streams in one round == each alone, any job
cut == serial, byte for byte; ties broken by position; a shared layer reads the full one's
choice. On the recorded case's inputs (tests/data/glm53/dsa_case.json: 61 tokens, pools of 4,
index_topk 16, so most rows are past the dense pass)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from kernels import dsa
from tools.refs import glm53_cases as cases

dsa_cpu = pytest.importorskip("kernels.dsa_cpu")

CASE = json.loads((Path(__file__).resolve().parents[1] / "data/glm53/dsa_case.json").read_text())
C_ = CASE["case"]
KP, TOPK, T, Hi, Di = C_["kpool"], C_["topk"], C_["T"], C_["Hi"], C_["Di"]
H, N, C, V = 3, 16, 32, 16         # the latent attention: heads, nope, latent, v
TOL = 2e-6


@dataclass
class Ix:
    wq_t: np.ndarray
    wk_t: np.ndarray
    ln_w: np.ndarray
    ln_b: np.ndarray
    wproj_t: np.ndarray
    ape: np.ndarray
    gate_t: np.ndarray


@dataclass
class Chunk:
    table: list
    page_rows: int
    start: int
    slot: int


@dataclass
class Rows:
    spans: list
    chunks: list


@pytest.fixture(scope="module")
def w():
    x = cases.dsa_inputs(C_)
    assert cases.digest(x) == CASE["inputs_sha256"], "the seeded inputs changed; re-record"
    t = lambda a: np.ascontiguousarray(a.T)
    ix = Ix(t(x["wq_b"]), t(x["wk"]), x["k_norm_w"], x["k_norm_b"], t(x["weights_proj"]),
            x["ape"], t(x["gate"]))
    rng = np.random.default_rng(53)
    f = np.float32
    return {"ix": ix, "h": x["h"], "q_resid": x["q_resid"],
            "q": rng.standard_normal((T, H, N)).astype(f),
            "ckv": rng.standard_normal((T, C)).astype(f),
            "kv_norm": rng.uniform(0.5, 1.5, C).astype(f),
            "w_uk": (rng.standard_normal((H, N, C)) * 0.3).astype(f),
            "w_uv_t": (rng.standard_normal((H, C, V)) * 0.3).astype(f)}


PAGED = {"P": 8, "pages": 12, "table": [7, 2, 11, 0, 5, 9, 3, 10]}
WINDOW = {"P": 64, "pages": 1, "table": [0]}


def store(geo, streams=1):
    pool = np.full((geo["pages"], geo["P"], 1, C), np.nan, np.float32)
    pooled = np.full((geo["pages"], geo["P"], 1, Di // KP), np.nan, np.float32)
    rings = np.full((streams, KP, 2, Di), np.nan, np.float32)
    return pool, pooled, rings


def run(mod, w, geo, chunks, choices_of=None, **kw):
    """The prompt through `mod.round_attend` in rounds of `chunks` rows: (out [T, H V],
    choices, pool, pooled)."""
    pool, pooled, rings = store(geo)
    outs, choices, s = [], [], 0
    for n in chunks:
        r = Rows([(0, n)], [Chunk(geo["table"], geo["P"], s, 0)])
        sl = slice(s, s + n)
        o, ch = mod.round_attend(w["q"][sl], w["ckv"][sl], w["kv_norm"], 1e-5, w["w_uk"],
                                 w["w_uv_t"], N, pool, r, 0.17,
                                 None if choices_of else w["ix"], w["h"][sl], w["q_resid"][sl],
                                 pooled, rings, Hi, TOPK, KP,
                                 choices_of[sl] if choices_of else None, **kw)
        outs.append(o)
        choices += list(ch)
        s += n
    return np.concatenate(outs), choices, pool, pooled


def same(a, b):
    return np.array_equal(np.asarray(a).view(np.uint32), np.asarray(b).view(np.uint32))


def test_matches_the_definition(w):
    o1, c1, pool1, pooled1 = run(dsa, w, PAGED, [T])
    o2, c2, pool2, pooled2 = run(dsa_cpu, w, PAGED, [T])
    assert same(pool1, pool2) and same(pooled1, pooled2)           # the definition's writes
    assert [c.tolist() for c in c1] == [c.tolist() for c in c2]
    assert sum(len(c) < p + 1 for p, c in enumerate(c2)) >= 30    # most rows sparse
    assert o2.dtype == np.float32 and np.isfinite(o2).all()
    assert np.abs(o2.astype(np.float64) - o1).max() / np.abs(o1).max() <= TOL


def test_the_recorded_choices(w):
    """transformers' chosen rows (the recorded case) from this kernel's scores."""
    _, ch, _, _ = run(dsa_cpu, w, WINDOW, [T])
    for p in range(T):
        assert ch[p].tolist() == sorted(i for i in CASE["topk_indices"][p] if i >= 0), p


@pytest.mark.parametrize("chunks", [[1] * T, [3, 1, 8, 5, 13, 2, 29], [4, 4, 17, 36]])
def test_paged_in_chunks_equals_window_in_one(w, chunks):
    ow, cw, _, pw = run(dsa_cpu, w, WINDOW, [T])
    op, cp, _, pp = run(dsa_cpu, w, PAGED, chunks)
    assert same(ow, op)
    assert all(np.array_equal(a, b) for a, b in zip(cw, cp)) and len(cw) == len(cp) == T
    n = T // KP
    assert same(dsa.gather_pooled(pw, WINDOW["table"], WINDOW["P"], n, KP),
                dsa.gather_pooled(pp, PAGED["table"], PAGED["P"], n, KP))


@pytest.mark.parametrize("cut_to,parallel", [((1, H), False), ((1, H), True), ((H, 1), True),
                                             ((2, 2), True), ((3, 1), False)])
def test_any_job_cut_the_same_bytes(w, cut_to, parallel):
    base, cb, _, _ = run(dsa_cpu, w, PAGED, [T], cut_to=(1, H), parallel=False)
    got, cg, _, _ = run(dsa_cpu, w, PAGED, [T], cut_to=cut_to, parallel=parallel)
    assert same(base, got) and all(np.array_equal(a, b) for a, b in zip(cb, cg))
    one, _, _, _ = run(dsa_cpu, w, PAGED, [T - 1, 1], cut_to=cut_to, parallel=parallel)
    assert same(base[-1], one[-1])                  # a decode row alone, its heads cut


def test_two_streams_in_one_round_equal_each_alone(w):
    """Stream 0 (pages 7, 2, ...) prefills 29 rows, then decodes while stream 1 (other pages,
    the same tokens) prefills beside it in the same rounds: every row's bytes are its own."""
    alone, ca, _, _ = run(dsa_cpu, w, PAGED, [29, 1, 1, 1])
    geo = {"P": 8, "pages": 20, "table": PAGED["table"]}
    t1 = [12, 19, 13, 18, 14, 17, 15, 16]
    pool, pooled, rings = store(geo, streams=2)
    got0, got1 = [], []
    sched = [((0, 29), None), ((29, 30), (0, 9)), ((30, 31), (9, 29)), ((31, 32), (29, 30))]
    for (a0, b0), s1 in sched:
        spans, chunks, sl = [(0, b0 - a0)], [Chunk(geo["table"], 8, a0, 0)], [slice(a0, b0)]
        if s1:
            a1, b1 = s1
            spans.append((b0 - a0, b0 - a0 + b1 - a1))
            chunks.append(Chunk(t1, 8, a1, 1))
            sl.append(slice(a1, b1))
        cat = lambda k: np.concatenate([w[k][s] for s in sl])
        o, _ = dsa_cpu.round_attend(cat("q"), cat("ckv"), w["kv_norm"], 1e-5, w["w_uk"],
                                    w["w_uv_t"], N, pool, Rows(spans, chunks), 0.17, w["ix"],
                                    cat("h"), cat("q_resid"), pooled, rings, Hi, TOPK, KP)
        got0.append(o[:b0 - a0])
        if s1:
            got1.append(o[b0 - a0:])
    assert same(np.concatenate(got0), alone)
    assert same(np.concatenate(got1), alone[:30])


def test_ties_are_broken_by_position():
    """Equal pooled keys give equal scores: the earliest pools; a later pool with a higher
    score still wins over them (dsa_cpu's own sort)."""
    P, n = 32, 10
    pooled = np.zeros((2, P, 1, 16 // KP), np.float32)
    view = dsa.pooled_view(pooled, KP)
    view[:] = 1.0
    q, wt = np.ones((1, 2, 16), np.float32), np.ones((1, 2), np.float32)
    p = n * KP - 1 + 2
    out, count = np.empty((1, TOPK + KP), np.int64), np.empty(1, np.int64)
    args = (np.array([p]), np.zeros(1, np.int64), np.array([[1, 0]]), np.array([P]), q, wt)
    dsa_cpu._choose(*args, view, TOPK, KP, out, count)
    got = out[0, :count[0]]
    assert sorted({int(r) // KP for r in got[:TOPK]}) == [0, 1, 2, 3]
    assert got[TOPK:].tolist() == [n * KP, n * KP + 1]
    view[0, 1] = 2.0                                         # pool 9: table [1, 0], slot 1
    dsa_cpu._choose(*args, view, TOPK, KP, out, count)
    assert sorted({int(r) // KP for r in out[0, :TOPK]}) == [0, 1, 2, 9]


def test_a_shared_layer_reads_the_full_layers_choice(w):
    _, ch, _, _ = run(dsa_cpu, w, PAGED, [T])
    o1, c1, _, _ = run(dsa, w, PAGED, [T], choices_of=ch)
    o2, c2, _, _ = run(dsa_cpu, w, PAGED, [20, 41], choices_of=ch)
    assert all(np.array_equal(a, b) for a, b in zip(c2, ch))
    assert np.abs(o2.astype(np.float64) - o1).max() / np.abs(o1).max() <= TOL
    with pytest.raises(ValueError, match="shared indexer layer ran before any full one"):
        dsa_cpu.round_attend(w["q"][:1], w["ckv"][:1], w["kv_norm"], 1e-5, w["w_uk"],
                             w["w_uv_t"], N, store(PAGED)[0],
                             Rows([(0, 1)], [Chunk(PAGED["table"], 8, 0, 0)]), 0.17, None,
                             w["h"][:1], w["q_resid"][:1], None, None, Hi, TOPK, KP, None)


def test_index_query_heads_within_rounding_and_a_row_alone_equals_it_in_a_batch():
    """dsa_cpu.index_query (q_lora a multiple of 16: dot16 chains, the weight in blocks of JB
    rows) against the definition, and each row's bytes its own (blocks cut anywhere)."""
    rng = np.random.default_rng(7)
    QL, D, T_, Hi_, Di_ = 48, 32, 9, 4, 32
    wq_t = rng.standard_normal((QL, Hi_ * Di_)).astype(np.float32)
    wproj_t = rng.standard_normal((D, Hi_)).astype(np.float32)
    qr = rng.standard_normal((T_, QL)).astype(np.float32)
    h = rng.standard_normal((T_, D)).astype(np.float32)
    q1, w1 = dsa.index_query(qr, wq_t, h, wproj_t, Hi_)
    q2, w2 = dsa_cpu.index_query(qr, wq_t, h, wproj_t, Hi_)
    assert q2.shape == q1.shape == (T_, Hi_, Di_) and same(w1, w2)
    assert np.abs(q2.astype(np.float64) - q1).max() / np.abs(q1).max() <= TOL
    for t in range(T_):
        one, _ = dsa_cpu.index_query(qr[t:t + 1], wq_t, h[t:t + 1], wproj_t, Hi_)
        assert same(one[0], q2[t]), t


@pytest.mark.parametrize("chunks", [[1] * T, [KP * (TOPK // KP + 1) - 1, 1, 1, T - KP * (TOPK // KP + 1) - 1],
                                    [KP * (TOPK // KP + 1), T - KP * (TOPK // KP + 1)]])
def test_a_dense_round_skips_the_scores_with_the_same_bytes(w, chunks, monkeypatch):
    """A round whose every row is in the dense pass ((p + 1) // kpool <= topk // kpool: rows
    0 .. p) computes no query heads and no pool scores (dsa_cpu.all_dense); the first round
    with a row past it does. Pages, pooled keys, choices and outputs equal the scored path's
    (DENSE_SHORTCUT off) byte for byte, and the choices the definition's."""
    last_dense = KP * (TOPK // KP + 1) - 2          # the last position of the dense pass
    assert dsa_cpu.all_dense(np.array([last_dense]), TOPK, KP)
    assert not dsa_cpu.all_dense(np.array([last_dense + 1]), TOPK, KP)
    assert not dsa_cpu.all_dense(np.array([0, last_dense + 1]), TOPK, KP)
    monkeypatch.setattr(dsa_cpu, "DENSE_SHORTCUT", False)
    o0, c0, pool0, pooled0 = run(dsa_cpu, w, PAGED, chunks)
    monkeypatch.setattr(dsa_cpu, "DENSE_SHORTCUT", True)
    seen = []
    inner = dsa_cpu.index_query
    monkeypatch.setattr(dsa_cpu, "index_query", lambda q_resid, *a: seen.append(len(q_resid)) or inner(q_resid, *a))
    o1, c1, pool1, pooled1 = run(dsa_cpu, w, PAGED, chunks)
    assert same(o0, o1) and same(pool0, pool1) and same(pooled0, pooled1)
    assert all(np.array_equal(a, b) for a, b in zip(c0, c1)) and len(c0) == len(c1) == T
    _, cd, _, _ = run(dsa, w, PAGED, [T])
    assert [c.tolist() for c in cd] == [c.tolist() for c in c1]
    # the scored rounds: exactly those holding a row past the dense pass
    ends = np.cumsum(chunks)
    assert seen == [n for n, e in zip(chunks, ends) if e - 1 > last_dense]
