"""The startup line: one sentence that says the whole plan, e.g.

  4 streams at once, the engine's own and 3 more taking 803 pages of 512 rows (5.00 GiB) as
  they need them (enough for one at a 131072-token window), 180 MiB fixed each, of 37.8 GiB
  left after a 12.2 GiB reserve
"""
from __future__ import annotations

from server.planner.plan import Plan
from server.planner.units import size

_WORDS = ("none", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


def count(n: int) -> str:
    return _WORDS[n] if 0 <= n < len(_WORDS) else str(n)


def streams_phrase(n: int) -> str:
    return f"{n} stream{'s' if n != 1 else ''} at once"


def startup_line(plan: Plan, reserve_bytes: int | None = None) -> str:
    g = plan.rank
    if plan.paged:
        others = plan.streams - 1
        who = "the engine's own" + (f" and {others} more" if others else "")
        whole = plan.pages // plan.floor_pages
        text = (f"{streams_phrase(plan.streams)}, {who} taking {plan.pages} pages of "
                f"{plan.page_rows} rows ({size(plan.pages * g.page_bytes)}) as they need them "
                f"(enough for {count(whole)} at a {plan.context}-token window), "
                f"{size(g.fixed_bytes)} fixed each")
    else:
        each = "in its" if plan.streams == 1 else "each in"
        text = (f"{streams_phrase(plan.streams)}, {each} a whole window of {plan.window_rows} rows "
                f"({size(g.window_bytes)}), {size(g.fixed_bytes)} fixed each")
    if plan.cache_pages and plan.snap_slots:
        text += (f", a {size(g.prompt_cache_bytes)} prompt cache ({plan.cache_pages} pages and "
                 f"{plan.snap_slots} snapshot slots of {size(g.snap_bytes)})")
    elif plan.cache_pages:
        text += f", a {size(g.prompt_cache_bytes)} prompt cache ({plan.cache_pages} pages)"
    if reserve_bytes is None:
        text += f", of a {size(g.room, 1)} room"
    else:
        text += f", of {size(g.room, 1)} left after a {size(reserve_bytes, 1)} reserve"
    if plan.kv_rows:
        text += f"; KV as {plan.kv_rows}"
    if len(plan.ranks) > 1:
        text += f"; rank {plan.governing} of {len(plan.ranks)} governs"
        if plan.shards_differ:
            text += " (page bytes per rank: " + ", ".join(str(r.page_bytes) for r in plan.ranks) + ")"
    for note in plan.notes:
        text += f"; {note}"
    return text
