"""x @ W^T with W kept as its GGUF blocks, on the CPU: numba kernels that read the blocks as
stored (Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K, MXFP4, NVFP4; F16, BF16 and F32 rows likewise).

The 32-element kinds (Q8_0, Q4_0, Q4_1: the default model's) and the K-quants (Q4_K, Q6_K)
run kernels/blocks_vec.py, explicit LLVM vectors (2.5-3x these loops at one row for the
former; 6-18x for the K-quants, receipt 2026-12-05-moe-kernels); MXFP4 and the float rows
keep the unpack-then-dot kernels of this file. The K-quants' kernels here stay as the
reference blocks_vec's are tested against byte for byte (the same operations, in the order
below: tests/model/test_blocks_kvec.py).

How a kernel runs: output rows n are split in chunks of ROWS rows, the chunks shared by the
cores (prange). A chunk's rows are unpacked once into float32 (a few KB, in L1/L2), then every
x row i in tiles of TILE rows is multiplied with every unpacked row n. out[i, n] is one
computation: 32 float32 lanes, lane l summing w[k + l] * x[k + l] over k = 0, 32, 64, ...
in order, then the 32 lanes added in a fixed tree (l + 16, + 8, + 4, then (0+2)+(1+3)). That order depends on K alone: never on
the batch, the tile, the chunk or the thread, so a row's bytes never depend on other rows
(batch invariance by construction, no 4-row tiles).

fastmath is {"contract"} only: a * b + c may become one fused multiply-add (the same in
every call, the code being one), but no reassociation: the compiler may not reorder any
sum. The arrays each kernel is given never overlap, so the kernels are compiled with
`noalias` on their array arguments (numba has no option for it; `_noalias` below sets the
flag while our functions compile), which lets LLVM keep the lanes in vector registers.

cache=True: compiled code is kept in numba's cache (__pycache__ beside this file, or
NUMBA_CACHE_DIR) between runs; a kind compiles on its first use (a few seconds, once).
The definition the tests compare against: kernels.qmatmul.ref (float64).
"""
from __future__ import annotations

import threading

import numpy as np

from kernels import require_init  # noqa: E402

require_init(__name__)     # kernels.init() set NUMBA_SLP_VECTORIZE and GOMP_SPINCOUNT before numba
import numba  # noqa: E402
from numba import njit, prange  # noqa: E402
from numba.core import config as _nbconfig  # noqa: E402
from numba.core import cpu as _nbcpu  # noqa: E402

from kernels import blocks_vec  # noqa: E402

_nbconfig.SLP_VECTORIZE = 1

ROWS = 16          # output rows a chunk unpacks at once
TILE = 64          # x rows multiplied against a chunk before the next tile

# ---------------------------------------------------------------- noalias while ours compile
_ours = threading.local()
_finalize = _nbcpu.CPUTargetOptions.finalize


def _finalize_noalias(self, flags, options):
    _finalize(self, flags, options)
    if getattr(_ours, "on", False):
        flags.noalias = True


_nbcpu.CPUTargetOptions.finalize = _finalize_noalias


class _noalias:
    def __enter__(self):
        _ours.on = True

    def __exit__(self, *a):
        _ours.on = False


def _jit(**kw):
    """njit, deciding its options when the decorator runs: with noalias (see above)."""
    def deco(fn):
        with _noalias():
            return njit(cache=True, fastmath={"contract"}, boundscheck=False, **kw)(fn)
    return deco


F16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)


# ---------------------------------------------------------------- one row of blocks -> float32
@_jit()
def deq_q8_0(row, w, f16):
    for b in range(w.shape[0] // 32):
        blk = row[b * 34:b * 34 + 34]
        d = f16[np.int64(blk[0]) | (np.int64(blk[1]) << 8)]
        qs = blk[2:34].view(np.int8)
        wb = w[b * 32:b * 32 + 32]
        for j in range(32):
            wb[j] = d * np.float32(qs[j])


@_jit()
def deq_q4_0(row, w, f16):
    for b in range(w.shape[0] // 32):
        blk = row[b * 18:b * 18 + 18]
        d = f16[np.int64(blk[0]) | (np.int64(blk[1]) << 8)]
        qs = blk[2:18]
        wl = w[b * 32:b * 32 + 16]           # low nibbles, then high: two contiguous runs
        wh = w[b * 32 + 16:b * 32 + 32]      # (one loop writing both was a scatter)
        for j in range(16):
            wl[j] = d * np.float32((np.int32(qs[j]) & 15) - 8)
        for j in range(16):
            wh[j] = d * np.float32((np.int32(qs[j]) >> 4) - 8)


@_jit()
def deq_q4_1(row, w, f16):
    for b in range(w.shape[0] // 32):
        blk = row[b * 20:b * 20 + 20]
        d = f16[np.int64(blk[0]) | (np.int64(blk[1]) << 8)]
        m = f16[np.int64(blk[2]) | (np.int64(blk[3]) << 8)]
        qs = blk[4:20]
        wl = w[b * 32:b * 32 + 16]
        wh = w[b * 32 + 16:b * 32 + 32]
        for j in range(16):
            wl[j] = d * np.float32(qs[j] & 15) + m
        for j in range(16):
            wh[j] = d * np.float32(qs[j] >> 4) + m


@_jit()
def deq_q5_0(row, w, f16):
    # 32 values a block: d (f16), qh (a little-endian uint32 of fifth bits: bit j for element
    # j, bit j + 16 for element j + 16), 16 bytes of nibbles (0..15 low, 16..31 high); value
    # d * ((nibble | fifth << 4) - 16), exact in float32 (ggml's dequantize_row_q5_0)
    for b in range(w.shape[0] // 32):
        blk = row[b * 22:b * 22 + 22]
        d = f16[np.int64(blk[0]) | (np.int64(blk[1]) << 8)]
        qh = (np.int64(blk[2]) | (np.int64(blk[3]) << 8) | (np.int64(blk[4]) << 16)
              | (np.int64(blk[5]) << 24))
        qs = blk[6:22]
        wl = w[b * 32:b * 32 + 16]
        wh = w[b * 32 + 16:b * 32 + 32]
        for j in range(16):
            wl[j] = d * np.float32(((np.int64(qs[j]) & 15) | (((qh >> j) & 1) << 4)) - 16)
        for j in range(16):
            wh[j] = d * np.float32(((np.int64(qs[j]) >> 4) | (((qh >> (j + 16)) & 1) << 4)) - 16)


@_jit()
def deq_q4_k(row, w, f16):
    # 256 values a block: d, dmin (f16), 12 bytes of 6-bit scales and mins for 8 groups of
    # 32, then 128 bytes: group 2c in the low nibbles of bytes 32c..32c+31, 2c+1 in the high
    for b in range(w.shape[0] // 256):
        blk = row[b * 144:b * 144 + 144]
        d = f16[np.int64(blk[0]) | (np.int64(blk[1]) << 8)]
        dmin = f16[np.int64(blk[2]) | (np.int64(blk[3]) << 8)]
        sc = blk[4:16]
        qs = blk[16:144]
        wb = w[b * 256:b * 256 + 256]
        for c in range(4):
            j = 2 * c
            if j < 4:
                s1, m1 = np.int32(sc[j]) & 63, np.int32(sc[j + 4]) & 63
                s2, m2 = np.int32(sc[j + 1]) & 63, np.int32(sc[j + 5]) & 63
            else:
                s1 = (np.int32(sc[j + 4]) & 15) | ((np.int32(sc[j - 4]) >> 6) << 4)
                m1 = (np.int32(sc[j + 4]) >> 4) | ((np.int32(sc[j]) >> 6) << 4)
                s2 = (np.int32(sc[j + 5]) & 15) | ((np.int32(sc[j - 3]) >> 6) << 4)
                m2 = (np.int32(sc[j + 5]) >> 4) | ((np.int32(sc[j + 1]) >> 6) << 4)
            d1, n1 = d * np.float32(s1), dmin * np.float32(m1)
            d2, n2 = d * np.float32(s2), dmin * np.float32(m2)
            q = qs[32 * c:32 * c + 32]
            lo = wb[64 * c:64 * c + 32]
            hi = wb[64 * c + 32:64 * c + 64]
            for l in range(32):
                v = np.int32(q[l])
                lo[l] = d1 * np.float32(v & 15) - n1
                hi[l] = d2 * np.float32(v >> 4) - n2


@_jit()
def deq_q6_k(row, w, f16):
    # 256 values a block: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales
    # (one per 16 values), d (f16) last
    for b in range(w.shape[0] // 256):
        blk = row[b * 210:b * 210 + 210]
        sc = blk[192:208].view(np.int8)
        d = f16[np.int64(blk[208]) | (np.int64(blk[209]) << 8)]
        for half in range(2):
            ql = blk[64 * half:64 * half + 64]
            qh = blk[128 + 32 * half:128 + 32 * half + 32]
            s = sc[8 * half:8 * half + 8]
            y = w[b * 256 + 128 * half:b * 256 + 128 * half + 128]
            for l in range(32):
                i = l // 16
                a = np.int32(ql[l])
                c = np.int32(ql[l + 32])
                h = np.int32(qh[l])
                y[l] = d * np.float32(s[i]) * np.float32(((a & 15) | ((h & 3) << 4)) - 32)
                y[l + 32] = d * np.float32(s[i + 2]) * np.float32(((c & 15) | (((h >> 2) & 3) << 4)) - 32)
                y[l + 64] = d * np.float32(s[i + 4]) * np.float32(((a >> 4) | (((h >> 4) & 3) << 4)) - 32)
                y[l + 96] = d * np.float32(s[i + 6]) * np.float32(((c >> 4) | (((h >> 6) & 3) << 4)) - 32)


# e8m0 scale byte -> float32 2^(e - 128) (ggml's ggml_e8m0_to_fp32_half: the e2m1 values
# below are doubled), exact for every byte (e < 2: a denormal)
E8M0_HALF = np.array([np.ldexp(np.float64(1.0), int(e) - 128) for e in range(256)], np.float32)
KVALUES_MXFP4 = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.float32)


@_jit()
def deq_mxfp4(row, w, f16):
    # 32 values a block: the e8m0 scale byte, then 16 bytes (0..15 low nibbles, 16..31 high);
    # value = kvalues[q] * 2^(e - 128), exact in float32 (a 4-bit value times a power of 2)
    kv = KVALUES_MXFP4
    for b in range(w.shape[0] // 32):
        blk = row[b * 17:b * 17 + 17]
        d = E8M0_HALF[np.int64(blk[0])]
        qs = blk[1:17]
        wl = w[b * 32:b * 32 + 16]
        wh = w[b * 32 + 16:b * 32 + 32]
        for j in range(16):
            wl[j] = d * kv[np.int64(qs[j]) & 15]
        for j in range(16):
            wh[j] = d * kv[np.int64(qs[j]) >> 4]


def _ue4m3_half(x: int) -> float:
    """ggml's ggml_ue4m3_to_fp32 (ggml-impl.h), byte by byte: unsigned E4M3 (bias 7, the top
    bit ignored), 0x00 and 0x7F read as 0, times 0.5 (the e2m1 values are doubled)."""
    if x == 0 or x == 0x7F:
        return 0.0
    exp, man = (x >> 3) & 0xF, x & 0x7
    raw = np.ldexp(np.float64(man), -9) if exp == 0 else np.ldexp(1.0 + man / 8.0, exp - 7)
    return raw * 0.5


# E4M3 scale byte -> float32 (exact: at most 4 significant bits times a power of two)
UE4M3_HALF = np.array([_ue4m3_half(x) for x in range(256)], np.float32)


@_jit()
def deq_nvfp4(row, w, f16):
    # 64 values a block: 4 UE4M3 scale bytes (one a sub-block of 16), then 32 bytes; sub-block
    # s reads bytes 8 s .. 8 s + 7 of them: elements 0..7 the low nibbles, 8..15 the high;
    # value = kvalues[q] * ue4m3_half(d[s]), exact in float32 (ggml's dequantize_row_nvfp4)
    kv = KVALUES_MXFP4
    for b in range(w.shape[0] // 64):
        blk = row[b * 36:b * 36 + 36]
        for s in range(4):
            d = UE4M3_HALF[np.int64(blk[s])]
            qs = blk[4 + s * 8:4 + s * 8 + 8]
            wl = w[b * 64 + s * 16:b * 64 + s * 16 + 8]
            wh = w[b * 64 + s * 16 + 8:b * 64 + s * 16 + 16]
            for j in range(8):
                wl[j] = d * kv[np.int64(qs[j]) & 15]
            for j in range(8):
                wh[j] = d * kv[np.int64(qs[j]) >> 4]


@_jit()
def deq_f16(row, w, f16):
    r = row.view(np.uint16)
    for k in range(w.shape[0]):
        w[k] = f16[r[k]]


@_jit()
def deq_bf16(row, w, f16):
    r = row.view(np.uint16)
    o = w.view(np.uint32)
    for k in range(w.shape[0]):
        o[k] = np.uint32(r[k]) << 16


@_jit()
def deq_f32(row, w, f16):
    r = row.view(np.float32)
    for k in range(w.shape[0]):
        w[k] = r[k]


# ---------------------------------------------------------------- the product
def _make(deq):
    # deq and chunk pickled as their recipes (blocks_vec.stable_pickle): numba keys the cached
    # chunk / mm / grouped by their closures pickled, and a dispatcher pickles with a uuid new
    # in each process, so without this every process (each test, each rank) compiled them again
    name = deq.py_func.__name__
    deq = blocks_vec.stable_pickle(deq, "cpu_deq", name)

    @_jit()
    def chunk(x, data, f16, out, lo, hi, w, acc):
        """Output rows [lo, hi): unpack them into w, then every x row against every one.
        out[i, n] = sum_k w[n, k] x[i, k] in the one fixed order: 32 lanes, lane l summing
        over k = l, l + 32, l + 64, ... in order, then the lanes in a fixed tree."""
        M, K = x.shape
        for n in range(lo, hi):
            deq(data[n], w[n - lo], f16)
        for t in range(0, M, TILE):
            for n in range(lo, hi):
                wn = w[n - lo]
                for i in range(t, min(t + TILE, M)):
                    xi = x[i]
                    for l in range(32):
                        acc[l] = 0.0
                    for k in range(0, K, 32):
                        wk = wn[k:k + 32]
                        xk = xi[k:k + 32]
                        for l in range(32):
                            acc[l] += wk[l] * xk[l]
                    for l in range(16):          # the lanes in a fixed tree
                        acc[l] += acc[l + 16]
                    for l in range(8):
                        acc[l] += acc[l + 8]
                    for l in range(4):
                        acc[l] += acc[l + 4]
                    out[i, n] = (acc[0] + acc[2]) + (acc[1] + acc[3])
    chunk = blocks_vec.stable_pickle(chunk, "cpu_chunk", name)

    def mm_py(x, data, f16, out):
        K = x.shape[1]
        N = data.shape[0]
        chunks = (N + ROWS - 1) // ROWS
        for c in prange(chunks):
            lo = c * ROWS
            w = np.empty((ROWS, K), np.float32)
            acc = np.empty(32, np.float32)
            chunk(x, data, f16, out, lo, min(lo + ROWS, N), w, acc)
    mm = _jit(parallel=True)(mm_py)
    # the same chunks on the calling thread (prange as range): no parallel region, for a
    # product too small to pay for one (a MoE router at decode: 128 x 2048); the same bytes
    mm.serial = _jit()(mm_py)

    @_jit(parallel=True)
    def grouped(x, stack, experts, offs, f16, out):
        """A MoE layer's experts in one parallel region (kernels/moe_cpu.py): for each group g,
        out[offs[g]:offs[g+1]] = x[offs[g]:offs[g+1]] times stack[experts[g]]^T, as pieces
        (group, chunk of ROWS output rows) shared by the cores. Each piece is `chunk` above on
        the group's x rows and the expert's rows: mm's function on the same rows, so mm's
        bytes (an element's order depends on K alone)."""
        K = x.shape[1]
        N = stack.shape[1]
        chunks = (N + ROWS - 1) // ROWS
        G = experts.shape[0]
        for p in prange(G * chunks):
            g = p // chunks
            c = p - g * chunks
            a = offs[g]
            b = offs[g + 1]
            lo = c * ROWS
            w = np.empty((ROWS, K), np.float32)
            acc = np.empty(32, np.float32)
            chunk(x[a:b], stack[experts[g]], f16, out[a:b], lo, min(lo + ROWS, N), w, acc)
    return mm, grouped


blocks_vec.MAKERS.update(cpu_deq=lambda name: globals()[name],
                         cpu_chunk=lambda name: (_make(globals()[name]),
                                                 blocks_vec._MADE[("cpu_chunk", name)])[1])

with _noalias():
    _MADE_KINDS = {                  # Q8_0, Q4_0, Q4_1: kernels/blocks_vec.py
        # Q5_0, Q4_K, Q6_K run kernels/blocks_vec.py; these stay as the reference its kernels
        # are tested against byte for byte (tests/model/test_blocks_q5_0.py, test_blocks_kvec.py)
        "Q5_0": _make(deq_q5_0),
        "Q4_K": _make(deq_q4_k), "Q6_K": _make(deq_q6_k), "MXFP4": _make(deq_mxfp4),
        "NVFP4": _make(deq_nvfp4),
        "F16": _make(deq_f16), "BF16": _make(deq_bf16), "F32": _make(deq_f32),
    }
KERNELS = {k: v[0] for k, v in _MADE_KINDS.items()}
GROUPED = {k: v[1] for k, v in _MADE_KINDS.items()}   # the experts' one-region form


def grouped_matmul(x: np.ndarray, kind: str, stack: np.ndarray, experts: np.ndarray,
                   offs: np.ndarray) -> np.ndarray:
    """x [R, K] float32 (rows grouped by expert: group g = rows offs[g]:offs[g+1], expert
    experts[g]) times stack uint8 [E, N, row bytes] of `kind` -> [R, N]; every row's bytes
    those of `matmul(x_row, kind, stack[e])`."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty((x.shape[0], stack.shape[1]), np.float32)
    if x.shape[1] % 32:
        raise ValueError(f"blocks_cpu: K = {x.shape[1]} is not a multiple of 32")
    with _noalias():
        GROUPED[kind](x, stack, experts, offs, F16, out)
    return out
DEQ = {"Q8_0": deq_q8_0, "Q4_0": deq_q4_0, "Q4_1": deq_q4_1, "Q5_0": deq_q5_0, "Q4_K": deq_q4_k, "Q6_K": deq_q6_k,
       "MXFP4": deq_mxfp4, "NVFP4": deq_nvfp4,
       "F16": deq_f16, "BF16": deq_bf16, "F32": deq_f32}


SERIAL_MACS = 1 << 21    # at most this many multiply-adds: on the calling thread (same bytes)


def matmul(x: np.ndarray, kind: str, data: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """x [M, K] float32 times the [N, K] matrix whose rows are `data` (uint8 [N, row bytes]) in
    `kind` -> [M, N] float32 (x @ W^T). Products of at most SERIAL_MACS multiply-adds run on
    the calling thread (entering a parallel region costs more than they do on a loaded
    machine: ~20 ms a region at load 7 on 2 cores, measured); the chunks and their bytes are
    the same either way."""
    if kind in blocks_vec.VEC_KINDS:
        return blocks_vec.matmul(x, kind, data, out)
    x = np.ascontiguousarray(x, dtype=np.float32)
    if out is None:
        out = np.empty((x.shape[0], data.shape[0]), np.float32)
    if x.shape[1] % 32:
        raise ValueError(f"blocks_cpu: K = {x.shape[1]} is not a multiple of 32")
    mm = KERNELS[kind]
    if x.shape[0] * data.shape[0] * x.shape[1] <= SERIAL_MACS:
        mm = mm.serial
    with _noalias():
        mm(x, data, F16, out)
    return out


def dequantize_rows(kind: str, data: np.ndarray, cols: int) -> np.ndarray:
    """Rows of blocks -> float32 [rows, cols] (the embedding's gather)."""
    out = np.empty((data.shape[0], cols), np.float32)
    with _noalias():
        _deq_rows(DEQ[kind], data, out)
    return out


def _deq_rows_py(deq, data, out):
    for r in range(data.shape[0]):
        deq(data[r], out[r], F16)


_deq_rows = _deq_rows_py


def threads() -> int:
    return numba.get_num_threads()
