"""The weights of the GPU GEMMs as they sit on the device: [N, K] (out, in) bf16 cut into
tiles of 8 columns x 32 k in mma fragment order (`Packed`), made once at load (`pack_weights`)."""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import BF16, as_bf16


class Packed:
    """W [N, K] bf16 in tiles of 8 columns x 32 k (512 contiguous bytes: a warp's load of one
    chunk of a column group is one tile, as the decode GEMVs want; with 8 x 64-k tiles, 64 bytes
    a row a chunk, llama3-8b's decode step went 5.15 -> 5.62 ms at one row and 10.0 -> 12.2 at
    64 on the H200). data[N8][KC][4][8][8], N8 = ceil(N / 8), KC = ceil(K / 32): tile (n / 8,
    k / 32) holds the chunk's 32 k of columns 8 (n / 8) + g, g = 0..7, in "pi order" (the row's
    32-bit word 4i + t holds the k pair 8t + 2i, +1; position p = 16h + 8b + 2t + e holds
    k = 8t + 4h + 2b + e), stored as four "core matrices": piece i (16 bytes = words 4i..4i+3)
    of rows 0..7, 128 bytes each. Pi order is the order in which the arithmetic's two k16 steps
    take k (kernels/matmul_definition_cuda.py): step h reads pieces 2h, 2h + 1 of every row,
    which is what wgmma reads from a K-major, unswizzled shared-memory tile, so
    kernels/wgmma_tma_cuda.py loads whole tiles with TMA; the streaming kernel loads a chunk as
    four 32-bit words, word t of row g of each piece (one whole 128-byte line a warp load, and
    natural order on arrival), the tiled kernel regroups its (g, t) shared-memory reads with
    `unpi` (kernels/csrc/pi_order.cuh). Padding (N to 8, K to 32) is zeros."""

    def __init__(self, w):
        N, K = w.shape
        n8, kc = -(-N // 8), -(-K // 32)
        u = as_bf16(w).view(cp.uint16)
        if (n8 * 8, kc * 32) != (N, K):
            z = cp.zeros((n8 * 8, kc * 32), dtype=cp.uint16)
            z[:N, :K] = u
            u = z
        # [n8, g, kc, natural word 4t + i as (t, i), e] -> [n8, kc, piece i, g, t, e]
        self.data = cp.ascontiguousarray(
            u.reshape(n8, 8, kc, 4, 4, 2).transpose(0, 2, 4, 1, 3, 5)).view(BF16)
        self.shape, self.dtype, self.nbytes = (N, K), BF16, self.data.nbytes


def pack(w) -> Packed:
    # quantized weights (kernels/qmatmul_cuda: planes / parts) stay as their blocks
    return w if isinstance(w, Packed) or hasattr(w, "planes") or hasattr(w, "parts") else Packed(w)


def pack_weights(sw) -> None:
    """Every GEMM matrix of a ShardWeights packed in place (one matrix at a time, so the
    peak is one matrix over the weights); a tied LM head gets its own packed copy."""
    for L in sw.layers:
        L.wqkv, L.wo, L.wgu, L.wdown = (pack(a) for a in (L.wqkv, L.wo, L.wgu, L.wdown))
    sw.lm_head = pack(sw.lm_head)
