"""A round's whole forward on the CPU over GGUF blocks in one numba call.

The op-by-op path (server/engine/model.py's Model.run through kernels/ops.py) calls ~300 numba
functions a decode step from Python (4 matmuls, 2 norms, SwiGLU and the attention a layer,
each with its wrapper's allocations and a dispatch); at one token a step those calls cost about
as much as the small matmuls themselves. Here the same functions run in the same order from
one compiled function:

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

Used for the plain llama layer (no qkv bias, no q/k norms), TP=1, every matrix one of the
32-element kinds (Q8_0, Q4_0, Q4_1): the default model. Anything else keeps the op-by-op path.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from kernels import blocks_vec
from kernels.attention_cpu import _attend_parallel, _attend_serial, wide
from kernels.blocks_vec import block_sums
from kernels.rmsnorm_cpu import add_rms_norm, rms_norm, swiglu

_FORWARDS: dict = {}


def _make(kinds):
    """The forward for (qkv, o, gate/up, down, head) kinds: each role's kernel a constant."""
    mq, mo, mg, md, mh = (blocks_vec.KERNELS[k] for k in kinds)
    sq, so, sg, sd, sh = (k == "Q4_1" for k in kinds)     # Q4_1 reads its x block sums

    # nogil: the server's other threads (HTTP, streaming the last token) run during the step
    # not parallel itself (its kernels are): a parfor pass over this function cost ~8 s of a
    # cold compile
    @njit(cache=True, boundscheck=False, nogil=True)
    def forward(h, attn_norm, mlp_norm, final_norm, eps, wq, wo, wg, wd, wh,
                K, V, nq, nkv, hd, ff, cos, sin, spans, starts, tables, page_rows, scale, sel,
                logits):
        T, D = h.shape
        big = wide(spans, starts, nq, nkv)     # attention_cpu.round_attend's rule
        nqkv = (nq + 2 * nkv) * hd
        x = np.empty((T, D), np.float32)
        h2 = np.empty((T, D), np.float32)
        out = np.empty((T, D), np.float32)
        qkv = np.empty((T, nqkv), np.float32)
        att = np.empty((T, nq, hd), np.float32)
        att2 = att.reshape(T, nq * hd)
        gu = np.empty((T, 2 * ff), np.float32)
        act = np.empty((T, ff), np.float32)
        xs_d = np.empty((T, D // 32), np.float32)
        xs_a = np.empty((T, nq * hd // 32), np.float32)
        xs_f = np.empty((T, ff // 32), np.float32)
        for li in range(len(wq)):
            if li == 0:
                rms_norm(h, attn_norm[li], eps, x)
            else:
                add_rms_norm(out, h, attn_norm[li], eps, x, h2)
                h, h2 = h2, h
            if sq:
                block_sums(x, xs_d)
            mq(x, xs_d, wq[li], qkv)
            kl = K[li]
            vl = V[li]
            if big:                    # round_attend's two forms: the same (row, head) jobs
                _attend_parallel(qkv, nq, nkv, hd, cos, sin, kl, vl, spans, starts, tables,
                                 page_rows, scale, att)
            else:
                _attend_serial(qkv, nq, nkv, hd, cos, sin, kl, vl, spans, starts, tables,
                               page_rows, scale, att)
            if so:
                block_sums(att2, xs_a)
            mo(att2, xs_a, wo[li], out)
            add_rms_norm(out, h, mlp_norm[li], eps, x, h2)
            h, h2 = h2, h
            if sg:
                block_sums(x, xs_d)
            mg(x, xs_d, wg[li], gu)
            swiglu(gu, ff, act)
            if sd:
                block_sums(act, xs_f)
            md(act, xs_f, wd[li], out)
        S = sel.shape[0]
        if S == 0:
            return
        os_ = np.empty((S, D), np.float32)
        hs = np.empty((S, D), np.float32)
        for i in range(S):
            for k in range(D):
                os_[i, k] = out[sel[i], k]
                hs[i, k] = h[sel[i], k]
        xs = np.empty((S, D), np.float32)
        hs2 = np.empty((S, D), np.float32)
        add_rms_norm(os_, hs, final_norm, eps, xs, hs2)
        xs_s = np.empty((S, D // 32), np.float32)
        if sh:
            block_sums(xs, xs_s)
        mh(xs, xs_s, wh, logits)
    return forward


class Fused:
    """The model's weights as the one-call forward reads them (made once, at Model init)."""

    def __init__(self, w, spec):
        L = w.layers
        self.kinds = (L[0].wqkv.kind, L[0].wo.kind, L[0].wgu.kind, L[0].wdown.kind, w.lm_head.kind)
        self.fn = _FORWARDS.get(self.kinds)
        if self.fn is None:
            self.fn = _FORWARDS[self.kinds] = _make(self.kinds)

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
        """The plain llama layer at TP=1 with every matrix in one 32-element kind per role."""
        from server.engine.weights.blocks import Blocks
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
        return all(layer.bqkv is None and layer.q_norm is None for layer in w.layers)

    def run(self, h, r, kv, scale):
        cos, sin, spans, starts, tables, page_rows = r.cpu
        sel = np.zeros(0, np.int64) if r.sel is None else np.asarray(r.sel, np.int64)
        logits = np.empty((sel.shape[0], self.vocab), np.float32)
        self.fn(np.ascontiguousarray(h, np.float32), self.attn_norm, self.mlp_norm, self.norm, self.eps,
                self.wq, self.wo, self.wg, self.wd, self.wh,
                kv.K, kv.V, self.nq, self.nkv, self.hd, self.ff, cos, sin, spans, starts, tables,
                page_rows, np.float32(scale), sel, logits)
        return None if r.sel is None else logits
