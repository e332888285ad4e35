"""bench/mask_cost.py at small scale on the CPU with the default model: both runs go
through the real engine and scheduler, every reply runs to its length, the constrained
ones are the schema's JSON so far, and the table names both."""
from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.slow


def test_mask_cost_runs_small_on_the_cpu(tmp_path, capsys):
    try:
        from server.engine.locate import ModelNotFound, default_gguf
        default_gguf()
    except ModelNotFound as e:
        pytest.skip(str(e))
    pytest.importorskip("llguidance")
    from bench import mask_cost
    results = mask_cost.main(["--device", "cpu", "--streams", "2", "--tokens", "5",
                              "--out", str(tmp_path)])
    out = capsys.readouterr().out
    con, plain = results
    assert con["constrained"] and not plain["constrained"]
    for r in results:
        assert r["finish"] == ["length"] and r["tokens_out"] == [5, 5]
        assert r["decode_rounds"] == 3 and r["forward_ms"] > 0 and r["tpot_ms"] > 0
    assert con["masks_per_round"] == 2 and con["masks_ms"] > 0     # one mask a stream a round
    assert plain["masks_ms"] == 0
    assert con["sample_text"].startswith('{"items": [')            # the schema's JSON so far
    assert "json_schema x2" in out and "plain x2" in out and "TPOT constrained / plain" in out
    saved = json.loads((tmp_path / "results.json").read_text())
    assert [r["constrained"] for r in saved["results"]] == [True, False]
