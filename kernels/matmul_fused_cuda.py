"""The layer's GEMMs with their neighbours fused in, on the GPU: the gate|up GEMM with SwiGLU
in its epilogue (`cuda_glu`) and the residual add + RMSNorm made as the GEMM loads its rows
(`cuda_norm`). Each gives the bytes of its unfused pair of kernels (the GEMM by
kernels/matmul_cuda.cuda, then kernels/swiglu_cuda; kernels/rmsnorm_cuda, then the GEMM),
whichever runs (tests/gpu/test_kernels.py, test_gemm_definition.py)."""
from __future__ import annotations

import cupy as cp

from kernels import matmul_cuda as MM
from kernels.common_cuda import BF16, as_bf16
from kernels.matmul_definition_cuda import bias_arg, check
from kernels.matmul_mma_cuda import STREAM_CFG, stream, stream_cfg
from kernels.matmul_packed_cuda import pack
from kernels.matmul_pi_cuda import Pi, unpi

FUSE_NORM = True       # residual add + RMSNorm in the streaming GEMM's x load (cuda_norm) ..
NORM_WIDE = (16384, 1, 8, 1)  # (from N columns: MT, NT, U) of the norm-fused launch: 8 groups
                              # a block (bench/norm_head_sweep.py: smollm2's LM head 79 -> 22 us)
FUSE_NORM_MAX_K = 1024  # .. for rows up to this long: smollm2 (576) gains 0.05 ms a step, and
                        # llama3 (4096) loses 1.3 (every block recomputes a long row's norm)


def _glu_fused(w, F, cfg) -> bool:
    return cfg is not None and F % 8 == 0 and w.shape[0] == 2 * F


def cuda_glu(x, w, F: int, bias=None, force: str | None = None, cfg: tuple | None = None,
             pi_out: bool = False):
    """silu(x @ Wg^T) * (x @ Wu^T) as bf16 [M, F], w: the gate|up matrix [2F, K] (gate rows
    then up rows). Decode sizes: one streaming launch with SwiGLU in its epilogue; more than
    64 rows on sm_90: the TMA GEMM with SwiGLU in its epilogue; else the GEMM then
    kernels/swiglu_cuda. All: the GEMM's float32 values, then common_cuda's silu_mul, rounded
    to bf16 once: the same bytes (tests/gpu/test_kernels.py, test_gemm_definition.py). x may
    be a `Pi`; pi_out: where the TMA GEMM runs, the result is a `Pi` (for a next TMA GEMM)."""
    M, K = x.shape
    cfg = cfg or stream_cfg(M)
    small = cfg is not None and MM.TMA_SMALL and M >= MM.WGMMA_SMALL[0]        # 17..64 rows
    tma = ((force == "tma" or (force is None and (cfg is None or small) and MM.WGMMA))
           and w.shape[0] == 2 * F
           and MM.wgmma_tma_cuda().available(M, 2 * F, K, glu=True,
                                             min_tiles=MM.WGMMA_SMALL[1] if small else 0))
    x, x_pi = unpi(x, tma)
    if tma:
        check(x, w)                      # prefill rows on sm_90: SwiGLU in the TMA GEMM's epilogue
        out = cp.empty((M, F), dtype=BF16)
        MM.wgmma_tma_cuda().cuda(as_bf16(x), pack(w).data, None if bias is None else bias_arg(bias),
                                 out, M, 2 * F, K, glu=True, x_pi=x_pi, pi_out=pi_out)
        return Pi(out) if pi_out else out
    if (force is None and cfg is not None and MM.WGMMA and M >= MM.WGMMA_SMALL[0] and w.shape[0] == 2 * F
            and MM.wgmma_cuda().available(M, 2 * F, K, MM.WGMMA_SMALL[1])):
        force = "wgmma"                  # a wide gate|up at 17..64 rows: weights read once
    if (force or ("stream" if cfg else "")) != "stream" or not _glu_fused(w, F, cfg or STREAM_CFG[-1][1:]):
        from kernels import swiglu_cuda
        gu = MM.cuda(x, w, bias, force=force, cfg=cfg)
        return swiglu_cuda.cuda(gu[:, :F], gu[:, F:])
    check(x, w)
    mt, nt, u = cfg or STREAM_CFG[-1][1:]
    out = cp.empty((M, F), dtype=BF16)
    if M:                                # a gate and an up group at least
        stream(x, pack(w).data, bias_arg(bias), out, 2 * F, (mt, max(2, nt), u), glu=True)
    return out


def cuda_norm(xo, h, norm_w, eps, w, bias=None, glu_F: int | None = None, fuse: bool | None = None,
              cfg: tuple | None = None, pi_out: bool = False):
    """The layer's residual add and RMSNorm with the next GEMM: h' = xo + h (h alone when xo
    is None), y = rmsnorm(h') @ W^T (with SwiGLU when glu_F: bf16 [M, glu_F]). Up to 16 rows
    of up to FUSE_NORM_MAX_K (and FUSE_NORM): one streaming launch that norms rows as it
    loads them; else rmsnorm_cuda then the GEMM. The same bytes either way. Returns (y, h').
    cfg: the streaming kernel's (MT, NT, U) (tests, sweeps); else stream_cfg(M), widened to
    NORM_WIDE's NT for many columns (each block norms its rows once: fewer, wider blocks).
    Where the GEMM is the TMA kernel, rmsnorm_cuda writes its rows in pi order (no permute);
    pi_out (glu): cuda_glu's `pi_out` (y may be a `Pi`, for the down GEMM)."""
    from kernels import rmsnorm_cuda
    M, K = h.shape
    if cfg is None:
        cfg = stream_cfg(M)
        if cfg is not None and glu_F is None and w.shape[0] >= NORM_WIDE[0]:
            cfg = NORM_WIDE[1:]
    fuse = FUSE_NORM if fuse is None else fuse
    ok = (fuse and cfg is not None and cfg[0] == 1 and K % 8 == 0 and M > 0
          and K <= FUSE_NORM_MAX_K
          and w.shape[1] == K and (glu_F is None or _glu_fused(w, glu_F, cfg)))
    if not ok:
        N = w.shape[0]
        pi = K % 32 == 0 and MM.tma_rows(M, N, K, glu=glu_F is not None and N == 2 * glu_F)
        if xo is None:
            x, hn = rmsnorm_cuda.cuda(h, norm_w, eps, pi), h
        else:
            x, hn = rmsnorm_cuda.add_cuda(xo, h, norm_w, eps, pi)
        x = Pi(x) if pi else x
        return (MM.cuda(x, w, bias) if glu_F is None else cuda_glu(x, w, glu_F, bias, pi_out=pi_out)), hn
    h = cp.ascontiguousarray(h, dtype=cp.float32)
    if xo is not None:
        xo = cp.ascontiguousarray(xo, dtype=cp.float32)
    hn = h if xo is None else cp.empty_like(h)
    mt, nt, u = cfg
    if glu_F is None:
        out = cp.empty((M, w.shape[0]), dtype=cp.float32)
        stream(h, pack(w).data, bias_arg(bias), out, w.shape[0], cfg,
               norm=(xo, norm_w, None if xo is None else hn, eps))
    else:
        out = cp.empty((M, glu_F), dtype=BF16)
        stream(h, pack(w).data, bias_arg(bias), out, 2 * glu_F, (mt, max(2, nt), u), glu=True,
               norm=(xo, norm_w, None if xo is None else hn, eps))
    return out, hn
