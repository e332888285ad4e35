"""The large-M GEMM on Hopper (sm_90): wgmma tensor-core instructions running
kernels/matmul_cuda.py's arithmetic, so its bytes equal the streaming and tiled kernels' for
every row (tests/gpu/test_wgmma.py).

Why it keeps the arithmetic: wgmma m64nNk16 with A from registers gives mma.sync m16n8k16's
bits on the same operands (receipt 2026-11-29-wgmma-probe: 0 of 1,048,576 outputs differ),
so feeding it the same k order (lane t of a quad: k 8t..8t+7 of a 32-k chunk; step h takes
8t+4h..8t+4h+3) and summing the same ranges in the same order (8 ranges, each from 0, folded
in order) gives the same element bytes. The variants' sweep and bit checks against the
definition: bench/wgmma_gemm_v2.cu, receipt 2026-11-29-gpu-pdl (wgmma_v2.txt: this is the
`b256p` variant, ~375-425 TFLOP/s on llama3-8b's prefill shapes, the tiled kernel ~190).

Layout: a block of 2 warpgroups owns 128 rows x 256 columns; each warpgroup runs
wgmma m64n256k16, A (x) from registers (16-byte shared loads give both steps' fragments), B (W)
from shared memory in K-major core matrices (no swizzle; padded strides LBO 160 B, SBO 288 B
keep the copies free of bank conflicts). W stays in matmul_cuda's packed order (`Packed`); a
core-matrix row is four 4-byte words of it (natural words 4t + 2h + b, t = 0..3), copied with
4-byte cp.async. 6 stages of one 32-k chunk; one chunk's wgmma group stays in flight
(wait_group 1) while the next is issued; before a range's fold, wait_group 0. Range totals:
64 of a thread's 128 in registers, the rest in its own shared-memory slots. Blocks walk groups
of 16 row tiles, row tile fastest, so x stays in L2 and each W tile leaves DRAM about once.

Needs sm_90 exactly (wgmma is an sm_90a instruction): common_cuda.kernel(..., arch="sm_90a")
compiles it through NVRTC for compute_90a and loads it as PTX. Elsewhere (or N % 256, K % 32
off, or the compile failing) `available` says no and matmul_cuda keeps its tiled kernel.
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels.common_cuda import csrc, kernel

BN = 256               # columns a block (wgmma n)
BM = 128               # rows a block (2 warpgroups x 64)
ST = 6                 # pipeline stages of one 32-k chunk
TOTR = 64              # range totals kept in registers (of BN / 2 a thread); the rest in smem
GM = 16                # row tiles a group (block order)
MIN_BLOCKS = 132       # used from this many blocks (a wave on an H200); fewer: matmul_cuda's own
ENABLED = True

_LBO, _SBO = 160, 288
_HST = (BN // 8) * _SBO + 64          # one k16 step's core matrices
_CT = BM * 64 + 2 * _HST              # one 32-k chunk: the x tile, then W steps 0 and 1
SMEM = ST * _CT + (BN // 2 - TOTR) * 256 * 4

# wgmma group control, kernels/csrc/wgmma.cuh, as kernels/wgmma_tma_cuda.py's (needs NACC:
# accumulators a thread)
_WG = csrc("wgmma.cuh")

_SRC = csrc("wgmma_gemm.cu")


def source(split: bool = False) -> str:
    """The kernel's source (common_cuda.kernel puts HEADER in front): the %-template filled."""
    dregs = ", ".join(f"%{i}" for i in range(128))
    douts = ", ".join(f'"+f"(d[{i}])' for i in range(128))
    return f"#define SPLIT_ {int(split)}\n" + _SRC % dict(BN=BN, BM=BM, ST=ST, TOTR=TOTR, GM=GM, LBO=_LBO, SBO=_SBO,
                                HST=_HST, CT=_CT, DREGS=dregs, DOUTS=douts, WG=_WG)


_fn: dict = {}


def _compile(split: bool = False):
    """The kernel for this device (None where it cannot run: not sm_90, or no compile)."""
    dev = cp.cuda.Device()
    if (dev.id, split) not in _fn:
        _fn[dev.id, split] = kernel(source(split), "wgmma_gemm", smem=SMEM, arch="sm_90a",
                                    fallback="the tiled kernel runs instead") if ENABLED else None
    return _fn[dev.id, split]


def available(M: int, N: int, K: int, min_blocks: int = MIN_BLOCKS) -> bool:
    """Whether this launch shape runs here: sm_90, N % 256 == 0, K % 32 == 0, and at least
    min_blocks blocks (by default enough to fill the device)."""
    if N % BN or K % 32 or M <= 0:
        return False
    if -(-M // BM) * (N // BN) < min_blocks:
        return False
    return _compile() is not None


def split_available(M: int, N: int, K: int, min_blocks: int) -> bool:
    """The range-split form (`cuda(..., split=True)`): one block a (tile, K range), for rows
    too few to fill the device with tiles alone."""
    if N % BN or K % 32 or M <= 0 or -(-M // BM) * (N // BN) * 8 < min_blocks:
        return False
    return _compile(True) is not None


def cuda(x, wdata, bias, out, M: int, N: int, K: int, split: bool = False) -> None:
    """out[M, N] (float32) = x[M, K] (bf16, contiguous) @ W^T (+ bias bf16 [N] or a null
    pointer), W as matmul_cuda's Packed data. The caller checked `available`. split: out is
    [8, M, N], range q's sum in out[q] (no bias: matmul_cuda's fold_parts adds it)."""
    fn = _compile(split)
    I = np.int32
    blocks = -(-M // BM) * (N // BN)
    fn((blocks, 8 if split else 1), (256,), (x, wdata, bias, out, I(M), I(N), I(K)), shared_mem=SMEM)
