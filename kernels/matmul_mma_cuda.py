"""The mma.sync GEMM kernels of kernels/csrc/matmul.cu and their launches: three schedulings
of kernels/matmul_definition_cuda.py's arithmetic (kernels/matmul_cuda.py picks one by shape):
  * `stream` (up to 64 rows, STREAM_CFG: decode rounds): a block of KSPLIT warps owns NT
    groups of 8 columns and MT tiles of 16 rows; warp q streams range q's weights straight
    into registers (U chunks in flight), then the block folds the ranges from shared memory.
    Its variants change what is loaded or stored, never the sum: GLU_ (the gate|up GEMM
    writing SwiGLU, matmul_fused_cuda.cuda_glu) and NORM_ (x = RMSNorm of the residual sum,
    made on load, matmul_fused_cuda.cuda_norm); each gives the bytes of its unfused pair of
    kernels;
  * `tiled` (large M): 128 x 128 tiles through swizzled shared memory, cp.async in 3
    stages of 64 k; each warp sums a range in `acc` and folds it into `tot` at its end;
  * `split` (few tiles): the tiled kernel with one block per range writing its sum to a
    scratch buffer, then `fold_parts` folds them in order (`fold`, also the wgmma kernels'
    split forms' fold).
The weights are matmul_packed_cuda.Packed data; x is [M, K] bf16 (the streaming kernel also
takes float32, rounded to bf16, nearest even, as it is loaded).
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels.common_cuda import BF16, csrc, kernel, launch
from kernels.matmul_definition_cuda import KSPLIT, NULL
from kernels.settings import setting

# streaming kernel configurations by rows (scheduling only; bench/stream_sweep.py):
# (up to M rows, MT tiles of 16 rows, NT groups of 8 columns a block, U chunks in flight)
STREAM_CFG = [(16, 1, 1, 4), (64, 2, 4, 2)]
PF = setting("TF_STREAM_PF") != "0"  # the streaming kernel loads round r + 1's
                       # weights before round r's arithmetic (llama3-8b's GEMMs at one row on the
                       # H200: 4.38 -> 4.21 ms; cuBLAS 4.08)

_SRC = csrc("matmul_mma.cuh", "pi_order.cuh", "matmul.cu")

TILED_SMEM = 3 * (128 + 128) * 64 * 2


def stream_smem(mt: int, nt: int) -> int:
    return KSPLIT * mt * nt * 128 * 4


def _fn(name: str, x_f32: bool = False, mt: int = 1, nt: int = 1, u: int = 2,
        split_only: bool = False, glu: bool = False, norm: bool = False):
    defs = (f"XT={'float' if x_f32 else 'bf16'}", f"X_F32={int(x_f32)}", f"MT={mt}", f"NT={nt}",
            f"U_={u}", f"S_={KSPLIT}", f"SPLIT_ONLY={int(split_only)}", f"GLU_={int(glu)}",
            f"NORM_={int(norm)}", f"PF_={int(PF)}")
    smem = TILED_SMEM if name == "tiled" else stream_smem(mt, nt) if name == "stream" else 0
    return kernel(_SRC, name, defs, smem)


def stream_cfg(M: int):
    """(MT, NT, U) of the streaming kernel for M rows, or None above the table."""
    for top, mt, nt, u in STREAM_CFG:
        if M <= top:
            return mt, nt, u
    return None


def stream(x, wdata, bias, out, N, cfg, glu=False, norm=None):
    """One streaming launch. wdata: Packed data; bias: a kernel argument (bias_arg). glu: out
    is bf16 [M, N / 2] (SwiGLU epilogue); norm: (xo, norm weight, hout, eps): x is the residual
    h and rows are normed on load (MT must be 1)."""
    M, K = x.shape
    mt, nt, u = cfg
    I = np.int32
    if norm is not None:
        xo, nwt, hout, eps = norm
        extra = (NULL if xo is None else xo, nwt, NULL if hout is None else hout, np.float32(eps))
        x_f32 = True
    else:
        extra = (NULL, NULL, NULL, np.float32(0))
        x_f32 = x.dtype != BF16
    x = cp.ascontiguousarray(x, dtype=cp.float32) if x_f32 else cp.ascontiguousarray(x)
    cols = N // 2 if glu else N                          # columns a block's NT groups cover
    launch(_fn("stream", x_f32, mt, nt, u, glu=glu, norm=norm is not None),
           (-(-cols // (8 * (nt // 2 if glu else nt))), -(-M // (16 * mt))), (32 * KSPLIT,),
           (x, wdata, bias, out, I(M), I(N), I(K)) + extra,
           shared_mem=stream_smem(mt, nt))


def tiled(x, wdata, bias, out, M: int, N: int, K: int, split: bool = False):
    """out = x @ W^T (+ bias) by the tiled kernel (x bf16; bias a kernel argument); split: its
    ranges one block each into a scratch buffer, then `fold`."""
    I = np.int32
    grid = (-(-N // 128), -(-M // 128))
    if not split:
        _fn("tiled")(grid + (1,), (256,), (x, wdata, bias, out, NULL, I(M), I(N), I(K)),
                     shared_mem=TILED_SMEM)
    else:
        part = cp.empty((KSPLIT, M, N), dtype=cp.float32)
        _fn("tiled", split_only=True)(grid + (KSPLIT,), (256,), (x, wdata, bias, out, part, I(M), I(N), I(K)),
                     shared_mem=TILED_SMEM)
        fold(part, bias, out)
    return out


def fold(part, bias, out):
    """out = the KSPLIT range sums in `part` [KSPLIT, M, N] folded in order (+ bias)."""
    M, N = out.shape
    _fn("fold_parts")((min(-(-M * N // 256), 65535),), (256,), (part, bias, out, np.int32(M), np.int32(N)))
    return out
