"""A round's whole forward on the CPU over GGUF blocks in one numba call a thread, composed
from the family's stage list.

The op-by-op path (server/engine/model.py's Model.run through kernels/ops.py) calls ~300 numba
functions a decode step from Python (4 matmuls, 2 norms, SwiGLU and the attention a layer,
each with its wrapper's allocations and a dispatch); at one token a step those calls cost about
as much as the small matmuls themselves, and each matmul was a parallel region of its own.
Here the same functions run in the same order from one compiled function, `member`, called
once a round by each member of a crew (kernels/team_cpu.Crew: the calling thread and daemon
helpers; nogil, so they run at once).

**Stages compose the round.** A family lists each layer's CPU stages (`cpu_stages(spec, L)`
in server/families/, names from STAGE_NAMES below), in the order its forward runs them. Each
name with a fused form is a FORMS entry: its code, the counter stages it takes, the weight
role its matrix reads (or the vector it adds), and the round buffers it reads and writes. `compose` turns the model's
lists into a program (int64 [layers, stages, 3]: a form's code, its argument, its flags),
checking that every stage reads only what an earlier stage wrote; `member` runs the program
in order, each code calling its form (a numba function: the norm, a role's matrix, the
attention, SwiGLU, a bias), then the final norm and the LM head. A form's arguments are three
records (namedtuples): the round's buffers (`Bufs`), the model's weights (`Weights`) and the
round's rows (`Rows`). A stage's pieces (a matrix's row ranges, attention's (row, kv head)
jobs, SwiGLU's spans, the norms whole) are taken one at a time from counters (a matrix's
pieces a region a member, each member its own first), and every member waits for the whole
stage before the next (kernels/team_cpu.py):

  h = the embedded rows (given)
  norm            x = rmsnorm(h) (the round's first) or h = out + h, x = rmsnorm(h)
  qkv             qkv = x Wqkv^T                                  kernels/blocks_vec
  qkv_bias        qkv += bqkv (Qwen2)
  attend          K, V rows written; att = attention(q, keys)     kernels/attention_cpu
  o               out = att Wo^T
  gate_up_swiglu  gu = x Wgu^T; act = swiglu(gu)                  kernels/rmsnorm_cpu
  down            out = act Wdown^T
  (the head)      logits = rmsnorm(out[sel] + h[sel]) Whead^T

The plain llama layer lists norm, qkv, attend, o, norm, gate_up_swiglu, down (LAYER); Qwen2's
adds qkv_bias after qkv. Every value is computed by the very functions the op-by-op path
calls (the block kernels' per-element order, the norms' lanes, the attention's per-(row, head)
order, the bias's one float32 add an element), so the bytes are
the op-by-op path's (tests/model/test_forward_cpu.py holds them equal, byte for byte, on the
real model and at several batch shapes); batch invariance and paged == window carry over.

Used where every stage of every layer has a fused form, the lists compose (`compose`), and
the matrices fit (`Fused.fits`: TP=1, every matrix of a role one of the 32-element kinds,
Q8_0, Q4_0, Q4_1, one kind a role); anything else keeps the op-by-op path, said once at
startup with the reason (the stages without a fused form, by name: server/engine/model.Model).
A new fused form is a FORMS entry, its numba function and its branch in `member`.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
from collections import namedtuple
from typing import NamedTuple

import numba
import numpy as np
from numba import njit

from kernels import attention_cpu, blocks_vec
from kernels.attention_cpu import row_groups, span_job, write_row
from kernels.blocks_vec import block_sums, block_sums_span
from kernels.rmsnorm_cpu import add_rms_norm, rms_norm, swiglu_span
from kernels.team_cpu import REGION, WIDTH, Crew, finish, next_piece, region_piece, take, wait

_FORWARDS: dict = {}
PIECE_ACTS = 256       # SwiGLU activations a piece (a multiple of 32: its block sums with it)
PIECES = 4             # a matrix's pieces a member at least (a region a member)
PIECE_BYTES = 64 << 10   # a matrix piece's weight bytes at most (the head's: 229 a member of 2)
HEAD_STAGES = 2        # counter stages of the final norm and the head

# The names families list their CPU stages by (server/families: cpu_stages), each what the op
# path runs for it. FORMS: the ones with a fused form.
STAGE_NAMES = {
    "norm": "h' = out + h (h alone first), x = rmsnorm(h')",
    "qkv": "x Wqkv", "qkv_bias": "+ bqkv", "qk_norm": "rmsnorm of each q and k head",
    "rope_part": "RoPE on part of each head", "attend": "RoPE, KV write, paged attention",
    "o": "att Wo", "o_bias": "+ bo", "gate_up_swiglu": "silu(x Wg) * (x Wu)",
    "down": "act Wdown", "moe": "routed experts", "shared_expert": "+ the shared expert",
    "shared_gate": "sigmoid-gated shared expert", "moe_biased": "gpt-oss's biased experts",
    "sinks_attend": "attention with sinks and windows", "q": "x Wq", "q_a": "x Wq_a",
    "q_a_norm": "rmsnorm(q_a)", "q_b": "q_a Wq_b", "kv_a": "x Wkv_a",
    "mla_attend": "latent attention", "qkvz": "x Wqkvz", "ba": "x Wba",
    "gdn": "Gated DeltaNet scan", "out": "o Wout", "qkvg": "x Wqkvg",
    "gate": "att * sigmoid(gate)",
    "kda_in": "x W[q|k|v|b|f_a|g_a], f and gate up-projections", "kda": "Kimi Delta Attention scan",
    "mhc": "mHC's Sinkhorn mix of the residual streams", "dsa_attend": "sparse latent attention",
}


class Form(NamedTuple):
    """A stage's fused form: `code` its branch in `member`, `counters` the counter stages it
    takes, `role` the layer's matrix it multiplies by (a LayerWeights field; None: no matrix),
    `reads` / `writes` the round buffers (Bufs fields) it reads and writes, `vector` the
    layer's float vector it adds (a LayerWeights field, a Weights one too)."""
    code: int
    counters: int
    role: str | None
    reads: tuple
    writes: tuple
    vector: str | None = None


# codes (member's branches; 0 ends a layer's list)
_NORM, _QKV, _ATTEND, _O, _GATE_UP_SWIGLU, _DOWN, _QKV_BIAS = 1, 2, 3, 4, 5, 6, 7
FORMS = {
    "norm": Form(_NORM, 1, None, ("h",), ("h", "x")),       # + out, after the round's first
    "qkv": Form(_QKV, 1, "wqkv", ("x",), ("qkv",)),
    "qkv_bias": Form(_QKV_BIAS, 1, None, ("qkv",), ("qkv",), "bqkv"),   # Qwen2's q/k/v biases
    "attend": Form(_ATTEND, 3, None, ("qkv",), ("att",)),   # K, V rows; the jobs; att's sums
    "o": Form(_O, 1, "wo", ("att",), ("out",)),
    "gate_up_swiglu": Form(_GATE_UP_SWIGLU, 2, "wgu", ("x",), ("act",)),   # the matrix; SwiGLU
    "down": Form(_DOWN, 1, "wdown", ("act",), ("out",)),
}
ROLES = ("wqkv", "wo", "wgu", "wdown")   # member's matrix roles, in its kinds' order (+ the head)
NORM_ROLES = ("attn_norm", "mlp_norm")   # a layer's first norm stage reads attn_norm, its second mlp_norm
SUMS, ALONE, HALVE = 1, 2, 4   # a program step's flags: write block sums for the next matrix
                       # (a Q4_1 reads them); the round's first norm (h alone, no out to add);
                       # attend: a crew of two halves its last job's rows (`_attend`)
HALVE_JOBS = True      # compose sets HALVE on every attend step (False: main's jobs, to compare)
LAYER = ("norm", "qkv", "attend", "o", "norm", "gate_up_swiglu", "down")   # the plain llama layer

# The records a form reads (fields are numba-typed: a record's type is its fields' types)
Bufs = namedtuple("Bufs", "h h2 x out qkv att gu act xs_d xs_a xs_f os_ hs xs hs2 xs_s logits")
Weights = namedtuple("Weights", "norms final_norm eps wqkv wo wgu wdown wh nq nkv hd ff bqkv")
Rows = namedtuple("Rows", "K V owner cos sin spans starts tables page_rows scale sel")


def compose(stages, kinds) -> tuple:
    """The program for a round of layers whose stage lists are `stages` (one tuple of names a
    layer), with `kinds` {role: block kind} of the matrices the stages multiply by: (prog
    int64 [layers, longest list, 3] of (code, argument, flags), counter rows the round takes
    with the head and the abort row). A norm's argument is its NORM_ROLES index in the layer.
    ValueError names a stage without a fused form, a list with more norms than NORM_ROLES, a
    stage reading a buffer no earlier stage wrote, and a round whose last stage leaves no out."""
    L, P = len(stages), max((len(st) for st in stages), default=0)
    prog = np.zeros((L, P, 3), np.int64)
    steps = [(li, k, name) for li, st in enumerate(stages) for k, name in enumerate(st)]
    wrote, counters = {"h"}, 0
    for i, (li, k, name) in enumerate(steps):
        f = FORMS.get(name)
        if f is None:
            raise ValueError(f"layer {li}: stage {name!r} has no fused form (FORMS: {sorted(FORMS)})")
        missing = [b for b in f.reads if b not in wrote]
        if missing:
            raise ValueError(f"layer {li}: stage {name!r} reads {missing}, written by no stage before it")
        arg, flags = 0, 0
        if f.code == _ATTEND and HALVE_JOBS:
            flags |= HALVE
        if f.code == _NORM:
            arg = stages[li][:k].count("norm")
            if arg >= len(NORM_ROLES):
                raise ValueError(f"layer {li}: more than {len(NORM_ROLES)} norm stages ({NORM_ROLES})")
            if "out" not in wrote:
                flags |= ALONE
        for b in f.writes:          # block sums where a matrix reading b before b's next
            for _, _, n in steps[i + 1:]:          # write is of a kind that reads them
                g = FORMS.get(n)
                if g is None:
                    continue
                if b in g.reads and g.role is not None and kinds.get(g.role) == "Q4_1":
                    flags |= SUMS
                if b in g.writes:
                    break
        prog[li, k] = (f.code, arg, flags)
        wrote.update(f.writes)
        counters += f.counters
    if steps and "out" not in FORMS[steps[-1][2]].writes:
        raise ValueError(f"the round's last stage {steps[-1][2]!r} leaves no out for the head")
    return prog, counters + HEAD_STAGES + 1


@njit(cache=True, nogil=True)
def _edge(N, n, k):
    """Where piece k of n of N matrix rows starts (multiples of blocks_vec.ROWS)."""
    chunks = (N + blocks_vec.ROWS - 1) // blocks_vec.ROWS
    return min(N, (k * chunks // n) * blocks_vec.ROWS)


def _make_matrix(kind):
    """matrix(ctr, s, m, n, x, xs, w, out): out = x w^T as stage s, member m of a team of n:
    the rows in n regions of `per` pieces (at least PIECES, more where a piece would pass
    PIECE_BYTES of weights), member m taking region m's from the front, then the others' from
    their backs (team_cpu.region_piece), then the whole stage waited for. Every element is
    the row kernel's (kernels/blocks_vec.py), whoever computes it."""
    rows = blocks_vec.ROW_KERNELS[kind]

    @njit(cache=True, boundscheck=False, nogil=True)
    def matrix(ctr, s, m, n, x, xs, w, out):
        N = w.shape[0]
        per = max(PIECES, min((N + blocks_vec.ROWS - 1) // blocks_vec.ROWS // n,
                              N * w.shape[1] // (n * PIECE_BYTES)))
        pieces = per * n
        for k in range(n):                  # its own region from the front, then the others'
            r = (m + k) % n                 # from their backs
            p = region_piece(ctr, s, r, per, k > 0)
            while p >= 0:
                rows(x, xs, w, out, _edge(N, pieces, p), _edge(N, pieces, p + 1))
                finish(ctr, s)
                p = region_piece(ctr, s, r, per, k > 0)
        wait(ctr, s, pieces)
    return blocks_vec.stable_pickle(matrix, "matrix", kind)


blocks_vec.MAKERS["matrix"] = _make_matrix


@njit(cache=True, boundscheck=False, nogil=True)
def _norm(ctr, s, flags, b, h, h2, nw, eps):
    """norm: x = rmsnorm(h) (ALONE) or h2 = out + h, x = rmsnorm(h2); x's block sums (SUMS).
    One piece, taken by whoever asks first."""
    if take(ctr, s):
        if flags & ALONE:
            rms_norm(h, nw, eps, b.x)
        else:
            add_rms_norm(b.out, h, nw, eps, b.x, h2)
        if flags & SUMS:
            block_sums(b.x, b.xs_d)
        finish(ctr, s)
    wait(ctr, s, 1)


@njit(cache=True, boundscheck=False, nogil=True)
def _attend(ctr, s, n, flags, b, w, r, li):
    """attend (counter stages s, s+1, s+2): the round's K, V rows written (a round of chunks
    longer than a row), then each (row group, kv head) job's RoPE'd q against its keys into att
    (a group's rows share each key read, each row's arithmetic its own; a decode round's job
    writes its own row's K, V first: no other job reads them), then att's block sums where the
    next matrix reads them (SUMS; per job where heads are whole 32-blocks). n: the crew's
    members (HALVE cuts a job in two for a crew of two, below)."""
    T = b.h.shape[0]
    nq, nkv, hd = w.nq, w.nkv, w.hd
    att2 = b.att.reshape(T, nq * hd)
    jobs = T * nkv
    one_row = r.spans.shape[0] == T
    sums = flags & SUMS
    head_sums = hd % 32 == 0
    kl = r.K[li]
    vl = r.V[li]
    if not one_row:                                      # K, V rows written
        j = next_piece(ctr, s)
        while j < jobs:
            write_row(j // nkv, j % nkv, r.owner, b.qkv, nq, nkv, hd, r.cos, r.sin, kl, vl,
                      r.spans, r.starts, r.tables, r.page_rows)
            finish(ctr, s)
            j = next_piece(ctr, s)
        wait(ctr, s, jobs)
    s += 1
    groups = row_groups(r.spans)          # the attention's jobs: row groups x kv heads
    gjobs = groups.shape[0] * nkv
    G = groups.shape[0]
    # a crew of two (n) with an odd count of jobs whose last has rows to share (HALVE): that
    # job as two, its rows' halves, so both members end together (a verify chunk of 2-8 rows
    # at 3 kv heads: 4 jobs, each member a head's rows and half of the third's, where one
    # member took two heads and the other one). Each row's arithmetic is its own (span_job),
    # so the bytes are the same whichever way the rows are cut.
    split = (n == 2 and flags & HALVE != 0 and gjobs % 2 == 1
             and groups[G - 1, 1] - groups[G - 1, 0] >= 2)
    njobs = gjobs + 1 if split else gjobs
    j = next_piece(ctr, s)                               # each (row group, kv head) attends
    while j < njobs:
        h = j % nkv
        t0 = groups[j // nkv, 0]
        t1 = groups[j // nkv, 1]
        if split and j >= gjobs - 1:                     # the last group's last head, halved
            h = nkv - 1
            t0 = groups[G - 1, 0]
            t1 = groups[G - 1, 1]
            mid = t0 + (t1 - t0 + 1) // 2
            if j == gjobs - 1:
                t1 = mid
            else:
                t0 = mid
        if one_row:          # a chunk's one row: its K, V first, then its keys
            write_row(t0, h, r.owner, b.qkv, nq, nkv, hd, r.cos, r.sin, kl, vl,
                      r.spans, r.starts, r.tables, r.page_rows)
        span_job(t0, t1, h, r.owner, b.qkv, nq, nkv, hd, r.cos, r.sin, kl, vl, r.spans,
                 r.starts, r.tables, r.page_rows, r.scale, b.att)
        if sums and head_sums:               # the job's heads' block sums of att
            q0 = h * (nq // nkv) * hd
            for t in range(t0, t1):
                block_sums_span(att2, t, q0 // 32, (q0 + (nq // nkv) * hd) // 32, b.xs_a)
        finish(ctr, s)
        j = next_piece(ctr, s)
    wait(ctr, s, njobs)
    s += 1
    if sums and not head_sums:
        if take(ctr, s):
            block_sums(att2, b.xs_a)
            finish(ctr, s)
        wait(ctr, s, 1)


@njit(cache=True, boundscheck=False, nogil=True)
def _add_bias(ctr, s, y, bias):
    """y[t] += bias, a row a piece: each element the one float32 add of the op path's
    `y += bias` (kernels/qmatmul.cpu)."""
    T, N = y.shape
    t = next_piece(ctr, s)
    while t < T:
        for k in range(N):
            y[t, k] += bias[k]
        finish(ctr, s)
        t = next_piece(ctr, s)
    wait(ctr, s, T)


@njit(cache=True, boundscheck=False, nogil=True)
def _swiglu(ctr, s, flags, b, ff):
    """SwiGLU (gate_up_swiglu's second counter stage): act = silu(gu[:, :ff]) * gu[:, ff:] in
    spans of PIECE_ACTS a piece, each span's block sums with it (SUMS)."""
    T = b.h.shape[0]
    acts = (ff + PIECE_ACTS - 1) // PIECE_ACTS
    c = next_piece(ctr, s)
    while c < T * acts:
        i = c // acts
        k0 = (c % acts) * PIECE_ACTS
        k1 = min(ff, k0 + PIECE_ACTS)
        swiglu_span(b.gu[i, :ff], b.gu[i, ff:], b.act[i], k0, k1)
        if flags & SUMS:
            block_sums_span(b.act, i, k0 // 32, k1 // 32, b.xs_f)
        finish(ctr, s)
        c = next_piece(ctr, s)
    wait(ctr, s, T * acts)


@njit(cache=True, boundscheck=False, nogil=True)
def _head_norm(ctr, s, sums, b, h, w, sel):
    """The wanted rows' final norm: xs = rmsnorm(out[sel] + h[sel]), its block sums (sums)."""
    S, D = sel.shape[0], h.shape[1]
    if take(ctr, s):
        for i in range(S):
            for k in range(D):
                b.os_[i, k] = b.out[sel[i], k]
                b.hs[i, k] = h[sel[i], k]
        add_rms_norm(b.os_, b.hs, w.final_norm, w.eps, b.xs, b.hs2)
        if sums:
            block_sums(b.xs, b.xs_s)
        finish(ctr, s)
    wait(ctr, s, 1)


def _make(kinds):
    """The round for (wqkv, wo, wgu, wdown, head) kinds: each role's matrix kernel a constant;
    the stages run as the program says."""
    mq, mo, mg, md, mh = (blocks_vec._made("matrix", k) for k in kinds)
    sh = kinds[-1] == "Q4_1"                  # the head's x block sums

    @njit(cache=True, boundscheck=False, nogil=True)
    def member(m, n, ctr, prog, b, w, r):
        """Member m of a crew of n: every step of the program in order, each piece it takes,
        then the head."""
        T = b.h.shape[0]
        att2 = b.att.reshape(T, w.nq * w.hd)
        h, h2 = b.h, b.h2                       # h2: where the next add writes (then swapped)
        s = np.int64(0)     # not the literal 0: numba would compile every stage's form for it too
        for li in range(prog.shape[0]):
            for k in range(prog.shape[1]):
                c = prog[li, k, 0]
                flags = prog[li, k, 2]
                if c == 0:
                    break
                elif c == _NORM:
                    _norm(ctr, s, flags, b, h, h2, w.norms[li, prog[li, k, 1]], w.eps)
                    if not flags & ALONE:
                        h, h2 = h2, h
                    s += 1
                elif c == _QKV:
                    mq(ctr, s, m, n, b.x, b.xs_d, w.wqkv[li], b.qkv)
                    s += 1
                elif c == _QKV_BIAS:
                    _add_bias(ctr, s, b.qkv, w.bqkv[li])
                    s += 1
                elif c == _ATTEND:
                    _attend(ctr, s, n, flags, b, w, r, li)
                    s += 3
                elif c == _O:
                    mo(ctr, s, m, n, att2, b.xs_a, w.wo[li], b.out)
                    s += 1
                elif c == _GATE_UP_SWIGLU:
                    mg(ctr, s, m, n, b.x, b.xs_d, w.wgu[li], b.gu)
                    _swiglu(ctr, s + 1, flags, b, w.ff)
                    s += 2
                elif c == _DOWN:
                    md(ctr, s, m, n, b.act, b.xs_f, w.wdown[li], b.out)
                    s += 1
        if r.sel.shape[0] == 0:
            return
        _head_norm(ctr, s, sh, b, h, w, r.sel)
        mh(ctr, s + 1, m, n, b.xs, b.xs_s, w.wh, b.logits)  # logits = x Whead^T

    return blocks_vec.stable_pickle(member, "member", *kinds)


blocks_vec.MAKERS["member"] = lambda *kinds: _make(kinds)


class Fused:
    """The model's weights as the composed round reads them (made once, at Model init), for
    `stages`: each layer's stage list (the family's cpu_stages), every name in FORMS."""

    def __init__(self, w, spec, stages):
        L = w.layers
        stages = [tuple(st) for st in stages]
        used = {FORMS[n].role for st in stages for n in st} - {None}
        kind = {role: next(getattr(layer, role).kind for layer, st in zip(L, stages)
                           if any(FORMS[n].role == role for n in st))
                for role in used}
        self.prog, self.counters = compose(stages, kind)
        # a role no stage multiplies by: any 32-element kind (its kernel is never called)
        self.kinds = (*(kind.get(role, "Q8_0") for role in ROLES), w.lm_head.kind)
        self.team = _FORWARDS.get(self.kinds)
        if self.team is None:
            self.team = _FORWARDS[self.kinds] = Crew(_make(self.kinds))

        def mats(role):
            """The role's matrix a layer (an empty one where the layer's stages do not read it)."""
            if role not in used:
                return tuple(np.zeros((0, 0), np.uint8) for _ in L)
            return tuple(np.ascontiguousarray(getattr(layer, role).data)
                         if any(FORMS[n].role == role for n in st) else np.zeros((0, 0), np.uint8)
                         for layer, st in zip(L, stages))

        norms = np.zeros((len(L), len(NORM_ROLES), len(w.norm)), np.float32)
        for li, layer in enumerate(L):
            for j, role in enumerate(NORM_ROLES):
                v = getattr(layer, role, None)
                if v is not None:
                    norms[li, j] = v
        width = (w.nq + 2 * w.nkv) * spec.head_dim
        bqkv = np.zeros((len(L), width if any("qkv_bias" in st for st in stages) else 0), np.float32)
        for li, (layer, st) in enumerate(zip(L, stages)):
            if "qkv_bias" in st:
                bqkv[li] = layer.bqkv
        self.w = Weights(norms, np.ascontiguousarray(w.norm, np.float32), float(spec.rms_eps),
                         *(mats(r) for r in ROLES), np.ascontiguousarray(w.lm_head.data),
                         w.nq, w.nkv, spec.head_dim, w.ff, bqkv)
        self.vocab = w.lm_head.rows

    @staticmethod
    def fits(w, all_reduce, stages) -> bool:
        """TP=1, the head and every matrix a stage multiplies by (FORMS' roles) in one
        32-element kind a role over the layers whose stages read it, every vector a stage
        adds (FORMS' vectors) float32."""
        from kernels.blocks import Blocks
        if all_reduce is not None or not w.layers or not isinstance(w.lm_head, Blocks):
            return False
        if w.lm_head.kind not in blocks_vec.BLOCK_BYTES:
            return False
        kinds: dict = {}
        for layer, st in zip(w.layers, stages):
            for vec in {FORMS[n].vector for n in st if n in FORMS} - {None}:
                v = getattr(layer, vec, None)         # added as the op path adds it: float32
                if not isinstance(v, np.ndarray) or v.dtype != np.float32:
                    return False
            for role in {FORMS[n].role for n in st if n in FORMS} - {None}:
                m = getattr(layer, role, None)
                if not isinstance(m, Blocks) or m.kind not in blocks_vec.BLOCK_BYTES:
                    return False
                kinds.setdefault(role, set()).add(m.kind)
        return all(len(k) == 1 for k in kinds.values())

    def run(self, h, r, kv, scale):
        """The round's forward: logits [len(r.sel), vocab] (None when r.sel is None)."""
        cos, sin, spans, starts, tables, page_rows = r.cpu
        sel = np.zeros(0, np.int64) if r.sel is None else np.asarray(r.sel, np.int64)
        h = np.ascontiguousarray(h, np.float32)
        T, D = h.shape
        w = self.w
        S, nq, nkv, hd, ff = sel.shape[0], w.nq, w.nkv, w.hd, w.ff
        f32 = np.float32
        b = Bufs(h, np.empty((T, D), f32), np.empty((T, D), f32), np.empty((T, D), f32),   # h h2 x out
                 np.empty((T, (nq + 2 * nkv) * hd), f32), np.empty((T, nq, hd), f32),    # qkv att
                 np.empty((T, 2 * ff), f32), np.empty((T, ff), f32),                     # gu act
                 np.empty((T, D // 32), f32), np.empty((T, nq * hd // 32), f32),         # block sums
                 np.empty((T, ff // 32), f32),
                 np.empty((S, D), f32), np.empty((S, D), f32), np.empty((S, D), f32),    # the head's
                 np.empty((S, D), f32), np.empty((S, D // 32), f32),
                 np.empty((S, self.vocab), f32))
        rows = Rows(kv.K, kv.V, attention_cpu.owners(spans, T), cos, sin, spans, starts, tables,
                    page_rows, f32(scale), sel)
        ctr = np.zeros((self.counters, WIDTH), np.int64)        # + the abort row
        self.team.run(min(numba.get_num_threads(), WIDTH - REGION), (ctr, self.prog, b, w, rows))
        return None if r.sel is None else b.logits
