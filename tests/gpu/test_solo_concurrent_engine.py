"""On the GPU: solo == concurrent at the engine as the server runs it (graphs for decode
rounds, mixed prefill rounds, another stream index), on SmolLM2's shape with dummy weights,
whose flat logits turn any bitwise difference into other tokens. Serving showed 0 of 6
requests identical on the H200 at commit 1b792e9+ (docs/receipts/2026-11-29-gpu-serve/);
this test is the engine-level form of that check."""
from __future__ import annotations

import pytest

from server.engine.build import open_model
from server.engine.probe import solo_vs_concurrent


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_solo_equals_concurrent_on_other_streams_gpu(paged):
    eng = open_model("dummy:smollm2-135m", device="cuda", progress=False).engine
    r = solo_vs_concurrent(eng, paged=paged)
    assert r["equal_steps"] == r["steps"], r
