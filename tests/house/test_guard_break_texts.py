"""Every break in tools/guard_breaks.py names source text that is in its file exactly once
(the tool applies a break only then): a break whose text was moved, reworded or repeated
would apply nothing and prove nothing."""
from __future__ import annotations

from pathlib import Path

from tools import guard_breaks

ROOT = Path(__file__).resolve().parents[2]


def test_every_break_still_matches_its_source():
    stale = [(b.name, path) for b in guard_breaks.BREAKS for path, old, _ in b.edits
             if (ROOT / path).read_text().count(old) != 1]
    assert not stale, f"guard breaks whose text is not in the source exactly once: {stale}"
