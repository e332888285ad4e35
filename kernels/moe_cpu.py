"""The experts' products of a MoE layer on the CPU in one parallel region each: every
chosen expert's gate|up over its group of token rows, then every down, as pieces (group,
chunk of 16 output rows) handed out by numba's prange, both cores on one request.

Each piece is kernels/blocks_vec.py's `rows` on the group's rows against the expert's rows
of blocks: the same function on the same x rows and weight rows as kernels/ops.moe's loop of
one product an expert, so the same bytes (tests/model/test_moe_engine.py compares them);
only the number of parallel regions entered changes (2 a layer instead of 2 a chosen
expert). For the kinds of kernels/blocks_vec.py (Q8_0, Q4_0, Q4_1, Q5_0 and the K-quants Q4_K, Q6_K:
a Q4_K_M file's experts) of a stack of experts (kernels/blocks.ExpertStack);
the kinds left to kernels/blocks_cpu.py (MXFP4, F16, BF16, F32) the same way through its
`grouped`, each piece its `chunk` (the function its one-expert product runs), so again the
loop's bytes.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import numpy as np
from numba import njit, prange

from kernels import blocks_vec, halves
from kernels.blocks_vec import ROWS
from kernels.qmatmul import Q80_KINDS


def _make_grouped(kind, table):
    rows = blocks_vec._made("rows", kind, table)

    @njit(cache=True, parallel=True, boundscheck=False)
    def grouped(x, xsum, stack, experts, offs, out):
        """out[offs[g]:offs[g+1]] = x[offs[g]:offs[g+1]] times stack[experts[g]]^T, each g."""
        N = stack.shape[1]
        chunks = (N + ROWS - 1) // ROWS
        G = experts.shape[0]
        for p in prange(G * chunks):
            g = p // chunks
            c = p - g * chunks
            a = offs[g]
            b = offs[g + 1]
            rows(x[a:b], xsum[a:b], stack[experts[g]], out[a:b], c * ROWS, min(c * ROWS + ROWS, N))
    return blocks_vec.stable_pickle(grouped, "moe_grouped", kind, table)


blocks_vec.MAKERS["moe_grouped"] = _make_grouped


def _vec(kind) -> bool:
    return kind in blocks_vec.VEC_KINDS


def fits(stack) -> bool:
    if stack is None:
        return False
    if _vec(stack.kind):
        return True
    from kernels import blocks_cpu
    return stack.kind in blocks_cpu.GROUPED


def gate_up(x: np.ndarray, gate, up, experts: np.ndarray, offs: np.ndarray, q8: bool = False,
            q80: bool = False) -> np.ndarray:
    """A MoE layer's gate and up stacks (kernels.blocks.ExpertGateUp's) on the grouped rows x
    [R, K] -> [R, 2 N]: gate's products, then up's, side by side (each row's bytes those of
    grouped_matmul on each stack). q80 with two stacks of Q80_KINDS (Q8_0, Q5_0): x quantized
    to q8_0 once for both."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    N = gate.data.shape[1]
    gu = np.empty((x.shape[0], 2 * N), np.float32)
    if q80 and gate.kind in Q80_KINDS and up.kind in Q80_KINDS:
        from kernels import kquant_cpu
        q, dx = kquant_cpu.quantize_q80(x)
        gu[:, :N] = kquant_cpu.q80_grouped_q(q, dx, gate.data, experts, offs, kind=gate.kind)
        gu[:, N:] = kquant_cpu.q80_grouped_q(q, dx, up.data, experts, offs, kind=up.kind)
        return gu
    gu[:, :N] = grouped_matmul(x, gate, experts, offs, q8, q80)
    gu[:, N:] = grouped_matmul(x, up, experts, offs, q8, q80)
    return gu


def gate_up_halves(x: np.ndarray, rows: np.ndarray, gate, up, experts: np.ndarray,
                   offs: np.ndarray, q8: bool = False, q80: bool = False):
    """(gate's products, up's products) [R, N] each of the grouped rows x[rows] (x [T, K]):
    gate_up's bytes. q80 with two stacks of Q80_KINDS (Q8_0, Q5_0): x's T rows quantized once,
    the quantized rows gathered (a row's quantization is its own: the same bytes as quantizing
    x[rows]); where up's stack lies right after gate's, of one kind (the file's layout:
    `_pair`), both in one crew round, up's experts numbered E + e."""
    if q80 and gate.kind in Q80_KINDS and up.kind in Q80_KINDS:
        from kernels import kquant_cpu
        q, dx = kquant_cpu.quantize_q80(x)
        q, dx = q[rows], dx[rows]
        R = q.shape[0]
        both = _pair(gate.data, up.data, gate.kind) if gate.kind == up.kind else None
        if both is not None and R:
            E = gate.data.shape[0]
            y = kquant_cpu.q80_grouped_q(np.concatenate([q, q]), np.concatenate([dx, dx]), both,
                                         np.concatenate([experts, experts + E]),
                                         np.concatenate([offs, offs[1:] + R]), kind=gate.kind)
            return y[:R], y[R:]
        return (kquant_cpu.q80_grouped_q(q, dx, gate.data, experts, offs, kind=gate.kind),
                kquant_cpu.q80_grouped_q(q, dx, up.data, experts, offs, kind=up.kind))
    if q8 and gate.kind in ("Q4_K", "Q6_K") and up.kind in ("Q4_K", "Q6_K"):
        # x's T rows quantized once (q8_K, kernels/kquant_cpu.py) for both stacks, the rows
        # gathered after: a row's quantization is its own, so the bytes of quantizing x[rows]
        from kernels import kquant_cpu
        q, dx, gs = kquant_cpu.quantize(x)
        q, dx, gs = q[rows], dx[rows], gs[rows]
        return (kquant_cpu.grouped_quantized(q, dx, gs, gate.kind, gate.data, experts, offs),
                kquant_cpu.grouped_quantized(q, dx, gs, up.kind, up.data, experts, offs))
    xg = np.ascontiguousarray(x[rows], dtype=np.float32)
    return (grouped_matmul(xg, gate, experts, offs, q8, q80),
            grouped_matmul(xg, up, experts, offs, q8, q80))


_PAIRS: dict = {}        # (id(gate), id(up)) -> (gate, up, the [2E, N, row bytes] view or None)


def _pair(a: np.ndarray, b: np.ndarray, kind: str = "Q8_0"):
    """Where the file put up's stack right after gate's (the same shape, dtype and flags, both
    C-contiguous, an even number of `kind` blocks a row (Q8_0, Q5_0): no pad copy), one [2E, N, row bytes]
    view over both (expert e's gate at e, its up at E + e: the same bytes of the same rows,
    so each product's bytes are unchanged; the same array type, so no new specialisation);
    else None. Decided once a pair (branch dec's 10be7b5)."""
    key = (id(a), id(b))
    got = _PAIRS.get(key)
    if got is not None and got[0] is a and got[1] is b:
        return got[2]
    v = None
    if (a.shape == b.shape and a.dtype == b.dtype and a.ndim == 3 and a.flags.c_contiguous
            and b.flags.c_contiguous and a.flags.writeable == b.flags.writeable
            and a.flags.aligned and b.flags.aligned
            and (a.shape[-1] // {"Q8_0": 34, "Q5_0": 22}[kind]) % 2 == 0
            and b.__array_interface__["data"][0] == a.__array_interface__["data"][0] + a.nbytes):
        v = np.lib.stride_tricks.as_strided(a, (2 * a.shape[0],) + a.shape[1:], a.strides,
                                            writeable=a.flags.writeable)
        if not v.flags.c_contiguous:
            v = None
    if len(_PAIRS) >= 1024:
        _PAIRS.clear()
    _PAIRS[key] = (a, b, v)
    return v


def grouped_matmul(x: np.ndarray, stack, experts: np.ndarray, offs: np.ndarray,
                   q8: bool = False, q80: bool = False) -> np.ndarray:
    """x [R, K] (rows grouped by expert, group g = rows offs[g]:offs[g+1]) -> [R, N]. q8: a
    K-quant stack against x quantized to int8 (kernels/kquant_cpu.py: each row's bytes those of
    kernels.qmatmul.cpu(x_row, expert, q8=True)); q80: a Q8_0 or Q5_0 stack against x
    quantized to q8_0 (kernels/kquant_cpu.Q8_0_DEF: each row's bytes those of
    qmatmul.cpu(x_row, expert, q80=True))."""
    if q80 and stack.kind in Q80_KINDS:
        from kernels import kquant_cpu
        return kquant_cpu.q80_grouped(x, stack.data, experts, offs, kind=stack.kind)
    if q8 and stack.kind in ("Q4_K", "Q6_K"):
        from kernels import kquant_cpu
        return kquant_cpu.grouped_matmul(x, stack.kind, stack.data, experts, offs)
    if not _vec(stack.kind):
        from kernels import blocks_cpu
        return blocks_cpu.grouped_matmul(x, stack.kind, stack.data, np.ascontiguousarray(experts, np.int64),
                                         np.ascontiguousarray(offs, np.int64))
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty((x.shape[0], stack.data.shape[1]), np.float32)
    xsum = np.empty((x.shape[0], x.shape[1] // 32), np.float32)
    if stack.kind == "Q4_1":
        blocks_vec.block_sums(x, xsum)
    experts = np.ascontiguousarray(experts, np.int64)
    offs = np.ascontiguousarray(offs, np.int64)
    if blocks_vec.CREW:                     # one crew round (kernels/blocks_vec.crew_grouped)
        return blocks_vec.crew_grouped(x, xsum, stack.kind, stack.data, experts, offs, out)
    kernel = blocks_vec._made("moe_grouped", stack.kind, blocks_vec.TABLE)
    kernel(x, xsum, stack.data, experts, offs, out)
    return out


# ---------------------------------------------------------------- the router's F32 product
# A router stored as F32 rows (the GGUF's ffn_gate_inp: 2 MB a layer at 256 x 2048) was
# kernels/blocks_cpu.py's serial F32 product: each 16-row chunk copied into scratch, then the
# dots, on the calling thread (~9 GB/s; the host streams ~34). Here the rows are read in place
# and cut into pieces shared by a crew round (kernels/team_cpu.Crew): the same element chain
# as blocks_cpu's `chunk` (32 float32 lanes, lane l summing w[k + l] * x[k + l] over k = 0,
# 32, ... in order, fma where contracted, then the lanes in the fixed tree), so the same
# bytes (tests/model/test_moe_glue.py); an element's order depends on K alone, never on the
# batch, the piece or the thread.
from kernels.blocks_cpu import _jit as _jit_noalias  # noqa: E402
from kernels.team_cpu import finish as _finish, region_piece as _region_piece, wait as _wait  # noqa: E402
from kernels.vec_ir import dots32 as _dots32  # noqa: E402

ROUTER_PIECE = 16        # rows of W a piece (128 KB of F32 at K = 2048)


@_jit_noalias(nogil=True)
def _f32_rows(x, w, out, lo, hi):
    """out[i, n] = x[i] . w[n] for n in [lo, hi), every x row, blocks_cpu.chunk's order."""
    M, K = x.shape
    acc = np.empty(32, np.float32)
    for n in range(lo, hi):
        wn = w[n]
        for i in range(M):
            xi = x[i]
            for l in range(32):
                acc[l] = 0.0
            for k in range(0, K, 32):
                wk = wn[k:k + 32]
                xk = xi[k:k + 32]
                for l in range(32):
                    acc[l] += wk[l] * xk[l]
            for l in range(16):
                acc[l] += acc[l + 16]
            for l in range(8):
                acc[l] += acc[l + 8]
            for l in range(4):
                acc[l] += acc[l + 4]
            out[i, n] = (acc[0] + acc[2]) + (acc[1] + acc[3])


@_jit_noalias(nogil=True)
def _f32_member(m, n, ctr, x, w, out):
    """Member m of a crew of n: out = x w^T, pieces of ROUTER_PIECE rows of w, a region a
    member (kernels/team_cpu.region_piece)."""
    N = w.shape[0]
    P = (N + ROUTER_PIECE - 1) // ROUTER_PIECE
    per = (P + n - 1) // n
    for k in range(n):
        r = (m + k) % n
        p = _region_piece(ctr, 0, r, per, k > 0)
        while p >= 0:
            if p < P:
                lo = p * ROUTER_PIECE
                _f32_rows(x, w, out, lo, min(lo + ROUTER_PIECE, N))
                _finish(ctr, 0)
            p = _region_piece(ctr, 0, r, per, k > 0)
    _wait(ctr, 0, P)


ROUTER_ROWS = 16         # x rows at most for the W-row pieces above (beyond: the x-row tiles)
ROUTER_SERIAL_BYTES = 0  # W bytes at most on the caller alone (0: always a crew round)
_ROUTER_CREW = []
_ROUTER_XCREW = []

# A prompt's round (more than ROUTER_ROWS x rows, K a multiple of 32): pieces of ROUTER_XPIECE
# x rows, each against every W row by kernels/vec_ir.dots32 (register tiles of x rows by W
# rows, every chunk of 32 loaded once for the tile): each element the same chain and tree as
# blocks_cpu's `chunk` (tests/model/test_moe_glue.py holds it to blocks_cpu.matmul's bytes).
# blocks_cpu's product kept each lane in memory: 512 x 2048 x 128 took 23-25 ms at 1.5-1.8
# cores (receipt 2026-12-05-pp37).
ROUTER_XPIECE = 16


@_jit_noalias(nogil=True)
def _f32_xmember(m, n, ctr, x, w, out):
    """Member m of a crew of n: out = x w^T, pieces of ROUTER_XPIECE x rows against every W row
    (vec_ir.dots32), a region a member."""
    M = x.shape[0]
    P = (M + ROUTER_XPIECE - 1) // ROUTER_XPIECE
    per = (P + n - 1) // n
    for k in range(n):
        r = (m + k) % n
        p = _region_piece(ctr, 0, r, per, k > 0)
        while p >= 0:
            if p < P:
                lo = p * ROUTER_XPIECE
                hi = min(lo + ROUTER_XPIECE, M)
                _dots32(x[lo:hi], w, out[lo:hi])
                _finish(ctr, 0)
            p = _region_piece(ctr, 0, r, per, k > 0)
    _wait(ctr, 0, P)


def router_fits(w, x) -> bool:
    """A router this form multiplies: F32 rows as stored, a decode-sized round (W-row pieces)
    or any round whose K is a multiple of 32 (x-row pieces)."""
    return (getattr(w, "kind", None) == "F32" and w.data.dtype == np.uint8
            and w.data.flags.c_contiguous
            and (x.shape[0] <= ROUTER_ROWS or x.shape[1] % 32 == 0))


def router_logits(x: np.ndarray, w) -> np.ndarray:
    """x [T, K] float32 times the F32 router rows (kernels.blocks.Blocks "F32") -> [T, N]:
    kernels/blocks_cpu.matmul's bytes, as one crew round of numba's thread count."""
    import numba

    from kernels import blocks_cpu
    from kernels.team_cpu import WIDTH, Crew
    x = np.ascontiguousarray(x, dtype=np.float32)
    wf = w.data.view(np.float32)
    out = np.empty((x.shape[0], wf.shape[0]), np.float32)
    ctr = np.zeros((2, WIDTH), np.int64)
    args = (ctr, x, wf, out)
    n = min(numba.get_num_threads(), 16)
    if x.shape[0] > ROUTER_ROWS:                  # a prompt's round: pieces of x rows
        if n == 1:
            _f32_xmember(0, 1, *args)
            return out
        if not _ROUTER_XCREW:
            _ROUTER_XCREW.append(Crew(_f32_xmember))
        _ROUTER_XCREW[0].run(n, args)
        return out
    with blocks_cpu._noalias():
        if n == 1 or w.data.nbytes <= ROUTER_SERIAL_BYTES:
            _f32_member(0, 1, *args)
            return out
        if not _ROUTER_CREW:
            _f32_member(0, 1, *args)              # compiled here, under noalias, first
            _ROUTER_CREW.append(Crew(_f32_member))
            return out
        _ROUTER_CREW[0].run(n, args)
    return out


# ---------------------------------------------------------------- route, group, combine
# kernels/moe.py's route, groups and combine as numba calls, for the grouped products above:
# at decode each was a dozen numpy calls (~0.2 ms a layer together on this host). The same
# operations in the same order: route in float64, each row alone (the chosen k by a stable
# selection, ties to the lower id; the chosen weights summed pairwise as numpy's sum is), so
# the same ids and, but for exp's last float64 bit (numpy's vector exp, libm's here), the same
# float32 weights; the groups those of kernels/moe.groups concatenated; combine the same
# float32 multiplies and adds in the same order (tests/model/test_moe_glue.py).
ROUTERS = {"softmax": 0, "sigmoid": 1, "topk_softmax": 2}


@njit(cache=True, nogil=True, boundscheck=False)
def _pairwise_leaf(a, lo, n):
    """numpy's pairwise sum of a[lo:lo + n], n <= 128 (its add.reduce's order, float64)."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - n % 8:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


# numpy's split of a longer run (n2 = n / 2 rounded down to a multiple of 8), one level a
# function: numba's cache keeps no self-recursive function safely (a cached recursive call
# crashed on its reload here)
@njit(cache=True, nogil=True, boundscheck=False)
def _pairwise_2(a, lo, n):                       # n up to 256
    if n <= 128:
        return _pairwise_leaf(a, lo, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_leaf(a, lo, n2) + _pairwise_leaf(a, lo + n2, n - n2)


@njit(cache=True, nogil=True, boundscheck=False)
def _pairwise_3(a, lo, n):                       # 512
    if n <= 128:
        return _pairwise_leaf(a, lo, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_2(a, lo, n2) + _pairwise_2(a, lo + n2, n - n2)


@njit(cache=True, nogil=True, boundscheck=False)
def _pairwise(a, lo, n):                         # MAX_EXPERTS
    if n <= 128:
        return _pairwise_leaf(a, lo, n)
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_3(a, lo, n2) + _pairwise_3(a, lo + n2, n - n2)


MAX_EXPERTS = 1024


@njit(cache=True, nogil=True, boundscheck=False)
def _top(s, k, out):
    """out[:k] = the k largest of s, ties to the lower index (a stable sort's first k),
    then out[:k] ascending."""
    E = s.shape[0]
    taken = np.zeros(E, np.bool_)
    for j in range(k):
        b = -1
        for e in range(E):
            if not taken[e] and (b < 0 or s[e] > s[b]):
                b = e
        taken[b] = True
    j = 0
    for e in range(E):
        if taken[e]:
            out[j] = e
            j += 1


@njit(cache=True, nogil=True, boundscheck=False)
def _route_group(logits, kind, k, norm, scale, n_group, topk_group, bias):
    """kernels/moe.route then kernels/moe.groups concatenated, for logits [T, E] float32;
    bias float64 [E] (sigmoid's selection bias) or [0]. -> (ok, ids [T, k], weights [T, k]
    float32, rows [T k], slots [T k], experts [G], offs [G + 1], pos [T, k]: the grouped row
    of token t's slot j). ok False where a logit or score is not finite (the definition then
    decides, its NaN order)."""
    T, E = logits.shape
    ids = np.empty((T, k), np.int64)
    wts = np.empty((T, k), np.float32)
    z = np.empty(E, np.float64)
    p = np.empty(E, np.float64)
    s = np.empty(E, np.float64)
    w = np.empty(k, np.float64)
    gsz = E // n_group if n_group > 1 else E
    gscore = np.empty(max(n_group, 1), np.float64)
    gkeep = np.empty(max(topk_group, 1), np.int64)
    row = np.empty(k, np.int64)
    ok = True
    for t in range(T):
        for e in range(E):
            z[e] = np.float64(logits[t, e])
            if not np.isfinite(z[e]):
                ok = False
        if not ok:
            break
        if kind == 2:                               # topk_softmax: the chosen logits' softmax
            _top(z, k, row)
            m = z[row[0]]
            for j in range(1, k):
                if z[row[j]] > m:
                    m = z[row[j]]
            for j in range(k):
                w[j] = np.exp(z[row[j]] - m)
            tot = _pairwise(w, 0, k)
            for j in range(k):
                ids[t, j] = row[j]
                wts[t, j] = np.float32(w[j] / tot)
            continue
        if kind == 0:
            m = z[0]
            for e in range(1, E):
                if z[e] > m:
                    m = z[e]
            for e in range(E):
                p[e] = np.exp(z[e] - m)
            tot = _pairwise(p, 0, E)
            for e in range(E):
                p[e] = p[e] / tot
                s[e] = p[e]
        else:
            for e in range(E):
                p[e] = 1.0 / (1.0 + np.exp(-z[e]))
                s[e] = p[e] + bias[e] if bias.shape[0] else p[e]
                if not np.isfinite(s[e]):
                    ok = False
            if not ok:
                break
        if n_group > 1:
            for g in range(n_group):
                b1 = -np.inf
                b2 = -np.inf
                for e in range(g * gsz, g * gsz + gsz):
                    if s[e] > b1:
                        b2 = b1
                        b1 = s[e]
                    elif s[e] > b2:
                        b2 = s[e]
                gscore[g] = b1 + b2 if gsz > 1 else b1
            _top(gscore, topk_group, gkeep)
            for g in range(n_group):
                kept = False
                for j in range(topk_group):
                    if gkeep[j] == g:
                        kept = True
                if not kept:
                    for e in range(g * gsz, g * gsz + gsz):
                        s[e] = 0.0
        _top(s, k, row)
        for j in range(k):
            w[j] = p[row[j]]
        if norm:
            tot = _pairwise(w, 0, k)
            if kind == 1:
                tot = tot + 1e-20
            for j in range(k):
                w[j] = w[j] / tot
        for j in range(k):
            if scale != 1.0:
                w[j] = w[j] * scale
            ids[t, j] = row[j]
            wts[t, j] = np.float32(w[j])
    R = T * k
    rows = np.empty(R, np.int64)
    slots = np.empty(R, np.int64)
    pos = np.empty((T, k), np.int64)
    if not ok:
        return False, ids, wts, rows, slots, rows[:0], rows[:1], pos
    count = np.zeros(E + 1, np.int64)
    for t in range(T):
        for j in range(k):
            count[ids[t, j] + 1] += 1
    G = 0
    for e in range(E):
        if count[e + 1]:
            G += 1
    experts = np.empty(G, np.int64)
    offs = np.empty(G + 1, np.int64)
    g = 0
    offs[0] = 0
    for e in range(E):
        if count[e + 1]:
            experts[g] = e
            offs[g + 1] = offs[g] + count[e + 1]
            g += 1
        count[e + 1] += count[e]                    # count[e]: expert e's first grouped row
    for t in range(T):
        for j in range(k):
            r = count[ids[t, j]]
            count[ids[t, j]] += 1
            rows[r] = t
            slots[r] = j
            pos[t, j] = r
    return True, ids, wts, rows, slots, experts, offs, pos


_NO_BIAS = np.zeros(0, np.float64)


def route_group(logits: np.ndarray, routing, bias=None):
    """(ids, weights, rows, slots, experts, offs, pos) of a round's router logits [T, E]: the
    numba form of kernels/moe.route and kernels/moe.groups (their grouped rows concatenated,
    offs the groups' bounds, pos[t, j] the grouped row of token t's j-th expert); None where
    a logit is not finite or past MAX_EXPERTS experts (the caller takes the definition)."""
    if logits.shape[1] > MAX_EXPERTS:
        return None
    b = _NO_BIAS if bias is None or routing.kind != "sigmoid" else np.ascontiguousarray(bias, np.float64)
    got = _route_group(np.ascontiguousarray(logits, np.float32), ROUTERS[routing.kind], routing.k,
                       bool(routing.norm), float(routing.scale), int(routing.n_group),
                       int(routing.topk_group), b)
    return got[1:] if got[0] else None


@njit(cache=True, nogil=True, boundscheck=False)
def _combine(yd, pos, wts, out):
    """out[t] = ((w_0 y_0) + w_1 y_1) + ... in slot order (kernels/moe.combine), y_j the
    grouped row pos[t, j] of yd; float32 multiplies and adds, no fma."""
    T, k = pos.shape
    D = yd.shape[1]
    for t in range(T):
        y0 = yd[pos[t, 0]]
        w0 = wts[t, 0]
        for d in range(D):
            out[t, d] = w0 * y0[d]
        for j in range(1, k):
            yj = yd[pos[t, j]]
            wj = wts[t, j]
            for d in range(D):
                out[t, d] += wj * yj[d]


def combine_grouped(yd: np.ndarray, pos: np.ndarray, wts: np.ndarray) -> np.ndarray:
    """kernels/moe.combine of the grouped expert outputs yd [R, d] (row pos[t, j] = token t's
    slot j) -> [T, d] float32: its bytes."""
    out = np.empty((pos.shape[0], yd.shape[1]), np.float32)
    if halves.wanted(pos.shape[0]):     # a token's sum is its own: two halves, two threads
        halves.pair(lambda a, b: _combine(yd, pos[a:b], wts[a:b], out[a:b]), pos.shape[0] // 2, pos.shape[0])
    else:
        _combine(yd, pos, wts, out)
    return out
