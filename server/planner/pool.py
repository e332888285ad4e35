"""Pool: page ids, who holds them, and the invariant free + held + kept == total.

A page is in exactly one state:

    free   no stream holds it and the prompt cache does not keep it
    held   one or more streams hold it (refs > 0); it may be kept too
    kept   only the prompt cache keeps it (refs == 0)

Ids are handed out lowest free id first (a heap), so the same calls in the same order give
the same ids on every rank: followers map the ids rank 0 names and never take their own.

With poison on (TF_KV_POISON=1) the pool records every page `take` hands out; the engine
drains them with `pop_fresh()` and fills them with NaN before any row is written. Shared
pages (a kept prefix) are never fresh: their rows are already written.
"""
from __future__ import annotations

import heapq


class PoolExhausted(RuntimeError):
    pass


class PoolCorrupt(AssertionError):
    pass


class Pool:
    def __init__(self, total: int, poison: bool = False):
        if total < 0:
            raise ValueError(f"pool of {total} pages")
        self.total = total
        self.poison = poison
        self._free = list(range(total))        # a heap; range() is already one
        self._refs = [0] * total               # streams holding each page
        self._kept = [False] * total           # the prompt cache keeps it
        self._n_kept_only = 0                  # kept and refs == 0
        self._fresh: list[int] = []

    # -- counts --------------------------------------------------------------------------
    @property
    def free(self) -> int:
        return len(self._free)

    @property
    def kept(self) -> int:
        """Pages only the prompt cache keeps (evicting them frees them)."""
        return self._n_kept_only

    @property
    def held(self) -> int:
        return self.total - self.free - self.kept

    def refs(self, page: int) -> int:
        return self._refs[page]

    def is_kept(self, page: int) -> bool:
        return self._kept[page]

    # -- streams ---------------------------------------------------------------------------
    def take(self, n: int) -> tuple:
        """n free pages, lowest ids first, each held once."""
        if n < 0:
            raise ValueError(f"take({n})")
        if n > len(self._free):
            raise PoolExhausted(f"take({n}) with {len(self._free)} of {self.total} pages free")
        ids = tuple(heapq.heappop(self._free) for _ in range(n))
        for i in ids:
            self._refs[i] = 1
        if self.poison:
            self._fresh.extend(ids)
        return ids

    def share(self, ids) -> None:
        """Another stream holds these (already written) pages too."""
        for i in ids:
            if self._refs[i] == 0:
                if not self._kept[i]:
                    raise PoolCorrupt(f"share of free page {i}")
                self._n_kept_only -= 1
            self._refs[i] += 1

    def give(self, ids) -> None:
        """A stream lets go of its pages; a page nobody holds or keeps is free again."""
        for i in ids:
            if self._refs[i] <= 0:
                raise PoolCorrupt(f"give of page {i}, which no stream holds")
            self._refs[i] -= 1
            if self._refs[i] == 0:
                if self._kept[i]:
                    self._n_kept_only += 1
                else:
                    heapq.heappush(self._free, i)

    # -- prompt cache ----------------------------------------------------------------------
    def keep(self, page: int) -> None:
        """The prompt cache keeps a page a stream holds (it stays after the stream gives it)."""
        if self._kept[page]:
            raise PoolCorrupt(f"page {page} is kept twice")
        if self._refs[page] == 0:
            raise PoolCorrupt(f"keep of page {page}, which no stream holds")
        self._kept[page] = True

    def take_kept(self, n: int) -> tuple:
        """n free pages straight into the cache (windows: cache pages rows are copied into)."""
        ids = self.take(n)
        for i in ids:
            self._refs[i] = 0
            self._kept[i] = True
        self._n_kept_only += len(ids)
        if self.poison:
            del self._fresh[len(self._fresh) - len(ids):]   # a copy fills every row
        return ids

    def release(self, page: int) -> None:
        """The prompt cache lets go of a page; free unless a stream still holds it."""
        if not self._kept[page]:
            raise PoolCorrupt(f"release of page {page}, which the cache does not keep")
        self._kept[page] = False
        if self._refs[page] == 0:
            self._n_kept_only -= 1
            heapq.heappush(self._free, page)

    # -- engine ----------------------------------------------------------------------------
    def pop_fresh(self) -> tuple:
        """Pages handed out since the last call, to NaN-fill before use (poison on; else empty)."""
        out, self._fresh = tuple(self._fresh), []
        return out

    def check_integrity(self) -> None:
        free = set(self._free)
        if len(free) != len(self._free):
            raise PoolCorrupt("a page is on the free list twice")
        held = sum(1 for r in self._refs if r > 0)
        kept_only = sum(1 for r, k in zip(self._refs, self._kept) if r == 0 and k)
        for i in free:
            if self._refs[i] or self._kept[i]:
                raise PoolCorrupt(f"page {i} is free and in use")
        if kept_only != self._n_kept_only:
            raise PoolCorrupt(f"kept count {self._n_kept_only}, pages kept {kept_only}")
        if len(free) + held + kept_only != self.total:
            raise PoolCorrupt(f"free {len(free)} + held {held} + kept {kept_only} != total {self.total}")
