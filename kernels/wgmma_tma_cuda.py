"""The prefill GEMM on Hopper (sm_90a): TMA loads into swizzled shared memory, an mbarrier
pipeline, one producer and two consumer warpgroups, wgmma with both operands from shared
memory; kernels/matmul_cuda.py's arithmetic exactly, so its bytes equal the streaming, tiled and
wgmma_cuda kernels' for every row (tests/gpu/test_gemm_definition.py).

Why the bits stay: the arithmetic takes each 32-k chunk in two k16 tensor-core steps whose
positions j hold k = pi(16h + j), pi(16h + 8b + 2t + e) = 8t + 4h + 2b + e (matmul_cuda's
mma.sync fragments). A wgmma step reads 16 consecutive stored k of a swizzled row, so both
operands are stored in pi order: W is (matmul_packed_cuda `Packed`: 8-column x 32-k tiles, each
row in pi order), x is permuted into a scratch copy by matmul_pi_cuda.permute (a 4x4 transpose
of 32-bit words per chunk), unless its producer wrote it in pi order (a matmul_pi_cuda.Pi).
Ranges and their fold are the definition's: 8 ranges of K / 256 chunks (K % 256 == 0 here),
each summed from zero by the steps in order (the first step of a range with scale-d 0:
D = A B), folded in order into totals from 0, + bias. wgmma with both
operands in shared memory gives mma.sync's bits (bench/wgmma_tma_proto.cu, receipt
2026-11-29-tma-gemm: no output bit off on llama3-8b's prefill shapes).

Layout: persistent blocks (grid = min(tiles, SMs)) walk 128 x BN tiles in groups of GM row
tiles (row tile fastest). Stage = 64 k: x box {64 k, 128 rows} (2-D map over the permuted x,
128-byte swizzle) and W box {256, 2 chunks, BN / 8 groups} (3-D map over the Packed data, whose
512-byte tiles are already wgmma's unswizzled K-major core matrices: no swizzle). Earlier forms
on the H200 (receipt 2026-11-29-tma-gemm): 64-byte-swizzled boxes of 64-byte rows ran the
prefill GEMMs ~25% slower than the prototype's 128-byte rows; Packed tiles of 64 k (128-byte
rows) got that back but slowed the decode GEMVs (see Packed); a 128-byte-swizzled box
gathering a tile's two chunks side by side faulted.
The producer's one thread issues the loads when the consumers have released a stage (empty
barrier: 8 consumer warps), the stage's full barrier counts its bytes. Each consumer
warpgroup owns 64 rows: m64nBNk16, BN / 2 f32 accumulators a thread, one stage of wgmma groups
in flight; TOTR of the range totals in registers, the rest in the thread's own shared slots.
BN 256 (ST 4 stages) where its tiles fill the device, else BN 128 (ST 6). Split form (decode
rows, 17..64): a block per (tile, K range), the range's sum written as it is (matmul_cuda's
fold_parts folds them); a consumer warpgroup whose 64 rows all lie past M issues no wgmma.
GLU form (gate|up):
a tile holds BN / 2 gate and the matching BN / 2 up columns (two W boxes a stage), and its
epilogue writes silu_mul(gate, up) as bf16: swiglu_cuda's bytes without the float32 round trip.

Tensor maps are encoded by the driver (cuTensorMapEncodeTiled through ctypes) and passed by
value (__grid_constant__); the kernel is launched with cuLaunchKernel (a CUDA graph captures
the maps with the launch). Used by matmul_cuda for more than 64 rows, and for 17..64 rows of
wide GEMMs (split form, or whole tiles where they fill the device).
"""
from __future__ import annotations

import ctypes

import cupy as cp

from kernels.common_cuda import csrc, kernel
from kernels.matmul_pi_cuda import permute

BM, BK, GM = 128, 64, 16
ZFIRST = 1
# BN: (stages, range totals in registers, setmaxnreg producer / consumers)
CONFIGS = {256: (4, 96, 24, 240), 128: (6, 64, 40, 232)}
ENABLED = True

_SRC = csrc("gemm_tma.cu")

_WG = csrc("wgmma.cuh")                   # wgmma group control (as kernels/wgmma_cuda.py's)


def _smem(bn: int) -> int:
    st, totr, _, _ = CONFIGS[bn]
    return 1024 + st * (BM * BK * 2 + bn * BK * 2) + (bn // 2 - totr) * 2 * 128 * 4 + 2 * st * 8


def source(bn: int, glu: bool = False, split: bool = False, pi_out: bool = False) -> str:
    """The kernel's source for one variant (common_cuda.kernel puts HEADER in front)."""
    st, totr, rp, rc = CONFIGS[bn]
    nacc = bn // 2
    body = (_SRC.replace("WG_HELPERS\n", _WG).replace("DREGS", ", ".join(f"%{i}" for i in range(nacc)))
            .replace("DOUTS", ", ".join(f'"+f"(d[{i}])' for i in range(nacc)))
            .replace("%SD", f"%{nacc + 2}").replace("%DA", f"%{nacc}").replace("%DB", f"%{nacc + 1}"))
    defs = "".join(f"#define {k} {v}\n" for k, v in dict(
        BM=BM, BK=BK, GM=GM, BN=bn, BNS=f'"{bn}"', ST=st, TOTR=totr, REG_P=rp, REG_C=rc, ZFIRST=ZFIRST,
        GLU=int(glu), SPLIT=int(split), PIOUT=int(pi_out)).items())
    return defs + body


_fn: dict = {}


def _compile(bn: int, glu: bool = False, split: bool = False, pi_out: bool = False):
    key = (cp.cuda.Device().id, bn, glu, split, pi_out)
    if key not in _fn:
        _fn[key] = kernel(source(bn, glu, split, pi_out), "gemm_tma", smem=_smem(bn), arch="sm_90a",
                          fallback="the other GEMM kernels run instead") if ENABLED else None
    return _fn[key]


def pick_bn(M: int, N: int) -> int:
    """256-column tiles where they fill the device (a wave of SMs), else 128."""
    tiles = -(-M // BM) * (N // 256) if N % 256 == 0 else 0
    return 256 if tiles >= _sms() else 128


def available(M: int, N: int, K: int, glu: bool = False, min_tiles: int = 0) -> bool:
    """Whether this shape runs here: sm_90, N % 128 == 0 (GLU: N = 2F, F % 128 == 0),
    K % 256 == 0, M > 0, and at least min_tiles tiles."""
    if M <= 0 or N % (256 if glu else 128) or K % 256:
        return False
    bn = pick_bn(M, N)
    if -(-M // BM) * (N // bn) < min_tiles:
        return False
    return _compile(bn, glu) is not None


def split_available(M: int, N: int, K: int) -> bool:
    """The range-split form (`cuda(..., split=True)`: one block a tile and K range, for rows
    too few to fill the device with tiles): N % 128 == 0, K % 512 == 0 (ranges of whole
    stages)."""
    if M <= 0 or N % 128 or K % 512:
        return False
    return _compile(128, False, True) is not None


# -- the driver: tensor maps and the launch ------------------------------------------------
_BF16, _NONE, _SW128, _L2_256 = 9, 0, 3, 3          # CUtensorMap enums (cuda.h)
_lib = None
_sm_count: dict = {}


def _sms() -> int:
    dev = cp.cuda.Device()
    if dev.id not in _sm_count:
        _sm_count[dev.id] = dev.attributes["MultiProcessorCount"]
    return _sm_count[dev.id]


def _driver():
    global _lib
    if _lib is None:
        _lib = ctypes.CDLL("libcuda.so.1")
        _lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
        _lib.cuLaunchKernel.restype = ctypes.c_int
    return _lib


class _Map:
    """One CUtensorMap (128 bytes, 64-aligned) in host memory, kept alive with its array."""

    def __init__(self, ptr: int, dims, strides, box, swizzle: int, keep):
        self.buf = ctypes.create_string_buffer(128 + 64)
        self.addr = (ctypes.addressof(self.buf) + 63) & ~63
        self.keep = keep
        U64, U32 = ctypes.c_uint64, ctypes.c_uint32
        n = len(dims)
        rc = _driver().cuTensorMapEncodeTiled(
            ctypes.c_void_p(self.addr), ctypes.c_int(_BF16), U32(n), ctypes.c_void_p(ptr),
            (U64 * n)(*dims), (U64 * (n - 1))(*strides), (U32 * n)(*box), (U32 * n)(*([1] * n)),
            ctypes.c_int(0), ctypes.c_int(swizzle), ctypes.c_int(_L2_256), ctypes.c_int(0))
        if rc != 0:
            raise RuntimeError(f"cuTensorMapEncodeTiled failed: CUresult {rc} (dims {dims}, box {box})")


_wmaps: dict = {}


def _wmap(wdata, N: int, K: int, groups: int) -> _Map:
    """The W map of a Packed array, boxes of `groups` 8-column groups (cached by its address:
    weights live as long as the model)."""
    key = (wdata.data.ptr, N, K, groups)
    m = _wmaps.get(key)
    if m is None or m.keep is not wdata:
        kc = K // 32                  # Packed [N/8][K/32][512 bytes]: tile, chunk, group
        m = _Map(wdata.data.ptr, (256, kc, N // 8), (512, kc * 512), (256, 2, groups), _NONE, wdata)
        _wmaps[key] = m
    return m


def cuda(x, wdata, bias, out, M: int, N: int, K: int, glu: bool = False, split: bool = False,
         x_pi: bool = False, pi_out: bool = False) -> None:
    """out[M, N] (float32) = x[M, K] (bf16, contiguous, natural order) @ W^T (+ bias bf16 [N]
    or None), W as matmul_cuda's Packed data. glu: W is gate|up [N = 2F, K] and out is bf16
    [M, F] = silu_mul(gate, up) (common_cuda; swiglu_cuda's bytes). split: out is [8, M, N],
    range q's sum in out[q] (no bias: matmul_cuda's fold_parts folds them in order). x_pi: x
    is already in pi order (its producer wrote it so: no permute). pi_out (glu): out in pi
    order, for a next TMA GEMM. The caller checked `available` / `split_available`."""
    bn = 128 if split else pick_bn(M, N)
    fn = _compile(bn, glu, split, pi_out and glu)
    xp = x if x_pi else permute(x)
    xmap = _Map(xp.data.ptr, (K, M), (K * 2,), (BK, BM), _SW128, xp)
    wmap = _wmap(wdata, N, K, bn // 16 if glu else bn // 8)
    tiles = -(-M // BM) * (N // bn)
    vals = [ctypes.c_void_p(0 if bias is None else bias.data.ptr), ctypes.c_void_p(out.data.ptr),
            ctypes.c_int(M), ctypes.c_int(N), ctypes.c_int(K)]
    params = (ctypes.c_void_p * 7)(xmap.addr, wmap.addr, *[ctypes.addressof(v) for v in vals])
    U = ctypes.c_uint
    rc = _driver().cuLaunchKernel(
        ctypes.c_void_p(fn.ptr), U(tiles if split else min(tiles, _sms())), U(8 if split else 1), U(1),
        U(128 * 3), U(1), U(1),
        U(_smem(bn)), ctypes.c_void_p(cp.cuda.get_current_stream().ptr), params, None)
    if rc != 0:
        raise RuntimeError(f"cuLaunchKernel(gemm_tma) failed: CUresult {rc}")
    del xmap                                  # the map was copied into the launch's parameters
