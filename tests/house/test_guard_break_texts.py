"""Every break in tools/guard_breaks.py names source text that is still in its file: a
break whose text was moved or reworded would apply nothing and prove nothing."""
from __future__ import annotations

from pathlib import Path

from tools import guard_breaks

ROOT = Path(__file__).resolve().parents[2]


def test_every_break_still_matches_its_source():
    stale = [(b.name, path) for b in guard_breaks.BREAKS for path, old, _ in b.edits
             if old not in (ROOT / path).read_text()]
    assert not stale, f"guard breaks whose text is gone from the source: {stale}"
