"""Decode rounds on the GPU as CUDA graph replays, one graph per batch-size bucket.

A decode round (every chunk one token, every chunk wanting logits) of b streams runs the
graph of the smallest bucket B >= b. Its inputs live in fixed device buffers (ids, pos,
page tables [B, W], slots, tiles) that are refilled by one host->device copy before each
replay, so page tables and positions change without recapture. Rows b..B-1 are padding
(pos = -1): they write no KV and read none, and the kernels are row-independent, so the
real rows' bytes equal an eager round's. Attention's split-over-keys scratch (span states,
sized by W) is allocated in the graph's own pool at capture; which mode a bucket captures is
scheduling only (kernels/attention_cuda.py), so replay == eager still holds. Anything else
(prefill chunks, a table wider than W, a new KV store) runs eagerly.
"""
from __future__ import annotations

import gc
import logging

import cupy as cp
import numpy as np

from kernels.attention_cuda import RoundMap
from server.config import setting
from server.engine.rows import Rows

log = logging.getLogger("foldserve")

BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128)


class _Graph:
    def __init__(self, model, kv, B, W):
        group = model.spec.n_heads // model.spec.n_kv_heads
        # host layout of the one input buffer: ids | pos | slot | tile_row | tile_n | tables
        self.B, self.W = B, W
        # pinned, so the copy before each replay is asynchronous (replay waits on `done`
        # before refilling it)
        import cupyx
        self.host = cupyx.empty_pinned((5 * B + B * W,), dtype=np.int32)
        self.host[:] = 0
        self.buf = cp.asarray(self.host)
        v = lambda i: self.buf[i * B:(i + 1) * B]
        ids, pos, slot, trow, tn = (v(i) for i in range(5))
        tables = self.buf[5 * B:].reshape(B, W)
        self.host[2 * B:3 * B] = np.arange(B)           # slot: row b reads table row b
        self.host[3 * B:4 * B] = np.arange(B)           # one tile a row
        self.host[4 * B:5 * B] = 1
        self.host[B:2 * B] = -1                         # all padding until filled
        self.buf.set(self.host)
        rmap = RoundMap(tables, slot, pos, trow, tn, kv.page_rows if kv.paged else kv.context)
        self.pool = cp.cuda.MemoryPool()                # the graph's own scratch, never shared
        with cp.cuda.using_allocator(self.pool.malloc):
            sel = cp.arange(B, dtype=cp.int32)
        # Every array the graph reads must live as long as the graph: `rows` is kept, and sel
        # comes from the graph's own pool. (It once came from the default pool and was freed
        # when __init__ returned; eager rounds then reused its bytes, and replays picked other
        # rows' logits: solo != concurrent in serving. tests/gpu/test_graphs.py guards it.)
        rows = self.rows = Rows([], [], ids, pos, sel, rmap)
        self.stream = cp.cuda.Stream()
        self.ready, self.done = cp.cuda.Event(disable_timing=True), cp.cuda.Event(disable_timing=True)
        with cp.cuda.using_allocator(self.pool.malloc), self.stream:
            model.run(rows, kv)                         # compile, warm cuBLAS, fill the pool
            self.stream.synchronize()
            self.stream.begin_capture()
            self.out = model.run(rows, kv)
            self.graph = self.stream.end_capture()
        self.group = group

    def fill(self, chunks) -> None:
        """The host buffer for a round of these chunks: ids, positions (padding -1), tables."""
        B, W, b, h = self.B, self.W, len(chunks), self.host
        h[:b] = [c.tokens[0] for c in chunks]
        h[B:B + b] = [c.start for c in chunks]
        h[B + b:2 * B] = -1
        tables = h[5 * B:].reshape(B, W)
        tables[:] = 0
        for i, c in enumerate(chunks):
            tables[i, :len(c.table)] = c.table

    def replay(self, chunks):
        b = len(chunks)
        self.done.synchronize()                         # the last replay's copy has been read
        h = self.host
        self.fill(chunks)
        # ordered on the device both ways, no host wait: the replay starts after the caller's
        # stream's work so far (eager rounds' KV writes), and the caller's stream waits for it
        cur = cp.cuda.get_current_stream()
        self.ready.record(cur)
        self.stream.wait_event(self.ready)
        self.buf.set(h, stream=self.stream)
        self.graph.launch(stream=self.stream)
        self.done.record(self.stream)
        cur.wait_event(self.done)
        return self.out[:b]


class DecodeGraphs:
    def __init__(self, model, enabled=None):
        if enabled is None:                             # TF_CUDA_GRAPHS=0: every round eager
            enabled = setting("TF_CUDA_GRAPHS") != "0"
        self.model, self.enabled = model, enabled
        self.graphs: dict = {}
        self.kv = None
        self.failed = None

    def run(self, chunks, kv):
        if not self.enabled or self.failed or not chunks:
            return NotImplemented
        if any(len(c.tokens) != 1 or not c.logits for c in chunks) or len(chunks) > BUCKETS[-1]:
            return NotImplemented
        if kv is not self.kv:                           # a new store: old graphs point into the old one
            self.graphs, self.kv = {}, kv
        P = kv.page_rows if kv.paged else kv.context
        W = max(1, -(-kv.context // P))
        if max(len(c.table) for c in chunks) > W:
            return NotImplemented
        B = next(b for b in BUCKETS if b >= len(chunks))
        if B not in self.graphs:
            try:
                self.graphs[B] = _Graph(self.model, kv, B, W)
            except Exception as e:                      # capture unsupported: stay eager
                self.failed = f"{type(e).__name__}: {e}"
                log.warning("CUDA graphs off: %s", self.failed)
                return NotImplemented
        return self.graphs[B].replay(chunks)

    def release(self) -> None:
        """Drop every captured graph (at a StopStep). A graph that captured an NCCL collective
        holds a reference on the communicator: ncclCommDestroy waits until the graph is gone,
        so a TP > 1 rank that closed its communicator with graphs alive never exited (seen on
        two H200s). Later rounds capture afresh."""
        if self.graphs:
            cp.cuda.Device().synchronize()
        self.graphs, self.kv = {}, None
        gc.collect()
