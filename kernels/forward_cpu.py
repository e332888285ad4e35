"""A round's whole forward on the CPU over GGUF blocks in one numba call a thread.

The op-by-op path (server/engine/model.py's Model.run through kernels/ops.py) calls ~300 numba
functions a decode step from Python (4 matmuls, 2 norms, SwiGLU and the attention a layer,
each with its wrapper's allocations and a dispatch); at one token a step those calls cost about
as much as the small matmuls themselves, and each matmul was a parallel region of its own.
Here the same functions run in the same order from one compiled function, `member`, called
once a round by each thread of a team (Team: the calling thread and daemon threads; nogil,
so they run at once): each stage below is cut into pieces (a matrix's row ranges, attention's
(row, kv head) jobs, SwiGLU's spans, the norms whole) that the members take one at a time
from counters (a matrix's pieces a region a member, each member its own first), and every
member waits for the whole stage before the next (kernels/team_cpu.py):

  h = the embedded rows (given)
  for each layer:
      x = rmsnorm(h) (layer 0) or h = out + h, x = rmsnorm(h)     kernels/rmsnorm_cpu
      qkv = x Wqkv^T                                             kernels/blocks_vec
      K, V rows written; att = attention(q, keys)                 kernels/attention_cpu
      out = att Wo^T
      h = out + h, x = rmsnorm(h); gu = x Wgu^T; act = swiglu(gu)
      out = act Wdown^T
  logits = rmsnorm(out[sel] + h[sel]) Whead^T

Every value is computed by the very functions the op-by-op path calls (the block kernels'
per-element order, the norms' lanes, the attention's per-(row, head) order), so the bytes are
the op-by-op path's (tests/model/test_forward_cpu.py holds them equal, byte for byte, on the
real model and at several batch shapes); batch invariance and paged == window carry over.

Used where every layer's stages, as its family lists them (`cpu_stages(spec, L)` in
server/families/: names from STAGES below), are LAYER, the stages this round has fused forms
of, in its order: the plain llama layer (no qkv bias, no q/k norms, RoPE on whole heads); and
TP=1, every matrix of a role one of the 32-element kinds (Q8_0, Q4_0, Q4_1): the default
model (Fused.fits). Anything else keeps the op-by-op path, said once at startup with the
stages that have no fused form (server/engine/model.Model). `member` runs LAYER's stages as
one compiled sequence; a stage list is matched against it, not compiled from it.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import queue
import threading

import numba
import numpy as np
from numba import njit

from kernels import attention_cpu, blocks_vec
from kernels.attention_cpu import _group_job, row_groups, write_row
from kernels.blocks_vec import block_sums, block_sums_span
from kernels.rmsnorm_cpu import add_rms_norm, rms_norm, swiglu_span
from kernels.team_cpu import REGION, WIDTH, finish, next_piece, region_piece, take, wait

_FORWARDS: dict = {}
PIECE_ACTS = 256       # SwiGLU activations a piece (a multiple of 32: its block sums with it)
PIECES = 4             # a matrix's pieces a member at least (a region a member)
PIECE_BYTES = 64 << 10   # a matrix piece's weight bytes at most (the head's: 229 a member of 2)
STAGES = 10            # counter stages a layer (and 2 for the head)

# The names families list their CPU stages by (server/families: cpu_stages), each what the op
# path runs for it. LAYER: the ones this round has fused forms of, in `member`'s order.
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
LAYER = ("norm", "qkv", "attend", "o", "norm", "gate_up_swiglu", "down")


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


def _make(kinds):
    """The forward for (qkv, o, gate/up, down, head) kinds: each role's kernel a constant."""
    mq, mo, mg, md, mh = (blocks_vec._made("matrix", k) for k in kinds)
    sq, so, sg, sd, sh = (k == "Q4_1" for k in kinds)     # Q4_1 reads its x block sums

    @njit(cache=True, boundscheck=False, nogil=True)
    def member(m, n, ctr, h, h2, x, out, qkv, att, gu, act, xs_d, xs_a, xs_f, owner,
               attn_norm, mlp_norm, final_norm, eps, wq, wo, wg, wd, wh, K, V, nq, nkv, hd, ff,
               cos, sin, spans, starts, tables, page_rows, scale, sel, os_, hs, xs, hs2, xs_s,
               logits):
        """Member m of a team of n: every stage of the round in order, each piece it takes."""
        T, D = h.shape
        att2 = att.reshape(T, nq * hd)
        jobs = T * nkv
        groups = row_groups(spans)          # the attention's jobs: row groups x kv heads
        gjobs = groups.shape[0] * nkv
        acts = (ff + PIECE_ACTS - 1) // PIECE_ACTS
        # a round whose every chunk is one row (decode): a job writes its row's K, V itself
        # (no other job of the round reads them); heads of whole 32-blocks: a job sums its own
        one_row = spans.shape[0] == T
        head_sums = hd % 32 == 0
        s = 0
        for li in range(len(wq)):
            if take(ctr, s):                                  # x = norm(h) (+ the residual)
                if li == 0:
                    rms_norm(h, attn_norm[li], eps, x)
                else:
                    add_rms_norm(out, h, attn_norm[li], eps, x, h2)
                if sq:
                    block_sums(x, xs_d)
                finish(ctr, s)
            wait(ctr, s, 1)
            s += 1
            if li > 0:
                h, h2 = h2, h
            mq(ctr, s, m, n, x, xs_d, wq[li], qkv)  # qkv = x Wqkv^T
            s += 1
            kl = K[li]
            vl = V[li]
            if not one_row:                                      # K, V rows written
                j = next_piece(ctr, s)
                while j < jobs:
                    write_row(j // nkv, j % nkv, owner, qkv, nq, nkv, hd, cos, sin, kl, vl,
                              spans, starts, tables, page_rows)
                    finish(ctr, s)
                    j = next_piece(ctr, s)
                wait(ctr, s, jobs)
            s += 1
            j = next_piece(ctr, s)               # each (row group, kv head) attends
            while j < gjobs:
                t0 = groups[j // nkv, 0]
                if one_row:          # a chunk's one row: its K, V first, then its keys
                    write_row(t0, j % nkv, owner, qkv, nq, nkv, hd, cos, sin, kl, vl,
                              spans, starts, tables, page_rows)
                _group_job(j, groups, owner, qkv, nq, nkv, hd, cos, sin, kl, vl, spans, starts,
                           tables, page_rows, scale, att)
                if so and head_sums:             # the job's heads' block sums of att
                    q0 = (j % nkv) * (nq // nkv) * hd
                    for t in range(t0, groups[j // nkv, 1]):
                        block_sums_span(att2, t, q0 // 32, (q0 + (nq // nkv) * hd) // 32, xs_a)
                finish(ctr, s)
                j = next_piece(ctr, s)
            wait(ctr, s, gjobs)
            s += 1
            if so and not head_sums:
                if take(ctr, s):
                    block_sums(att2, xs_a)
                    finish(ctr, s)
                wait(ctr, s, 1)
            s += 1
            mo(ctr, s, m, n, att2, xs_a, wo[li], out)  # out = att Wo^T
            s += 1
            if take(ctr, s):                                  # h += out, x = norm(h)
                add_rms_norm(out, h, mlp_norm[li], eps, x, h2)
                if sg:
                    block_sums(x, xs_d)
                finish(ctr, s)
            wait(ctr, s, 1)
            s += 1
            h, h2 = h2, h
            mg(ctr, s, m, n, x, xs_d, wg[li], gu)  # gu = x Wgu^T
            s += 1
            c = next_piece(ctr, s)                               # act = swiglu(gu)
            while c < T * acts:
                i = c // acts
                k0 = (c % acts) * PIECE_ACTS
                k1 = min(ff, k0 + PIECE_ACTS)
                swiglu_span(gu[i, :ff], gu[i, ff:], act[i], k0, k1)
                if sd:
                    block_sums_span(act, i, k0 // 32, k1 // 32, xs_f)
                finish(ctr, s)
                c = next_piece(ctr, s)
            wait(ctr, s, T * acts)
            s += 1
            md(ctr, s, m, n, act, xs_f, wd[li], out)  # out = act Wdown^T
            s += 1
        S = sel.shape[0]
        if S == 0:
            return
        if take(ctr, s):                                      # the wanted rows' final norm
            for i in range(S):
                for k in range(D):
                    os_[i, k] = out[sel[i], k]
                    hs[i, k] = h[sel[i], k]
            add_rms_norm(os_, hs, final_norm, eps, xs, hs2)
            if sh:
                block_sums(xs, xs_s)
            finish(ctr, s)
        wait(ctr, s, 1)
        s += 1
        mh(ctr, s, m, n, xs, xs_s, wh, logits)  # logits = x Whead^T

    return blocks_vec.stable_pickle(member, "member", *kinds)


blocks_vec.MAKERS["member"] = lambda *kinds: _make(kinds)


class Team:
    """The threads that run a round's members beside the calling thread (member 0): daemon
    threads, each waiting on its own queue, made once. members are nogil, so they run at once;
    an error in one (the others would wait for its pieces) sets the abort row and is raised.
    One round at a time: a team is shared by every model of its kinds in the process, and two
    callers' rounds on the same queues would take each other's replies."""

    def __init__(self, member):
        self.member = member
        self.threads = []
        self.lock = threading.Lock()

    def _grow(self, n):
        while len(self.threads) < n:
            inbox, outbox = queue.SimpleQueue(), queue.SimpleQueue()
            t = threading.Thread(target=self._serve, args=(inbox, outbox), daemon=True,
                                 name=f"foldserve-cpu-{len(self.threads) + 1}")
            t.start()
            self.threads.append((inbox, outbox))

    def _serve(self, inbox, outbox):
        while True:
            m, n, args = inbox.get()
            try:
                self.member(m, n, *args)
                outbox.put(None)
            except BaseException as e:          # noqa: BLE001 (handed to the caller)
                args[0][-1, 0] = 1              # the abort row: every wait returns
                outbox.put(e)

    def run(self, n, args):
        with self.lock:
            self._run(n, args)

    def _run(self, n, args):
        if n == 1:
            self.member(0, 1, *args)
            return
        self._grow(n - 1)
        for m in range(1, n):
            self.threads[m - 1][0].put((m, n, args))
        err = None
        try:
            self.member(0, n, *args)
        except BaseException as e:              # noqa: BLE001
            args[0][-1, 0] = 1
            err = e
        for m in range(1, n):
            got = self.threads[m - 1][1].get()
            err = err or got
        if err is not None:
            raise err


class Fused:
    """The model's weights as the one-call forward reads them (made once, at Model init)."""

    def __init__(self, w, spec):
        L = w.layers
        self.kinds = (L[0].wqkv.kind, L[0].wo.kind, L[0].wgu.kind, L[0].wdown.kind, w.lm_head.kind)
        self.team = _FORWARDS.get(self.kinds)
        if self.team is None:
            self.team = _FORWARDS[self.kinds] = Team(_make(self.kinds))

        def mats(role):
            ms = [getattr(layer, role) for layer in L]
            return tuple(np.ascontiguousarray(m.data) for m in ms)
        self.wq, self.wo, self.wg, self.wd = (mats(r) for r in ("wqkv", "wo", "wgu", "wdown"))
        self.wh = np.ascontiguousarray(w.lm_head.data)
        self.attn_norm = np.ascontiguousarray(np.stack([layer.attn_norm for layer in L]), np.float32)
        self.mlp_norm = np.ascontiguousarray(np.stack([layer.mlp_norm for layer in L]), np.float32)
        self.norm = np.ascontiguousarray(w.norm, np.float32)
        self.vocab = w.lm_head.rows
        self.eps = float(spec.rms_eps)
        self.nq, self.nkv, self.hd, self.ff = w.nq, w.nkv, spec.head_dim, w.ff

    @staticmethod
    def fits(w, all_reduce) -> bool:
        """TP=1, every matrix of a role (LAYER's wqkv, wo, wgu, wdown, and the head) in one
        32-element kind (the layers' stages are LAYER: the caller's to check)."""
        from kernels.blocks import Blocks
        if all_reduce is not None or not w.layers or not isinstance(w.lm_head, Blocks):
            return False
        if w.lm_head.kind not in blocks_vec.BLOCK_BYTES:
            return False
        for role in ("wqkv", "wo", "wgu", "wdown"):
            kinds = set()
            for layer in w.layers:
                m = getattr(layer, role)
                if not isinstance(m, Blocks) or m.kind not in blocks_vec.BLOCK_BYTES:
                    return False
                kinds.add(m.kind)
            if len(kinds) != 1:
                return False
        return True

    def run(self, h, r, kv, scale):
        """The round's forward: logits [len(r.sel), vocab] (None when r.sel is None)."""
        cos, sin, spans, starts, tables, page_rows = r.cpu
        sel = np.zeros(0, np.int64) if r.sel is None else np.asarray(r.sel, np.int64)
        h = np.ascontiguousarray(h, np.float32)
        T, D = h.shape
        S, nq, hd, ff = sel.shape[0], self.nq, self.hd, self.ff
        f32 = np.float32
        bufs = (np.empty((T, D), f32), np.empty((T, D), f32), np.empty((T, D), f32),      # h2 x out
                np.empty((T, (nq + 2 * self.nkv) * hd), f32), np.empty((T, nq, hd), f32),  # qkv att
                np.empty((T, 2 * ff), f32), np.empty((T, ff), f32),                       # gu act
                np.empty((T, D // 32), f32), np.empty((T, nq * hd // 32), f32),           # block sums
                np.empty((T, ff // 32), f32), attention_cpu.owners(spans, T))
        head = (np.empty((S, D), f32), np.empty((S, D), f32), np.empty((S, D), f32),
                np.empty((S, D), f32), np.empty((S, D // 32), f32),
                np.empty((S, self.vocab), f32))
        ctr = np.zeros((STAGES * len(self.wq) + 3, WIDTH), np.int64)     # + the abort row
        args = (ctr, h, *bufs, self.attn_norm, self.mlp_norm, self.norm, self.eps,
                self.wq, self.wo, self.wg, self.wd, self.wh, kv.K, kv.V, nq, self.nkv, hd, ff,
                cos, sin, spans, starts, tables, page_rows, f32(scale), sel, *head)
        self.team.run(min(numba.get_num_threads(), WIDTH - REGION), args)
        return None if r.sel is None else head[-1]
