"""The GPU forward against the numpy forward on the same (bf16-rounded) dummy weights:
relative error < 1e-2 at every layer's output; and on the GPU, greedy replies of a
stream alone equal its replies beside other streams, and paged equals window, byte for byte."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from server.shapes.spec import SHAPES
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep
from tests.gpu.conftest import bf16_round, rel

SPEC = SHAPES["smollm2-135m"]


def weights(spec, seed=0):
    from server.engine.weights.dummy import dummy_tensor

    @functools.lru_cache(maxsize=None)
    def get(name):                 # bf16-rounded, so both devices hold the same weights
        return bf16_round(dummy_tensor(spec, name, seed))
    return get


def engine(device, get, paged=True, P=16, streams=4, context=512):
    from server.engine.engine import Engine
    e = Engine(SPEC, get, device=device)
    pages = streams * context // P
    e.apply(PoolStep(paged, pages if paged else 0, P, (e.page_bytes(P),), streams, context, True))
    return e


def test_every_layer_matches_numpy():
    get = weights(SPEC)
    seen = {}

    def spied(ops):                               # the engine's backend (kernels.ops.backend)
        real = ops.norm_linear

        def spy(out, h, *a, **k):                 # every residual h' = out + h of the forward
            y, h = real(out, h, *a, **k)
            if out is not None:
                seen.setdefault(type(h).__module__.split(".")[0], []).append(
                    h if isinstance(h, np.ndarray) else h.get())
            return y, h
        ops.norm_linear = spy
    prompt = tuple(int(t) for t in np.random.default_rng(1).integers(0, SPEC.vocab, 40))
    logits = {}
    for dev in ("cpu", "cuda"):
        e = engine(dev, get)
        spied(e.model.ops)
        e.apply(BeginStep(0, tuple(range(7, -1, -1))))
        logits[dev] = e.apply(RoundStep((Chunk(0, 0, prompt),)))
    cpu, gpu = seen["numpy"], seen["cupy"]
    # two residual sums a layer but the first (h alone), and the LM head's over the wanted row
    assert len(cpu) == len(gpu) == 2 * SPEC.n_layers
    errs = [rel(g, c) for g, c in zip(gpu, cpu)]
    print("per-layer relative error:", " ".join(f"{x:.1e}" for x in errs))
    assert max(errs) < 1e-2
    assert rel(logits["cuda"], logits["cpu"]) < 1e-2


def greedy(e, streams, steps):
    """streams: {stream: (pages, prompt)}; all prefill in one round, then decode rounds."""
    for s, (pages, _) in streams.items():
        e.apply(BeginStep(s, pages))
    pos = {s: len(p) for s, (_, p) in streams.items()}
    out = {s: [] for s in streams}
    raw = {s: [] for s in streams}
    lg = e.apply(RoundStep(tuple(Chunk(s, 0, p) for s, (_, p) in streams.items())))
    for _ in range(steps):
        chunks = []
        for i, s in enumerate(streams):
            t = int(np.argmax(lg[i]))
            out[s].append(t)
            raw[s].append(lg[i].tobytes())
            chunks.append(Chunk(s, pos[s], (t,)))
            pos[s] += 1
        lg = e.apply(RoundStep(tuple(chunks)))
    return out, raw


def test_solo_equals_concurrent_and_paged_equals_window():
    get = weights(SPEC)
    rng = np.random.default_rng(2)
    prompts = [tuple(int(t) for t in rng.integers(0, SPEC.vocab, n)) for n in (15, 16, 17, 40)]
    tables = [tuple(range(31, 23, -1)), (3, 9, 0, 4, 12, 1, 7, 5), (8, 2, 30, 11, 6, 10, 13, 14),
              (15, 16, 17, 18, 19, 20, 21, 22)]
    e = engine("cuda", get)
    solo_ids, solo_raw = greedy(e, {0: (tables[0], prompts[0])}, 12)
    e2 = engine("cuda", get)
    both_ids, both_raw = greedy(e2, {i: (tables[i], prompts[i]) for i in range(4)}, 12)
    assert both_ids[0] == solo_ids[0]
    assert both_raw[0] == solo_raw[0]                      # logits byte for byte
    w = engine("cuda", get, paged=False)
    win_ids, win_raw = greedy(w, {0: ((), prompts[0])}, 12)
    assert win_raw[0] == solo_raw[0]


def test_graph_replay_equals_eager():
    get = weights(SPEC)
    prompt = tuple(range(100, 133))
    e = engine("cuda", get)
    ids_g, raw_g = greedy(e, {0: (tuple(range(8)), prompt)}, 6)
    e2 = engine("cuda", get)
    e2.model.graphs.enabled = False
    ids_e, raw_e = greedy(e2, {0: (tuple(range(8)), prompt)}, 6)
    assert e.model.graphs.failed is None, e.model.graphs.failed
    assert raw_g[0] == raw_e[0]
