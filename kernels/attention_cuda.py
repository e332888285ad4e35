"""Causal attention over pages on the GPU, decode and prefill in one launch per layer, with
long rows split over keys (flash-decoding) and merged in a fixed order.

The arithmetic of a query row at position p is fixed by p alone:
  * keys 0..p fall into spans of SPAN keys: span j = keys [j*SPAN, min((j+1)*SPAN, p+1));
  * each span is streamed in key blocks of BK=32 from its start with an online softmax in
    that fixed order, giving a state (m, l, acc) per (row, q head);
  * the spans' states are folded in order 0, 1, 2, ... by `fold` (running max, explicit
    __fmul_rn/__fadd_rn, so no FMA contraction can differ between kernels), and the row's
    output is acc * (1 / l) of the folded state.
A row with p < SPAN has one span: its bytes equal the single-pass kernel's.

Who computes a span is scheduling, not arithmetic. `attend` runs in one of two modes that
give the same bytes:
  * in-block (split = 0): grid (tiles, kv heads); a block walks its tile's spans one after
    the other and folds them in registers;
  * split (split = 1): grid (tiles, kv heads, Z); block z computes spans z, z+Z, ... of its
    tile and writes each span's state to a scratch buffer (float32, exact); the tile's last
    block to finish (a count per tile and kv head, left at zero) folds each row's spans in
    order 0, 1, 2, ... with the same `fold` and writes the output. Rows with one span
    (p < SPAN) are written by their span-0 block directly.
The mode is chosen per launch from shapes only (tiles x kv heads, the table width W and
the page rows P), so a CUDA graph captures one mode per bucket and the scratch is sized by
W: spans = ceil(W*P / SPAN). A row's bytes depend on p and its own KV bytes, never on the
mode, the tile, the other rows of the round, or where the pages lie: paged == window,
solo == concurrent, resumed == fresh, chunked == whole, byte for byte.

GQA: a block serves the G query heads of one kv head for its tile's rows (up to QT
consecutive rows of one chunk). Rows with p < 0 are padding (CUDA-graph buckets): no keys
are read, zeros are written.
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels.common_cuda import BF16, kernel, launch

PAIRS = 32          # (row, q head) pairs a block serves: 4 warps x 8
SPAN = 64           # keys a span: the arithmetic (a multiple of 32; 1 << 30 turns splitting off)
SPLIT_BLOCKS = 512  # split when tiles x kv heads is below this (scheduling only)
SPLIT_TARGET = 512  # blocks aimed at in split mode: Z = ceil(this / (tiles x kv heads)), <= spans
SCRATCH_MAX = 128 << 20  # bytes of span states a launch may use; above it: in-block
FORCE_SPLIT = None  # tests: True / False forces a mode, None chooses by shape
PREFETCH = True     # split mode and decode rounds fetch the next key block during the current one
MIN_BLOCKS = 3      # __launch_bounds__ blocks per SM (3: no spills at hd 128; 4: caps at 128 registers)

_SRC = r"""
#define BK 32
#define NEG_INF __int_as_float(0xff800000u)
#define NW 4
#define PPW (PAIRS_ / NW)
#define DPL (HD / 32)

// Fold a span's state (m2, l2, a2) into the running state (M, L, A). The first fold
// (M = -inf, L = A = 0) copies the span's state exactly.
__device__ __forceinline__ void fold(float& M, float& L, float* A, float m2, float l2,
                                     const float* a2) {
    const float mn = fmaxf(M, m2);
    const float ca = expf(M - mn), cb = expf(m2 - mn);
    L = __fadd_rn(__fmul_rn(L, ca), __fmul_rn(l2, cb));
#pragma unroll
    for (int c = 0; c < DPL; c++) A[c] = __fadd_rn(__fmul_rn(A[c], ca), __fmul_rn(a2[c], cb));
    M = mn;
}

extern "C" __global__ void __launch_bounds__(128, MINB_) attend(
        const float* q, const bf16* kp, const bf16* vp, const int* tables, int W,
        const int* slot, const int* pos, const int* tile_row, const int* tile_n,
        int P, int NQ, int KV, int G, float scale, bf16* out,
        int split, int NS, float* sm, float* sl, float* sa, int* count) {
    __shared__ __align__(16) float qs[PAIRS_][HD];
    __shared__ __align__(16) bf16 ks[BK][HD + 4];  // +4: lanes read rows conflict-free
    __shared__ __align__(16) bf16 vs[BK][HD];
    __shared__ float pw[NW][BK];                   // each warp's softmax weights of a key block
    pdl_trigger();
    pdl_wait();                                   // q, the pools and the map: after this
    const int kvh = blockIdx.y, r0 = tile_row[blockIdx.x], nr = tile_n[blockIdx.x];
    const int s = slot[r0], pmax = pos[r0 + nr - 1];
    const int z = split ? blockIdx.z : 0;
    if (z > 0 && (long long)z * SPAN_ > pmax) return;          // no span of this block: uniform
    const int npairs = nr * G, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int i = tid; i < npairs * HD; i += blockDim.x) {
        const int pr = i / HD, d = i % HD;
        qs[pr][d] = q[((long long)(r0 + pr / G) * NQ + kvh * G + pr % G) * HD + d];
    }
    float m[PPW], l[PPW], acc[PPW][DPL];          // the current span's state
    float M[PPW], L[PPW], A[PPW][DPL];            // in-block: the folded state
    int prow[PPW];
#pragma unroll
    for (int i = 0; i < PPW; i++) {
        const int pair = warp + NW * i;
        M[i] = NEG_INF; L[i] = 0.f;
#pragma unroll
        for (int c = 0; c < DPL; c++) A[i][c] = 0.f;
        prow[i] = pair < npairs ? pos[r0 + pair / G] : -1;
    }
    __syncthreads();
    const int nsp = pmax < 0 ? 1 : pmax / SPAN_ + 1;          // spans of the tile's last row
    const int zstep = split ? gridDim.z : 1;
    for (int j = z; j < nsp; j += zstep) {
        const int k0 = j * SPAN_, kend = min(pmax, k0 + SPAN_ - 1);
#pragma unroll
        for (int i = 0; i < PPW; i++) {
            m[i] = NEG_INF; l[i] = 0.f;
#pragma unroll
            for (int c = 0; c < DPL; c++) acc[i][c] = 0.f;
        }
        // a key block: BK keys x HD bf16 of K and V, DPL 16-byte pieces of each a thread
        // (thread tid takes pieces tid + 128 u); PF_: the next block's pieces are fetched into
        // registers while this one is computed (scheduling only: the same bytes reach smem)
        uint4 kk[DPL], vv[DPL];
        auto fetch = [&](int kb) {
#pragma unroll
            for (int u = 0; u < DPL; u++) {
                const int i = tid + 128 * u, jj = i / (HD / 8), c = i % (HD / 8), key = kb + jj;
                if (key <= kend) {
                    const long long page = tables[(long long)s * W + key / P];
                    const long long off = ((page * P + key % P) * KV + kvh) * HD + c * 8;
                    kk[u] = *(const uint4*)(kp + off);
                    vv[u] = *(const uint4*)(vp + off);
                }
            }
        };
        auto put = [&](int kb) {
#pragma unroll
            for (int u = 0; u < DPL; u++) {
                const int i = tid + 128 * u, jj = i / (HD / 8), c = i % (HD / 8);
                if (kb + jj <= kend) {
                    uint2* kd = (uint2*)&ks[jj][c * 8];
                    kd[0] = make_uint2(kk[u].x, kk[u].y); kd[1] = make_uint2(kk[u].z, kk[u].w);
                    *(uint4*)&vs[jj][c * 8] = vv[u];
                }
            }
        };
        if (PF_) fetch(k0);
        for (int kb = k0; kb <= kend; kb += BK) {
            if (!PF_) fetch(kb);
            put(kb);
            __syncthreads();
            if (PF_ && kb + BK <= kend) fetch(kb + BK);
#pragma unroll
            for (int i = 0; i < PPW; i++) {
                const int pair = warp + NW * i, p = prow[i];
                if (pair < npairs && kb <= p) {                  // uniform across the warp
                    const bool valid = kb + lane <= p;
                    const float* qq = qs[pair];
                    float s0 = 0.f, s1 = 0.f, s2 = 0.f, s3 = 0.f;  // 4 chains: d mod 4, then summed
#pragma unroll 8
                    for (int d = 0; d < HD; d += 4) {             // 4 dims: one 16-byte q, one 8-byte k
                        const float4 qv = *(const float4*)&qq[d];
                        const uint2 kw = *(const uint2*)&ks[lane][d];
                        s0 = fmaf(qv.x, __uint_as_float(kw.x << 16), s0);
                        s1 = fmaf(qv.y, __uint_as_float(kw.x & 0xffff0000u), s1);
                        s2 = fmaf(qv.z, __uint_as_float(kw.y << 16), s2);
                        s3 = fmaf(qv.w, __uint_as_float(kw.y & 0xffff0000u), s3);
                    }
                    float sc = (s0 + s1) + (s2 + s3);
                    sc = valid ? sc * scale : NEG_INF;
                    const float mn = fmaxf(m[i], warp_max(sc));
                    const float alpha = expf(m[i] - mn);
                    const float pj = valid ? expf(sc - mn) : 0.f;
                    l[i] = l[i] * alpha + warp_sum(pj);
                    const int nk = min(BK, p - kb + 1);
#pragma unroll
                    for (int c = 0; c < DPL; c++) acc[i][c] *= alpha;
                    pw[warp][lane] = pj;
                    __syncwarp();
#pragma unroll 8
                    for (int jj = 0; jj < nk; jj++) {              // lane owns dims lane*DPL ..
                        const float pjj = pw[warp][jj];
                        const bf16* vr = &vs[jj][lane * DPL];
#pragma unroll
                        for (int c = 0; c < DPL; c++) acc[i][c] = fmaf(pjj, b2f(vr[c]), acc[i][c]);
                    }
                    m[i] = mn;
                    __syncwarp();                                  // pw is rewritten by the next pair
                }
            }
            __syncthreads();
        }
        // the span is done: fold it (in-block) or hand it on (split)
#pragma unroll
        for (int i = 0; i < PPW; i++) {
            const int pair = warp + NW * i, p = prow[i];
            if (pair < npairs && p >= k0) {
                if (!split || p < SPAN_) {
                    fold(M[i], L[i], A[i], m[i], l[i], acc[i]);
                } else {
                    const long long st = ((long long)(r0 + pair / G) * NQ + kvh * G + pair % G) * NS + j;
                    if (lane == 0) { sm[st] = m[i]; sl[st] = l[i]; }
#pragma unroll
                    for (int c = 0; c < DPL; c++) sa[st * HD + lane * DPL + c] = acc[i][c];
                }
            }
        }
    }
    // outputs: in-block every row; split: rows of one span and padding, by the span-0 block
    if (split) {
        // the last of the tile's blocks to finish folds its rows of two spans or more, spans
        // 0, 1, 2, ... in order from the scratch (the others' states are visible after the
        // fence and the count); it leaves the count at 0 for the next launch
        __shared__ int last;
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            int* c = count + blockIdx.x * KV + kvh;
            last = atomicAdd(c, 1) == min((int)gridDim.z, nsp) - 1;
            if (last) *c = 0;
        }
        __syncthreads();
        if (last) {
            __threadfence();
#pragma unroll
            for (int i = 0; i < PPW; i++) {
                const int pair = warp + NW * i, p = prow[i];
                if (pair < npairs && p >= SPAN_) {
                    const long long w = (long long)(r0 + pair / G) * NQ + kvh * G + pair % G;
                    float Mx = NEG_INF, Lx = 0.f, Ax[DPL], a2[DPL];
#pragma unroll
                    for (int c = 0; c < DPL; c++) Ax[c] = 0.f;
                    for (int j = 0; j <= p / SPAN_; j++) {
                        const long long st = w * NS + j;
#pragma unroll
                        for (int c = 0; c < DPL; c++) a2[c] = __ldcg(sa + st * HD + lane * DPL + c);
                        fold(Mx, Lx, Ax, __ldcg(sm + st), __ldcg(sl + st), a2);
                    }
                    const float inv = 1.0f / Lx;
#pragma unroll
                    for (int c = 0; c < DPL; c++) out[w * HD + lane * DPL + c] = f2b(Ax[c] * inv);
                }
            }
        }
    }
    if (split && z != 0) return;
    // rows of one span (every row in-block; split: those and padding, by the span-0 block)
#pragma unroll
    for (int i = 0; i < PPW; i++) {
        const int pair = warp + NW * i, p = prow[i];
        if (pair < npairs && !(split && p >= SPAN_)) {
            const long long o = ((long long)(r0 + pair / G) * NQ + kvh * G + pair % G) * HD;
            const float inv = p < 0 ? 0.f : 1.0f / L[i];
#pragma unroll
            for (int c = 0; c < DPL; c++)
                out[o + lane * DPL + c] = f2b(p < 0 ? 0.f : A[i][c] * inv);
        }
    }
}
"""


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
    """numpy arrays for a RoundMap of chunks [(table, page_rows, start, ids, ...)]."""
    qt = max(1, PAIRS // group)
    W = width or max(len(c[0]) for c in chunks)
    tables = np.zeros((len(chunks), W), dtype=np.int32)
    slot, pos, trow, tn = [], [], [], []
    row = 0
    for ci, c in enumerate(chunks):
        tables[ci, :len(c[0])] = c[0]
        n = len(c[3])
        slot += [ci] * n
        pos += range(c[2], c[2] + n)
        for a in range(0, n, qt):
            trow.append(row + a)
            tn.append(min(qt, n - a))
        row += n
    i32 = lambda a: np.asarray(a, dtype=np.int32)
    return tables, i32(slot), i32(pos), i32(trow), i32(tn)


def round_map(chunks, group, pos=None, width=None) -> RoundMap:
    t, s, p, tr, tn = host_map(chunks, group, width)
    d = cp.asarray
    return RoundMap(d(t), d(s), d(p) if pos is None else pos, d(tr), d(tn), chunks[0][1])


def plan(T, hq, hd, kv, n_tiles, keys):
    """(split, Z, spans) of a launch, from shapes only: `keys` = W x P, the most keys a row
    of this map can have. Scheduling only: both modes give the same bytes."""
    spans = -(-keys // SPAN)
    blocks = n_tiles * kv
    split = spans >= 2 and blocks < SPLIT_BLOCKS and T * hq * spans * (hd + 2) * 4 <= SCRATCH_MAX
    if FORCE_SPLIT is not None:
        split = bool(FORCE_SPLIT) and spans >= 2
    z = min(spans, max(1, -(-SPLIT_TARGET // max(1, blocks)))) if split else 1
    return split, z, spans


_COUNTS = {}


def _counts(n: int):
    """Split mode's per-(tile, kv head) finish counts: at least n int32 on this device, zeroed
    once and left at zero by every launch (so CUDA graphs replay without a memset). Grown
    outside captures only; older buffers are kept (graphs may point into them)."""
    dev = cp.cuda.Device().id
    have = _COUNTS.get(dev, [])
    if not have or have[-1].size < n:
        if cp.cuda.get_current_stream().is_capturing():
            raise RuntimeError("attention: split counts grown inside a graph capture (run once eagerly first)")
        size = max(n, SPLIT_BLOCKS)
        mem = cp.cuda.Memory(size * 4)                  # its own allocation, outside any pool
        cp.cuda.runtime.memset(mem.ptr, 0, size * 4)
        have.append(cp.ndarray((size,), cp.int32, cp.cuda.MemoryPointer(mem, 0)))
        _COUNTS[dev] = have
    return have[-1]


def cuda_round(q, k_pool, v_pool, rmap: RoundMap, scale):
    # q: [T, Hq, hd] float32 contiguous; pools [pages, P, KV, hd] bf16 -> [T, Hq, hd] bf16
    T, hq, hd = q.shape
    kv = k_pool.shape[2]
    q = cp.ascontiguousarray(q, dtype=cp.float32)
    out = cp.empty((T, hq, hd), dtype=BF16)
    n_tiles = rmap.tile_row.shape[0]
    if not n_tiles:
        return out
    split, z, spans = plan(T, hq, hd, kv, n_tiles, rmap.width * rmap.page_rows)
    # split mode and decode rounds (one row a tile): the next key block is fetched during this
    # one's compute, at 2 blocks an SM for the registers; prefill tiles: 3 blocks, no prefetch
    pf = int((split or n_tiles == T) and PREFETCH)        # split, or decode rows (a tile each)
    defs = (f"HD={hd}", f"PAIRS_={PAIRS}", f"SPAN_={SPAN}", f"MINB_={2 if pf else MIN_BLOCKS}",
            f"PF_={pf}")
    if split:
        sm = cp.empty((T * hq * spans,), dtype=cp.float32)
        sl = cp.empty_like(sm)
        sa = cp.empty((T * hq * spans * hd,), dtype=cp.float32)
    else:
        sm = sl = sa = cp.empty((1,), dtype=cp.float32)
    launch(kernel(_SRC, "attend", defs), (n_tiles, kv, z), (128,), (q, k_pool, v_pool, rmap.tables, cp.int32(rmap.width),
                                  rmap.slot, rmap.pos, rmap.tile_row, rmap.tile_n,
                                  cp.int32(rmap.page_rows), cp.int32(hq), cp.int32(kv),
                                  cp.int32(hq // kv), cp.float32(scale), out,
                                  cp.int32(int(split)), cp.int32(spans), sm, sl, sa, _counts(n_tiles * kv)))
    return out


def cuda(q, k_pool, v_pool, table, page_rows, start, scale):
    # the reference's signature: one chunk of rows start .. start+n-1 of one stream
    chunk = (tuple(table), page_rows, start, range(q.shape[0]))
    group = q.shape[1] // k_pool.shape[2]
    return cuda_round(q, k_pool, v_pool, round_map([chunk], group), scale)
