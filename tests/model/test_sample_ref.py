"""The numpy definition of on-device sampling (kernels/sample.py): its hash and exp, the set it
keeps against a sort-based statement of the same rules, the byte-at-a-time threshold search
the kernel runs against the definition's, its shaping against the host sampler's
(server/engine/sampler.py) bit for bit, its draw against the softmax it claims, and the
scheduler's wiring of a device draw (a fake device whose draw is the definition): a request
alone equals the same request among 63 others."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from kernels import sample
from server.engine.sampler import SamplerState, penalise, sample as host_sample, shape
from server.requests import SamplingParams

rng = np.random.default_rng()
F32 = np.float32
VOCABS = (10, 257, 5000, 49152)


def test_hash_and_uniform():
    assert sample.mix(0) == 0xE220A8397B1DCDAF             # splitmix64's first output from 0
    us = [sample.uniform(s, 3, t) for s in (0, 1, 2**64 - 1) for t in range(50)]
    assert all(0.0 <= u < 1.0 for u in us) and len(set(us)) == len(us)
    assert sample.uniform(5, 0, 7) == sample.uniform(5, 0, 7)
    assert sample.uniform(-1, 0, 7) == sample.uniform(2**64 - 1, 0, 7)


def test_expf_is_exp():
    d = np.concatenate([-np.geomspace(1e-9, 31.9, 20001), [0.0]]).astype(F32)
    assert np.abs(sample.expf_(d) / np.exp(d.astype(np.float64)) - 1).max() < 2e-6
    assert sample.expf_(np.array([0.0], dtype=F32))[0] == 1.0
    assert (sample.expf_(np.array([-32.5, -np.inf, np.nan], dtype=F32)) == 0).all()
    assert sample.expf_(d).dtype == F32


def _sorted_kept(y, T, K, P, M):
    """The kept set by sorting the weights (the definition's integer weights): top-k (ties
    kept), min-p, then the smallest top set of keys whose mass reaches P of the top-k mass."""
    q = sample.weights(y, T, M).astype(object)
    k = sample.keys(y)
    keep = np.ones(y.size, dtype=bool)
    if 0 < K < y.size:
        keep &= k >= np.sort(k)[-K]
    if P < 1:
        total = float(sum(q[keep]))
        for u in sorted(set(k[keep].tolist()), reverse=True):
            s = sum(q[k >= u])
            if float(s) >= float(P) * total and s > 0:
                keep &= k >= u
                break
    return keep & (sample.weights(y, T, M) > 0)


def _bytewise(y, T, K, P, M):
    """tk and tp as the kernel finds them: a byte of the key at a time, from histograms."""
    k = sample.keys(y)
    q = sample.weights(y, T, M).astype(object)

    def search(pred):
        pre, base = 0, 0
        for shift in (24, 16, 8, 0):
            sel = (k >> (shift + 8)) == (pre >> (shift + 8)) if shift != 24 else np.ones(k.size, bool)
            d = (k >> shift) & 255
            h = [0] * 256
            for dj, v in zip(d[sel].tolist(), pred.vals[sel].tolist()):
                h[dj] += v
            run = base
            for j in range(255, -1, -1):
                if pred(run + h[j]):
                    pre |= j << shift
                    base = run
                    break
                run += h[j]
            else:
                raise AssertionError("no byte satisfies the predicate")
        return pre

    class Count:
        vals = np.ones(k.size, dtype=object)
        __call__ = staticmethod(lambda c: c >= K)
    tk = search(Count()) if 0 < K < y.size else 0
    tp = tk
    if P < 1:
        target = float(P) * float(sum(q[k >= tk]))

        class Mass:
            vals = q
            __call__ = staticmethod(lambda c: float(c) >= target and c > 0)
        tp = search(Mass())
    return tk, tp


def _logits(V, scale, ties, masked):
    x = (rng.standard_normal(V) * scale).astype(F32)
    if ties:
        x = np.round(x * 4) / 4                           # many equal logits
    if masked and V > 2:
        x[rng.integers(0, V, max(1, V // 10))] = -np.inf
    return x.astype(F32)


fields = st.tuples(st.sampled_from([1e-5, 2e-5, 1e-3, 0.3, 0.7, 1.0, 1.3, 2.5]),
                   st.sampled_from([0, 1, 2, 5, 40, 1000]),
                   st.sampled_from([1.0, 0.99, 0.95, 0.9, 0.5, 0.2, 1e-3]),
                   st.sampled_from([0.0, 0.01, 0.05, 0.3, 1.0]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(V=st.sampled_from(VOCABS), f=fields, scale=st.floats(0.3, 8), ties=st.booleans(),
       masked=st.booleans(), seed=st.integers(0, 2**64 - 1), step=st.integers(0, 10**6))
def test_row_keeps_the_sorted_set_and_bytewise_thresholds(V, f, scale, ties, masked, seed, step):
    T, K, P, M = f
    y = sample.shape(_logits(V, scale, ties, masked))
    h = sample.draw_hash(seed, 7, step)
    tok, kept = sample.row(y, T, K, P, M, h)
    if not F32(T) >= F32(sample.MIN_TEMPERATURE):
        assert tok == int(np.argmax(y))
        return
    assert kept[tok] and np.isfinite(y[tok])
    if V <= 5000:                                         # the object sums are slow
        assert (kept == _sorted_kept(y, T, K, P, M)).all()
        tk, tp = _bytewise(y, T, K, P, M)
        k = sample.keys(y)
        assert (kept == ((k >= tp) & (sample.weights(y, T, M) > 0))).all()
        assert tk <= tp
    if 0 < K < V:
        assert len(np.unique(y[kept])) <= K


@settings(max_examples=40, deadline=None)
@given(V=st.sampled_from(VOCABS), rep=st.sampled_from([1.0, 0.8, 1.3]),
       pres=st.sampled_from([0.0, 0.5, -0.4]), freq=st.sampled_from([0.0, 0.3, 1.1]),
       nbias=st.integers(0, 6), min_tokens=st.integers(0, 3), produced=st.integers(0, 5),
       grammar=st.booleans())
def test_shaping_equals_the_host_sampler(V, rep, pres, freq, nbias, min_tokens, produced, grammar):
    """Penalties, logit_bias, min_tokens and a grammar mask as the device gets them
    (SamplerState.device_inputs) shape the row to the host sampler's bytes."""
    x = _logits(V, 3.0, True, False)
    bias = tuple((int(t), float(b)) for t, b in zip(rng.choice(V, nbias, replace=False),
                                                     rng.choice([-100.0, -2.5, 0.75, 100.0], nbias)))
    p = SamplingParams(temperature=0.8, repetition_penalty=rep, presence_penalty=pres,
                       frequency_penalty=freq, logit_bias=bias, min_tokens=min_tokens,
                       stop_token_ids=(V - 1,))
    prompt = rng.integers(0, V, 12).tolist()
    s = SamplerState(p, prompt, eos_ids=(0,))
    words = None
    if grammar:
        ok = rng.random(V) < 0.5
        ok[int(np.argmax(x))] = True
        words = np.packbits(np.concatenate([ok, np.zeros(-V % 32, bool)]),
                            bitorder="little").view(np.uint32)

        class C:
            done = False
            allowed_ = ok

            def allowed(self, n):
                return self.allowed_[:n]

            def words(self):
                return words

            def consume(self, t):
                pass
        s.constraint = C()
    early = SamplerState(p, prompt, eos_ids=(0,))      # device rows kept up token by token
    early.constraint = s.constraint
    early.device_inputs()
    for t in rng.integers(0, V, produced).tolist():
        s.record(t)
        early.record(t)
    want = x.copy()
    want = penalise(want, s)
    if s.shaped:
        try:
            want = shape(want, s)
        except ValueError:
            return
    d = s.device_inputs()
    got = sample.shape(x, d["rep"], d["pres"], d["freq"], d["adj"], d["mask"])
    assert got.tobytes() == (want + F32(0)).tobytes()
    assert not d["plain"]
    e = early.device_inputs()
    assert sample.shape(x, e["rep"], e["pres"], e["freq"], e["adj"], e["mask"]).tobytes() == got.tobytes()
    ids = sample.split_adj(e["adj"])[0][:, 0]
    assert len(np.unique(ids)) == len(ids)


def test_shaped_greedy_and_the_fault_codes():
    V = 300
    x = _logits(V, 2.0, False, False)
    top = int(np.argmax(x))
    p = SamplingParams(temperature=0.0, logit_bias=((top, -100.0),))
    s = SamplerState(p, [1, 2])
    d = s.device_inputs()
    y = sample.shape(x, d["rep"], d["pres"], d["freq"], d["adj"], d["mask"])
    tok = sample.row(y, d["temperature"], 0, 1.0, 0.0, 0, d["plain"])[0]
    assert tok == host_sample(x, SamplerState(p, [1, 2]))[0] != top
    bad = x.copy()
    bad[5] = np.nan
    assert sample.row(bad, 0.8, 0, 1.0, 0.0, 1)[0] == -2
    assert sample.row(bad, 0.0, 0, 1.0, 0.0, 1, plain=True)[0] == 5   # numpy's arg-max
    assert sample.row(np.full(V, -np.inf, F32), 0.8, 0, 1.0, 0.0, 1)[0] == -1


@pytest.mark.parametrize("T,K,P,M", [(1.0, 0, 1.0, 0.0), (0.7, 0, 0.9, 0.0), (1.3, 3, 1.0, 0.0),
                                     (1.0, 0, 1.0, 0.2), (0.9, 4, 0.8, 0.05)])
def test_draws_follow_the_truncated_softmax(T, K, P, M):
    V, N = 10, 20000
    x = np.array([2.0, 1.5, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -3.0, -np.inf], dtype=F32)
    y = sample.shape(x)
    kept = sample.row(y, T, K, P, M, 0)[1]
    q = np.where(kept, sample.weights(y, T, M).astype(np.float64), 0.0)
    prob = q / q.sum()
    n = np.bincount([sample.row(y, T, K, P, M, sample.draw_hash(3, 0, t))[0] for t in range(N)],
                    minlength=V) / N
    assert (n[~kept] == 0).all()
    assert (np.abs(n - prob) <= 5 * np.sqrt(prob * (1 - prob) / N) + 1e-4).all()


def test_deterministic_and_row_independent():
    R, V = 6, 3000
    x = (rng.standard_normal((R, V)) * 2).astype(F32)
    args = dict(rows=[3, 0, 5, 3, 1, 2], temperature=[1.0, 0.8, 1.0, 1.0, 0.5, 1.2],
                top_k=[0, 40, 0, 0, 10, 0], top_p=[1.0, 0.9, 0.7, 1.0, 1.0, 0.95],
                min_p=[0.0, 0.0, 0.05, 0.0, 0.0, 0.01], seed=[1, 2, 3, 1, 5, 2**64 - 1],
                salt=[0] * 6, step=[0, 1, 2, 0, 4, 5])
    a = sample.ref(x, **args)
    assert a.tolist() == sample.ref(x, **args).tolist()
    assert a[0] == a[3]                                   # same row, seed, step: same token
    for n in range(6):
        one = {k: [v[n]] for k, v in args.items()}
        assert sample.ref(x, **one).tolist() == [a[n]]
    flat = (rng.standard_normal((1, V)) * 0.3).astype(F32)
    draws = [sample.ref(flat, [0], [1.0], [0], [1.0], [0.0], [9], [0], [t])[0] for t in range(20)]
    assert len(set(draws)) > 15                           # the step moves the draw


class FakeDeviceLogits:
    """numpy logits that answer like DeviceLogits, drawing with the definition."""
    calls: list = []

    def __init__(self, a):
        self.a = a

    def __len__(self):
        return len(self.a)

    def __getitem__(self, i):
        return self.a[i]

    def argmax_rows(self):
        return np.argmax(self.a, axis=1).tolist()

    def sample_rows(self, rows, states, steps):
        from server.engine.logits import draw_rows
        FakeDeviceLogits.calls.append(len(rows))
        return draw_rows(lambda args: sample.ref(self.a, rows, step=steps, **args), states)


_ENGINES: dict = {}


def _serve(reqs, streams=4, device="cpu"):
    from server.step_driver import LocalDriver
    from server.engine.build import open_model
    from server.planner.admission import Admission
    from server.ranks.steps import PoolStep
    from server.requests import GenRequest
    from server.scheduler import Scheduler

    class Driver(LocalDriver):
        def run(self, step):
            out = super().run(step)
            return FakeDeviceLogits(out) if isinstance(out, np.ndarray) else out

    # the GPU's attention takes head dims 64 and 128: SmolLM2's shape there, tiny's here;
    # one engine a device (each serve gets a fresh pool and streams)
    if device not in _ENGINES:
        model = "dummy:tiny" if device == "cpu" else "dummy:smollm2-135m"
        _ENGINES[device] = open_model(model, device=device, progress=False).engine
    eng = _ENGINES[device]
    pages = streams * 16
    adm = Admission(paged=True, pages=pages, page_rows=4, streams=streams, context=64)
    s = Scheduler(Driver(eng), adm, context=64, prefill_chunk=8, seed_salt=3)
    eng.apply(PoolStep(True, pages, 4, (eng.page_bytes(4),), streams, 64))
    s.start()

    async def one(rid, params, prompt):
        req = GenRequest(rid, prompt, params, eos_ids=frozenset({0}))
        return [ev.token_id async for ev in s.generate(req) if ev.token_id is not None]

    async def all_():
        return await asyncio.gather(*(one(*r) for r in reqs))
    try:
        return asyncio.run(all_())
    finally:
        s.stop()


def test_scheduler_draws_every_row_on_the_device(monkeypatch):
    import server.host_sampling as drv
    host_calls = []
    real = drv.sample
    monkeypatch.setattr(drv, "sample", lambda row, st: host_calls.append(st) or real(row, st))
    P = [5, 6, 7, 8, 9]
    dev = SamplingParams(max_tokens=8, temperature=0.9, top_p=0.9, top_k=20, seed=42, ignore_eos=True)
    pen = SamplingParams(max_tokens=8, temperature=0.9, presence_penalty=0.5, seed=1,
                         repetition_penalty=1.2, ignore_eos=True, logprobs=2)
    bias = SamplingParams(max_tokens=8, temperature=0.0, logit_bias=((7, 100.0),), ignore_eos=True)
    greedy = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    FakeDeviceLogits.calls.clear()
    (alone,) = _serve([("a", dev, P)])
    assert len(alone) == 8 and sum(FakeDeviceLogits.calls) == 8
    mixed = _serve([("p", pen, P), ("a", dev, P), ("b", bias, P), ("g", greedy, P)])
    assert mixed[1] == alone                             # same seed, same reply among others
    assert mixed[2] == [7] * 8                           # +100 forces the token
    assert not host_calls                                # penalties, bias: on the device


def test_a_failing_row_ends_alone(monkeypatch):
    """A request whose device inputs fail (its grammar matcher, say) ends with an error; the
    round's other rows are still drawn on the device, their replies as alone."""
    from server.engine import sampler as smod
    real = smod.SamplerState.device_inputs

    def inputs(self):
        if self.params.seed == 666 and self.produced >= 2:
            raise RuntimeError("the grammar matcher failed: test")
        return real(self)
    monkeypatch.setattr(smod.SamplerState, "device_inputs", inputs)
    P = [5, 6, 7, 8, 9]
    ok = SamplingParams(max_tokens=8, temperature=0.9, top_p=0.9, seed=42, ignore_eos=True)
    bad = SamplingParams(max_tokens=8, temperature=0.9, seed=666, ignore_eos=True)
    (alone,) = _serve([("a", ok, P)])
    a, b = _serve([("a", ok, P), ("b", bad, P)])
    assert a == alone and len(b) == 2


def serve_mix(device):
    """64 requests of every kind at once, then five of them alone -> (alone {i: reply},
    the 64 replies, the kinds): also run on the GPU (tests/gpu/test_sample.py)."""
    kinds = [dict(temperature=0.8, top_p=0.95), dict(temperature=1.0, top_k=40),
             dict(temperature=0.7, min_p=0.05), dict(temperature=0.0),
             dict(temperature=0.9, frequency_penalty=0.7, presence_penalty=0.2),
             dict(temperature=1.1, repetition_penalty=1.3, top_p=0.9),
             dict(temperature=0.6, logit_bias=((3, -100.0), (4, 2.0)), min_tokens=3)]
    r = np.random.default_rng(5)
    reqs = [(f"r{i}", SamplingParams(max_tokens=6, seed=1000 + i, **kinds[i % len(kinds)]),
             [int(t) for t in r.integers(1, 200, 3 + i % 5)]) for i in range(64)]
    crowd = _serve(reqs, streams=64, device=device)
    alone = {i: _serve([reqs[i]], device=device)[0] for i in (0, 1, 4, 5, 6)}
    return alone, crowd, [kinds[i % len(kinds)] for i in range(64)]


def test_a_sampled_request_alone_equals_it_among_63_others():
    alone, crowd, kinds = serve_mix("cpu")
    for i, reply in alone.items():
        assert len(reply) == 6 and reply == crowd[i], kinds[i]
