"""Plan: each rank's room -> the pool (pages or windows), the streams and the prompt cache.

Rank 0 plans once from every rank's room; the rank that can hold the fewest pages
governs (with even shards: the smallest room). Every rank gets the same page count and
stream count; each rank's page bytes are its own shard's.

On pages, the room is funded in this order:

    | floor: one window of pages | N-1 pages | prompt cache | the rest as pages  | spare |
    |  (the engine's own stream) | (a page   |   pages      | up to N x floor    |       |
    |                            |  each)    |              |   pages in all     |       |
    + N streams' fixed bytes (table, sampling, scratch)

  floor_pages = ceil((context + verify_window) / page_rows): one conversation can always
  reach --context; while it is short, those pages serve the other streams.

On windows, each stream owns a whole window of context + verify_window - 1 rows; the
prompt cache (if any) lives on `cache_pages` pages of page_rows rows beside them.

A recurrent family (a KV layout with a fixed part: recurrent states and conv windows a
stream) needs its state where a kept prefix ends: the prompt cache splits into **snapshot
slots** (each one stream's fixed part, `snap_bytes` on its rank) and copied rows (pages). Half
of --prompt-cache-gib goes to slots (at least one, where the budget holds a slot and a page),
the rest to pages, both trimmed where the room is short; a budget under one slot and a page
is no cache (a note says so). A family without a fixed part has `snap_bytes` 0: no slots,
the whole cache goes to pages.

`pages` counts the streams' pages only; the prompt cache's pages are `cache_pages`; the
pool the engine allocates holds `pool_pages` = pages + cache_pages (pages mode), or
cache_pages alone (windows mode). The numbers add up on every rank:

    pages * page_bytes + streams * fixed_bytes + cache_pages * page_bytes
        + snap_slots * snap_bytes <= room
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

from server.planner.layout import Layout, cdiv
from server.planner.modes import resolve_kv_pages
from server.planner.units import size
from server.ranks.steps import PoolStep

AUTO = 0
AUTO_PAGED_CAP = 64      # --parallel auto on pages: at most this many streams
AUTO_WINDOWS_FIT = 4     # TF_KV_PAGES=auto with --parallel auto: windows if this many fit


class PlanError(ValueError):
    pass


class NoStream(PlanError):
    """The room cannot hold one stream at --context."""

    def __init__(self, message: str, rank: int, room: int, floor_bytes: int, largest_context: int):
        super().__init__(message)
        self.rank, self.room, self.floor_bytes, self.largest_context = rank, room, floor_bytes, largest_context


class TooManyStreams(PlanError):
    def __init__(self, message: str, asked: int, fits: int):
        super().__init__(message)
        self.asked, self.fits = asked, fits


@dataclass(frozen=True)
class RankPlan:
    rank: int
    room: int
    n_kv: int
    bytes_per_token: int
    page_bytes: int
    fixed_bytes: int          # one stream's
    window_bytes: int         # one stream's window (windows mode; 0 on pages)
    kv_bytes: int             # the streams' KV: pages * page_bytes, or streams * window_bytes
    prompt_cache_bytes: int   # cache_pages * page_bytes + snap_slots * snap_bytes
    fixed_total: int          # streams * fixed_bytes
    snap_bytes: int = 0       # one snapshot slot (the KV layout's fixed part); 0: no slots

    @property
    def used(self) -> int:
        return self.kv_bytes + self.prompt_cache_bytes + self.fixed_total

    @property
    def spare(self) -> int:
        return self.room - self.used

    def as_dict(self) -> dict:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__}
        d.update(used=self.used, spare=self.spare)
        return d


@dataclass(frozen=True)
class Plan:
    mode: str                 # "on" (pages) | "off" (whole windows)
    pages: int                # the streams' pages (0 on windows)
    cache_pages: int          # the prompt cache's pages
    page_rows: int
    streams: int              # streams at once, the engine's own included
    context: int
    verify_window: int
    floor_pages: int
    ranks: tuple              # RankPlan per rank, rank order
    governing: int            # the rank whose room bounds the plan
    notes: tuple = field(default=())
    kv_rows: str = ""         # the latent / window kind's phrase (KV layout spec); "" for K and V rows
    snap_slots: int = 0       # the prompt cache's snapshot slots (recurrent families)

    @property
    def paged(self) -> bool:
        return self.mode == "on"

    @property
    def pool_pages(self) -> int:
        return self.pages + self.cache_pages

    @property
    def window_rows(self) -> int:
        return self.context + self.verify_window - 1

    @property
    def rank(self) -> RankPlan:
        """The governing rank's figures."""
        return self.ranks[self.governing]

    @property
    def shards_differ(self) -> bool:
        return len({(r.page_bytes, r.fixed_bytes) for r in self.ranks}) > 1

    def pool_step(self, poison: bool = False) -> PoolStep:
        return PoolStep(paged=self.paged, pages=self.pool_pages, page_rows=self.page_rows,
                        page_bytes=tuple(r.page_bytes for r in self.ranks), streams=self.streams,
                        context=self.window_rows, poison=poison, verify=self.verify_window,
                        snaps=self.snap_slots)

    def as_dict(self) -> dict:
        g = self.rank
        d = dict(mode=self.mode, pages=self.pages, page_rows=self.page_rows,
                 page_bytes=g.page_bytes, bytes_per_token=g.bytes_per_token,
                 fixed_bytes=g.fixed_bytes, prompt_cache_bytes=g.prompt_cache_bytes,
                 cache_pages=self.cache_pages, pool_pages=self.pool_pages,
                 snap_slots=self.snap_slots, snap_bytes=g.snap_bytes,
                 floor_pages=self.floor_pages, streams=self.streams, context=self.context,
                 verify_window=self.verify_window, window_rows=self.window_rows,
                 window_bytes=g.window_bytes, room_bytes=g.room, used_bytes=g.used,
                 spare_bytes=g.spare, tp=len(self.ranks), governing_rank=self.governing,
                 notes=list(self.notes))
        if self.shards_differ or len({r.room for r in self.ranks}) > 1:
            d["ranks"] = [r.as_dict() for r in self.ranks]
        return d


def plan(layouts: Sequence[Layout], rooms: Sequence[int], context: int, parallel: int = AUTO,
         prompt_cache_bytes: int = 0, kv_pages: str = "auto", verify_window: int = 1) -> Plan:
    """Plan the pool. layouts and rooms (bytes) are per rank, rank order; parallel 0 = auto;
    kv_pages is TF_KV_PAGES as read by config.Env (auto | on | off | 0 | all)."""
    if len(layouts) != len(rooms) or not layouts:
        raise PlanError(f"{len(rooms)} rooms for {len(layouts)} ranks: give one room per rank")
    if context < 1:
        raise PlanError(f"--context {context} must be at least 1")
    if verify_window < 1:
        raise PlanError(f"verify window {verify_window} must be at least 1")
    if parallel < 0:
        raise PlanError(f"--parallel {parallel} must be a positive number or auto")
    if prompt_cache_bytes < 0:
        raise PlanError("--prompt-cache-gib must not be negative")
    page_rows = layouts[0].page_rows
    if any(L.page_rows != page_rows for L in layouts):
        raise PlanError("every rank must use the same --page-rows")

    kv = layouts[0].kv_spec
    cache_note = ()
    if kv.kind == "window" and prompt_cache_bytes:     # a ring holds no prefix to share
        prompt_cache_bytes = 0
        cache_note = ("no prompt cache: the window layers keep a stream's last rows only",)
    notes0 = ()
    want = parallel or AUTO_WINDOWS_FIT
    windows_fit = all(want * (L.fixed_bytes(context, False, verify_window) + _window(L, context, verify_window)) <= room
                      for L, room in zip(layouts, rooms))
    mode, note = resolve_kv_pages(kv_pages, len(layouts), windows_fit)
    notes = notes0 + ((note,) if note else ()) + cache_note
    fund = _on_pages if mode == "on" else _on_windows
    p = fund(list(layouts), list(rooms), context, parallel, prompt_cache_bytes, verify_window, notes)
    if kv.kind in ("latent", "window") or kv.fixed or kv.mtp_layers:   # the MHA plan line
                                                    # stays as it was (no MTP rows: --draft mtp)
        p = replace(p, kv_rows=f"{kv.describe()}, {p.rank.bytes_per_token} bytes a token")
    return p


def _window(L: Layout, context: int, verify: int) -> int:
    return (context + verify - 1) * L.bytes_per_token


def _largest_context(fits, context: int) -> int:
    """The largest c < context with fits(c) (fits is monotone), 0 if none."""
    lo, hi = 0, context - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if fits(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo if lo >= 1 and fits(lo) else 0


def _no_stream(rank: int, room: int, context: int, need: int, how: str, largest: int) -> NoStream:
    fit = (f"the largest context that fits is {largest} tokens" if largest
           else "not even a 1-token context fits")
    return NoStream(
        f"room {size(room)} on rank {rank} is under the floor: one stream at a {context}-token "
        f"context needs {size(need)} ({how}); {fit}. Lower --context, give the rank more "
        f"room (a smaller --reserve-gib or a larger TF_ROOM_GIB; --room in foldserve plan) or "
        f"spread the model over more ranks (--tp)",
        rank, room, need, largest)


def _check_floor(layouts, rooms, context, verify, paged: bool) -> None:
    pr = layouts[0].page_rows
    worst = None
    for L, room in zip(layouts, rooms):
        if paged:
            def need_at(c, L=L):
                return L.fixed_bytes(c, True, verify) + cdiv(c + verify, pr) * L.page_bytes
            how = (f"{cdiv(context + verify, pr)} pages of {pr} rows x {size(L.page_bytes)}"
                   f" + {size(L.fixed_bytes(context, True, verify))} fixed")
        else:
            def need_at(c, L=L):
                return L.fixed_bytes(c, False, verify) + _window(L, c, verify)
            how = (f"a window of {context + verify - 1} rows x {L.bytes_per_token} bytes"
                   f" + {size(L.fixed_bytes(context, False, verify))} fixed")
        need = need_at(context)
        if room < need:
            largest = _largest_context(lambda c: need_at(c) <= room, context)
            if worst is None or largest < worst[-1]:
                worst = (L.rank, room, context, need, how, largest)
    if worst:
        raise _no_stream(*worst)


def _on_pages(layouts, rooms, context, parallel, cache_bytes, verify, notes) -> Plan:
    pr = layouts[0].page_rows
    floor = cdiv(context + verify, pr)
    _check_floor(layouts, rooms, context, verify, paged=True)
    f = [L.fixed_bytes(context, True, verify) for L in layouts]
    p = [L.page_bytes for L in layouts]

    # the most streams each rank funds with a fixed part and a page each beyond the floor
    fits = min((room - floor * pb + pb) // (fb + pb) for room, fb, pb in zip(rooms, f, p))
    if parallel:
        n = parallel
        if n > fits:
            raise TooManyStreams(
                f"--parallel {n} does not fit: at a {context}-token context the room holds "
                f"{fits} streams on pages (each {size(max(f))} fixed and a page beyond the "
                f"{floor}-page floor); lower --parallel or --context", n, fits)
    else:
        half = min((room - floor * pb) // 2 // (fb + pb) for room, fb, pb in zip(rooms, f, p))
        n = max(1, min(AUTO_PAGED_CAP, half, fits))

    # pages each rank can hold once the streams' fixed parts are paid
    snap = [L.kv_spec.snap_bytes for L in layouts]
    if _unkept(layouts):
        slots, cache_pages, notes = 0, 0, notes + _unkept(layouts, cache_bytes)
    elif any(snap):
        left = [room - n * fb - (floor + n - 1) * pb for room, fb, pb in zip(rooms, f, p)]
        slots, cache_pages, notes = _cache_snaps(cache_bytes, p, snap, left, notes)
    else:
        cap = [(room - n * fb) // pb for room, fb, pb in zip(rooms, f, p)]
        slots, (cache_pages, notes) = 0, _cache(cache_bytes, p, min(cap) - (floor + n - 1), notes)
    cap = [(room - n * fb - slots * sb) // pb for room, fb, pb, sb in zip(rooms, f, p, snap)]
    pages = min(n * floor, min(cap) - cache_pages)
    governing = min(range(len(cap)), key=lambda i: (cap[i], i))
    ranks = tuple(RankPlan(L.rank, room, L.n_kv, L.bytes_per_token, pb, fb, 0, pages * pb,
                           cache_pages * pb + slots * sb, n * fb, sb)
                  for L, room, fb, pb, sb in zip(layouts, rooms, f, p, snap))
    return Plan("on", pages, cache_pages, pr, n, context, verify, floor, ranks, governing, notes,
                snap_slots=slots)


def _on_windows(layouts, rooms, context, parallel, cache_bytes, verify, notes) -> Plan:
    pr = layouts[0].page_rows
    floor = cdiv(context + verify, pr)
    _check_floor(layouts, rooms, context, verify, paged=False)
    f = [L.fixed_bytes(context, False, verify) for L in layouts]
    w = [_window(L, context, verify) for L in layouts]
    p = [L.page_bytes for L in layouts]
    fits = min(room // (fb + wb) for room, fb, wb in zip(rooms, f, w))
    if parallel:
        n = parallel
        if n > fits:
            raise TooManyStreams(
                f"--parallel {n} does not fit: the room holds {fits} whole windows of "
                f"{context + verify - 1} rows; lower --parallel or --context, or set "
                f"TF_KV_PAGES=on to share pages", n, fits)
    else:
        # auto: the prompt cache is funded first, the windows take the rest (at least one)
        want = cache_bytes // max(p)
        n = max(1, min((room - want * pb) // (fb + wb) for room, fb, wb, pb in zip(rooms, f, w, p)))
    snap = [L.kv_spec.snap_bytes for L in layouts]
    if _unkept(layouts):
        slots, cache_pages, notes = 0, 0, notes + _unkept(layouts, cache_bytes)
    elif any(snap):
        slots, cache_pages, notes = _cache_snaps(
            cache_bytes, p, snap, [room - n * (fb + wb) for room, fb, wb in zip(rooms, f, w)], notes)
    else:
        left = [(room - n * (fb + wb)) // pb for room, fb, wb, pb in zip(rooms, f, w, p)]
        slots, (cache_pages, notes) = 0, _cache(cache_bytes, p, min(left), notes)
    left = [(room - n * (fb + wb) - slots * sb) // pb
            for room, fb, wb, pb, sb in zip(rooms, f, w, p, snap)]
    governing = min(range(len(left)), key=lambda i: (left[i], i))
    ranks = tuple(RankPlan(L.rank, room, L.n_kv, L.bytes_per_token, pb, fb, wb, n * wb,
                           cache_pages * pb + slots * sb, n * fb, sb)
                  for L, room, fb, wb, pb, sb in zip(layouts, rooms, f, w, p, snap))
    return Plan("off", 0, cache_pages, pr, n, context, verify, floor, ranks, governing, notes,
                snap_slots=slots)


def _unkept(layouts, cache_bytes: int | None = None):
    """A layout with a fixed part that snapshot slots do not keep (KVSpec.snap_bytes 0): with
    cache_bytes, the note saying the prompt cache is off (none when none was asked); else
    whether any layout is so."""
    if cache_bytes is None:
        return any(L.kv_spec.fixed and not L.kv_spec.snap_bytes for L in layouts)
    return (f"prompt cache off: {size(cache_bytes)} asked, but this family's kept state "
            "is not held in snapshot slots yet",) if cache_bytes else ()


def _cache_snaps(cache_bytes: int, page_bytes: list, snap_bytes: list, left: list,
                 notes: tuple) -> tuple[int, int, tuple]:
    """A recurrent family's prompt cache: (snapshot slots, pages, notes). Half of the budget
    in slots of the largest shard's fixed part (at least one where the budget holds a slot
    and a page), the rest in pages; both trimmed to `left`, each rank's bytes once the
    streams are funded (with a note). No slot or no page: no cache."""
    if not cache_bytes:
        return 0, 0, notes
    sb, pb = max(snap_bytes), max(page_bytes)
    if cache_bytes < sb + pb:
        return 0, 0, notes + (
            f"prompt cache off: {size(cache_bytes)} asked is under one snapshot slot "
            f"({size(sb)}, the recurrent states of a stream) and a page ({size(pb)})",)
    slots = max(1, cache_bytes // 2 // sb)
    pages = (cache_bytes - slots * sb) // pb
    fit_slots = min((lb - b) // s for lb, b, s in zip(left, page_bytes, snap_bytes))
    s2 = max(0, min(slots, fit_slots))
    p2 = max(0, min([pages] + [(lb - s2 * s) // b for lb, b, s in zip(left, page_bytes, snap_bytes)]))
    if not s2 or not p2:
        return 0, 0, notes + (
            f"prompt cache off: {size(cache_bytes)} asked, but once the streams are funded "
            f"the room holds no snapshot slot ({size(sb)}) and a page beside it",)
    if (s2, p2) != (slots, pages):
        notes = notes + (f"prompt cache trimmed from {slots} snapshot slots and {pages} pages "
                         f"to {s2} and {p2} to keep the streams' pages",)
    return s2, p2, notes


def _cache(cache_bytes: int, page_bytes: list, room_pages: int, notes: tuple) -> tuple[int, tuple]:
    """--prompt-cache-gib in whole pages of the largest shard's page, trimmed (with a note)
    to the pages left once the streams are funded."""
    want = cache_bytes // max(page_bytes)
    room_pages = max(0, room_pages)
    if want > room_pages:
        notes = notes + (f"prompt cache trimmed from {size(cache_bytes)} to "
                         f"{size(room_pages * max(page_bytes))} to keep the streams' pages",)
        want = room_pages
    return want, notes
