"""Solo equals concurrent: sixteen different greedy requests run one by one, then all at
once, give byte-identical replies, on pages and on windows.

On pages (--parallel 16) all sixteen run in one batch, which covers issue 3's acceptance
"8 concurrent greedy requests on pages equal their solo runs" (16 >= 8 streams at once).
On windows (--parallel 8) eight run at once and eight wait for a stream, so admission
and continuous batching (prefill chunks beside running decodes) are in play as well.
"""
from __future__ import annotations

import pytest

from .requests_set import bodies, run_solo, run_together

pytestmark = pytest.mark.slow

_solo: dict = {}


def solo(server) -> list:
    if server.name not in _solo:
        _solo[server.name] = run_solo(server.url, bodies(server.model))
    return _solo[server.name]


def test_sixteen_at_once_equal_their_solo_runs(either):
    alone = solo(either)
    together = run_together(either.url, bodies(either.model))
    for i, (a, t) in enumerate(zip(alone, together)):
        assert t == a, f"request {i} on {either.name}: concurrent {t!r} != solo {a!r}"
    assert len({text for text, _ in alone}) == 16          # sixteen different replies
    either.wait_idle()


def test_paging_changes_addresses_only(paged, windowed):
    """The same requests, solo, on pages and on windows: the same replies."""
    assert solo(paged) == solo(windowed)
