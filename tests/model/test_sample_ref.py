"""The numpy reference of on-device sampling (kernels/sample.py): its hash, its exp, the set
it keeps (against a sort-based definition), its determinism; and the scheduler's wiring of a
device draw (a fake device whose draw is the reference)."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from kernels import sample

rng = np.random.default_rng()


def test_hash_and_uniform():
    assert sample.mix(0) == 0xE220A8397B1DCDAF             # splitmix64's first output from 0
    us = [sample.uniform(s, 3, t) for s in (0, 1, 2**64 - 1) for t in range(50)]
    assert all(0.0 <= u < 1.0 for u in us) and len(set(us)) == len(us)
    assert sample.uniform(5, 0, 7) == sample.uniform(5, 0, 7)
    assert sample.uniform(-1, 0, 7) == sample.uniform(2**64 - 1, 0, 7)


def test_exp_is_exp():
    d = np.concatenate([-np.geomspace(1e-12, 699, 20001), [0.0]])
    assert np.abs(sample.exp_(d) / np.exp(d) - 1).max() < 1e-15
    assert sample.exp_(np.array([0.0]))[0] == 1.0
    assert (sample.exp_(np.array([-700.5, -np.inf, np.nan])) == 0).all()


def _sorted_kept(x, T, K, P, M):
    """The kept set by sorting: top-k (ties kept), min-p, then the smallest top set reaching P."""
    x = x.astype(np.float64)
    ok = np.isfinite(x)
    d = np.where(ok, x / T - x[ok].max() / T, -np.inf)
    w = np.where(d >= -700, np.exp(d), 0.0)             # the reference's exp is 0 under -700
    keep = w > 0
    if 0 < K < x.size:
        keep &= x >= np.sort(x)[-K]
    keep &= w >= M
    if P < 1:
        order = np.argsort(-np.where(keep, x, -np.inf), kind="stable")
        cum = np.cumsum(np.where(keep, w, 0.0)[order])
        cut = int(np.searchsorted(cum, P * cum[-1]))
        keep &= x >= x[order[cut]]
    return keep


SETTINGS = [(1.0, 0, 1.0, 0.0), (0.7, 50, 1.0, 0.0), (1.2, 5, 1.0, 0.0), (1.0, 0, 0.9, 0.0),
            (0.8, 0, 0.5, 0.0), (1.0, 0, 0.2, 0.0), (1.0, 0, 1.0, 0.05), (0.9, 0, 1.0, 0.3),
            (0.8, 40, 0.95, 0.0), (1.0, 100, 0.9, 0.02), (0.6, 0, 0.8, 0.1), (1e-5, 0, 1.0, 0.0),
            (1e-4, 50, 0.9, 0.0)]


@pytest.mark.parametrize("T,K,P,M", SETTINGS)
def test_support_matches_the_sorted_definition(T, K, P, M):
    V = 5000
    for ties in (False, True):
        x = (rng.standard_normal(V) * rng.uniform(0.5, 5)).astype(np.float32)
        if ties:
            x = np.round(x * 8) / 8                       # many equal logits
        x[rng.integers(0, V, 100)] = -np.inf
        for _ in range(3):
            tok, kept = sample.row(x, T, K, P, M, float(rng.random()))
            assert kept[tok]
            assert (kept == _sorted_kept(x, T, K, P, M)).all()


def test_deterministic_and_row_independent():
    R, V = 6, 3000
    x = (rng.standard_normal((R, V)) * 2).astype(np.float32)
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
    flat = (rng.standard_normal((1, V)) * 0.3).astype(np.float32)
    draws = [sample.ref(flat, [0], [1.0], [0], [1.0], [0.0], [9], [0], [t])[0] for t in range(20)]
    assert len(set(draws)) > 15                           # the step moves the draw


class _FakeDeviceLogits:
    """numpy logits that answer like DeviceLogits, drawing with the reference."""
    calls = []

    def __init__(self, a):
        self.a = a

    def __len__(self):
        return len(self.a)

    def __getitem__(self, i):
        return self.a[i]

    def argmax_rows(self):
        return np.argmax(self.a, axis=1).tolist()

    def sample_rows(self, rows, states, steps):
        ps = [s.params for s in states]
        _FakeDeviceLogits.calls.append(len(rows))
        return sample.ref(self.a, rows, [p.temperature for p in ps], [p.top_k for p in ps],
                          [p.top_p for p in ps], [p.min_p for p in ps],
                          [s.device_seed for s in states], [s.salt for s in states], steps).tolist()


def test_scheduler_draws_seed_only_rows_on_the_device(monkeypatch):
    from server.step_driver import LocalDriver
    from server.engine.build import open_model
    from server.planner.admission import Admission
    from server.ranks.steps import PoolStep
    from server.requests import GenRequest, SamplingParams
    from server.scheduler import Scheduler
    import server.step_driver as sched_mod

    class Driver(LocalDriver):
        def run(self, step):
            out = super().run(step)
            return _FakeDeviceLogits(out) if isinstance(out, np.ndarray) else out

    host_calls = []
    real = sched_mod.sample

    def spy(row, st):
        host_calls.append(st.params)
        return real(row, st)
    monkeypatch.setattr(sched_mod, "sample", spy)

    def serve(reqs):
        eng = open_model("dummy:tiny", progress=False).engine
        adm = Admission(paged=True, pages=64, page_rows=4, streams=4, context=64)
        s = Scheduler(Driver(eng), adm, context=64, prefill_chunk=8, seed_salt=3)
        eng.apply(PoolStep(True, 64, 4, (eng.page_bytes(4),), 4, 64))
        s.start()

        async def one(rid, params):
            req = GenRequest(rid, [5, 6, 7, 8, 9], params)
            return [ev.token_id async for ev in s.generate(req) if ev.token_id is not None]

        async def all_():
            return await asyncio.gather(*(one(r, p) for r, p in reqs))
        try:
            return asyncio.run(all_())
        finally:
            s.stop()

    dev = SamplingParams(max_tokens=8, temperature=0.9, top_p=0.9, top_k=20, seed=42, ignore_eos=True)
    pen = SamplingParams(max_tokens=8, temperature=0.9, presence_penalty=0.5, seed=1, ignore_eos=True)
    greedy = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
    _FakeDeviceLogits.calls.clear()
    (alone,) = serve([("a", dev)])
    assert len(alone) == 8 and not host_calls and sum(_FakeDeviceLogits.calls) == 8
    mixed = serve([("p", pen), ("a", dev), ("g", greedy)])
    assert mixed[1] == alone                             # same seed, same reply among others
    assert len(host_calls) == 8 and all(p is pen for p in host_calls)   # penalties: the host
