"""bench/golden_record.py's exact_prefix: the shared golden file's rule, checked against its own cases."""
from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "golden_record", Path(__file__).resolve().parents[2] / "bench/golden_record.py")
gr = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gr)


def test_no_near_tie_keeps_every_step():
    assert gr.exact_prefix([1.0, 0.5, 0.003]) == (None, 3)


def test_the_first_near_tie_step_is_the_last_that_must_match():
    assert gr.exact_prefix([1.0, 1e-4, 1e-5, 1.0]) == (1, 2)
    assert gr.exact_prefix([1e-3]) == (0, 1)


def test_the_rule_gives_the_shared_golden_files_own_prefixes(golden):
    for case in golden["cases"]:
        margins = [step["logits"][0] - step["logits"][1] for step in case["top5"]]
        tie, n = gr.exact_prefix(margins)
        assert (tie, n) == (case["near_tie_step"], case["exact_prefix"]), case["name"]
