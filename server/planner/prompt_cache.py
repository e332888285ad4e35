"""Prompt cache: kept prefixes of ended requests, one node per whole page of rows.

A prefix is a chain of nodes, one per full page of page_rows token ids:

    ids:   | t0 .. t15 | t16 .. t31 | t32 .. t40 |      (page_rows 16)
    keys:  k0=H(""+p0)  k1=H(k0+p1)   (not kept: a partly written page is never shared)

Each key chains sha256 over the previous key and the page's token ids (little-endian
uint32), so a node's key names its whole prefix. A hit also compares the page's ids, and
the chain is walked from the root, so a hash collision can never join two prompts.

On pages the cache keeps the stream's own pages (Pool.keep): a resumed stream shares them
(refs, no copy) and writes only past them. On windows the cache owns pages rows are copied
into (CopyStep); a resumed stream copies them back into its window.

A recurrent family (a KV layout with a fixed part) also needs the stream's state where a
kept prefix ends: **snapshot slots**, `snap_slots` of them, ids lowest free first. A node may
hold one (`Node.snap`): a copy of the recurrent states and conv windows at the end of its
page (server/ranks/steps.SnapStep). A resumed stream of such a family starts at the deepest
node of its chain that holds a snapshot (pages past it are not shared: their rows would be
rewritten). A running stream's pending slot (the engine writes its page-boundary states
there) comes from the same slots (`take_slot`) and is attached to its node when it ends
(`attach`). A slot wanted when none is free drops the least recently used snapshot (the
node's pages stay). With snap_slots 0 the cache is the page cache alone.

Eviction takes the least recently used leaf first. A walk touches its nodes leaf first,
root last, so every parent sits after its children in `_lru`: its front is always a leaf.
"""
from __future__ import annotations

import hashlib
import heapq
import struct
from collections import OrderedDict
from dataclasses import dataclass

from server.planner.pool import Pool


@dataclass
class Node:
    key: bytes
    parent: bytes            # b"" at the root
    ids: tuple               # this page's token ids
    page: int
    children: int = 0
    snap: int = -1           # snapshot slot: the recurrent state at this page's end (-1: none)


def page_key(prev: bytes, ids) -> bytes:
    return hashlib.sha256(prev + struct.pack(f"<{len(ids)}I", *ids)).digest()


class PromptCache:
    def __init__(self, pool: Pool, page_rows: int, budget_pages: int, snap_slots: int = 0):
        self.pool = pool
        self.page_rows = page_rows
        self.budget = budget_pages
        self._nodes: "OrderedDict[bytes, Node]" = OrderedDict()   # LRU order, oldest first
        self.snap_slots = snap_slots
        self._free_slots = list(range(snap_slots))                 # a heap: lowest id first
        self._snaps: "OrderedDict[bytes, int]" = OrderedDict()     # node key -> slot, LRU first

    def __len__(self) -> int:
        return len(self._nodes)

    @property
    def pages(self) -> tuple:
        return tuple(n.page for n in self._nodes.values())

    # -- lookups ---------------------------------------------------------------------------
    def _walk(self, ids, max_pages: int) -> list:
        """The longest chain of kept nodes matching ids page by page."""
        pr, chain, prev = self.page_rows, [], b""
        for i in range(max_pages):
            part = tuple(ids[i * pr:(i + 1) * pr])
            key = page_key(prev, part)
            node = self._nodes.get(key)
            if node is None or node.ids != part or node.parent != prev:
                break
            chain.append(node)
            prev = key
        return chain

    def _touch(self, chain) -> None:
        for node in reversed(chain):
            self._nodes.move_to_end(node.key)

    def lookup(self, ids) -> tuple:
        """Pages of the longest kept prefix of ids, leaving at least one token to prefill
        (with snapshot slots: up to the deepest node holding a snapshot, see lookup_snap)."""
        return self.lookup_snap(ids)[0]

    def lookup_snap(self, ids) -> tuple[tuple, int]:
        """(pages, slot): the longest kept prefix of ids leaving at least one token to
        prefill; with snapshot slots, cut to its deepest node holding a snapshot, and that
        snapshot's slot (-1: none; then no pages either)."""
        if self.budget == 0 or not ids:
            return (), -1
        chain = self._walk(ids, (len(ids) - 1) // self.page_rows)
        slot = -1
        if self.snap_slots:
            while chain and chain[-1].snap < 0:
                chain.pop()
            if chain:
                slot = chain[-1].snap
                self._snaps.move_to_end(chain[-1].key)
        self._touch(chain)
        return tuple(n.page for n in chain), slot

    # -- snapshot slots --------------------------------------------------------------------
    def take_slot(self) -> int:
        """A free snapshot slot, lowest id first; none free: the least recently used
        snapshot is dropped from its node. -1 when there are no slots."""
        if not self._free_slots and self._snaps:
            key, slot = self._snaps.popitem(last=False)
            self._nodes[key].snap = -1
            heapq.heappush(self._free_slots, slot)
        return heapq.heappop(self._free_slots) if self._free_slots else -1

    def give_slot(self, slot: int) -> None:
        """A slot no node holds goes back (a pending one whose stream kept nothing)."""
        if slot < 0:
            return
        if slot in self._free_slots or slot in self._snaps.values():
            raise AssertionError(f"snapshot slot {slot} given back twice")
        heapq.heappush(self._free_slots, slot)

    def snap_node(self, ids, n_pages: int):
        """The kept node ending ids' first n_pages pages if it holds no snapshot yet, else
        None (not kept, or it has one: a slot is not spent twice on one position)."""
        if n_pages < 1 or not self.snap_slots:
            return None
        chain = self._walk(ids, n_pages)
        if len(chain) < n_pages or chain[-1].snap >= 0:
            return None
        return chain[-1]

    def attach(self, ids, n_pages: int, slot: int) -> bool:
        """The snapshot in `slot` (the state after ids' first n_pages pages) kept on that
        node; False (the slot given back) where the node is not kept or already has one."""
        node = self.snap_node(ids, n_pages)
        if node is None or slot < 0:
            self.give_slot(slot)
            return False
        node.snap = slot
        self._snaps[node.key] = slot
        return True

    @property
    def slots_free(self) -> tuple:
        return tuple(sorted(self._free_slots))

    @property
    def slots_kept(self) -> tuple:
        return tuple(sorted(self._snaps.values()))

    # -- keeping ---------------------------------------------------------------------------
    def _add(self, prev: bytes, key: bytes, part: tuple, page: int) -> Node:
        node = Node(key, prev, part, page)
        self._nodes[key] = node
        if prev:
            self._nodes[prev].children += 1
        return node

    def insert(self, ids, page_ids) -> int:
        """Pages: keep the full pages of a stream that wrote rows for ids (its table
        page_ids). Pages already kept for the same ids are not kept twice. Returns the
        number of pages newly kept; then trims the cache to its budget."""
        if self.budget == 0:
            return 0
        pr = self.page_rows
        full = min(len(ids) // pr, len(page_ids))
        chain, prev, added = [], b"", 0
        for i in range(full):
            part = tuple(ids[i * pr:(i + 1) * pr])
            key = page_key(prev, part)
            node = self._nodes.get(key)
            if node is None:
                if self.pool.is_kept(page_ids[i]):
                    break                       # this page is kept under another prefix
                node = self._add(prev, key, part, page_ids[i])
                self.pool.keep(page_ids[i])
                added += 1
            elif node.ids != part or node.parent != prev:
                break                           # a collision: never join two prompts
            chain.append(node)
            prev = key
        self._touch(chain)
        self.trim()
        return added

    def insert_copy(self, ids) -> tuple[tuple, int]:
        """Windows: cache pages to copy a window's full pages of rows into, and the rows.
        Pages of the prefix the cache already keeps are named -1 (their rows are there and
        the same: nothing to copy); new ones come from the pool as far as the budget allows.
        ((), 0) when none."""
        if self.budget == 0:
            return (), 0
        pr = self.page_rows
        full = len(ids) // pr
        chain = self._walk(ids, full)
        self._touch(chain)
        kept = len(chain)
        prev = chain[-1].key if chain else b""
        fresh = {}                              # key -> (parent, ids) of each page to add, in order
        for i in range(kept, full):
            part = tuple(ids[i * pr:(i + 1) * pr])
            key = page_key(prev, part)
            if key in self._nodes or key in fresh:
                break                           # a collision: never join two prompts (as insert)
            fresh[key] = (prev, part)
            prev = key
        protect = {n.key for n in chain}
        while len(self._nodes) + len(fresh) > self.budget and self._evict_one(protect, free_only=False):
            pass
        new = max(0, min(len(fresh), self.budget - len(self._nodes), self.pool.free))
        pages = self.pool.take_kept(new)
        for (key, (parent, part)), page in zip(fresh.items(), pages):
            chain.append(self._add(parent, key, part, page))
        self._touch(chain)
        if len(chain) == kept:                 # nothing new: no copy at all
            return (), 0
        return tuple(-1 if i < kept else n.page for i, n in enumerate(chain)), len(chain) * pr

    # -- eviction --------------------------------------------------------------------------
    def _evict_one(self, protect=frozenset(), free_only: bool = True) -> bool:
        """Drop the least recently used leaf (free_only: one whose page no stream holds)."""
        for node in self._nodes.values():
            if node.children or node.key in protect:
                continue
            if free_only and self.pool.refs(node.page):
                continue
            del self._nodes[node.key]
            if node.parent:
                self._nodes[node.parent].children -= 1
            if node.snap >= 0:
                del self._snaps[node.key]
                heapq.heappush(self._free_slots, node.snap)
            self.pool.release(node.page)
            return True
        return False

    def evict_until_free(self, free: int) -> None:
        """Evict least recently used prefixes until the pool has `free` pages, or none is left."""
        while self.pool.free < free and self._evict_one():
            pass

    def trim(self) -> None:
        while len(self._nodes) > self.budget and self._evict_one(free_only=False):
            pass

    def check(self) -> None:
        for node in self._nodes.values():
            assert self.pool.is_kept(node.page), f"cached page {node.page} is not kept"
            assert not node.parent or node.parent in self._nodes, "a node without its parent"
        kids: dict = {}
        for node in self._nodes.values():
            if node.parent:
                kids[node.parent] = kids.get(node.parent, 0) + 1
        for node in self._nodes.values():
            assert node.children == kids.get(node.key, 0), "children count is off"
        assert len(set(self.pages)) == len(self._nodes), "a page is cached twice"
        assert len(self._nodes) <= self.budget or self.budget == 0, "cache past its budget"
        held = {k: n.snap for k, n in self._nodes.items() if n.snap >= 0}
        assert held == dict(self._snaps), "snapshot slots and their nodes disagree"
        assert not set(held.values()) & set(self._free_slots), "a kept snapshot slot is free"
        assert len(set(held.values())) == len(held), "a snapshot slot kept twice"
