"""Causal attention over pages on the GPU, decode and prefill in one launch per layer.

Grid: (tiles, kv heads). A tile is up to QT consecutive rows of one chunk; a block serves
its rows' G query heads of one kv head (GQA) and streams keys 0..max p through the table
in blocks of BK=32 (one key a lane), into shared memory.

Exactness: a query row at position p uses keys 0..p and nothing else, in key blocks
[0,32), [32,64), ... with an online softmax in that fixed order. Its arithmetic depends on
p and the bytes of its rows alone, never on the tile, the other rows of the round, or
where the pages lie: paged == window, solo == concurrent, resumed == fresh, byte for byte.
Rows with p < 0 are padding (CUDA-graph buckets): no keys are read, zeros are written.
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels.common_cuda import BF16, kernel

PAIRS = 32          # (row, q head) pairs a block serves: 4 warps x 8

_SRC = r"""
#define BK 32
#define NEG_INF __int_as_float(0xff800000u)
#define NW 4
#define PPW (PAIRS_ / NW)
#define DPL (HD / 32)
extern "C" __global__ void __launch_bounds__(128) attend(
        const float* q, const bf16* kp, const bf16* vp, const int* tables, int W,
        const int* slot, const int* pos, const int* tile_row, const int* tile_n,
        int P, int NQ, int KV, int G, float scale, bf16* out) {
    __shared__ __align__(16) float qs[PAIRS_][HD];
    __shared__ __align__(16) bf16 ks[BK][HD + 4];  // +4: lanes read rows conflict-free
    __shared__ __align__(16) bf16 vs[BK][HD];
    __shared__ float pw[NW][BK];                   // each warp's softmax weights of a key block
    const int kvh = blockIdx.y, r0 = tile_row[blockIdx.x], nr = tile_n[blockIdx.x];
    const int npairs = nr * G, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int i = tid; i < npairs * HD; i += blockDim.x) {
        const int pr = i / HD, d = i % HD;
        qs[pr][d] = q[((long long)(r0 + pr / G) * NQ + kvh * G + pr % G) * HD + d];
    }
    const int s = slot[r0], pmax = pos[r0 + nr - 1];
    float m[PPW], l[PPW], acc[PPW][DPL];
    int prow[PPW];
#pragma unroll
    for (int i = 0; i < PPW; i++) {
        const int pair = warp + NW * i;
        m[i] = NEG_INF; l[i] = 0.f;
#pragma unroll
        for (int c = 0; c < DPL; c++) acc[i][c] = 0.f;
        prow[i] = pair < npairs ? pos[r0 + pair / G] : -1;
    }
    __syncthreads();
    for (int kb = 0; kb <= pmax; kb += BK) {
        for (int i = tid; i < BK * (HD / 8); i += blockDim.x) {
            const int j = i / (HD / 8), c = i % (HD / 8), key = kb + j;
            if (key <= pmax) {
                const long long page = tables[(long long)s * W + key / P];
                const long long off = ((page * P + key % P) * KV + kvh) * HD + c * 8;
                const uint4 kk = *(const uint4*)(kp + off);
                const uint4 vv = *(const uint4*)(vp + off);
                uint2* kd = (uint2*)&ks[j][c * 8];
                kd[0] = make_uint2(kk.x, kk.y); kd[1] = make_uint2(kk.z, kk.w);
                *(uint4*)&vs[j][c * 8] = vv;
            }
        }
        __syncthreads();
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
                for (int j = 0; j < nk; j++) {                 // lane owns dims lane*DPL ..
                    const float pjj = pw[warp][j];
                    const bf16* vr = &vs[j][lane * DPL];
#pragma unroll
                    for (int c = 0; c < DPL; c++) acc[i][c] = fmaf(pjj, b2f(vr[c]), acc[i][c]);
                }
                m[i] = mn;
                __syncwarp();                                  // pw is rewritten by the next pair
            }
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < PPW; i++) {
        const int pair = warp + NW * i;
        if (pair < npairs) {
            const long long o = ((long long)(r0 + pair / G) * NQ + kvh * G + pair % G) * HD;
            const float inv = prow[i] < 0 ? 0.f : 1.0f / l[i];
#pragma unroll
            for (int c = 0; c < DPL; c++)
                out[o + lane * DPL + c] = f2b(prow[i] < 0 ? 0.f : acc[i][c] * inv);
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


def cuda_round(q, k_pool, v_pool, rmap: RoundMap, scale):
    # q: [T, Hq, hd] float32 contiguous; pools [pages, P, KV, hd] bf16 -> [T, Hq, hd] bf16
    T, hq, hd = q.shape
    kv = k_pool.shape[2]
    q = cp.ascontiguousarray(q, dtype=cp.float32)
    out = cp.empty((T, hq, hd), dtype=BF16)
    n_tiles = rmap.tile_row.shape[0]
    if n_tiles:
        fn = kernel(_SRC, "attend", (f"HD={hd}", f"PAIRS_={PAIRS}"))
        fn((n_tiles, kv), (128,), (q, k_pool, v_pool, rmap.tables, cp.int32(rmap.width),
                                   rmap.slot, rmap.pos, rmap.tile_row, rmap.tile_n,
                                   cp.int32(rmap.page_rows), cp.int32(hq), cp.int32(kv),
                                   cp.int32(hq // kv), cp.float32(scale), out))
    return out


def cuda(q, k_pool, v_pool, table, page_rows, start, scale):
    # the reference's signature: one chunk of rows start .. start+n-1 of one stream
    chunk = (tuple(table), page_rows, start, range(q.shape[0]))
    group = q.shape[1] // k_pool.shape[2]
    return cuda_round(q, k_pool, v_pool, round_map([chunk], group), scale)
