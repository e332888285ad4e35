"""On-device sampling (kernels/sample_cuda.py) against its numpy definition (kernels/sample.py):
token for token at 4 vocabulary sizes for every field and their combinations (temperature,
top-k, top-p, min-p, repetition / presence / frequency penalties, logit bias, banned tokens,
a grammar bitmask, greedy plain and shaped, NaN and all-masked rows), fixed settings and
hypothesis-drawn ones; bf16 logits through DeviceLogits.sample_rows with real SamplerStates;
the empirical distribution of a toy vocabulary equal to the truncated softmax; same seed same
tokens; a row's token independent of the other rows; and through the scheduler on the GPU,
a sampled request alone equals the same request among 63 others."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tests.gpu.conftest import bf16_round

rng = np.random.default_rng()
M64 = 2**64
VOCABS = (128256, 49152, 1000, 10)

# (temperature, top_k, top_p, min_p)
SETTINGS = [
    (1.0, 0, 1.0, 0.0), (0.7, 50, 1.0, 0.0), (1.0, 1000, 1.0, 0.0), (1.2, 5, 1.0, 0.0),
    (1.0, 0, 0.9, 0.0), (0.8, 0, 0.5, 0.0), (1.3, 0, 0.99, 0.0), (1.0, 0, 0.2, 0.0),
    (1.0, 0, 1.0, 0.05), (0.9, 0, 1.0, 0.3),
    (0.8, 40, 0.95, 0.0), (1.0, 100, 0.9, 0.02), (0.6, 0, 0.8, 0.1), (1.0, 20, 0.7, 0.05),
    (1e-5, 0, 1.0, 0.0), (1e-4, 50, 0.9, 0.0), (1e-3, 0, 0.95, 0.0), (2e-5, 3, 1.0, 0.5),
    (0.0, 0, 1.0, 0.0), (0.8, 1, 1.0, 0.0),
]


def _logits(R, V):
    x = rng.standard_normal((R, V)).astype(np.float32) * rng.uniform(0.5, 6, (R, 1)).astype(np.float32)
    x[::3] = bf16_round(x[::3])                       # many ties
    x[1::4, rng.integers(0, V, max(1, V // 10))] = -np.inf   # masked tokens
    return x


def _args(S, R):
    n = len(S)
    return dict(rows=rng.integers(0, R, n).tolist(),
                temperature=[s[0] for s in S], top_k=[s[1] for s in S],
                top_p=[s[2] for s in S], min_p=[s[3] for s in S],
                seed=[int(v) for v in rng.integers(0, M64, n, dtype=np.uint64)],
                salt=[int(v) for v in rng.integers(0, M64, n, dtype=np.uint64)],
                step=rng.integers(0, 5000, n).tolist())


def _shaping(n, V, every=2):
    """Penalties, bias, bans and masks on every `every`-th row; plain greedy flags on rows
    nothing shapes."""
    rep, pres, freq, adj, mask = [], [], [], [], []
    for i in range(n):
        if i % every:
            rep.append(1.0), pres.append(0.0), freq.append(0.0), adj.append(()), mask.append(None)
            continue
        rep.append(float(rng.choice([1.0, 0.8, 1.3]))), pres.append(float(rng.choice([0.0, 0.4])))
        freq.append(float(rng.choice([0.0, 0.9])))
        ids = rng.choice(V, min(V, int(rng.integers(1, 300))), replace=False)
        a = np.zeros((ids.size, 4))
        a[:, 0] = ids
        a[:, 1] = rng.integers(0, 4, ids.size)
        a[:, 2] = rng.integers(0, 4, ids.size) & rng.choice([1, 3], ids.size)
        a[:, 3] = np.where(rng.random(ids.size) < 0.3, rng.choice([-100.0, 5.0, 100.0], ids.size), 0)
        adj.append(a)
        if rng.random() < 0.5:
            ok = rng.random(V) < rng.choice([0.01, 0.5, 0.99])
            ok[rng.integers(0, V)] = True
            mask.append(np.packbits(np.concatenate([ok, np.zeros(-V % 32, bool)]),
                                    bitorder="little").view(np.uint32))
        else:
            mask.append(None)
    return dict(rep=rep, pres=pres, freq=freq, adj=adj, mask=mask)


def _plain(a, sh):
    return [T < 1e-5 and not len(sh["adj"][i]) and sh["mask"][i] is None
            for i, T in enumerate(a["temperature"])]


@pytest.mark.parametrize("V", VOCABS)
def test_kernel_equals_definition(V):
    import cupy as cp
    from kernels import sample, sample_cuda
    S = SETTINGS * 3
    R = 24
    x = _logits(R, V)
    x[5, 7 % V] = np.nan                              # a fault: -2 (sampled), numpy's rule (plain)
    x[6] = -np.inf                                     # nothing allowed: -1
    a = _args(S, R)
    got = sample_cuda.cuda(cp.asarray(x), **a).get()
    want = sample.ref(x, **a)
    assert got.tolist() == want.tolist()
    sh = _shaping(len(S), V)
    sh["plain"] = _plain(a, sh)
    got = sample_cuda.cuda(cp.asarray(x), **a, **sh).get()
    want = sample.ref(x, **a, **sh)
    assert got.tolist() == want.tolist()
    for n, r in enumerate(a["rows"]):                 # inside the kept set
        if want[n] < 0 or sh["plain"][n]:
            continue
        y = sample.shape(x[r], sh["rep"][n], sh["pres"][n], sh["freq"][n], sh["adj"][n], sh["mask"][n])
        h = sample.draw_hash(a["seed"][n], a["salt"][n], a["step"][n])
        tok, kept = sample.row(y, *S[n], h)
        assert tok == got[n] and kept[tok] and np.isfinite(y[tok])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(V=st.sampled_from(VOCABS), n=st.integers(1, 6), data=st.data())
def test_kernel_equals_definition_hypothesis(V, n, data):
    import cupy as cp
    from kernels import sample, sample_cuda
    S = [data.draw(st.tuples(st.sampled_from([0.0, 1e-5, 0.01, 0.5, 0.8, 1.0, 1.5]),
                             st.sampled_from([0, 1, 3, 40, 2000]),
                             st.sampled_from([1.0, 0.999, 0.95, 0.8, 0.3, 1e-4]),
                             st.sampled_from([0.0, 0.02, 0.2, 1.0]))) for _ in range(n)]
    x = _logits(n, V)
    a = _args(S, n)
    sh = _shaping(n, V, every=data.draw(st.sampled_from([1, 2, 7])))
    sh["plain"] = _plain(a, sh)
    got = sample_cuda.cuda(cp.asarray(x), **a, **sh).get()
    assert got.tolist() == sample.ref(x, **a, **sh).tolist()


def test_bf16_logits_and_device_logits_entry():
    import cupy as cp
    from kernels import sample, sample_cuda
    from kernels.common_cuda import as_bf16
    from server.engine.logits import DeviceLogits, device_args
    from server.engine.sampler import SamplerState
    from server.requests import SamplingParams
    x = bf16_round(_logits(8, 32000))
    a = _args(SETTINGS, 8)
    got = sample_cuda.cuda(as_bf16(cp.asarray(x)), **a).get()
    assert got.tolist() == sample.ref(x, **a).tolist()
    states = []
    for n, (T, K, P, M) in enumerate(SETTINGS):
        extra = [dict(), dict(logit_bias=((3, 100.0),)), dict(repetition_penalty=1.2),
                 dict(frequency_penalty=0.5, presence_penalty=0.3), dict(min_tokens=4)][n % 5]
        s = SamplerState(SamplingParams(temperature=T, top_k=K, top_p=P, min_p=M,
                                        seed=a["seed"][n], **extra), [1, 2, 9], salt=7, eos_ids=(5,))
        for t in rng.integers(0, 32000, 3).tolist():
            s.record(t)
        states.append(s)
    toks = DeviceLogits(as_bf16(cp.asarray(x))).sample_rows(a["rows"], states, a["step"])
    assert toks == sample.ref(x, a["rows"], step=a["step"], **device_args(states)[0]).tolist()


@pytest.mark.parametrize("T,K,P,M", [(1.0, 0, 1.0, 0.0), (0.7, 4, 1.0, 0.0),
                                     (1.0, 0, 0.8, 0.0), (1.5, 0, 1.0, 0.1),
                                     (1.0, 6, 0.9, 0.02)])
def test_distribution_matches_softmax(T, K, P, M):
    import cupy as cp
    from kernels import sample_cuda
    N, V = 20000, 10
    x = np.array([2.0, 1.5, 1.0, 0.7, 0.3, 0.0, -0.4, -1.0, -2.0, -3.0], dtype=np.float32)
    x = x[rng.permutation(V)]
    seed = int(rng.integers(0, M64, dtype=np.uint64))
    got = sample_cuda.cuda(cp.asarray(x[None]), [0] * N, [T] * N, [K] * N, [P] * N, [M] * N,
                           [seed] * N, [3] * N, list(range(N))).get()
    p = np.exp((x.astype(np.float64) - x.max()) / T)       # the distribution, by sorting
    order = np.argsort(-x, kind="stable")
    keep = np.zeros(V, dtype=bool)
    keep[order[:K] if K else order] = True
    keep &= p >= M * p.max()
    q = np.where(keep, p, 0) / np.where(keep, p, 0).sum()
    if P < 1:
        cum = np.cumsum(q[order])
        cut = int(np.searchsorted(cum, P)) + 1
        keep2 = np.zeros(V, dtype=bool)
        keep2[order[:cut]] = True
        q = np.where(keep2, q, 0) / np.where(keep2, q, 0).sum()
    freq = np.bincount(got, minlength=V) / N
    tol = 5 * np.sqrt(q * (1 - q) / N) + 1e-4
    assert (freq[q == 0] == 0).all(), (freq, q)
    assert (np.abs(freq - q) <= tol).all(), (freq, q)


def test_same_seed_same_tokens_and_row_independence():
    import cupy as cp
    from kernels import sample_cuda
    R, V = 40, 128256
    x = cp.asarray(_logits(R, V))
    S = (SETTINGS * 3)[:R]
    a = _args(S, R)
    a["rows"] = list(range(R))
    a.update(_shaping(R, V, every=3))
    first = sample_cuda.cuda(x, **a).get()
    assert sample_cuda.cuda(x, **a).get().tolist() == first.tolist()
    flat = cp.asarray(rng.standard_normal((8, V)).astype(np.float32) * 0.5)   # near-uniform
    one = dict(rows=list(range(8)), temperature=[1.0] * 8, top_k=[0] * 8, top_p=[1.0] * 8,
               min_p=[0.0] * 8, seed=[11] * 8, salt=[0] * 8, step=[0] * 8)
    t1 = sample_cuda.cuda(flat, **one).get()
    assert sample_cuda.cuda(flat, **one).get().tolist() == t1.tolist()
    t2 = sample_cuda.cuda(flat, **dict(one, seed=[12] * 8)).get()
    t3 = sample_cuda.cuda(flat, **dict(one, step=[1] * 8)).get()
    assert (t1 != t2).sum() >= 6 and (t1 != t3).sum() >= 6
    for n in (0, 5, 17, R - 1):                        # alone, and moved among other rows
        alone = {k: [v[n]] for k, v in a.items()}
        assert sample_cuda.cuda(x, **alone).get().tolist() == [first[n]]
        perm = rng.permutation(R)
        mixed = {k: [v[i] for i in perm] for k, v in a.items()}
        got = sample_cuda.cuda(x, **mixed).get()
        assert got[int(np.where(perm == n)[0][0])] == first[n]


def test_scheduler_sampled_alone_equals_among_63_others_gpu():
    """The scheduler on the GPU (graphs, DeviceLogits, this kernel): same seed, same reply
    alone and among 63 other requests of every kind."""
    from tests.model.test_sample_ref import serve_mix
    alone, crowd, kinds = serve_mix("cuda")
    for i, reply in alone.items():
        assert len(reply) == 6 and reply == crowd[i], kinds[i]


@pytest.mark.parametrize("R,V", [(1, 49152), (5, 128256), (3, 7), (64, 1000)])
def test_argmax_kernel_equals_numpy(R, V):
    """Our arg-max == numpy's argmax(axis=1) on float32 and bf16 rows: ties to the first
    index (a row of equal values, planted duplicates of the maximum), NaN first (numpy's
    rule), -inf rows, strided rows; DeviceLogits.argmax_rows goes through it."""
    import cupy as cp
    from kernels import argmax_cuda
    from kernels.common_cuda import as_bf16, as_f32
    from server.engine.logits import DeviceLogits
    x = rng.standard_normal((R, V)).astype(np.float32)
    x[0, :] = 1.5                                            # all tied: index 0
    if R > 1:
        j = rng.integers(0, V, 3)
        x[1, j] = 9.0                                        # the maximum three times
    if R > 2:
        x[2, :] = -np.inf
        x[2, V // 2] = np.nan                                # NaN wins, as in numpy
    for dev in (cp.asarray(x), as_bf16(cp.asarray(x))):
        want = np.argmax(as_f32(dev).get(), axis=1)
        assert argmax_cuda.cuda(dev).get().tolist() == want.tolist()
        assert DeviceLogits(dev).argmax_rows() == want.tolist()
    wide = cp.asarray(np.concatenate([x, x], axis=1))[:, V:]   # rows with a stride of 2V
    assert argmax_cuda.cuda(wide).get().tolist() == np.argmax(x, axis=1).tolist()
