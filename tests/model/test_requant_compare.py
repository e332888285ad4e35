"""bench/requant_replies.py's comparison: equal through the first near tie of either record."""
from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "requant_replies", Path(__file__).resolve().parents[2] / "bench/requant_replies.py")
rr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rr)


def _rec(ids, margins, prompt=(1, 2)):
    return {"cases": [{"name": "c", "prompt_ids": list(prompt), "greedy_ids": ids, "margins": margins}]}


def test_equal_replies_pass():
    a = _rec([5, 6, 7], [1.0, 1.0, 1.0])
    assert rr.compare(a, a) == []


def test_a_difference_before_any_near_tie_is_named():
    bad = rr.compare(_rec([5, 6, 7], [1.0] * 3), _rec([5, 9, 7], [1.0] * 3))
    assert len(bad) == 1 and bad[0].startswith("c:")


def test_a_difference_after_a_near_tie_in_either_record_passes():
    a, b = _rec([5, 6, 7], [1.0, 1e-4, 1.0]), _rec([5, 6, 8], [1.0, 1.0, 1.0])
    assert rr.compare(a, b) == [] and rr.compare(b, a) == []
    # through the near-tie step itself, as the golden file's exact_prefix counts it
    assert rr.compare(_rec([5, 6, 7], [1.0, 1e-4, 1.0]), _rec([5, 9, 8], [1.0, 1.0, 1.0])) != []
    assert rr.compare(_rec([5, 6, 7], [1.0, 1e-4, 1.0]), _rec([4, 6, 7], [1.0, 1.0, 1.0])) != []


def test_differing_prompt_ids_are_named():
    assert rr.compare(_rec([5], [1.0]), _rec([5], [1.0], prompt=(1, 3))) == ["c: prompt ids differ"]
