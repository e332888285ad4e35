"""GEMMs over GGUF quantized weights kept on the device as the file stores them.

A `QWeight` is a `Blocks` (kernels/blocks.py) uploaded as its own bytes, regrouped
per row into planes (kernels/csrc/qblocks.cuh says which; the same byte count: `nbytes` ==
Blocks.nbytes). The arithmetic is matmul_definition_cuda's on the weights gguf dequantizes,
rounded to bf16 (each weight unpacked in registers by the same operations as gguf's numpy
code, then rounded to nearest even): so a quantized matrix gives the bytes the bf16 path gives
for the same file, at every row count, through every path here:
- `gemv` (M <= GEMV_MAX rows: decode): kernel `qgemv`, weights unpacked in registers, fed to
  mma.sync as the definition feeds them; one launch per part of a `QStack` (q|k|v or gate|up
  whose parts differ in type), each writing its column slice.
- above GEMV_MAX rows (prefill): each part dequantized straight into matmul_packed_cuda.Packed order in
  a scratch buffer (`qdequant`), then matmul_cuda.cuda (the tensor-core paths) on it.
- `definition`: kernel `qdefinition`, one warp a 16 x 8 tile, the definition's loop (tests).
CUDA source: kernels/csrc/qgemv.cu (+ qblocks.cuh), composed by common_cuda.csrc (the local
includes inlined) and compiled at run time by common_cuda.kernel (HEADER in front).
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels import common_cuda as C
from kernels import matmul_cuda as MM
from kernels.matmul_definition_cuda import KSPLIT
from kernels.matmul_packed_cuda import Packed
from kernels.matmul_pi_cuda import Pi
from kernels.settings import setting
from kernels.blocks import BLOCK, Blocks

KIND_ID = {"Q8_0": 1, "Q4_0": 2, "Q4_1": 3, "Q4_K": 4, "Q6_K": 5}
GEMV_MAX = int(setting("TF_QGEMV_MAX"))   # rows through qgemv; more: dequant + GEMM
# (up to M rows: MT, NT, U, PF[, CV, MB]) of qgemv, from bench/quant_bench.py's sweeps on the
# H200 (receipt 2026-12-01-quant-gpu, run3): NT = 2 groups a warp at decode rows, the next
# group's loads issued early (PF) only where it measured faster. CV: 1 (default) the group
# loop of fconv_u (qblocks.cuh), 0 the earlier conv_u loop; MB: qgemv's minimum blocks per SM
# (__launch_bounds__; 1 = the compiler's choice of registers). All: the same bytes.
GEMV_CFG = [(16, 1, 2, 1, 0), (64, 4, 2, 1, 0)]
_NULL = np.uint64(0)
BP_INT = int(setting("TF_QBP_INT"))   # 1: bf16 rounding by integer ops (a speed variant)
PF_G = int(setting("TF_QPF"))          # default of qgemv's PF: group g + 1's loads before g's arithmetic

_SRC = C.csrc("qgemv.cu")


def _fn(name: str, kind: str, mt: int = 1, nt: int = 1, u: int = 1, pf: int | None = None,
        cv: int = 1, mb: int = 1):
    defs = (f"QK={KIND_ID[kind]}", f"S_={KSPLIT}", f"MT={mt}", f"NT={nt}", f"U_={u}",
            f"BP_INT={BP_INT}", f"PF_G={PF_G if pf is None else pf}", f"CV={cv}", f"MINB={mb}")
    smem = KSPLIT * mt * nt * 128 * 4
    return C.kernel(_SRC, name, defs, smem if smem > 48 * 1024 else 0)


class QWeight:
    """One matrix [N, K] of one GGML type on the device: planes p0..p3 (uint8 cupy arrays or
    None), the file's bytes regrouped per row (kernels/csrc/qblocks.cuh)."""

    def __init__(self, kind: str, N: int, K: int, planes: tuple):
        self.kind, self.shape, self.planes = kind, (N, K), planes
        self.nbytes = sum(p.nbytes for p in planes if p is not None)
        self.dtype = kind

    def ptrs(self):
        return tuple(_NULL if p is None else p for p in self.planes)


def planes_of(b: Blocks) -> tuple:
    """The host planes (numpy uint8, C-contiguous) of a Blocks: p0, p1, p2, p3 (None where the
    type has none)."""
    blk, nb = BLOCK[b.kind]
    d = np.ascontiguousarray(b.data).reshape(b.rows, b.cols // blk, nb)

    def cut(lo, hi):
        return np.ascontiguousarray(d[:, :, lo:hi]).reshape(b.rows, -1)
    if b.kind == "Q8_0":
        return cut(2, 34), None, cut(0, 2), None
    if b.kind == "Q4_0":
        return cut(2, 18), None, cut(0, 2), None
    if b.kind == "Q4_1":
        return cut(4, 20), None, cut(0, 4), None
    if b.kind == "Q4_K":
        return cut(16, 144), cut(0, 16), None, None
    if b.kind == "Q6_K":
        return cut(0, 128), cut(128, 192), cut(208, 210), cut(192, 208)
    raise ValueError(f"no GPU kernel for {b.kind}")


def upload(b: Blocks) -> QWeight:
    if b.rows % 8:
        raise ValueError(f"{b.kind} {b.rows}x{b.cols}: rows must be a multiple of 8 on the GPU")
    return QWeight(b.kind, b.rows, b.cols,
                   tuple(None if p is None else cp.asarray(p) for p in planes_of(b)))


class QStack:
    """Matrices of one width stacked by rows (q|k|v, gate|up) whose parts may differ in type:
    each part's rows are their own launch (decode) or their own rows of the dequantized Packed
    buffer (prefill). Every output element is still its own row's definition."""

    def __init__(self, parts: list):
        ks = {p.shape[1] for p in parts}
        if len(ks) != 1:
            raise ValueError(f"QStack: parts differ in width: {[p.shape for p in parts]}")
        self.parts = list(parts)
        self.shape = (sum(p.shape[0] for p in parts), ks.pop())
        self.nbytes = sum(p.nbytes for p in parts)
        self.dtype = self.kind = "+".join(sorted({p.kind for p in parts}))


def stack(parts: list):
    """One QWeight where the parts share a type (their planes concatenated by rows), else a QStack."""
    parts = list(parts)
    if len(parts) == 1:
        return parts[0]
    if len({p.kind for p in parts}) == 1:
        K = parts[0].shape[1]
        planes = tuple(None if parts[0].planes[i] is None else
                       cp.concatenate([p.planes[i] for p in parts], axis=0) for i in range(4))
        return QWeight(parts[0].kind, sum(p.shape[0] for p in parts), K, planes)
    return QStack(parts)


def is_quant(w) -> bool:
    return isinstance(w, (QWeight, QStack))


def _parts(w):
    return w.parts if isinstance(w, QStack) else [w]


# per type: [(up to M rows, (MT, NT, U, PF))], from bench/quant_bench.py's sweep; else GEMV_CFG
# (receipt 2026-12-01-quant-gpu/run7-engine: the sweep's choices, the same in run6 where both
# swept them; at 16 rows Q4_K / Q6_K keep the conv_u loop, CV = 0, measured faster there; at one
# row NT = 1 with 4 blocks an SM for Q8_0 / Q6_K, NT = 2 with 3 for Q4_K)
GEMV_CFG_KIND: dict = {
    "Q8_0": [(1, 1, 1, 1, 0, 1, 4), (16, 1, 2, 1, 0, 1, 1), (64, 4, 2, 1, 0, 1, 1)],
    "Q4_K": [(1, 1, 2, 1, 0, 1, 3), (16, 1, 2, 1, 0, 0, 1), (64, 4, 2, 1, 0, 1, 1)],
    "Q6_K": [(1, 1, 1, 1, 0, 1, 4), (16, 1, 2, 1, 0, 0, 1), (64, 4, 2, 1, 0, 1, 1)],
}


def gemv_cfg(M: int, kind: str | None = None):
    for top, *cfg in GEMV_CFG_KIND.get(kind, GEMV_CFG):
        if M <= top:
            return tuple(cfg)
    return tuple(GEMV_CFG[-1][1:])


def _bias(bias):
    return _NULL if bias is None else (bias if bias.dtype == C.BF16 else C.as_bf16(bias))


def gemv(x, w, bias=None, out=None, cfg: tuple | None = None):
    """x [M, K] bf16 (float32 rounded first) @ w.T (+ bias) -> float32 [M, N] by qgemv, one
    launch a part. out: a float32 [M, >= N] array (a view with unit column stride) to write."""
    x = C.as_bf16(x)
    M, K = x.shape
    N = w.shape[0]
    if K != w.shape[1]:
        raise ValueError(f"qgemv: x {tuple(x.shape)} against weight {w.shape}")
    if out is None:
        out = cp.empty((M, N), dtype=cp.float32)
    if not M:
        return out
    ldo = out.strides[0] // 4
    col = 0
    for p in _parts(w):
        n = p.shape[0]
        mt, nt, u, *more = cfg or gemv_cfg(M, p.kind)
        pf, cv, mb = (list(more) + [None, 1, 1][len(more):])[:3]
        b = _NULL if bias is None else _bias(bias[col:col + n])
        o = out[:, col:col + n]
        C.launch(_fn("qgemv", p.kind, mt, nt, u, pf, cv, mb), (-(-n // (8 * nt)), -(-M // (16 * mt))),
                 (32 * KSPLIT,),
                 (x, np.int64(K)) + p.ptrs() + (b, o, np.int64(ldo), np.int32(M), np.int32(n),
                                                np.int32(K)),
                 shared_mem=KSPLIT * mt * nt * 128 * 4)
        col += n
    return out


def definition(x, w: QWeight, bias=None):
    """The definition kernel (plain, slow: tests): float32 [M, N]."""
    x = C.as_bf16(x)
    M, K = x.shape
    N = w.shape[0]
    out = cp.empty((M, N), dtype=cp.float32)
    _fn("qdefinition", w.kind)((-(-N // 8), -(-M // 16)), (32,),
                               (x,) + w.ptrs() + (_bias(bias), out, np.int32(M), np.int32(N),
                                                  np.int32(K)))
    return out


def dequant(w) -> cp.ndarray:
    """Plain bf16 [N, K] of a QWeight or QStack (tests; the CPU's cross-check)."""
    N, K = w.shape
    out = cp.empty((N, K), dtype=C.BF16)
    row = 0
    for p in _parts(w):
        n = p.shape[0]
        tot = n * (K // 32) * 4
        _fn("qdequant", p.kind)((-(-tot // 256),), (256,),
                                p.ptrs() + (out[row:row + n], np.int32(n), np.int32(K), np.int32(0),
                                            np.int32(0), np.int32(K // 32)))
        row += n
    return out


def dequant_packed(w, data: cp.ndarray | None = None) -> Packed:
    """A matmul_packed_cuda.Packed of the bf16 weights (prefill), written straight in Packed order;
    data: a scratch buffer to reuse (bf16, at least N * K elements)."""
    N, K = w.shape
    if N % 8 or K % 32:
        raise ValueError(f"dequant_packed: {w.shape} needs N % 8 == 0 and K % 32 == 0")
    if data is None or data.size < N * K:
        data = cp.empty(N * K, dtype=C.BF16)
    buf = data[:N * K]
    row = 0
    for p in _parts(w):
        n = p.shape[0]
        tot = n * (K // 32) * 4
        C.launch(_fn("qdequant", p.kind), (-(-tot // 256),), (256,),
                 p.ptrs() + (buf, np.int32(n), np.int32(K), np.int32(1), np.int32(row),
                             np.int32(K // 32)))
        row += n
    pk = Packed.__new__(Packed)
    pk.data = buf.reshape(N // 8, K // 32, 4, 8, 4, 2)
    pk.shape, pk.dtype, pk.nbytes = (N, K), C.BF16, buf.nbytes
    return pk


_SCRATCH: dict = {}


def scratch(n: int) -> cp.ndarray:
    """One bf16 buffer per device for the prefill dequantization (grown, never shrunk)."""
    dev = cp.cuda.Device().id
    buf = _SCRATCH.get(dev)
    if buf is None or buf.size < n:
        buf = _SCRATCH[dev] = cp.empty(n, dtype=C.BF16)
    return buf


def cuda(x, w, bias=None):
    """x [M, K] @ w.T (+ bias) -> float32 [M, N]: qgemv up to GEMV_MAX rows, else the weights
    dequantized to Packed bf16 and matmul_cuda.cuda (the same bytes either way)."""
    if isinstance(x, Pi):
        x = x.natural()
    M = x.shape[0]
    if M <= GEMV_MAX:
        return gemv(x, w, bias)
    return MM.cuda(x, dequant_packed(w, scratch(w.shape[0] * w.shape[1])), bias)


def rows(w: QWeight, ids) -> cp.ndarray:
    """Embedding rows w[ids] as float32 [T, K] (dequantized to bf16, widened): the bytes
    common_cuda.rows_of gives from the bf16 table."""
    ids = cp.ascontiguousarray(cp.asarray(ids, dtype=cp.int32).reshape(-1))
    T, K = int(ids.size), w.shape[1]
    out = cp.empty((T, K), dtype=cp.float32)
    tot = T * (K // 32) * 4
    if tot:
        C.launch(_fn("qrows", w.kind), (-(-tot // 256),), (256,),
                 w.ptrs() + (ids, out, np.int32(T), np.int32(K)))
    return out


def glu(x, w, ff: int, bias=None):
    """silu(x Wg) * (x Wu) as bf16 [M, ff] from a quantized gate|up: the GEMM, then
    swiglu_cuda (== matmul_fused_cuda.cuda_glu's fused epilogue, byte for byte)."""
    from kernels import swiglu_cuda
    gu = cuda(x, w, bias)
    return swiglu_cuda.cuda(gu[:, :ff], gu[:, ff:])
