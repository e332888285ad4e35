"""Solo == concurrent at the engine, with the stream index changing too (alone on stream 0,
then among seven others on the last stream): logits byte for byte, pages and windows."""
from __future__ import annotations

import pytest

from server.engine.build import open_model
from server.engine.probe import solo_vs_concurrent


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_solo_equals_concurrent_on_other_streams(paged):
    eng = open_model("dummy:tiny", progress=False).engine
    r = solo_vs_concurrent(eng, paged=paged, context=128)
    assert r["equal_steps"] == r["steps"], r
