"""x @ W^T on the GPU with tensor cores (mma.sync m16n8k16, bf16 operands, float32
accumulation and output): our own kernels, batch invariant by construction.

On the GPU the weights are [N, K] (out, in) and packed in mma fragment order (`Packed`:
a warp's load of one 32-k chunk of 8 columns is 512 contiguous bytes); x is [M, K] bf16
(float32 is rounded to bf16, nearest even, as it is loaded).

The arithmetic of one output element C[m, n] is fixed and depends on nothing but row m of
x, row n of W and K:
  * K is cut into chunks of 32 (a last partial chunk reads zeros past K), and the chunks
    into KSPLIT ranges: range q = chunks [q nch / KSPLIT, (q + 1) nch / KSPLIT);
  * within a chunk, lane t of a quad holds k = 8t .. 8t+7 of its row; the first mma takes
    k in {8t .. 8t+3 : t = 0..3}, the second {8t+4 .. 8t+7}: the same fixed permutation of k
    for x and W, so the product is x.W and the order is one and the same in every kernel;
  * a range's sum starts at 0 and each mma adds its 16 products (the hardware's order within
    one instruction is fixed), chunk after chunk;
  * C = ((((0 + range 0) + range 1) + ...) + range KSPLIT-1) + bias[n] (bf16 widened).
Three kernels run this arithmetic with different scheduling, chosen by shape only:
  * `stream` (up to 64 rows, STREAM_CFG: decode rounds): a block of KSPLIT warps owns NT
    groups of 8 columns and MT tiles of 16 rows; warp q streams range q's weights straight
    into registers (U chunks in flight), then the block folds the ranges from shared memory.
    Its variants change what is loaded or stored, never the sum: GLU_ (the gate|up GEMM
    writing SwiGLU, `cuda_glu`) and NORM_ (x = RMSNorm of the residual sum, made on load,
    `cuda_norm`); each gives the bytes of its unfused pair of kernels;
  * `tiled` (large M): 128 x 128 tiles through swizzled shared memory, cp.async in 3
    stages of 64 k; each warp sums a range in `acc` and folds it into `tot` at its end;
  * `split` (few tiles): the tiled kernel with one block per range writing its sum to a
    scratch buffer, then `fold_parts` folds them in order.
On sm_90 two more run it with wgmma: kernels/wgmma_tma_cuda.py (more than 64 rows: TMA, both
operands from shared memory) and kernels/wgmma_cuda.py (17..64 rows of wide GEMMs; shapes the
TMA kernel does not take).
Every row's bytes are the same in all three, whatever the other rows
(tests/gpu/test_kernels.py checks the kernels against each other, and rows alone against
rows among others). That is what makes solo == concurrent, resumed == fresh (decoded rows
== prefilled rows) and graph == eager hold for the GEMMs; cuBLAS picks its kernel (tiles,
split-K) from the shape, so its rows change with M (gpu-notes), and is not used for them
(bench/cublas_ref.py runs it beside ours for the benchmarks).
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels.common_cuda import BF16, UNPI, as_bf16, csrc, kernel, launch
from server.config import setting

# streaming kernel configurations by rows (scheduling only; bench/stream_sweep.py):
# (up to M rows, MT tiles of 16 rows, NT groups of 8 columns a block, U chunks in flight)
STREAM_CFG = [(16, 1, 1, 4), (64, 2, 4, 2)]
WGMMA = True           # sm_90: more than 64 rows through kernels/wgmma_tma_cuda.py (shapes it
                       # lacks: wgmma_cuda.py), 17..64 rows per WGMMA_SMALL (same bytes)
WGMMA_SMALL = (17, 96)  # from 17 rows (decode rounds), a GEMM of >= 96 wgmma blocks (tiles, or
                        # tiles x 8 K ranges then fold_parts) takes wgmma_cuda (same bytes); a
                        # gate|up of >= 96 tiles: wgmma_cuda then swiglu_cuda (the same bytes as
                        # the fused stream launch)
PF = setting("TF_STREAM_PF") != "0"  # the streaming kernel loads round r + 1's
                       # weights before round r's arithmetic (llama3-8b's GEMMs at one row on the
                       # H200: 4.38 -> 4.21 ms; cuBLAS 4.08)
TMA_SMALL = setting("TF_TMA_SMALL") == "1"   # 17..64 rows of wide GEMMs through
                       # kernels/wgmma_tma_cuda (whole tiles, or its split form); else wgmma_cuda.
                       # Off: at 64 rows the H200 measured 6.54-6.60 ms on, 6.42 off (same bytes)
SPLIT_BELOW = 100      # tiles (128 x 128) below which the tiled kernel splits K over blocks
KSPLIT = 8             # K ranges summed apart, then folded in order: ARITHMETIC (all kernels)
FUSE_NORM = True       # residual add + RMSNorm in the streaming GEMM's x load (cuda_norm) ..
NORM_WIDE = (16384, 1, 8, 1)  # (from N columns: MT, NT, U) of the norm-fused launch: 8 groups
                              # a block (bench/norm_head_sweep.py: smollm2's LM head 79 -> 22 us)
FUSE_NORM_MAX_K = 1024  # .. for rows up to this long: smollm2 (576) gains 0.05 ms a step, and
                        # llama3 (4096) loses 1.3 (every block recomputes a long row's norm)

_MMA = csrc("matmul_mma.cuh")

_SRC = _MMA + UNPI + csrc("matmul.cu")


_DEFINITION = _MMA + csrc("matmul_definition.cu")


def definition(x, w, bias=None):
    """x [M, K] bf16 @ w [N, K] bf16 (plain, not Packed; K % 8 == 0) -> [M, N] float32 by the
    definition kernel (slow; tests)."""
    M, K = x.shape
    N = w.shape[0]
    out = cp.empty((M, N), dtype=cp.float32)
    kernel(_DEFINITION, "definition", (f"S_={KSPLIT}",))(
        (-(-N // 8), -(-M // 16)), (32,), (as_bf16(x), as_bf16(w), _bias(bias), out,
                                            np.int32(M), np.int32(N), np.int32(K)))
    return out


class Packed:
    """W [N, K] bf16 in tiles of 8 columns x 32 k (512 contiguous bytes: a warp's load of one
    chunk of a column group is one tile, as the decode GEMVs want; with 8 x 64-k tiles, 64 bytes
    a row a chunk, llama3-8b's decode step went 5.15 -> 5.62 ms at one row and 10.0 -> 12.2 at
    64 on the H200). data[N8][KC][4][8][8], N8 = ceil(N / 8), KC = ceil(K / 32): tile (n / 8,
    k / 32) holds the chunk's 32 k of columns 8 (n / 8) + g, g = 0..7, in "pi order" (the row's
    32-bit word 4i + t holds the k pair 8t + 2i, +1; position p = 16h + 8b + 2t + e holds
    k = 8t + 4h + 2b + e), stored as four "core matrices": piece i (16 bytes = words 4i..4i+3)
    of rows 0..7, 128 bytes each. Pi order is the order in which the arithmetic's two k16 steps
    take k (the module docstring): step h reads pieces 2h, 2h + 1 of every row, which is what
    wgmma reads from a K-major, unswizzled shared-memory tile, so kernels/wgmma_tma_cuda.py
    loads whole tiles with TMA; the streaming kernel loads a chunk as four 32-bit words, word t
    of row g of each piece (one whole 128-byte line a warp load, and natural order on arrival),
    the tiled kernel regroups its (g, t) shared-memory reads with `unpi`.
    Padding (N to 8, K to 32) is zeros."""

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


_TILED_SMEM = 3 * (128 + 128) * 64 * 2
def _stream_smem(mt: int, nt: int) -> int:
    return KSPLIT * mt * nt * 128 * 4


def _fn(name: str, x_f32: bool = False, mt: int = 1, nt: int = 1, u: int = 2,
        split_only: bool = False, glu: bool = False, norm: bool = False):
    defs = (f"XT={'float' if x_f32 else 'bf16'}", f"X_F32={int(x_f32)}", f"MT={mt}", f"NT={nt}",
            f"U_={u}", f"S_={KSPLIT}", f"SPLIT_ONLY={int(split_only)}", f"GLU_={int(glu)}",
            f"NORM_={int(norm)}", f"PF_={int(PF)}")
    smem = _TILED_SMEM if name == "tiled" else _stream_smem(mt, nt) if name == "stream" else 0
    return kernel(_SRC, name, defs, smem)


def stream_cfg(M: int):
    """(MT, NT, U) of the streaming kernel for M rows, or None above the table."""
    for top, mt, nt, u in STREAM_CFG:
        if M <= top:
            return mt, nt, u
    return None


_NULL = np.uint64(0)


def _bias(bias):
    if bias is None:
        return _NULL                                       # a null pointer: no bias
    return bias if bias.dtype == BF16 else as_bf16(bias)


def _stream(x, w, bias, out, N, cfg, glu=False, norm=None):
    """One streaming launch. glu: out is bf16 [M, N / 2] (SwiGLU epilogue); norm: (xo, norm
    weight, hout, eps): x is the residual h and rows are normed on load (MT must be 1)."""
    M, K = x.shape
    mt, nt, u = cfg
    I = np.int32
    if norm is not None:
        xo, nwt, hout, eps = norm
        extra = (_NULL if xo is None else xo, nwt, _NULL if hout is None else hout, np.float32(eps))
        x_f32 = True
    else:
        extra = (_NULL, _NULL, _NULL, np.float32(0))
        x_f32 = x.dtype != BF16
    x = cp.ascontiguousarray(x, dtype=cp.float32) if x_f32 else cp.ascontiguousarray(x)
    cols = N // 2 if glu else N                          # columns a block's NT groups cover
    launch(_fn("stream", x_f32, mt, nt, u, glu=glu, norm=norm is not None),
           (-(-cols // (8 * (nt // 2 if glu else nt))), -(-M // (16 * mt))), (32 * KSPLIT,),
           (x, pack(w).data, _bias(bias), out, I(M), I(N), I(K)) + extra,
           shared_mem=_stream_smem(mt, nt))


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
        x, x_pi = _unpi(x, force == "tma" or (force is None and tma_rows(M, N, K, cfg)))
    _check(x, w)
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
        _stream(x, w, bias, out, N, cfg or STREAM_CFG[-1][1:])
        return out
    w, bias, I = pack(w).data, _bias(bias), np.int32
    x = as_bf16(x)
    if how == "tma":                                    # Hopper: kernels/wgmma_tma_cuda.py
        wgmma_tma_cuda().cuda(x, w, None if bias is _NULL else bias, out, M, N, K, x_pi=x_pi)
        return out
    if how == "tma_split":                              # its ranges apart, folded below
        part = cp.empty((KSPLIT, M, N), dtype=cp.float32)
        wgmma_tma_cuda().cuda(x, w, None, part, M, N, K, split=True)
        return _fold(part, bias, out)
    if how == "wgmma":                                  # Hopper: kernels/wgmma_cuda.py
        wgmma_cuda().cuda(x, w, bias, out, M, N, K)
        return out
    if how == "wgmma_split":                            # its ranges apart, folded below
        part = cp.empty((KSPLIT, M, N), dtype=cp.float32)
        wgmma_cuda().cuda(x, w, _NULL, part, M, N, K, split=True)
        return _fold(part, bias, out)
    grid = (-(-N // 128), -(-M // 128))
    if how == "tiled":
        _fn("tiled")(grid + (1,), (256,), (x, w, bias, out, _NULL, I(M), I(N), I(K)),
                     shared_mem=_TILED_SMEM)
    else:
        part = cp.empty((KSPLIT, M, N), dtype=cp.float32)
        _fn("tiled", split_only=True)(grid + (KSPLIT,), (256,), (x, w, bias, out, part, I(M), I(N), I(K)),
                     shared_mem=_TILED_SMEM)
        _fold(part, bias, out)
    return out


class Pi:
    """A bf16 [M, K] activation that its producer wrote with each 32-k chunk in pi order
    (`Packed`'s order), for the TMA GEMM, which then skips its permute (rmsnorm_cuda's `pi`,
    the TMA GLU epilogue's `pi_out`); any other path takes `natural()` (the permute is its own
    inverse): the same bytes as a natural-order x either way."""

    def __init__(self, a):
        self.a, self.shape, self.dtype = a, a.shape, a.dtype

    def natural(self):
        return wgmma_tma_cuda().permute(self.a)

    def reshape(self, *shape):
        return Pi(self.a.reshape(*shape))


def _unpi(x, tma: bool):
    """(x for the chosen path, whether it is in pi order): a Pi stays so only for the TMA path."""
    if not isinstance(x, Pi):
        return x, False
    return (x.a, True) if tma else (x.natural(), False)


def tma_rows(M: int, N: int, K: int, cfg=None, glu: bool = False) -> bool:
    """Whether the dispatcher sends this shape (not forced) to kernels/wgmma_tma_cuda: more
    rows than STREAM_CFG covers, on sm_90, shapes it takes."""
    cfg = cfg or stream_cfg(M)
    return WGMMA and not cfg and wgmma_tma_cuda().available(M, N, K, glu=glu)


def _check(x, w) -> None:
    if w.shape[1] != x.shape[1] or x.shape[1] % 8:
        raise ValueError(f"matmul: x {x.shape} against w {w.shape} (K must match and be a multiple of 8)")


def _fold(part, bias, out):
    """out = the KSPLIT range sums in `part` [KSPLIT, M, N] folded in order (+ bias)."""
    M, N = out.shape
    _fn("fold_parts")((min(-(-M * N // 256), 65535),), (256,), (part, bias, out, np.int32(M), np.int32(N)))
    return out


def wgmma_cuda():
    from kernels import wgmma_cuda as mod
    return mod


def wgmma_tma_cuda():
    from kernels import wgmma_tma_cuda as mod
    return mod


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
    small = cfg is not None and TMA_SMALL and M >= WGMMA_SMALL[0]        # 17..64 rows
    tma = ((force == "tma" or (force is None and (cfg is None or small) and WGMMA))
           and w.shape[0] == 2 * F
           and wgmma_tma_cuda().available(M, 2 * F, K, glu=True, min_tiles=WGMMA_SMALL[1] if small else 0))
    x, x_pi = _unpi(x, tma)
    if tma:
        _check(x, w)                     # prefill rows on sm_90: SwiGLU in the TMA GEMM's epilogue
        out = cp.empty((M, F), dtype=BF16)
        wgmma_tma_cuda().cuda(as_bf16(x), pack(w).data, None if bias is None else _bias(bias),
                              out, M, 2 * F, K, glu=True, x_pi=x_pi, pi_out=pi_out)
        return Pi(out) if pi_out else out
    if (force is None and cfg is not None and WGMMA and M >= WGMMA_SMALL[0] and w.shape[0] == 2 * F
            and wgmma_cuda().available(M, 2 * F, K, WGMMA_SMALL[1])):
        force = "wgmma"                  # a wide gate|up at 17..64 rows: weights read once
    if (force or ("stream" if cfg else "")) != "stream" or not _glu_fused(w, F, cfg or STREAM_CFG[-1][1:]):
        from kernels import swiglu_cuda
        gu = cuda(x, w, bias, force=force, cfg=cfg)
        return swiglu_cuda.cuda(gu[:, :F], gu[:, F:])
    _check(x, w)
    mt, nt, u = cfg or STREAM_CFG[-1][1:]
    out = cp.empty((M, F), dtype=BF16)
    if M:
        _stream(x, w, bias, out, 2 * F, (mt, max(2, nt), u), glu=True)   # a gate and an up group at least
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
        pi = K % 32 == 0 and tma_rows(M, N, K, glu=glu_F is not None and N == 2 * glu_F)
        if xo is None:
            x, hn = rmsnorm_cuda.cuda(h, norm_w, eps, pi), h
        else:
            x, hn = rmsnorm_cuda.add_cuda(xo, h, norm_w, eps, pi)
        x = Pi(x) if pi else x
        return (cuda(x, w, bias) if glu_F is None else cuda_glu(x, w, glu_F, bias, pi_out=pi_out)), hn
    h = cp.ascontiguousarray(h, dtype=cp.float32)
    if xo is not None:
        xo = cp.ascontiguousarray(xo, dtype=cp.float32)
    hn = h if xo is None else cp.empty_like(h)
    mt, nt, u = cfg
    if glu_F is None:
        out = cp.empty((M, w.shape[0]), dtype=cp.float32)
        _stream(h, w, bias, out, w.shape[0], cfg, norm=(xo, norm_w, None if xo is None else hn, eps))
    else:
        out = cp.empty((M, glu_F), dtype=BF16)
        _stream(h, w, bias, out, 2 * glu_F, (mt, max(2, nt), u), glu=True,
                norm=(xo, norm_w, None if xo is None else hn, eps))
    return out, hn
