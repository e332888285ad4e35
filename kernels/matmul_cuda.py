"""x @ W^T on the GPU with tensor cores: which kernel runs a shape. Every kernel runs
kernels/matmul_definition_cuda.py's arithmetic (bf16 operands, float32 accumulation and
output, K in KSPLIT ranges folded in order), so the choice is scheduling only and a row's
bytes never depend on it or on the other rows: batch invariant by construction.

The weights are matmul_packed_cuda.Packed ([N, K] in mma fragment order, packed at load);
x is [M, K] bf16 (float32 is rounded to bf16, nearest even, as it is loaded) or a
matmul_pi_cuda.Pi. `cuda` picks, by shape only:
  * up to 64 rows (STREAM_CFG: decode rounds): matmul_mma_cuda's streaming kernel; on sm_90
    from 17 rows a wide GEMM (WGMMA_SMALL) takes kernels/wgmma_cuda.py (or, with TMA_SMALL,
    kernels/wgmma_tma_cuda.py), weights read once;
  * more rows on sm_90: kernels/wgmma_tma_cuda.py (TMA, both operands from shared memory),
    kernels/wgmma_cuda.py for shapes it does not take;
  * else matmul_mma_cuda's tiled kernel, or its split form below SPLIT_BELOW tiles.
The layer's fused entry points (SwiGLU in the epilogue, RMSNorm on load) are
kernels/matmul_fused_cuda.py. cuBLAS is not used (its rows change with M; gpu-notes):
bench/cublas_ref.py runs it beside ours for the benchmarks.
"""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import as_bf16
from kernels.matmul_definition_cuda import KSPLIT, NULL, bias_arg, check
from kernels.matmul_mma_cuda import STREAM_CFG, fold, stream, stream_cfg, tiled
from kernels.matmul_packed_cuda import pack
from kernels.matmul_pi_cuda import Pi, unpi
from kernels.settings import setting

WGMMA = True           # sm_90: more than 64 rows through kernels/wgmma_tma_cuda.py (shapes it
                       # lacks: wgmma_cuda.py), 17..64 rows per WGMMA_SMALL (same bytes)
WGMMA_SMALL = (17, 96)  # from 17 rows (decode rounds), a GEMM of >= 96 wgmma blocks (tiles, or
                        # tiles x 8 K ranges then fold_parts) takes wgmma_cuda (same bytes); a
                        # gate|up of >= 96 tiles: wgmma_cuda then swiglu_cuda (the same bytes as
                        # the fused stream launch)
TMA_SMALL = setting("TF_TMA_SMALL") == "1"   # 17..64 rows of wide GEMMs through
                       # kernels/wgmma_tma_cuda (whole tiles, or its split form); else wgmma_cuda.
                       # Off: at 64 rows the H200 measured 6.54-6.60 ms on, 6.42 off (same bytes)
SPLIT_BELOW = 100      # tiles (128 x 128) below which the tiled kernel splits K over blocks


def cuda(x, w, bias=None, force: str | None = None, cfg: tuple | None = None):
    """x: [M, K] float32 or bf16; w: Packed (or [N, K], packed on the fly); bias: [N] bf16
    or None -> [M, N] float32. force: "stream", "tiled", "split", "wgmma", "wgmma_split",
    "tma" or "tma_split" (tests, benchmarks), else chosen by shape (on sm_90 "tma" / "wgmma" where
    kernels/wgmma_tma_cuda / wgmma_cuda say available); cfg: the streaming kernel's
    (MT, NT, U) (tests, sweeps). x may be a `Pi` (the TMA path then skips its permute)."""
    M, K = x.shape
    N = w.shape[0]
    x_pi = False
    if isinstance(x, Pi):
        x, x_pi = unpi(x, force == "tma" or (force is None and tma_rows(M, N, K, cfg)))
    check(x, w)
    out = cp.empty((M, N), dtype=cp.float32)
    if not M or not N:
        return out
    tiles = -(-N // 128) * -(-M // 128)
    cfg = cfg or stream_cfg(M)
    if force is None and tma_rows(M, N, K, cfg):
        force = "tma"
    elif force is None and WGMMA and not cfg and wgmma_cuda().available(M, N, K):
        force = "wgmma"
    elif force is None and WGMMA and cfg and M >= WGMMA_SMALL[0]:
        if TMA_SMALL and wgmma_tma_cuda().available(M, N, K, min_tiles=WGMMA_SMALL[1]):
            force = "tma"                                     # decode rows: weights read once
        elif TMA_SMALL and wgmma_tma_cuda().split_available(M, N, K):
            force = "tma_split"
        elif wgmma_cuda().available(M, N, K, WGMMA_SMALL[1]):     # decode rows: weights read once
            force = "wgmma"
        elif wgmma_cuda().split_available(M, N, K, WGMMA_SMALL[1]):
            force = "wgmma_split"
    how = force or ("stream" if cfg else "split" if tiles < SPLIT_BELOW else "tiled")
    if how == "stream":
        stream(x, pack(w).data, bias_arg(bias), out, N, cfg or STREAM_CFG[-1][1:])
        return out
    w, bias = pack(w).data, bias_arg(bias)
    x = as_bf16(x)
    if how == "tma":                                    # Hopper: kernels/wgmma_tma_cuda.py
        wgmma_tma_cuda().cuda(x, w, None if bias is NULL else bias, out, M, N, K, x_pi=x_pi)
        return out
    if how == "tma_split":                              # its ranges apart, folded below
        part = cp.empty((KSPLIT, M, N), dtype=cp.float32)
        wgmma_tma_cuda().cuda(x, w, None, part, M, N, K, split=True)
        return fold(part, bias, out)
    if how == "wgmma":                                  # Hopper: kernels/wgmma_cuda.py
        wgmma_cuda().cuda(x, w, bias, out, M, N, K)
        return out
    if how == "wgmma_split":                            # its ranges apart, folded below
        part = cp.empty((KSPLIT, M, N), dtype=cp.float32)
        wgmma_cuda().cuda(x, w, NULL, part, M, N, K, split=True)
        return fold(part, bias, out)
    return tiled(x, w, bias, out, M, N, K, split=how != "tiled")


def tma_rows(M: int, N: int, K: int, cfg=None, glu: bool = False) -> bool:
    """Whether the dispatcher sends this shape (not forced) to kernels/wgmma_tma_cuda: more
    rows than STREAM_CFG covers, on sm_90, shapes it takes."""
    cfg = cfg or stream_cfg(M)
    return WGMMA and not cfg and wgmma_tma_cuda().available(M, N, K, glu=glu)


def wgmma_cuda():
    from kernels import wgmma_cuda as mod
    return mod


def wgmma_tma_cuda():
    from kernels import wgmma_tma_cuda as mod
    return mod
