"""Write a round's K and V rows through the page tables on the GPU (float32 -> bf16).

  row t at position p  ->  pool[tables[slot[t], p // P], p % P]      (p < 0: padding, skipped)

`rope_round` is the same write fused with RoPE (one launch instead of three): it reads q, k
and v straight out of the fused qkv GEMM's rows, rotates q (returned, float32) and k, and
writes k and v through the tables. Its arithmetic is kernels/rope_cuda.py's followed by this
file's rounding, so its bytes equal the three separate launches'.
"""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import grid, kernel, launch

_SRC = r"""
extern "C" __global__ void kv_write(const float* k, long long ks, const float* v, long long vs,
                                    bf16* kp, bf16* vp, const int* tables, int W,
                                    const int* slot, const int* pos, int P, int T, int RW) {
    const long long n = (long long)T * RW;              // RW = KV * hd
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long t = idx / RW; const int d = idx % RW;
        const int p = pos[t];
        if (p < 0) continue;
        const long long page = tables[(long long)slot[t] * W + p / P];
        const long long dst = (page * P + p % P) * RW + d;
        kp[dst] = f2b(k[t * ks + d]);
        vp[dst] = f2b(v[t * vs + d]);
    }
}

// qkv [T, (NQ + 2 KV) hd] rows (stride rs): heads 0..NQ-1 are q, then KV k heads, KV v heads
extern "C" __global__ void rope_kv_write(const float* qkv, long long rs, const float* inv,
                                         float* q, bf16* kp, bf16* vp, const int* tables, int W,
                                         const int* slot, const int* pos, int P, int T,
                                         int NQ, int KV, int half) {
    pdl_trigger();
    pdl_wait();
    const int H = NQ + 2 * KV, hd = 2 * half;
    const long long n = (long long)T * H * half;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const int i = idx % half;
        const long long t2 = idx / half;
        const int h = t2 % H;
        const long long m = t2 / H;
        const int p = pos[m];
        const float* xr = qkv + m * rs + (long long)h * hd;
        float a = xr[i], b = xr[i + half];
        if (h < NQ + KV) rope_pair(a, b, p, inv[i]);          // q and k: rotate (as rope_cuda)
        if (h < NQ) {
            float* o = q + (m * NQ + h) * hd;
            o[i] = a;
            o[i + half] = b;
            continue;
        }
        if (p < 0) continue;                                  // padding: no KV row
        const bool isk = h < NQ + KV;
        const int kh = isk ? h - NQ : h - NQ - KV;
        const long long page = tables[(long long)slot[m] * W + p / P];
        const long long dst = ((page * P + p % P) * KV + kh) * hd + i;
        bf16* pool = isk ? kp : vp;
        pool[dst] = f2b(a);
        pool[dst + half] = f2b(b);
    }
}
"""


def rope_round(qkv, nq, kv, hd, inv, k_pool, v_pool, rmap):
    """qkv: [T, (nq + 2 kv) hd] float32 (unit column stride, any row stride) -> q roped
    [T, nq, hd] float32; k roped and v written through rmap (positions rmap.pos)."""
    if qkv.dtype != cp.float32 or qkv.strides[1] != 4:
        qkv = cp.ascontiguousarray(qkv, dtype=cp.float32)
    T = qkv.shape[0]
    q = cp.empty((T, nq, hd), dtype=cp.float32)
    n = T * (nq + 2 * kv) * (hd // 2)
    if n:
        launch(kernel(_SRC, "rope_kv_write"), grid(n), (256,), (
            qkv, cp.int64(qkv.strides[0] // 4), cp.asarray(inv, dtype=cp.float32), q, k_pool,
            v_pool, rmap.tables, cp.int32(rmap.width), rmap.slot, rmap.pos,
            cp.int32(rmap.page_rows), cp.int32(T), cp.int32(nq), cp.int32(kv), cp.int32(hd // 2)))
    return q


def _rows(x):
    # [T, KV, hd] float32 with heads contiguous inside a row; any row stride
    if x.dtype != cp.float32 or x.strides[2] != 4 or x.strides[1] != x.shape[2] * 4:
        x = cp.ascontiguousarray(x, dtype=cp.float32)
    return x, cp.int64(x.strides[0] // 4)


def cuda_round(k_pool, v_pool, rmap, k, v) -> None:
    T, kv, hd = k.shape
    k, ks = _rows(k)
    v, vs = _rows(v)
    if T:
        kernel(_SRC, "kv_write")(grid(T * kv * hd), (256,), (
            k, ks, v, vs, k_pool, v_pool, rmap.tables, cp.int32(rmap.width), rmap.slot,
            rmap.pos, cp.int32(rmap.page_rows), cp.int32(T), cp.int32(kv * hd)))


def cuda(k_pool, v_pool, table, page_rows, start, k, v) -> None:
    from kernels.attention_cuda import round_map
    chunk = (tuple(table), page_rows, start, range(k.shape[0]))
    cuda_round(k_pool, v_pool, round_map([chunk], 1), k, v)
