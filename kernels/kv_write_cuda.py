"""Write a round's K and V rows through the page tables on the GPU (float32 -> bf16).

  row t at position p  ->  pool[tables[slot[t], p // P], p % P]      (p < 0: padding, skipped)

`rope_round` is the same write fused with RoPE (one launch instead of three): it reads q, k
and v straight out of the fused qkv GEMM's rows, rotates q (returned, float32) and k, and
writes k and v through the tables. Its arithmetic is kernels/rope_cuda.py's followed by this
file's rounding, so its bytes equal the three separate launches'.
"""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import csrc, grid, kernel, launch

_SRC = csrc("kv_write.cu")


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
