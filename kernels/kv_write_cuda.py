"""Write a round's K and V rows through the page tables on the GPU (float32 -> bf16).

  row t at position p  ->  pool[tables[slot[t], p // P], p % P]      (p < 0: padding, skipped)
"""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import grid, kernel

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
"""


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
