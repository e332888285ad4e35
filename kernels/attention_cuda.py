"""Causal attention over pages on the GPU on tensor cores (mma.sync m16n8k16, bf16 x bf16 ->
f32; sm_80 and later), decode and prefill in one launch per layer, with long rows split over
keys (flash-decoding) and folded in a fixed order.

THE ARITHMETIC of one query row at position p, q head h (kv head h / G):
  q is the float32 rotated query rounded to bf16 (RNE); K, V are the pool's bf16 rows.
  Keys 0..p fall into spans of SPAN = 64: span j = keys [64j, min(64j + 64, p + 1)); a span's
  keys sit in 8 n8 tiles, key 64j + 8nt + c in column c of tile nt. For each span, in order:
  (1) S_k = a chain of HD/16 mma.sync from C = 0, step dc multiplying q[16dc..16dc+15] by
      k[16dc..16dc+15] (the query in some m-row of A, the key in some column of B);
  (2) s_k = S_k * scale (rounded) for k <= p, -inf past p;
  (3) the span's max m: thread t of the row's quad takes keys with k mod 8 in {2t, 2t+1},
      fmaxf over tiles nt = 0..7 then the two columns, then over the quad (xor 1, then 2);
  (4) w_k = expf(s_k - m) for k <= p, 0 past p (a select); P_k = bf16(w_k) (RNE);
  (5) l: thread t sums its P_k (as f32) in the order of (3), then (l0 + l1) + (l2 + l3) by
      xor 1 then 2;
  (6) acc[d] = a chain of 4 mma.sync from 0, step kc multiplying P of keys 16kc..16kc+15 by
      V of those keys (keys past p have P = 0; their V is finite: a later row of the same
      chunk, or zero-filled past the tile's last row);
  (7) fold (m, l, acc) into the running (M, L, A) (M = -inf, L = A = 0 before span 0):
      mn = max(M, m); ca = expf(M - mn), cb = expf(m - mn); L = L ca + l cb;
      A = A ca + acc cb (each product and sum rounded on its own); M = mn.
  out = bf16(A * rcp_rn(L)) (RNE). A span with no key <= p is never folded.
Every step on a row's values is fixed by p and HD: the row's m-row in the mma, the rows
beside it, the tile and the launch mode do not change its bits (mma.sync's row i of D
depends on row i of A only; tests/gpu check every output bit against `reference`, a kernel
that runs the definition with the query alone in m-row 0). Hence paged == window, solo ==
concurrent, resumed == fresh and chunked == whole, byte for byte.

Who computes a span is scheduling, not arithmetic. `attend` runs in one of two modes:
  * in-block (split = 0): grid (tiles, kv heads); a block walks its tile's spans in order
    and folds them in registers;
  * split (split = 1): grid (tiles, kv heads, Z); block z computes spans z, z+Z, ... of its
    tile and writes each span's state (m, l, acc: float32, exact) to a scratch buffer; then
    `fold_spans` (a second launch, grid (row x q head, HD / 32)) folds each row's spans in
    order 0, 1, 2, ...: the running maxima are prefix maxima (exact in any order), so the
    scales of 32 spans come at once, and each element's sums run in span order from shared
    memory while the block's other warps copy the next spans' states in (the tile's last
    block walked the scratch span by span before: one 32k decode row's attention 5.16 ->
    2.30 ms a step, receipt 2026-12-01-real-traffic/long-context). Rows with one span
    (p < SPAN) are folded and written by their span-0 block.
The mode is chosen per launch from shapes only (tiles x kv heads, the table width W and the
page rows P), so a CUDA graph captures one mode per bucket and the scratch is sized by W.

A block: 4 warps, 64 (row, q head) pairs of one kv head (pair i: row r0 + i / G, head
kvh G + i % G; warp w holds pairs 16w..16w+15 as its m-rows), up to 64 / G consecutive rows
of one chunk. The heads share each K/V load: a span's 64 keys of K and V go through shared
memory by cp.async (zero fill past the tile's last row), XOR-swizzled for ldmatrix, the next
span fetched during this one (PREFETCH; scheduling only). Rows with p < 0 are padding
(CUDA-graph buckets): no keys are read, zeros are written.
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels.attention import GPU_HEAD_DIMS
from kernels.common_cuda import BF16, csrc, kernel, launch

PAIRS = 64          # (row, q head) pairs a block serves: 4 warps x 16 m-rows
SPAN = 64           # keys a span: the arithmetic (8 n8 tiles of keys; fixed by the kernel)
SPLIT_BLOCKS = 512  # split when tiles x kv heads is below this (scheduling only)
SPLIT_TARGET = 512  # blocks aimed at in split mode: Z = ceil(this / (tiles x kv heads)), <= spans
SCRATCH_MAX = 128 << 20  # bytes of span states a launch with prefill tiles may use; above it: in-block
# ... and one of decode rows only (a row a tile: graph buckets, padding included): 16 rows of
# llama3-8b at 131,072 keys (545 MB) still split (147.4 ms a step in-block, 103.7 split)
SCRATCH_DECODE = 576 << 20
FORCE_SPLIT = None  # tests: True / False forces a mode, None chooses by shape
PREFETCH = True     # fetch span j+1's keys while span j is computed (scheduling only)
HEAD_DIMS = GPU_HEAD_DIMS  # head dims built (the swizzle wants >= 8 chunks of 16 bytes a row)

_MMA = csrc("attention_mma.cuh")

_SRC = _MMA + csrc("attention.cu")

# The definition, for the tests: one warp a (row, q head) of one chunk, the query alone in
# m-row 0 (rows 1..15 of A are zero), K and V read straight through the table (0 past p).
_REF_SRC = _MMA + csrc("attention_reference.cu")


class RoundMap:
    """Where each row of a round reads and writes its KV rows, as device int32 arrays.

    tables [S, W]: chunk c's page ids (padded with 0); slot [T]: the chunk of each row;
    pos [T]: each row's position (-1: padding); tiles: (first row, rows) of each tile."""

    def __init__(self, tables, slot, pos, tile_row, tile_n, page_rows):
        self.tables, self.slot, self.pos = tables, slot, pos
        self.tile_row, self.tile_n, self.page_rows = tile_row, tile_n, page_rows

    @property
    def width(self) -> int:
        return self.tables.shape[1]


def host_map(chunks, group, width=None):
    """numpy arrays for a RoundMap of chunks [(table, page_rows, start, ids, want_logits)]
    (server/engine/rows.py's RoundChunk, or a plain tuple in its order)."""
    qt = max(1, PAIRS // group)
    W = width or max(len(c[0]) for c in chunks)          # c[0]: the table
    tables = np.zeros((len(chunks), W), dtype=np.int32)
    slot, pos, trow, tn, keys = [], [], [], [], []
    row = 0
    for ci, (table, _, start, ids, *_) in enumerate(chunks):
        tables[ci, :len(table)] = table
        n = len(ids)
        slot += [ci] * n
        pos += range(start, start + n)
        for a in range(0, n, qt):
            trow.append(row + a)
            tn.append(min(qt, n - a))
            keys.append(start + a + tn[-1])             # the most keys a row of the tile reads
        row += n
    i32 = lambda a: np.asarray(a, dtype=np.int32)
    # Tiles with the most keys first: blocks start in grid order, so a causal prefill's long
    # tiles no longer form the launch's last wave (scheduling only: a tile's bytes do not
    # depend on its block)
    order = np.argsort(-np.asarray(keys, dtype=np.int64), kind="stable")
    return tables, i32(slot), i32(pos), i32(trow)[order], i32(tn)[order]


def round_map(chunks, group, pos=None, width=None) -> RoundMap:
    t, s, p, tr, tn = host_map(chunks, group, width)
    d = cp.asarray
    return RoundMap(d(t), d(s), d(p) if pos is None else pos, d(tr), d(tn), chunks[0][1])  # page_rows


def plan(T, hq, hd, kv, n_tiles, keys):
    """(split, Z, spans) of a launch, from shapes only: `keys` = W x P, the most keys a row
    of this map can have. Scheduling only: both modes give the same bytes."""
    spans = -(-keys // SPAN)
    blocks = n_tiles * kv
    cap = SCRATCH_DECODE if T == n_tiles else SCRATCH_MAX
    split = spans >= 2 and blocks < SPLIT_BLOCKS and T * hq * spans * (hd + 2) * 4 <= cap
    if FORCE_SPLIT is not None:
        split = bool(FORCE_SPLIT) and spans >= 2
    z = min(spans, max(1, -(-SPLIT_TARGET // max(1, blocks)))) if split else 1
    return split, z, spans


def _smem(hd: int) -> int:
    return (2 * PAIRS + 4 * SPAN) * hd * 2        # q (high, rest), K and V of two spans: bf16


def cuda_round(q, k_pool, v_pool, rmap: RoundMap, scale, pi: bool = False):
    # q: [T, Hq, hd] float32 contiguous; pools [pages, P, KV, hd] bf16 -> [T, Hq, hd] bf16
    # (pi: each 32-element chunk of a row in pi order, for matmul_cuda's TMA GEMM)
    T, hq, hd = q.shape
    kv = k_pool.shape[2]
    if hd not in HEAD_DIMS:
        raise NotImplementedError(f"GPU attention is built for head dims {HEAD_DIMS}, not {hd}; "
                                  "run this model with --device cpu")
    if hq // kv > PAIRS:
        raise NotImplementedError(f"GPU attention serves up to {PAIRS} q heads a kv head, not {hq // kv}")
    q = cp.ascontiguousarray(q, dtype=cp.float32)
    out = cp.empty((T, hq, hd), dtype=BF16)
    n_tiles = rmap.tile_row.shape[0]
    if not n_tiles:
        return out
    split, z, spans = plan(T, hq, hd, kv, n_tiles, rmap.width * rmap.page_rows)
    if split:
        sm = cp.empty((T * hq * spans,), dtype=cp.float32)
        sl = cp.empty_like(sm)
        sa = cp.empty((T * hq * spans * hd,), dtype=cp.float32)
    else:
        sm = sl = sa = cp.empty((1,), dtype=cp.float32)
    fn = kernel(_SRC, "attend", (f"HD={hd}", f"PF_={int(PREFETCH)}", f"PI_={int(pi)}"), smem=_smem(hd))
    launch(fn, (n_tiles, kv, z), (128,), (q, k_pool, v_pool, rmap.tables, cp.int32(rmap.width),
                                          rmap.slot, rmap.pos, rmap.tile_row, rmap.tile_n,
                                          cp.int32(rmap.page_rows), cp.int32(hq), cp.int32(kv),
                                          cp.int32(hq // kv), cp.float32(scale), out,
                                          cp.int32(int(split)), cp.int32(spans), sm, sl, sa),
           shared_mem=_smem(hd))
    if split:
        fold = kernel(_SRC, "fold_spans", (f"HD={hd}", f"PF_={int(PREFETCH)}", f"PI_={int(pi)}"))
        launch(fold, (T * hq, hd // 32), (256,), (rmap.pos, cp.int32(hq), cp.int32(spans),
                                                   sm, sl, sa, out))
    return out


def reference(q, k_pool, v_pool, table, page_rows, start, scale):
    """The definition kernel (tests): rows start .. start+n-1 of one stream, each (row, head)
    alone in m-row 0 of its own warp's mma. Same signature as `cuda`."""
    n, hq, hd = q.shape
    kv = k_pool.shape[2]
    q = cp.ascontiguousarray(q, dtype=cp.float32)
    out = cp.empty((n, hq, hd), dtype=BF16)
    t = cp.asarray(np.asarray(table, dtype=np.int32))
    kernel(_REF_SRC, "reference", (f"HD={hd}",))((n, hq), (32,), (
        q, k_pool, v_pool, t, cp.int32(page_rows), cp.int32(start), cp.int32(hq), cp.int32(kv),
        cp.float32(scale), out))
    return out


def cuda(q, k_pool, v_pool, table, page_rows, start, scale):
    # the reference's signature: one chunk of rows start .. start+n-1 of one stream
    chunk = (tuple(table), page_rows, start, range(q.shape[0]))
    group = q.shape[1] // k_pool.shape[2]
    return cuda_round(q, k_pool, v_pool, round_map([chunk], group), scale)
