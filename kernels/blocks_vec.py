"""x @ W^T over GGUF blocks in explicit LLVM vectors, on the CPU: the 32-element kinds (Q8_0,
Q4_0, Q4_1; MXFP4 on x86) here, the K-quants (Q4_K, Q6_K) further down, and every product run
as a crew round (kernels/team_cpu.Crew) at the end.

numba vectorizes loops only where LLVM's cost model agrees (the unpack-then-dot kernels of
kernels/blocks_cpu.py ran at 1.5-4 GMAC/s a core, much of it scalar or scattered); here one
output element is written as LLVM vector IR by hand (a numba intrinsic), so the SIMD is
what the code says on any target LLVM knows (AVX2: two ymm a 16-lane op; AVX-512, NEON: as
legal there), and every float operation is named: fmul, the llvm.fma intrinsic, fadd. No
contraction or reassociation is left to the compiler, so the bytes are the same in every
function that inlines it, whatever the batch.

One output element, out = sum_k w[k] x[k] for a row of nb blocks of 32 (32 float32 lanes,
lane l standing for position l of every block):
  for b in 0 .. nb-1, in order:
      w[l]   = d_b * q_b[l]                           (d_b: the block's f16 scale; q_b[l]: its
                                                       integer value at l, exact in float32)
      acc[l] = fma(w[l], x[32b + l], acc[l])
      Q4_1 only: sm = fma(m_b, xsum[b], sm)           (m_b: its f16 min; xsum[b]: the float32
                                                       sum of x over the block, in order)
  out = tree(acc) + sm, tree = lanes (l, l+16) added, then (l, l+8), (l, l+4), (l, l+2), (0, 1).
The integer values: Q8_0 q (int8); Q4_0 nibble - 8; Q4_1 nibble (the block's 16 bytes hold
positions 0..15 in their low nibbles, 16..31 in their high: GGUF's order); Q5_0 (nibble |
fifth bit << 4) - 16, the fifth bit of position l being bit l of the block's qh (a
little-endian uint32 after d), d * q exact as kernels/blocks_cpu.deq_q5_0's; MXFP4 the value its
nibble stands for (ggml's kvalues: e2m1 doubled, int8), d its e8m0 byte as 2^(e - 128), so
d * q exact (kernels/blocks_cpu.deq_mxfp4's products, the same bytes). The sum is the
product with the dequantized weights up to float32 rounding (Q4_1's d*q + m is split into the
two sums; tests/model/test_blocks_cpu.py holds every kind to the float64 definition,
kernels.qmatmul.ref). How many rows go side by side (a tile: R rows of blocks against C x rows,
w formed once a block for the C rows, each x load used by the R rows: 4x1 for one x row, 1x8
or 2x4 for several, Q8_0's 4x2 / 2x3 for 2 or 3 left over, 1x1 for what remains) changes how
many chains run at once, never a chain's operations.

The scales are read where the file keeps them (each block's f16 d, and Q4_1's m, widened to
float32 exactly in the loop: vcvtph2ps; d a row at a time, Q4_1's m the tile's rows in one
vector), so a step reads the blocks' bytes and nothing else (a float32 copy of the scales,
kept beside the blocks until c23, added 40% to a Q4_1 step's bytes; the same values, so the
same bytes out).

Batch invariance by construction: an output element reads its row of blocks, its x row and
its xsum row only, through the one function below, in the order above.
"""
from __future__ import annotations


# libgomp (numba's omp layer) spins 300,000 times before it sleeps at the end of each parallel
# region; on a 2-core machine shared with other work a spinning worker takes the core the
# other thread needs, and a decode step's ~121 regions each wait for a descheduled thread.
# Measured on the default model, -t 2, one process per setting (receipt 2026-12-02-cpu-speed):
# at load 4-7, step 423-512 ms (300k-like 100k spins) vs 64-69 (10k) vs 13-14 (passive);
# at load 2-3, 8.0-8.7 (100k) vs 8.2-8.3 (10k) vs 12.3-12.5 (passive). 10k keeps the quiet
# speed and drops most of the loaded collapse. Read when libgomp loads (the first parallel
# call), so set by kernels.init(), before numba; a user's own OMP_WAIT_POLICY / GOMP_SPINCOUNT
# wins.
from kernels import require_init  # noqa: E402

require_init(__name__)

import numpy as np  # noqa: E402
from llvmlite import ir  # noqa: E402
from numba import njit, prange, types  # noqa: E402
from numba.core import cgutils  # noqa: E402
from numba.extending import intrinsic  # noqa: E402

from kernels.vec_ir import F32 as _f32, V16F as _v16f, V32F as _v32f  # noqa: E402
from kernels.vec_ir import fma as _fma, half as _halfload, lanes as _lanes, ptr as _ptr  # noqa: E402
from kernels.vec_ir import _loop_n, prefetch_l2 as _prefetch_l2, splat as _splat  # noqa: E402
# module globals, not closure cells: a crew member closing over these dispatchers would
# pickle their per-process uuids into its cache key and compile again in every process
from kernels.team_cpu import finish, region_piece, wait  # noqa: E402

ROWS = 16                # output rows a parallel chunk takes
BLOCK_BYTES = {"Q8_0": 34, "Q4_0": 18, "Q4_1": 20}
K_BYTES = {"Q4_K": 144, "Q6_K": 210}     # the K-quants' 256-element blocks (below)


def _x86_ssse3() -> bool:
    import llvmlite.binding as ll
    try:
        return bool(ll.get_host_cpu_features().get("ssse3"))
    except Exception:           # features unknown: MXFP4 stays on kernels/blocks_cpu.py
        return False


# The 32-element kinds read here beyond the default model's: MXFP4 (gpt-oss experts; its
# value lookup is x86's pshufb, so on x86 hosts only; elsewhere kernels/blocks_cpu.py's).
# Q5_0 (llama-quantize's Q4_K_M takes it for rows not a multiple of 256: GLM-4.5-Air's FF 1408
# and 10,944) on every target; not in BLOCK_BYTES, so the llama family's fused round
# (kernels/forward_cpu.py) leaves a model with it to the op-by-op path as before.
VEC_BYTES = {**BLOCK_BYTES, "Q5_0": 22, **({"MXFP4": 17} if _x86_ssse3() else {})}
VEC_KINDS = (*VEC_BYTES, *K_BYTES)       # every kind blocks_vec.matmul reads

_i8, _i16, _i32, _i64 = ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64)
_half = ir.HalfType()
_v16i8 = ir.VectorType(_i8, 16)
_v32i8 = ir.VectorType(_i8, 32)
_v16i32 = ir.VectorType(_i32, 16)


def _vec(builder, elems, ty):
    v = ir.Constant(ir.VectorType(ty, len(elems)), ir.Undefined)
    for j, e in enumerate(elems):
        v = builder.insert_element(v, e, ir.Constant(_i32, j))
    return v


def _f16s(builder, kind, bases):
    """The f16 scales of blocks at `bases` (one block each), read where the file keeps them
    (bytes 0-1: d; Q4_1's 2-3: m) and widened to float32 exactly, all k at once: a vector
    [d_0, d_1, ...] or, Q4_1, [d_0, m_0, d_1, m_1, ...]."""
    w = _i32 if kind == "Q4_1" else _i16
    vals = [builder.load(builder.bitcast(b, w.as_pointer()), align=1) for b in bases]
    n = len(bases) * (2 if kind == "Q4_1" else 1)
    packed = builder.bitcast(_vec(builder, vals, w), ir.VectorType(_half, n))
    return builder.fpext(packed, ir.VectorType(_f32, n))


def _d16(builder, base, kind=""):
    """The block's f16 scale d (its bytes 0-1) widened to float32 and splat to 16 lanes: one
    row's own load and broadcast (taking it from the R rows' scales vector cost more
    shuffles: Q4_1 one-row tiles 0.50 against 0.47 G blocks/s a core in L1, receipt
    2026-12-02-cpu-regions). MXFP4: its e8m0 byte 0 as 2^(e - 128) (below)."""
    if kind == "MXFP4":
        return _splat(builder, _e8m0_half(builder, base))
    return _splat(builder, _halfload(builder, base))


def _e8m0_half(builder, base):
    """An MXFP4 block's scale byte e as float32 2^(e - 128), exactly (kernels/blocks_cpu's
    E8M0_HALF: ggml halves the scale, the e2m1 values being doubled): the float's bits built
    from e, (e - 1) << 23 for e >= 2, the denormals 2^-127 and 2^-128 for e = 1, 0."""
    e = builder.zext(builder.load(base, align=1), _i32)
    normal = builder.shl(builder.sub(e, ir.Constant(_i32, 1)), ir.Constant(_i32, 23))
    tiny = builder.shl(ir.Constant(_i32, 0x00200000), e)
    bits = builder.select(builder.icmp_unsigned(">=", e, ir.Constant(_i32, 2)), normal, tiny)
    return builder.bitcast(bits, _f32)


# MXFP4's 16 values a nibble stands for (ggml's kvalues_mxfp4: e2m1 doubled), int8
KVALUES_MXFP4 = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12]


def _pshufb(builder, table, idx):
    """table[idx] byte by byte (idx 0..15; SSSE3's pshufb, the one 16-entry lookup a vector
    does on x86 without AVX-512)."""
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16i8, [_v16i8, _v16i8]),
                                        "llvm.x86.ssse3.pshuf.b.128")
    return builder.call(fn, [table, idx])


def _block_q(builder, kind, base):
    """The block's 32 integer values as two float32 16-lane vectors (positions 0-15, 16-31)."""
    if kind == "MXFP4":          # byte 0 the scale, 1..16 the nibbles (0..15 low, 16..31 high)
        q = builder.load(builder.bitcast(builder.gep(base, [ir.Constant(_i64, 1)]), _v16i8.as_pointer()), align=1)
        tab = ir.Constant(_v16i8, KVALUES_MXFP4)
        lo = _pshufb(builder, tab, builder.and_(q, ir.Constant(_v16i8, [15] * 16)))
        hi = _pshufb(builder, tab, builder.lshr(q, ir.Constant(_v16i8, [4] * 16)))
        return builder.sitofp(lo, _v16f), builder.sitofp(hi, _v16f)
    if kind == "Q5_0":           # d, qh (uint32 LE: bit j element j's fifth bit), 16 nibble bytes
        qh = builder.load(builder.bitcast(builder.gep(base, [ir.Constant(_i64, 2)]), _i32.as_pointer()), align=1)
        qhv = builder.insert_element(ir.Constant(_v16i32, ir.Undefined), qh, ir.Constant(_i32, 0))
        qhv = builder.shuffle_vector(qhv, ir.Constant(_v16i32, ir.Undefined), ir.Constant(_v16i32, [0] * 16))
        one = ir.Constant(_v16i32, [1] * 16)
        q = builder.load(builder.bitcast(builder.gep(base, [ir.Constant(_i64, 6)]), _v16i8.as_pointer()), align=1)
        qi = builder.zext(q, _v16i32)
        out = []
        for nib, sh in ((builder.and_(qi, ir.Constant(_v16i32, [15] * 16)), 0),
                        (builder.lshr(qi, ir.Constant(_v16i32, [4] * 16)), 16)):
            bit = builder.and_(builder.lshr(qhv, ir.Constant(_v16i32, list(range(sh, sh + 16)))), one)
            v = builder.sub(builder.or_(nib, builder.shl(bit, ir.Constant(_v16i32, [4] * 16))),
                            ir.Constant(_v16i32, [16] * 16))
            out.append(builder.sitofp(v, _v16f))
        return out[0], out[1]
    if kind == "Q8_0":
        q = builder.load(builder.bitcast(builder.gep(base, [ir.Constant(_i64, 2)]), _v32i8.as_pointer()), align=1)
        return builder.sitofp(_lanes(builder, q, 0, 16), _v16f), builder.sitofp(_lanes(builder, q, 16, 16), _v16f)
    off = 2 if kind == "Q4_0" else 4
    q = builder.load(builder.bitcast(builder.gep(base, [ir.Constant(_i64, off)]), _v16i8.as_pointer()), align=1)
    lo = builder.and_(q, ir.Constant(_v16i8, [15] * 16))
    hi = builder.lshr(q, ir.Constant(_v16i8, [4] * 16))
    if kind == "Q4_0":
        eight = ir.Constant(_v16i8, [8] * 16)
        return builder.sitofp(builder.sub(lo, eight), _v16f), builder.sitofp(builder.sub(hi, eight), _v16f)
    return builder.uitofp(lo, _v16f), builder.uitofp(hi, _v16f)


# Each block loop asks for the same place PREFETCH_ROWS rows on (llvm.prefetch: no effect on
# any value): the rows a chunk reads next arrive from memory while this one computes. One
# token's matmuls at one thread, interleaved A/B on the default model's matrices (receipt
# 2026-12-02-cpu-speed): 0.64x the time with 4 or 8 rows ahead, 0.68x with 16. Into L2
# (locality 2, prefetcht1), not L1: the head stage (Q8_0, measured with 8x1 tiles) 3.64-3.75 M
# TSC cycles a round against 5.43-6.13 M, the other matrices unchanged (receipt
# 2026-12-02-cpu-regions; why is not measured: L1 holds few lines in flight, L2 more).
PREFETCH_ROWS = 8


def _permvar(builder, table, idx):
    """table[idx & 15] lane by lane (AVX-512's vpermps)."""
    v16i = ir.VectorType(_i32, 16)
    fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(_v16f, [_v16f, v16i]),
                                        "llvm.x86.avx512.permvar.sf.512")
    return builder.call(fn, [table, idx])


def _weights(builder, kind, base, dv, table):
    """The block's 32 weights as the sum reads them, d * q in block order (dv: d splat to 16
    lanes). table (Q4_0, Q4_1 where AVX-512 is there): the 16 products d * v for the 16 values
    v a nibble stands for (0..15; Q4_0 -8..7), each lane then picked by its nibble (vpermps):
    the same fmul(d, v) the unpacked form computes, one shuffle a 16 weights instead of a
    convert and a multiply."""
    if not table or kind in ("Q8_0", "MXFP4", "Q5_0"):
        lo, hi = _block_q(builder, kind, base)
        return _scaled(builder, dv, lo, hi)
    vals = list(range(16)) if kind == "Q4_1" else list(range(-8, 8))
    tab = builder.fmul(dv, ir.Constant(_v16f, [float(v) for v in vals]))
    off = 2 if kind == "Q4_0" else 4
    q = builder.load(builder.bitcast(builder.gep(base, [ir.Constant(_i64, off)]), _v16i8.as_pointer()), align=1)
    qi = builder.zext(q, ir.VectorType(_i32, 16))
    lo = _permvar(builder, tab, builder.and_(qi, ir.Constant(ir.VectorType(_i32, 16), [15] * 16)))
    hi = _permvar(builder, tab, builder.lshr(qi, ir.Constant(ir.VectorType(_i32, 16), [4] * 16)))
    mask = ir.Constant(ir.VectorType(_i32, 32), list(range(32)))
    return builder.shuffle_vector(lo, hi, mask)


def _scaled(builder, dv, lo, hi):
    """The block's 32 weights as the sum reads them: d * q in block order (float32 products;
    dv: d splat to 16 lanes)."""
    mask = ir.Constant(ir.VectorType(_i32, 32), list(range(32)))
    return builder.shuffle_vector(builder.fmul(dv, lo), builder.fmul(dv, hi), mask)


def _xblock(builder, xp, b):
    """Block b of an x row (32 float32 lanes)."""
    x0 = builder.gep(xp, [builder.mul(b, ir.Constant(_i64, 32))])
    return builder.load(builder.bitcast(x0, _v32f.as_pointer()), align=4)


def _finish(builder, acc, sm):
    v = acc
    for n in (16, 8, 4, 2):
        v = builder.fadd(_lanes(builder, v, 0, n), _lanes(builder, v, n, n))
    r = builder.fadd(builder.extract_element(v, ir.Constant(_i32, 0)),
                     builder.extract_element(v, ir.Constant(_i32, 1)))
    return builder.fadd(r, sm)


def _result(context, builder, signature, vals):
    if len(vals) == 1:
        return vals[0]
    return context.make_tuple(builder, signature.return_type, vals)


def _ret(k):
    return types.float32 if k == 1 else types.UniTuple(types.float32, k)


_ZERO32 = ir.Constant(_v32f, [0.0] * 32)
_FZERO = ir.Constant(_f32, 0.0)


def _made(role: str, *args):
    """The kernel `role` (tile, rows, mm; or a role another module registered in
    MAKERS, as kernels/forward_cpu.py does its member) for args, made once a process: what a
    pickled kernel is rebuilt from (see stable_pickle)."""
    key = (role, *args)
    if key not in _MADE:
        _MADE[key] = MAKERS[role](*args)
    return _MADE[key]


_MADE: dict = {}
MAKERS: dict = {}          # role -> the function making it from the recipe's args


def stable_pickle(fn, role: str, *args):
    """fn (an intrinsic or a dispatcher made inside a function) pickled as the recipe that
    makes it, (_made, (role, *args)): the same bytes in every process, before and after it
    compiles, so that numba's cache finds the functions that close over it.

    numba keys a cached function that closes over others by a hash of those others pickled;
    pickled as numba pickles them, an intrinsic or a dispatcher carries a uuid drawn afresh in
    each process and state that changes once it has compiled, so every kernel made by _make_mm
    (and the fused forward over them, kernels/forward_cpu.py) missed the cache in every new
    process and compiled again on its first call: about 3.5 s a kind, some 20 s for the default
    model's first round, at every start (tests/model/test_cpu_kernel_cache.py)."""
    cls = type(fn)
    fn.__class__ = _RECIPE_CLASSES.get(cls) or _RECIPE_CLASSES.setdefault(
        cls, type(cls.__name__, (cls,), {"__reduce__": lambda self: (_made, self._recipe),
                                         "__module__": cls.__module__}))
    fn._recipe = (role, *args)
    _MADE.setdefault((role, *args), fn)
    return fn


_RECIPE_CLASSES: dict = {}


def _make_tile(kind, R, C, table):
    """tile(data, n, x, i, xst): R rows of blocks (data[n .. n+R-1], uint8 [N, row bytes]) times
    C x rows (x[i .. i+C-1], float32 [M, K]) -> R*C elements, r-major (element r*C + c: block
    row n + r against x row i + c), each in the module's order. A block of each of the R rows
    is unpacked and scaled once for its C x rows, each x load serves the R rows, the R blocks'
    scales widen in one vector; R*C chains side by side, none changing another's operations.
    xst: the C rows' block sums side by side, [nb, C] (side_by_side; for C = 1 the row's own
    xsum[i]), read by Q4_1 only: its R*C min sums run as the lanes of one vector chain, lane
    r*C + c = fma(m_r, xsum_c[b], sm), each lane the same fma as a scalar chain."""
    nbytes = VEC_BYTES[kind]
    q41 = kind == "Q4_1"

    def typer(data, n, x, i, xst):
        sig = _ret(R * C)(data, n, x, i, xst)

        def codegen(context, builder, signature, vals):
            da = _ptr(context, builder, signature.args[0], vals[0])
            xa = _ptr(context, builder, signature.args[2], vals[2])
            nn, ii = vals[1], vals[3]
            stp = _ptr(context, builder, signature.args[4], vals[4]).data
            dstride = builder.extract_value(da.strides, 0)
            xstride = builder.sdiv(builder.extract_value(xa.strides, 0), ir.Constant(_i64, 4))
            d0 = builder.bitcast(da.data, _i8.as_pointer())
            ws = [builder.gep(d0, [builder.mul(builder.add(nn, ir.Constant(_i64, r)), dstride)]) for r in range(R)]
            xps = [builder.gep(xa.data, [builder.mul(builder.add(ii, ir.Constant(_i64, c)), xstride)])
                   for c in range(C)]
            nb = builder.sdiv(builder.extract_value(xa.shape, 1), ir.Constant(_i64, 32))
            vk = ir.VectorType(_f32, R * C)
            vc = ir.VectorType(_f32, C)
            ahead = builder.mul(nb, ir.Constant(_i64, nbytes * PREFETCH_ROWS))

            def body(b, st):
                bases = [builder.gep(wp, [builder.mul(b, ir.Constant(_i64, nbytes))]) for wp in ws]
                if PREFETCH_ROWS:
                    for base in bases:
                        _prefetch_l2(builder, builder.gep(base, [ahead]))
                out = list(st)
                wts = [_weights(builder, kind, base, _d16(builder, base, kind), table) for base in bases]
                for c in range(C):
                    xv = _xblock(builder, xps[c], b)
                    for r in range(R):
                        out[r * C + c] = _fma(builder, wts[r], xv, st[r * C + c])
                if q41:
                    sc = _f16s(builder, kind, bases)
                    ms = builder.shuffle_vector(sc, ir.Constant(sc.type, ir.Undefined),
                                                ir.Constant(ir.VectorType(_i32, R * C),
                                                            [2 * r + 1 for r in range(R) for _ in range(C)]))
                    sp = builder.bitcast(builder.gep(stp, [builder.mul(b, ir.Constant(_i64, C))]), vc.as_pointer())
                    xs = builder.load(sp, align=4)
                    xsr = builder.shuffle_vector(xs, ir.Constant(vc, ir.Undefined),
                                                 ir.Constant(ir.VectorType(_i32, R * C), [c for _ in range(R) for c in range(C)]))
                    out[R * C] = _fma(builder, ms, xsr, st[R * C])
                return out
            inits = [_ZERO32] * (R * C) + ([ir.Constant(vk, [0.0] * (R * C))] if q41 else [])
            st = _loop_n(builder, nb, body, inits)
            sms = [builder.extract_element(st[R * C], ir.Constant(_i32, j)) if q41 else _FZERO
                   for j in range(R * C)]
            return _result(context, builder, signature, [_finish(builder, st[j], sms[j]) for j in range(R * C)])
        return sig, codegen

    @intrinsic
    def tile(typingctx, data, n, x, i, xst):
        return typer(data, n, x, i, xst)
    return stable_pickle(tile, "tile", kind, R, C, table)


def _make_tile2(kind, R, C1, C2, table):
    """tile2(data, n, x, i, xst, ws): `tile`'s R x (C1 + C2) product (the same R*C elements,
    r-major, element r*C + c, C = C1 + C2) in two loops over the R rows' blocks, for more x rows
    than one loop holds in registers: the first forms each block's R weights, runs the chains of
    x rows i .. i+C1-1 and stores the weights in ws (float32, at least K/32 * R * 32), the
    second loads them for x rows i+C1 .. i+C-1. Each chain is `tile`'s (the same weights,
    bit for bit, the same fma order a block, the same tree); Q4_1's R*C min sums run in the
    first loop as R vectors of C lanes, lane c of vector r = fma(m_r, xsum_c[b], sm): `tile`'s
    lane r*C + c. The weights are formed once for all C rows, and
    the blocks read from memory once."""
    nbytes = VEC_BYTES[kind]
    q41 = kind == "Q4_1"
    C = C1 + C2

    def typer(data, n, x, i, xst, ws):
        sig = _ret(R * C)(data, n, x, i, xst, ws)

        def codegen(context, builder, signature, vals):
            da = _ptr(context, builder, signature.args[0], vals[0])
            xa = _ptr(context, builder, signature.args[2], vals[2])
            nn, ii = vals[1], vals[3]
            stp = _ptr(context, builder, signature.args[4], vals[4]).data
            wsp = builder.bitcast(_ptr(context, builder, signature.args[5], vals[5]).data, _v32f.as_pointer())
            dstride = builder.extract_value(da.strides, 0)
            xstride = builder.sdiv(builder.extract_value(xa.strides, 0), ir.Constant(_i64, 4))
            d0 = builder.bitcast(da.data, _i8.as_pointer())
            ws = [builder.gep(d0, [builder.mul(builder.add(nn, ir.Constant(_i64, r)), dstride)]) for r in range(R)]
            xps = [builder.gep(xa.data, [builder.mul(builder.add(ii, ir.Constant(_i64, c)), xstride)])
                   for c in range(C)]
            nb = builder.sdiv(builder.extract_value(xa.shape, 1), ir.Constant(_i64, 32))
            vc = ir.VectorType(_f32, C)
            ahead = builder.mul(nb, ir.Constant(_i64, nbytes * PREFETCH_ROWS))

            def slot(b, r):
                return builder.gep(wsp, [builder.add(builder.mul(b, ir.Constant(_i64, R)), ir.Constant(_i64, r))])

            def body1(b, st):
                bases = [builder.gep(wp, [builder.mul(b, ir.Constant(_i64, nbytes))]) for wp in ws]
                if PREFETCH_ROWS:
                    for base in bases:
                        _prefetch_l2(builder, builder.gep(base, [ahead]))
                out = list(st)
                wts = [_weights(builder, kind, base, _d16(builder, base, kind), table) for base in bases]
                for r in range(R):
                    builder.store(wts[r], slot(b, r), align=4)
                for c in range(C1):
                    xv = _xblock(builder, xps[c], b)
                    for r in range(R):
                        out[r * C1 + c] = _fma(builder, wts[r], xv, st[r * C1 + c])
                if q41:
                    sc = _f16s(builder, kind, bases)
                    sp = builder.bitcast(builder.gep(stp, [builder.mul(b, ir.Constant(_i64, C))]), vc.as_pointer())
                    xs = builder.load(sp, align=4)
                    for r in range(R):
                        ms = builder.shuffle_vector(sc, ir.Constant(sc.type, ir.Undefined),
                                                    ir.Constant(ir.VectorType(_i32, C), [2 * r + 1] * C))
                        out[R * C1 + r] = _fma(builder, ms, xs, st[R * C1 + r])
                return out

            def body2(b, st):
                out = list(st)
                wts = [builder.load(slot(b, r), align=4) for r in range(R)]
                for c in range(C2):
                    xv = _xblock(builder, xps[C1 + c], b)
                    for r in range(R):
                        out[r * C2 + c] = _fma(builder, wts[r], xv, st[r * C2 + c])
                return out
            inits = [_ZERO32] * (R * C1) + ([ir.Constant(vc, [0.0] * C)] * R if q41 else [])
            st1 = _loop_n(builder, nb, body1, inits)
            st2 = _loop_n(builder, nb, body2, [_ZERO32] * (R * C2))
            accs = [st1[r * C1 + c] if c < C1 else st2[r * C2 + c - C1] for r in range(R) for c in range(C)]
            sms = [builder.extract_element(st1[R * C1 + j // C], ir.Constant(_i32, j % C)) if q41 else _FZERO
                   for j in range(R * C)]
            return _result(context, builder, signature, [_finish(builder, accs[j], sms[j]) for j in range(R * C)])
        return sig, codegen

    @intrinsic
    def tile2(typingctx, data, n, x, i, xst, ws):
        return typer(data, n, x, i, xst, ws)
    return stable_pickle(tile2, "tile2", kind, R, C1, C2, table)


@njit(cache=True, boundscheck=False, nogil=True)
def block_sums_span(x, i, b0, b1, out):
    """out[i, b] = x[i, 32b] + x[i, 32b + 1] + ... + x[i, 32b + 31], in that order (float32),
    for blocks b0 .. b1 - 1 of row i."""
    for b in range(b0, b1):
        s = np.float32(0.0)
        for j in range(32):
            s += x[i, 32 * b + j]
        out[i, b] = s


@njit(cache=True, boundscheck=False, nogil=True)
def block_sums(x, out):
    """block_sums_span over every block of every row."""
    M, K = x.shape
    for i in range(M):
        block_sums_span(x, i, 0, K // 32, out)


@njit(cache=True, boundscheck=False, nogil=True)
def side_by_side(xsum, i, k):
    """xsum rows i .. i + k - 1 as columns: [nb, k] (a tile's xst)."""
    nb = xsum.shape[1]
    t = np.empty((nb, k), np.float32)
    for b in range(nb):
        for j in range(k):
            t[b, j] = xsum[i + j, b]
    return t


# x rows a tile takes. Long runs (a prompt chunk's rows): 8 at a time (one row of blocks at a
# time) while their K floats fit in L1d beside the blocks streaming past (8 * K * 4 bytes <=
# X_L1_BYTES), else 4 against two rows of blocks (at K = 1536, down, 2x4 took 0.63x the time
# of 1x8, one thread, receipt 2026-12-02-cpu-tiles), until at most 9 are left. The last 1-9
# (a decode round of a few streams, a verify chunk of a stream: its token and up to 8 drafts)
# go in the fewest passes over the blocks (VERIFY_TILE_KINDS): each pass forms every block's
# weights again for its rows (at one x row that forming, not the multiply-adds, is most of
# the time), so a row a pass of its own costs nearly a one-row product, and a row joining a
# pass only its multiply-adds:
#   1: 4x1   2: 4x2   3: 2x3   4: 2x4   5: 2x5   6: 2x6   7-9: tile2 where it fits
#   SPLIT_L1_BYTES (below), else 7: 2x4 + 2x3   8: 2x4 + 2x4   9: 2x4 + 2x5
# (2 rows of blocks against up to 6 x rows: 12 chains of 32 lanes in AVX-512's 32 registers;
# 2x7 measured no faster than 2x4 + 2x3, 2x8 slower than 2x4 + 2x4.) One thread, the default
# model's 30 layers and head in the crew's pieces, thread time, min of 9 (receipt
# 2026-12-05-drafts35, tiles.txt): 3 rows 13.5 ms against 20.5 one row at a time, 5 rows 17.7
# against 21.1, 6 rows 20.9 against 27.2, 9 rows 31.2 against 34.3; 1 and 4 rows unchanged.
# Other kinds (VEC_BYTES past BLOCK_BYTES) keep 4x1 for every row left past the 4s.
# 7-9 x rows whose floats and two rows of formed weights fit in SPLIT_L1_BYTES ((C + 2) * K * 4:
# K <= 744 at 9 rows, the default model's qkv, o, gate_up and head) take one pass of `tile2`:
# 2 rows of blocks formed once, in a first loop against 3-4 x rows and kept in an L1 scratch
# for a second loop against the other 4-5 (12-20 chains a loop, no spills); the 8 left of a
# long run too (tile2 2x(4+4) in place of 1x8). Beyond it (down at K = 1536: the x rows and
# the scratch spill out of L1) the two passes above. 1x7 / 1x9 (one weight row against 7-9 x
# rows) were no faster than two passes, and 1x9 at K = 1536 (x from L2) 1.5x slower. One thread, the
# default model's matrices in the crew's pieces, thread time, min of 11 (receipt
# 2026-12-05-vr36, tiles*.txt): 7 rows 25.5 against 27.7 ms, 8 25.7 against 27.0, 9 31.0
# against 32.3 (down included with tile2 there: 9 rows' down 7.2 against 6.1).
X_L1_BYTES = 24 * 1024
SPLIT_L1_BYTES = 32 * 1024
VERIFY_TILE_KINDS = tuple(BLOCK_BYTES)   # the kinds whose rows have the 4x2 .. 2x6 tiles


def _make_rows(kind, table):
    """rows(x, xsum, data, out, lo, hi): out[:, lo:hi] = x times rows lo..hi-1 of the matrix,
    each element through the one chain of `tile` (the piece a chunk of `mm`, or a member of
    kernels/team_cpu's team, computes); the tile shapes change the speed only."""
    t11, t41 = _make_tile(kind, 1, 1, table), _make_tile(kind, 4, 1, table)
    t24 = _make_tile(kind, 2, 4, table)
    t18 = _make_tile(kind, 1, 8, table)
    # the few-row tiles: VERIFY_TILE_KINDS only (~0.6 s of cold compile a tile and kind;
    # elsewhere the names stand for tiles never called)
    few = kind in VERIFY_TILE_KINDS
    t42 = _make_tile(kind, 4, 2, table) if few else t41
    t23 = _make_tile(kind, 2, 3, table) if few else t24
    t25 = _make_tile(kind, 2, 5, table) if few else t24
    t26 = _make_tile(kind, 2, 6, table) if few else t24
    s7 = _make_tile2(kind, 2, 3, 4, table) if few else None
    s8 = _make_tile2(kind, 2, 4, 4, table) if few else None
    s9 = _make_tile2(kind, 2, 4, 5, table) if few else None

    @njit(cache=True, boundscheck=False, nogil=True)
    def rows(x, xsum, data, out, lo, hi):
        M, K = x.shape
        i = 0
        l1 = 8 * K * 4 <= X_L1_BYTES
        while M - i >= 10 or (M - i == 8 and l1 and not few) or (not few and M - i >= 4):
            if l1 and M - i >= 8:               # 8 x rows against one row of blocks
                xst = side_by_side(xsum, i, 8)
                for n in range(lo, hi):
                    r = t18(data, n, x, i, xst)
                    for c in range(8):
                        out[i + c, n] = r[c]
                i += 8
            else:
                xst = side_by_side(xsum, i, 4)
                n = lo
                while n + 2 <= hi:
                    r = t24(data, n, x, i, xst)
                    for a in range(2):
                        for c in range(4):
                            out[i + c, n + a] = r[4 * a + c]
                    n += 2
                if n < hi:                          # a row of blocks left (hi - lo odd): 1x1
                    for c in range(4):
                        out[i + c, n] = t11(data, n, x, i + c, xsum[i + c])
                i += 4
        while few and M - i >= 2:               # the last 2-9 x rows in one or two passes
            left = M - i
            if left == 2:                       # 2 x rows against four rows of blocks
                xst = side_by_side(xsum, i, 2)
                n = lo
                while n + 4 <= hi:
                    r = t42(data, n, x, i, xst)
                    for a in range(4):
                        for c in range(2):
                            out[i + c, n + a] = r[2 * a + c]
                    n += 4
                for c in range(2):
                    for m in range(n, hi):
                        out[i + c, m] = t11(data, m, x, i + c, xsum[i + c])
                i += 2
            elif left == 3:
                xst = side_by_side(xsum, i, 3)
                n = lo
                while n + 2 <= hi:
                    r = t23(data, n, x, i, xst)
                    for a in range(2):
                        for c in range(3):
                            out[i + c, n + a] = r[3 * a + c]
                    n += 2
                if n < hi:                          # a row of blocks left (hi - lo odd): 1x1
                    for c in range(3):
                        out[i + c, n] = t11(data, n, x, i + c, xsum[i + c])
                i += 3
            elif left == 5:
                xst = side_by_side(xsum, i, 5)
                n = lo
                while n + 2 <= hi:
                    r = t25(data, n, x, i, xst)
                    for a in range(2):
                        for c in range(5):
                            out[i + c, n + a] = r[5 * a + c]
                    n += 2
                if n < hi:                          # a row of blocks left (hi - lo odd): 1x1
                    for c in range(5):
                        out[i + c, n] = t11(data, n, x, i + c, xsum[i + c])
                i += 5
            elif left >= 7 and (left + 2) * K * 4 <= SPLIT_L1_BYTES:   # one pass, two loops
                xst = side_by_side(xsum, i, left)
                ws = np.empty(2 * K, np.float32)
                n = lo
                while n + 2 <= hi:
                    if left == 7:
                        r7 = s7(data, n, x, i, xst, ws)
                        for a in range(2):
                            for c in range(7):
                                out[i + c, n + a] = r7[7 * a + c]
                    elif left == 8:
                        r8 = s8(data, n, x, i, xst, ws)
                        for a in range(2):
                            for c in range(8):
                                out[i + c, n + a] = r8[8 * a + c]
                    else:
                        r9 = s9(data, n, x, i, xst, ws)
                        for a in range(2):
                            for c in range(9):
                                out[i + c, n + a] = r9[9 * a + c]
                    n += 2
                if n < hi:                          # a row of blocks left (hi - lo odd): 1x1
                    for c in range(left):
                        out[i + c, n] = t11(data, n, x, i + c, xsum[i + c])
                i += left
            elif left == 6:
                xst = side_by_side(xsum, i, 6)
                n = lo
                while n + 2 <= hi:
                    r = t26(data, n, x, i, xst)
                    for a in range(2):
                        for c in range(6):
                            out[i + c, n + a] = r[6 * a + c]
                    n += 2
                if n < hi:                          # a row of blocks left (hi - lo odd): 1x1
                    for c in range(6):
                        out[i + c, n] = t11(data, n, x, i + c, xsum[i + c])
                i += 6
            else:                               # 4, 7, 8 (out of L1), 9: 4 now
                xst = side_by_side(xsum, i, 4)
                n = lo
                while n + 2 <= hi:
                    r = t24(data, n, x, i, xst)
                    for a in range(2):
                        for c in range(4):
                            out[i + c, n + a] = r[4 * a + c]
                    n += 2
                if n < hi:                          # a row of blocks left (hi - lo odd): 1x1
                    for c in range(4):
                        out[i + c, n] = t11(data, n, x, i + c, xsum[i + c])
                i += 4
        while i < M:                            # one x row against four rows of blocks
            n = lo
            while n + 4 <= hi:
                r = t41(data, n, x, i, xsum[i])
                for a in range(4):
                    out[i, n + a] = r[a]
                n += 4
            while n < hi:
                out[i, n] = t11(data, n, x, i, xsum[i])
                n += 1
            i += 1
    return stable_pickle(rows, "rows", kind, table)


def _make_mm(kind, table):
    rows = _make_krows(kind, table) if kind in K_BYTES else _make_rows(kind, table)

    @njit(cache=True, parallel=True, boundscheck=False)
    def mm(x, xsum, data, out):
        N = data.shape[0]
        for c in prange((N + ROWS - 1) // ROWS):
            rows(x, xsum, data, out, c * ROWS, min(c * ROWS + ROWS, N))
    return stable_pickle(mm, "mm", kind, table)


def _avx512() -> bool:
    """Numba compiles for this host (no NUMBA_CPU_NAME) and the host has AVX-512F."""
    from numba.core import config
    if config.CPU_NAME:
        return False
    import llvmlite.binding as ll
    try:
        return bool(ll.get_host_cpu_features().get("avx512f"))
    except Exception:           # features unknown: the portable form
        return False


TABLE = _avx512()          # the nibble table (vpermps); else the portable unpack, the same bytes
MAKERS.update(tile=_make_tile, tile2=_make_tile2, rows=_make_rows, mm=_make_mm)
KERNELS = {k: _make_mm(k, TABLE) for k in BLOCK_BYTES}
ROW_KERNELS = {k: _made("rows", k, TABLE) for k in BLOCK_BYTES}     # one piece of a matmul


def kernels(table: bool) -> dict:
    """The kernels with the nibble table on or off (tests compare the two forms' bytes)."""
    if table == TABLE:
        return KERNELS
    return {k: _make_mm(k, table) for k in BLOCK_BYTES}


def matmul(x: np.ndarray, kind: str, data: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """x [M, K] float32 times the [N, K] matrix whose rows are `data` (uint8 [N, row bytes])
    of 32-blocks in `kind` -> [M, N] float32."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if out is None:
        out = np.empty((x.shape[0], data.shape[0]), np.float32)
    xsum = np.empty((x.shape[0], x.shape[1] // 32), np.float32)
    if kind == "Q4_1":
        block_sums(x, xsum)
    if CREW:
        return crew_grouped(x, xsum, kind, data[None], _ONE, np.array([0, x.shape[0]], np.int64), out)
    KERNELS[kind](x, xsum, data, out)
    return out


# ---------------------------------------------------------------- the K-quants (Q4_K, Q6_K)
# 256-element blocks, each 8 runs of 32 (run s = 8b + j of the row). One output element,
# out = sum_k w[k] x[k] (32 float32 lanes, lane l standing for position l of every run):
#   for s in 0 .. K/32 - 1, in order:   acc[l] = fma(w_s[l], x[32s + l], acc[l])
#   out = tree(acc)   (lanes (l, l+16), then (l, l+8), (l, l+4), (l, l+2), (0, 1))
# the weights w_s[l] formed from the block as stored, in float32:
#   Q4_K: d, dmin (f16); run j's 6-bit scale sc_j and min m_j (12 bytes, ggml's packing);
#         run 2c in the low nibbles of quant bytes 32c..32c+31, 2c+1 in the high.
#         ds_j = d * sc_j, dm_j = dmin * m_j (exact: 11 x 6 bits); w = (ds_j * q) - dm_j
#         (the product exact, one rounding in the subtraction).
#   Q6_K: 128 bytes of low nibbles, 64 of high 2-bit pairs, 16 int8 scales (one a 16
#         values), d (f16) last, laid out as kernels/blocks_cpu.deq_q6_k reads them.
#         ds_i = d * sc_i (exact: 11 x 8 bits); w = ds_i * (q - 32) (one rounding at most).
# These are the operations of kernels/blocks_cpu.py's unpack-then-dot kernels (deq_q4_k,
# deq_q6_k, then a 32-lane fma chain and the same tree), so the same bytes (tests/model/
# test_blocks_kvec.py compares them on every tile shape); here the weights are formed in
# vector registers once a run for a tile's C x rows, never stored. How many rows go side by
# side changes how many chains run at once, never a chain's operations: an element's bytes
# depend on its row of blocks and its x row only (batch invariance by construction).
_V8F = ir.VectorType(_f32, 8)
_v32i32 = ir.VectorType(_i32, 32)


def _byte(builder, base, off):
    return builder.zext(builder.load(builder.gep(base, [ir.Constant(_i64, off)]), align=1), _i32)


def _q4k_scales(builder, base):
    """A Q4_K block's (ds, dm): 8-lane float32 vectors d * sc_j and dmin * m_j."""
    d = _halfload(builder, base)
    dmin = _halfload(builder, builder.gep(base, [ir.Constant(_i64, 2)]))
    sc = [_byte(builder, base, 4 + j) for j in range(12)]
    c63, c15 = ir.Constant(_i32, 63), ir.Constant(_i32, 15)
    c4, c6 = ir.Constant(_i32, 4), ir.Constant(_i32, 6)
    s, m = [], []
    for j in range(8):
        if j < 4:
            s.append(builder.and_(sc[j], c63))
            m.append(builder.and_(sc[j + 4], c63))
        else:
            s.append(builder.or_(builder.and_(sc[j + 4], c15), builder.shl(builder.lshr(sc[j - 4], c6), c4)))
            m.append(builder.or_(builder.lshr(sc[j + 4], c4), builder.shl(builder.lshr(sc[j], c6), c4)))
    sv = builder.uitofp(_vec(builder, s, _i32), _V8F)
    mv = builder.uitofp(_vec(builder, m, _i32), _V8F)
    return builder.fmul(_splat(builder, d, 8), sv), builder.fmul(_splat(builder, dmin, 8), mv)


def _pick32(builder, v, a, b):
    """[v[a] x 16, v[b] x 16]: a run's 32 lanes of scales."""
    return builder.shuffle_vector(v, ir.Constant(v.type, ir.Undefined),
                                  ir.Constant(_v32i32, [a] * 16 + [b] * 16))


def _q4k_runs(builder, base, ds, dm):
    """A Q4_K block's 8 runs of 32 weights ds_j * q - dm_j (float32 vectors, run order)."""
    out = []
    for c in range(4):
        q = builder.load(builder.bitcast(builder.gep(base, [ir.Constant(_i64, 16 + 32 * c)]),
                                         _v32i8.as_pointer()), align=1)
        lo = builder.uitofp(builder.and_(q, ir.Constant(_v32i8, [15] * 32)), _v32f)
        hi = builder.uitofp(builder.lshr(q, ir.Constant(_v32i8, [4] * 32)), _v32f)
        for j, v in ((2 * c, lo), (2 * c + 1, hi)):
            out.append(builder.fsub(builder.fmul(_pick32(builder, ds, j, j), v), _pick32(builder, dm, j, j)))
    return out


def _q6k_runs(builder, base):
    """A Q6_K block's 8 runs of 32 weights ds * (q - 32) (float32 vectors, run order)."""
    d = _halfload(builder, builder.gep(base, [ir.Constant(_i64, 208)]))
    scp = builder.bitcast(builder.gep(base, [ir.Constant(_i64, 192)]), _v16i8.as_pointer())
    ds = builder.fmul(_splat(builder, d, 16), builder.sitofp(builder.load(scp, align=1), _v16f))

    def load32(off):
        return builder.load(builder.bitcast(builder.gep(base, [ir.Constant(_i64, off)]), _v32i8.as_pointer()), align=1)

    def k(v):
        return ir.Constant(_v32i8, [v] * 32)
    out = []
    for h in range(2):
        a, b, hh = load32(64 * h), load32(64 * h + 32), load32(128 + 32 * h)
        qs = [builder.or_(builder.and_(a, k(15)), builder.shl(builder.and_(hh, k(3)), k(4))),
              builder.or_(builder.and_(b, k(15)), builder.shl(builder.and_(builder.lshr(hh, k(2)), k(3)), k(4))),
              builder.or_(builder.lshr(a, k(4)), builder.shl(builder.and_(builder.lshr(hh, k(4)), k(3)), k(4))),
              builder.or_(builder.lshr(b, k(4)), builder.shl(builder.lshr(hh, k(6)), k(4)))]
        for g in range(4):
            j = 4 * h + g
            qf = builder.sitofp(builder.sub(qs[g], k(32)), _v32f)
            out.append(builder.fmul(_pick32(builder, ds, 2 * j, 2 * j + 1), qf))
    return out


def _finish32(builder, acc):
    v = acc
    for n in (16, 8, 4, 2):
        v = builder.fadd(_lanes(builder, v, 0, n), _lanes(builder, v, n, n))
    return builder.fadd(builder.extract_element(v, ir.Constant(_i32, 0)),
                        builder.extract_element(v, ir.Constant(_i32, 1)))


def _make_ktile(kind, R, C, table=False):
    """ktile(data, n, x, i, xsum): R rows of K-quant blocks (data[n .. n+R-1]) times C x rows
    (x[i .. i+C-1]) -> R*C elements, r-major, each in the order above (xsum: unread, the
    signature of `tile`). A row's block is unpacked and scaled once for the C x rows; each x
    load serves the R rows."""
    nbytes = K_BYTES[kind]
    q4 = kind == "Q4_K"

    def typer(data, n, x, i, xsum):
        sig = _ret(R * C)(data, n, x, i, xsum)

        def codegen(context, builder, signature, vals):
            da = _ptr(context, builder, signature.args[0], vals[0])
            xa = _ptr(context, builder, signature.args[2], vals[2])
            nn, ii = vals[1], vals[3]
            dstride = builder.extract_value(da.strides, 0)
            xstride = builder.sdiv(builder.extract_value(xa.strides, 0), ir.Constant(_i64, 4))
            d0 = builder.bitcast(da.data, _i8.as_pointer())
            ws = [builder.gep(d0, [builder.mul(builder.add(nn, ir.Constant(_i64, r)), dstride)]) for r in range(R)]
            xps = [builder.gep(xa.data, [builder.mul(builder.add(ii, ir.Constant(_i64, c)), xstride)])
                   for c in range(C)]
            nb = builder.sdiv(builder.extract_value(xa.shape, 1), ir.Constant(_i64, 256))
            ahead = builder.mul(nb, ir.Constant(_i64, nbytes * PREFETCH_ROWS))

            def body(b, st):
                bases = [builder.gep(wp, [builder.mul(b, ir.Constant(_i64, nbytes))]) for wp in ws]
                if PREFETCH_ROWS:
                    for base in bases:
                        for off in range(0, nbytes, 64):
                            _prefetch_l2(builder, builder.gep(base, [builder.add(ahead, ir.Constant(_i64, off))]))
                out = list(st)
                b8 = builder.mul(b, ir.Constant(_i64, 8))
                for r, base in enumerate(bases):
                    if q4:
                        runs = _q4k_runs(builder, base, *_q4k_scales(builder, base))
                    else:
                        runs = _q6k_runs(builder, base)
                    for c in range(C):
                        a = out[r * C + c]
                        for j in range(8):
                            a = _fma(builder, runs[j], _xblock(builder, xps[c], builder.add(b8, ir.Constant(_i64, j))), a)
                        out[r * C + c] = a
                return out
            st = _loop_n(builder, nb, body, [_ZERO32] * (R * C))
            return _result(context, builder, signature, [_finish32(builder, v) for v in st])
        return sig, codegen

    @intrinsic
    def ktile(typingctx, data, n, x, i, xsum):
        return typer(data, n, x, i, xsum)
    return stable_pickle(ktile, "ktile", kind, R, C, table)


def _make_krows(kind, table=False):
    """rows(x, xsum, data, out, lo, hi) for a K-quant (the signature of `rows`; xsum unread):
    out[:, lo:hi] through `ktile`'s one chain an element. Tiles: 1 x row
    against 2 rows of blocks, or 4 (then 3) x rows against 1: each block unpacked once a 4 x
    rows (32-lane chains are 4 ymm each on AVX2: 4 chains fill the 16 registers; 1x4 and 1x3
    ran 30 and 28 GMAC/s a core under load, 2x2 20, 1x2 21)."""
    t21, t11 = _make_ktile(kind, 2, 1, table), _make_ktile(kind, 1, 1, table)
    t13, t14 = _make_ktile(kind, 1, 3, table), _make_ktile(kind, 1, 4, table)

    @njit(cache=True, boundscheck=False, nogil=True)
    def rows(x, xsum, data, out, lo, hi):
        M = x.shape[0]
        i = 0
        while i + 4 <= M:
            for n in range(lo, hi):
                r = t14(data, n, x, i, xsum)
                for c in range(4):
                    out[i + c, n] = r[c]
            i += 4
        if i + 3 <= M:
            for n in range(lo, hi):
                r = t13(data, n, x, i, xsum)
                for c in range(3):
                    out[i + c, n] = r[c]
            i += 3
        while i < M:
            n = lo
            while n + 2 <= hi:
                r = t21(data, n, x, i, xsum)
                out[i, n] = r[0]
                out[i, n + 1] = r[1]
                n += 2
            if n < hi:
                out[i, n] = t11(data, n, x, i, xsum)
            i += 1
    return stable_pickle(rows, "rows", kind, table)


def _make_rows_any(kind, table):
    return _make_krows(kind, table) if kind in K_BYTES else _make_rows(kind, table)


MAKERS.update(ktile=_make_ktile, rows=_make_rows_any)
for _k in (*K_BYTES, *(k for k in VEC_BYTES if k not in BLOCK_BYTES)):
    KERNELS[_k] = _make_mm(_k, TABLE)
    ROW_KERNELS[_k] = _made("rows", _k, TABLE)


# ---------------------------------------------------------------- a product as a crew round
# A matmul (or a MoE layer's experts: groups of x rows, each against its expert's rows) as one
# round of kernels/team_cpu.Crew instead of a parallel region: pieces of CREW_CHUNKS chunks of
# ROWS output rows, in a region a member (its own from the front, then the others' from their
# backs), each piece `rows` on its group's x rows: the same function on the same rows as `mm`
# and kernels/moe_cpu's region, so the same bytes; what changes is who waits for whom. A
# parallel region (numba's prange on libgomp) splits the rows evenly between the threads and
# waits for both: on 2 cores shared with other work, a thread the kernel has descheduled holds
# the region up for its time slice (~17 ms a region measured under load, receipt
# 2026-12-05-moe-speed); in a crew round the caller takes the pieces a late helper has not,
# and returns when the pieces are done, not when the helper is.
CREW = True            # matmul / grouped products as crew rounds (False: the prange regions)
CREW_CHUNKS = 4        # ROWS-row chunks a piece (64 rows: 73 KB of Q4_K at K = 2048)
CREW_SERIAL_MACS = 1 << 21   # at most this many multiply-adds: the caller alone (no helpers)


def _make_crew(kind, table):
    rows = _made("rows", kind, table)
    span = CREW_CHUNKS * ROWS

    @njit(cache=True, boundscheck=False, nogil=True)
    def member(m, n, ctr, x, xsum, stack, experts, offs, out):
        """Member m of a crew of n: out[offs[g]:offs[g+1]] = x[offs[g]:offs[g+1]] times
        stack[experts[g]]^T for every group g, the pieces (g, span of output rows) taken as
        above; returns when every piece is done."""
        N = stack.shape[1]
        per_g = (N + span - 1) // span
        P = experts.shape[0] * per_g
        per = (P + n - 1) // n
        for k in range(n):
            r = (m + k) % n
            p = region_piece(ctr, 0, r, per, k > 0)
            while p >= 0:
                if p < P:
                    g = p // per_g
                    lo = (p - g * per_g) * span
                    a = offs[g]
                    b = offs[g + 1]
                    rows(x[a:b], xsum[a:b], stack[experts[g]], out[a:b], lo, min(lo + span, N))
                    finish(ctr, 0)
                p = region_piece(ctr, 0, r, per, k > 0)
        wait(ctr, 0, P)
    return stable_pickle(member, "crew", kind, table)


MAKERS["crew"] = _make_crew
_CREWS: dict = {}


def crew_grouped(x, xsum, kind, stack, experts, offs, out):
    """out[offs[g]:offs[g+1]] = x[offs[g]:offs[g+1]] times stack[experts[g]]^T (stack uint8
    [E, N, row bytes] of `kind`; xsum x's block sums where the kind reads them) as one crew
    round of numba's thread count (the caller alone at most CREW_SERIAL_MACS)."""
    import numba

    from kernels.team_cpu import WIDTH, Crew
    member = _made("crew", kind, TABLE)
    ctr = np.zeros((2, WIDTH), np.int64)                 # stage 0, the abort row
    args = (ctr, x, xsum, stack, experts, offs, out)
    n = min(numba.get_num_threads(), 16)
    if n == 1 or x.shape[0] * stack.shape[1] * x.shape[1] <= CREW_SERIAL_MACS:
        member(0, 1, *args)
        return out
    crew = _CREWS.get(kind)
    if crew is None:
        crew = _CREWS[kind] = Crew(member)
    crew.run(n, args)
    return out


_ONE = np.zeros(1, np.int64)
