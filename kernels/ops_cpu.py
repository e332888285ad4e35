"""The CPU ops backends (kernels/ops.py: `backend("numpy")`, `backend("cpu")`): `Ops`, the
numpy definitions, also the base the other backends override op by op; `NumbaOps`, the numba
forms of the norms, SwiGLU and attention over them."""
from __future__ import annotations

import numpy as np

from kernels import (attention, dsa, gdn, kda, kv_write, matmul, mhc, mla, qmatmul, rmsnorm, rope,
                     swiglu)
from kernels import halves as _halves
from kernels import moe as M
from kernels.blocks import Blocks, ExpertGateUp, ExpertStack, MixedBlocks


def recurrent_chunks(rows, fixed, snaps, run, name=""):
    """Each chunk of a round through a recurrent layer's fixed part, for any recurrent op:
    run(a, b, slot) advances the state in `fixed[*][slot]` over the round's rows [a, b). A
    chunk with a `snap` (snapshot slot k, offset c) runs its first c rows, then every array
    of `fixed` (the layer's [streams, ...]) is copied into `snaps` (the layer's [slots, ...],
    the same order) at k, then the rest: one recurrence order, so the cut changes no byte
    (the prompt cache's snapshot slots, server/engine/engine.py's Engine._snap_at)."""
    for (a, b), c in zip(rows.spans, rows.chunks):
        slot = getattr(c, "slot", -1)
        if slot < 0:
            raise ValueError(f"{name}: a chunk without a stream slot reached a recurrent "
                             "layer; its state is kept a stream (RoundChunk.slot)")
        snap = getattr(c, "snap", ())
        if snap:
            k, cut = snap
            if cut > 0:
                run(a, a + cut, slot)
            for src, dst in zip(fixed, snaps):
                dst[k] = src[slot]
            if a + cut < b:
                run(a + cut, b, slot)
        elif b > a:
            run(a, b, slot)


def _grouped_rows(ids):
    """(rows, slots, experts, offs, pos) of kernels/moe.groups(ids) concatenated: the grouped
    rows, each group's bounds, pos[t, j] the grouped row of token t's slot j."""
    groups = M.groups(ids)
    rows = np.concatenate([r for _, r, _ in groups]).astype(np.int64)
    slots = np.concatenate([s for _, _, s in groups]).astype(np.int64)
    experts = np.array([e for e, _, _ in groups], np.int64)
    offs = np.cumsum([0] + [len(r) for _, r, _ in groups]).astype(np.int64)
    pos = np.empty(ids.shape, np.int64)
    pos[rows, slots] = np.arange(rows.shape[0])
    return rows, slots, experts, offs, pos


class Ops:
    """The "numpy" backend: the definitions; the base the others override op by op."""

    name = "numpy"
    # K-quant (Q4_K, Q6_K) products against int8-quantized x (kernels/kquant_cpu.py, llama.cpp's
    # arithmetic for them) or float32 x (kernels/blocks_vec.py): the definitions keep float32
    kq8 = False
    # every Q8_0 and Q5_0 product (Blocks, MixedBlocks parts, the experts' stacks) against x
    # quantized to q8_0 (kernels/kquant_cpu.Q8_0_DEF, llama.cpp's arithmetic for Q8_0, Q5_0 on
    # its Q8_0 repack: kquant_cpu.Q80_KINDS): set on the
    # instance by server/engine/model.Model where the family opts in (its Q8_0_X8; either CPU
    # backend, numba present); False: float32 x (kernels/blocks_vec.py)
    q80 = False

    def __init__(self):
        self.numba, self.why_not = qmatmul.available()
        if self.numba:
            from kernels import dsa_cpu, gdn_cpu, kda_cpu, mhc_cpu, mla_cpu, moe_cpu, rmsnorm_cpu
            self._gdn_chunk, self._moe_cpu = gdn_cpu.chunk, moe_cpu
            self._np_norms = rmsnorm_cpu
            self._kda_chunk, self._mla_cpu = kda_cpu.chunk, mla_cpu
            self._dsa_cpu, self._mhc_cpu = dsa_cpu, mhc_cpu
        else:
            self._gdn_chunk, self._moe_cpu = gdn.chunk, None
            self._kda_chunk, self._mla_cpu = kda.chunk, None
            self._dsa_cpu = self._mhc_cpu = self._np_norms = None
        self._fn_rows = {}                 # id(hc.fn_t) -> (fn_t, fn rows): mhc_cpu's layout

    def __repr__(self) -> str:
        return f"<kernels.ops {self.name}>"

    def describe(self) -> str:
        """One line for the startup log: the backend and what it runs."""
        return ("numpy definitions" + ("; GGUF blocks, the recurrent scans and the norms "
                                       "(numpy's order) by numba" if self.numba
                                       else f"; {self.why_not}"))

    def embed(self, table, ids):
        # table: [vocab, d] -> [T, d] float32
        if isinstance(table, Blocks):                  # the rows unpacked from their blocks
            return qmatmul.rows(table, ids)
        return table[ids]

    def linear(self, x, w, bias=None):
        if isinstance(w, Blocks):                      # numba over the blocks as stored
            return qmatmul.cpu(x, w, bias, q8=self.kq8, q80=self.q80)
        if isinstance(w, MixedBlocks):                 # each part as stored, side by side
            y = np.concatenate(self._mixed_parts(x, w), axis=1)
            if bias is not None:
                y += bias
            return y
        return matmul.ref(x, w, bias)

    def _mixed_parts(self, x, w):
        """Each part's product (qmatmul.cpu's bytes): the K-quant parts against x quantized to
        int8 once for them all (kquant_cpu.matmul is quantize then that product; a quantized
        row depends on its x row alone), the rest one by one."""
        kq = [p.kind in qmatmul.Q8_KINDS for p in w] if self.kq8 else [False] * len(w)
        if sum(kq) < 2:
            return [qmatmul.cpu(x, p, q8=self.kq8, q80=self.q80) for p in w]
        from kernels import kquant_cpu
        q, dx, gs = kquant_cpu.quantize(x)
        one, offs = np.zeros(1, np.int64), np.array([0, q.shape[0]], np.int64)
        return [kquant_cpu.grouped_quantized(q, dx, gs, p.kind, p.data[None], one, offs) if k
                else qmatmul.cpu(x, p, q8=self.kq8, q80=self.q80) for p, k in zip(w, kq)]

    def _np_order(self, x, w) -> bool:
        """Whether the norm runs as one numba call in numpy's own order (rmsnorm_cpu.np_rms_norm:
        rmsnorm.ref's bytes, a fraction of its time on a decode row): numba present, float32
        rows [M, D] and weight [D]."""
        return (self._np_norms is not None and x.ndim == 2 and x.dtype == np.float32
                and w.dtype == np.float32 and w.shape == (x.shape[1],))

    def rms_norm(self, x, w, eps):
        if self._np_order(x, w):
            y = np.empty(x.shape, np.float32)
            self._np_norms.np_rms_norm(np.ascontiguousarray(x), w, np.float32(eps), y)
            return y
        return rmsnorm.ref(x, w, eps)

    def add_rms_norm(self, x, residual, w, eps):
        if (self._np_order(x, w) and residual.shape == x.shape
                and residual.dtype == np.float32):
            y, h = np.empty(x.shape, np.float32), np.empty(x.shape, np.float32)
            self._np_norms.np_add_rms_norm(np.ascontiguousarray(x), np.ascontiguousarray(residual),
                                           w, np.float32(eps), y, h)
            return y, h
        return rmsnorm.add_ref(x, residual, w, eps)

    def apply_rope(self, x, positions, inv):
        return rope.ref(x, positions, inv)

    def norm_linear(self, out, h, norm_w, eps, w, bias=None, glu_ff=None):
        """A sublayer's input: h' = out + h (h alone when out is None), then rmsnorm(h') times
        W (gate|up with SwiGLU when glu_ff). Returns (y, h')."""
        x, h = self.add_norm(out, h, norm_w, eps)
        return (self.linear(x, w, bias) if glu_ff is None else self.gate_up_silu(x, w, glu_ff)), h

    def add_norm(self, out, h, norm_w, eps):
        """(rmsnorm(h'), h') with h' = out + h (h alone when out is None)."""
        if out is None:
            return self.rms_norm(h, norm_w, eps), h
        return self.add_rms_norm(out, h, norm_w, eps)

    def gate_up_silu(self, x, w, ff, limit=0.0):
        """silu(x Wg) * (x Wu) from the fused gate|up matrix (gate columns then up); limit
        (GLM-5.3-Flash's swiglu_limit): the gate clamped above, up both ways (0: none)."""
        gu = self.linear(x, w)
        return swiglu.limited(gu[:, :ff], gu[:, ff:], limit)

    def moe(self, x, router, router_bias, experts_gu, experts_down, ff, routing, shared_gu=None,
            shared_down=None, shared_ff=0, limit=0.0):
        """A mixture-of-experts MLP on the normed rows x [T, d] -> [T, d] (this shard's
        partial sum under TP): the router (replicated), each token's chosen experts in
        ascending id, tokens grouped by expert for the products, then + the shared expert
        (kernels/moe.py)."""
        pair = isinstance(experts_gu, ExpertGateUp)
        if (self._grouped(experts_gu.gate) and self._grouped(experts_gu.up) if pair else
                self._grouped(experts_gu)) and self._grouped(experts_down):
            # the router, route, grouping and combine as numba calls and every expert's
            # product in one crew round each (kernels/moe_cpu.py): the definition's bytes
            G = self._moe_cpu
            logits = (G.router_logits(x, router) if G.router_fits(router, x)
                      else self.linear(x, router))                  # [T, E]
            got = G.route_group(logits, routing, router_bias)
            if got is None:                 # a non-finite logit: the definition's order
                ids, wts = M.route(logits, routing, router_bias)
                got = (ids, wts) + _grouped_rows(ids)
            ids, wts, rows, slots, experts, offs, pos = got
            if pair:        # gate's stack and up's (each row's dot the fused stack's)
                g, u = G.gate_up_halves(x, rows, experts_gu.gate, experts_gu.up, experts, offs,
                                        self.kq8, self.q80)
            else:
                gu = G.grouped_matmul(x[rows], experts_gu, experts, offs, self.kq8, self.q80)
                g, u = gu[:, :ff], gu[:, ff:]
            act = self.swiglu_rows(g, u, limit)
            out = G.combine_grouped(G.grouped_matmul(act, experts_down, experts, offs, self.kq8,
                                                     self.q80), pos, wts)
        else:
            logits = self.linear(x, router)                         # [T, E]
            ids, wts = M.route(logits, routing, router_bias)
            T, k = ids.shape
            y = np.zeros((T, k, x.shape[1]), np.float32)
            for e, rows, slots in M.groups(ids):
                act = self.gate_up_silu(np.ascontiguousarray(x[rows]), experts_gu[e], ff, limit)
                y[rows, slots] = self.linear(act, experts_down[e])
            out = M.combine(y, wts)
        if shared_gu is not None:
            out += self.linear(self.gate_up_silu(x, shared_gu, shared_ff, limit), shared_down)
        return out

    # GLM-5.3-Flash: mHC's residual streams (kernels/mhc.py), sparse latent attention (dsa.py);
    # where numba loads their numba forms (kernels/mhc_cpu.py, dsa_cpu.py: the family's bytes,
    # the definitions' numbers within float32 rounding)
    def mhc_expand(self, x, n):
        """The embedding [T, d] as n equal residual streams [T, n, d]."""
        return mhc.expand(x, n)

    def mhc_head(self, streams):
        if self._mhc_cpu is not None:
            return self._mhc_cpu.head(streams)
        return mhc.head(streams)

    def mhc_pre(self, streams, hc, *, norm_eps, hc_eps, iters):
        """(the block's input [T, d], post [T, N], comb [T, N, N]) of the streams [T, N, d]."""
        N, D = streams.shape[1], streams.shape[2]
        if self._mhc_cpu is not None and (N * D) % 16 == 0:
            got = self._fn_rows.get(id(hc.fn_t))
            if got is None or got[0] is not hc.fn_t:
                got = self._fn_rows[id(hc.fn_t)] = (hc.fn_t, self._mhc_cpu.fn_rows(hc.fn_t))
            return self._mhc_cpu.pre(streams, got[1], hc.base, hc.scale, norm_eps=norm_eps,
                                     hc_eps=hc_eps, iters=iters)
        pre, post, comb = mhc.weights(streams, hc.fn_t, hc.base, hc.scale, norm_eps=norm_eps,
                                      hc_eps=hc_eps, iters=iters)
        return mhc.collapse(streams, pre), post, comb

    def mhc_post(self, y, streams, post, comb):
        if self._mhc_cpu is not None:
            return self._mhc_cpu.post_mix(y, streams, post, comb)
        return mhc.post_mix(np.ascontiguousarray(y, dtype=np.float32), streams, post, comb)

    def dsa_attend(self, q, ckv, kv_norm, eps, w_uk, w_uv_t, nope, pool, rows, scale, ix, x,
                   q_resid, pooled, rings, n_heads, topk, kpool, choices_in):
        """GLM-5.3-Flash's sparse latent attention (kernels/dsa.py's round_attend): -> ([T, H V],
        the round's choices); kernels/dsa_cpu.py where numba loads and the widths fit."""
        D = self._dsa_cpu
        if D is not None and D.fits(w_uk.shape[2], w_uv_t.shape[2],
                                    16 if ix is None else ix.ape.shape[1]):
            return D.round_attend(q, ckv, kv_norm, eps, w_uk, w_uv_t, nope, pool, rows, scale,
                                  ix, x, q_resid, pooled, rings, n_heads, topk, kpool, choices_in)
        return dsa.round_attend(q, ckv, kv_norm, eps, w_uk, w_uv_t, nope, pool, rows, scale, ix,
                                x, q_resid, pooled, rings, n_heads, topk, kpool, choices_in)

    def _grouped(self, experts) -> bool:
        """Experts the CPU multiplies in one call: an ExpertStack of a 32-element kind."""
        return (isinstance(experts, ExpertStack) and self._moe_cpu is not None
                and self._moe_cpu.fits(experts))

    def mla_attend(self, q, ckv, kv_norm, eps, w_ukt, w_uv, nope, pool, rows, inv, scale):
        """A round's multi-head latent attention (the absorbed form for every position): q
        [T, H, N + R] (this shard's heads), ckv [T, C + R], W_UK transposed [H, C, N] and W_UV
        [H, V, C] (float32, or Q8_0 rows as stored) -> [T, H V]; the rows' latent rows written
        to pool first. kernels/mla_cpu.py (numba) where numba loads, else the numpy definition
        (kernels/mla.py; the same numbers within rounding, not the same bytes: mla_cpu's
        docstring)."""
        if self._mla_cpu is not None:
            return self._mla_cpu.round_attend(q, ckv, kv_norm, eps, w_ukt, w_uv, nope, pool, rows,
                                              inv, scale)
        return mla.round_attend(q, ckv, kv_norm, eps,
                                np.ascontiguousarray(w_ukt.transpose(0, 2, 1)),
                                np.ascontiguousarray(w_uv.transpose(0, 2, 1)), nope, pool, rows,
                                inv, scale)

    def moe_biased(self, x, router, router_bias, experts_gu, gu_bias, experts_down, down_bias,
                   ff, routing, limit, alpha):
        """gpt-oss's MoE MLP on the normed rows x [T, d] -> [T, d] (this shard's partial sum
        under TP): logits = x Wr + br, routed by kernels/moe.route (topk_softmax); each chosen
        expert's y = down(clamped_swiglu(x gate|up + b_gu)) + b_down (b_down None: a rank past
        0), grouped by expert, summed per token in ascending expert id (kernels/moe.combine)."""
        if self._grouped(experts_gu) and self._grouped(experts_down):
            # the router, route, grouping and combine as numba calls (kernels/moe_cpu.py: the
            # definition's bytes), every expert's product in one crew round, each group's
            # biases added as the loop below adds them (the same float32 adds): its bytes
            G = self._moe_cpu
            if G.router_fits(router, x):
                logits = G.router_logits(x, router)
                if router_bias is not None:
                    logits += router_bias                           # qmatmul.cpu's one add
            else:
                logits = self.linear(x, router, router_bias)        # [T, E]
            got = G.route_group(logits, routing)
            if got is None:                 # a non-finite logit: the definition's order
                ids, wts = M.route(logits, routing)
                got = (ids, wts) + _grouped_rows(ids)
            ids, wts, rows, slots, experts, offs, pos = got
            gu = G.grouped_matmul(x[rows], experts_gu, experts, offs, self.kq8)
            for g, e in enumerate(experts):
                gu[offs[g]:offs[g + 1]] += gu_bias[e]
            yd = G.grouped_matmul(swiglu.clamped(gu[:, :ff], gu[:, ff:], limit, alpha),
                                  experts_down, experts, offs, self.kq8)
            if down_bias is not None:
                for g, e in enumerate(experts):
                    yd[offs[g]:offs[g + 1]] += down_bias[e]
            return G.combine_grouped(yd, pos, wts)
        logits = self.linear(x, router, router_bias)                # [T, E]
        ids, wts = M.route(logits, routing)
        T, k = ids.shape
        y = np.zeros((T, k, x.shape[1]), np.float32)
        groups = M.groups(ids)
        for e, rows, slots in groups:
            gu = self.linear(np.ascontiguousarray(x[rows]), experts_gu[e], gu_bias[e])
            act = swiglu.clamped(gu[:, :ff], gu[:, ff:], limit, alpha)
            y[rows, slots] = self.linear(act, experts_down[e],
                                         None if down_bias is None else down_bias[e])
        return M.combine(y, wts)

    def qkv_attend_sinks(self, qkv, nq, nkv, hd, pos, inv, k_pool, v_pool, rows, scale, sinks,
                         window, ring=False):
        """gpt-oss's attention from the fused qkv rows -> [T, nq, hd]: q and k rotated, k and
        v written, then each chunk's rows attend with the sinks and (window > 0) their last
        `window` rows only (kernels/attention.ref). The CPU's numpy definition, chunk by chunk.

        ring (a window layer of the KV window kind, server/shapes/kv_layout.py): the pools
        are the streams' rings, read through each chunk's `ring` table, and a chunk is written
        and read page_rows rows at a time (a ring of W + P - 1 rows then never loses a row one
        of the piece's queries reads). A row's numbers are its own (attention.ref), so the
        pieces change nothing but the addresses."""
        T = qkv.shape[0]
        q = np.ascontiguousarray(qkv[:, : nq * hd].reshape(T, nq, hd))
        k = np.ascontiguousarray(qkv[:, nq * hd:(nq + nkv) * hd].reshape(T, nkv, hd))
        v = np.ascontiguousarray(qkv[:, (nq + nkv) * hd:].reshape(T, nkv, hd))
        q = self.apply_rope(q, pos, inv)
        k = self.apply_rope(k, pos, inv)
        out = np.empty(q.shape, dtype=np.float32)
        for (a, b), c in zip(rows.spans, rows.chunks):
            if not ring:
                kv_write.ref(k_pool, v_pool, c.table, c.page_rows, c.start, k[a:b], v[a:b])
                out[a:b] = attention.ref(q[a:b], k_pool, v_pool, c.table, c.page_rows, c.start,
                                         scale, sinks, window)
                continue
            if not c.ring:
                raise ValueError("a window layer's ring needs the chunk's ring table "
                                 "(RoundChunk.ring: KVStore.ring_table of its stream)")
            P = k_pool.shape[1]                  # the ring's page rows (on windows too)
            for x in range(a, b, P):
                y, at = min(b, x + P), c.start + x - a
                kv_write.ref(k_pool, v_pool, c.ring, P, at, k[x:y], v[x:y])
                out[x:y] = attention.ref(q[x:y], k_pool, v_pool, c.ring, P, at, scale, sinks,
                                         window)
        return out

    def write_kv(self, k_pool, v_pool, table, page_rows, start, k, v):
        kv_write.ref(k_pool, v_pool, table, page_rows, start, k, v)

    def attend(self, q, k_pool, v_pool, table, page_rows, start, scale):
        return attention.ref(q, k_pool, v_pool, table, page_rows, start, scale)

    def write_and_attend(self, q, k, v, k_pool, v_pool, rows, scale):
        """A round's KV writes and attention, chunk by chunk (rows.spans/rows.chunks): write
        then attend."""
        out = np.empty(q.shape, dtype=q.dtype)
        for (a, b), c in zip(rows.spans, rows.chunks):
            kv_write.ref(k_pool, v_pool, c.table, c.page_rows, c.start, k[a:b], v[a:b])
            out[a:b] = attention.ref(q[a:b], k_pool, v_pool, c.table, c.page_rows, c.start, scale)
        return out

    def qkv_attend(self, qkv, nq, nkv, hd, pos, inv, k_pool, v_pool, rows, scale, norms=None,
                   eps=0.0, rot=None):
        """The fused qkv GEMM's rows -> attention output [T, nq, hd]: q and k normed (Qwen3:
        norms = (q_norm, k_norm)) and rotated (the first `rot` dims of each head: GLM's
        partial RoPE; all when None), k and v written, then attention."""
        T = qkv.shape[0]
        q = qkv[:, : nq * hd].reshape(T, nq, hd)
        k = qkv[:, nq * hd:(nq + nkv) * hd].reshape(T, nkv, hd)
        v = qkv[:, (nq + nkv) * hd:].reshape(T, nkv, hd)
        if norms is not None:
            q = self.rms_norm(q.reshape(-1, hd), norms[0], eps).reshape(T, nq, hd)
            k = self.rms_norm(k.reshape(-1, hd), norms[1], eps).reshape(T, nkv, hd)
        q, k, v = (self.contiguous(a) for a in (q, k, v))   # the GPU kernels read strided rows
        q = self.rope_part(q, pos, inv, rot)
        k = self.rope_part(k, pos, inv, rot)
        return self.write_and_attend(q, k, v, k_pool, v_pool, rows, scale)

    def gdn_chunk(self, mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk):
        """One stream's chunk through a Gated DeltaNet layer (kernels/gdn.py: the
        definition), its conv window and state updated in place; the numba form where numba
        is present (chosen when the backend is made)."""
        return self._gdn_chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state,
                               nk)

    def gdn_round(self, qkvz, ba, conv_w, A_log, dt_bias, norm_w, eps, nk, fixed, rows, name="",
                  snaps=()):
        """A round's Gated DeltaNet layer: qkvz [T, q|k|v|z], ba [T, b|a] (this rank's heads)
        -> [T, nv dv], each chunk through `gdn_chunk` over its stream's slot of `fixed` (the
        layer's (state, conv window) arrays, [streams, ...]: the KV store's fixed part),
        snapshots taken where a chunk asks (`recurrent_chunks`)."""
        state, conv = fixed
        nv, C = A_log.shape[0], conv_w.shape[0]
        one = rows.chunks[0] if len(rows.chunks) == 1 else None
        if (one is not None and rows.spans[0] == (0, qkvz.shape[0]) and not getattr(one, "snap", ())
                and getattr(one, "slot", -1) >= 0):    # one stream's round (a decode step): its out
            return self.gdn_chunk(qkvz[:, :C], qkvz[:, C:], ba[:, :nv], ba[:, nv:], conv_w, A_log,
                                  dt_bias, norm_w, eps, conv[one.slot], state[one.slot], nk)
        o = np.empty((qkvz.shape[0], nv * state.shape[-1]), np.float32)

        def run(a, b, slot):
            o[a:b] = self.gdn_chunk(qkvz[a:b, :C], qkvz[a:b, C:], ba[a:b, :nv], ba[a:b, nv:],
                                    conv_w, A_log, dt_bias, norm_w, eps, conv[slot], state[slot],
                                    nk)

        recurrent_chunks(rows, fixed, snaps, run, name)
        return o

    def kda_chunk(self, mix, f, b, gate, conv_w, A_log, dt_bias, norm_w, eps, window, state,
                  lower_bound=None):
        """One stream's chunk through a Kimi Delta Attention layer (kernels/kda.py: the
        definition), its conv window and state updated in place; the numba form where numba
        is present (chosen when the backend is made)."""
        return self._kda_chunk(mix, f, b, gate, conv_w, A_log, dt_bias, norm_w, eps, window,
                               state, lower_bound)

    def kda_round(self, mix, f, b, gate, conv_w, A_log, dt_bias, norm_w, eps, fixed, rows,
                  lower_bound=None, name="", snaps=()):
        """A round's KDA layer: mix [T, q|k|v], f [T, H D], b [T, H], gate [T, H D] (this
        rank's heads) -> [T, H D], each chunk through `kda_chunk` over its stream's slot of
        `fixed` (the layer's (state, conv window) arrays, [streams, ...]: the KV store's
        fixed part), snapshots taken where a chunk asks (`recurrent_chunks`)."""
        state, conv = fixed
        o = np.empty((mix.shape[0], state.shape[1] * state.shape[-1]), np.float32)

        def run(a, b_, slot):
            o[a:b_] = self.kda_chunk(mix[a:b_], f[a:b_], b[a:b_], gate[a:b_], conv_w, A_log,
                                     dt_bias, norm_w, eps, conv[slot], state[slot], lower_bound)

        recurrent_chunks(rows, fixed, snaps, run, name)
        return o

    def swiglu_rows(self, gate, up, limit=0.0):
        """swiglu.limited(gate, up, limit) ([R, F] each)."""
        return swiglu.limited(gate, up, limit)

    def sigmoid(self, x):
        """1 / (1 + exp(-x)), float32, elementwise."""
        return np.float32(1) / (np.float32(1) + np.exp(-x))

    def contiguous(self, x):
        return np.ascontiguousarray(x)

    def rope_part(self, x, positions, inv, rot=None):
        """RoPE on the first `rot` dims of each head (all when None), the rest as they are."""
        if rot is None or rot == x.shape[-1]:
            return self.apply_rope(x, positions, inv)
        out = x.copy()
        out[..., :rot] = self.apply_rope(np.ascontiguousarray(x[..., :rot]), positions, inv)
        return out


# swiglu_rows' elements a block (each of gate, up and out 512 KB of float32: the five passes
# over a block stay in the core's L2, not five trips through memory a half)
SWIGLU_BLOCK = 1 << 17


class NumbaOps(Ops):
    """The "cpu" backend: the definitions' numba forms for the norms, SwiGLU and attention
    (kernels/rmsnorm_cpu.py, attention_cpu.py), the CPU engine over GGUF blocks."""

    name = "cpu"
    kq8 = True          # Q4_K / Q6_K against int8 x (kernels/kquant_cpu.py)

    def __init__(self):
        super().__init__()
        if not self.numba:
            raise RuntimeError(f"the cpu ops backend needs numba: {self.why_not}")
        from kernels import attention_cpu, rmsnorm_cpu
        self._attention_cpu, self._rmsnorm_cpu = attention_cpu, rmsnorm_cpu
        attention_cpu.ref_warm()        # write_and_attend's long-chunk form, loaded now

    def describe(self) -> str:
        return ("numba: GGUF blocks (Q4_K, Q6_K against int8 activations), norms, SwiGLU, attention, "
                "the Gated DeltaNet scan")

    def _paired(self, rows: int) -> bool:
        return _halves.wanted(rows)

    def rms_norm(self, x, w, eps):
        """Ops.rms_norm's bytes (numpy's order, a row at a time), many rows as two halves on
        two threads."""
        if not (self._np_order(x, w) and self._paired(x.shape[0])):
            return super().rms_norm(x, w, eps)
        x = np.ascontiguousarray(x)
        y = np.empty(x.shape, np.float32)
        e = np.float32(eps)
        _halves.pair(lambda a, b: self._np_norms.np_rms_norm(x[a:b], w, e, y[a:b]), x.shape[0] // 2, x.shape[0])
        return y

    def swiglu_rows(self, gate, up, limit=0.0):
        """swiglu.limited's bytes (numpy's elementwise operations, the same per element
        wherever it lies in the array), many rows as two halves on two threads."""
        if not self._paired(gate.shape[0]) or gate.ndim != 2:
            return swiglu.limited(gate, up, limit)
        out = np.empty(gate.shape, np.float32)

        def half(a, b):
            if limit or gate.dtype != np.float32 or up.dtype != np.float32:
                out[a:b] = swiglu.limited(gate[a:b], up[a:b], limit)
                return
            step = max(1, SWIGLU_BLOCK // max(1, gate.shape[1]))
            for r in range(a, b, step):     # swiglu.ref's operations in turn, a block of rows
                e = min(b, r + step)        # at a time (its three arrays' rows in L2)
                o = out[r:e]
                np.negative(gate[r:e], out=o)
                np.exp(o, out=o)
                o += np.float32(1.0)
                np.divide(gate[r:e], o, out=o)
                o *= up[r:e]
        _halves.pair(half, gate.shape[0] // 2, gate.shape[0])
        return out

    def write_and_attend(self, q, k, v, k_pool, v_pool, rows, scale):
        """Ops.write_and_attend's bytes (each chunk's KV written, then its rows attend by
        attention.ref). A chunk of many rows: its rows whose keys fit
        (kernels/attention_cpu.ref_rows) by the numba form of attention.ref's own float
        operations (`_ref_form`) where this process's numpy agrees with it
        (attention_cpu.ref_agrees), both cores; the rest as two runs of rows on two threads
        (a row's attention reads its q and its stream's keys up to its position only, so the
        bytes are the whole chunk's; the cut evens the keys the two runs read)."""
        out = np.empty(q.shape, dtype=q.dtype)
        for (a, b), c in zip(rows.spans, rows.chunks):
            kv_write.ref(k_pool, v_pool, c.table, c.page_rows, c.start, k[a:b], v[a:b])
            n = b - a
            if not self._paired(n):
                out[a:b] = attention.ref(q[a:b], k_pool, v_pool, c.table, c.page_rows, c.start, scale)
                continue
            done = self._ref_form(q[a:b], k_pool, v_pool, c, scale, out[a:b])
            if done < n:
                self._ref_halves(q[a + done:b], k_pool, v_pool, c, c.start + done, scale,
                                 out[a + done:b])
        return out

    def _ref_form(self, q, k_pool, v_pool, c, scale, out) -> int:
        """attention.ref's bytes for the first r rows of a chunk (q [n, nq, hd] at positions
        c.start ..) in three numba passes (kernels/attention_cpu.py: scores, numpy's exp on
        them as one array in two halves, values); returns r (0 where the shapes do not fit or
        this numpy disagrees)."""
        A = self._attention_cpu
        n, nq, hd = q.shape
        KV = k_pool.shape[2]
        if q.dtype != np.float32 or k_pool.dtype != np.float32 or nq % KV:
            return 0
        r = int(A.ref_rows(c.start, n, nq // KV, hd))
        if r == 0 or not A.ref_agrees(nq // KV, hd):
            return 0
        A.ref_chunk(np.ascontiguousarray(q[:r]), k_pool, v_pool, np.asarray(c.table, np.int64),
                    c.page_rows, c.start, scale, out[:r], _halves.pair)
        return r

    def _ref_halves(self, q, k_pool, v_pool, c, start, scale, out):
        """attention.ref over a chunk's rows (at positions start ..) as two runs on two threads."""
        n = q.shape[0]
        if not self._paired(n):
            out[:] = attention.ref(q, k_pool, v_pool, c.table, c.page_rows, start, scale)
            return
        keys = np.cumsum(np.arange(start + 1, start + n + 1, dtype=np.int64))
        cut = int(np.searchsorted(keys, keys[-1] // 2)) + 1
        cut = min(max(cut, 1), n - 1)

        def run(i, j):
            out[i:j] = attention.ref(q[i:j], k_pool, v_pool, c.table, c.page_rows, start + i, scale)
        _halves.pair(run, cut, n)

    def apply_rope(self, x, positions, inv):
        """rope.ref's bytes in one numba call (kernels/attention_cpu.apply_rope) where x is
        [T, H, hd] float32 with hd even; else the definition."""
        if x.ndim == 3 and x.dtype == np.float32 and x.shape[-1] % 2 == 0:
            return self._attention_cpu.apply_rope(x, positions, inv)
        return super().apply_rope(x, positions, inv)

    def add_norm(self, out, h, norm_w, eps):
        R = self._rmsnorm_cpu
        x = np.empty(h.shape, np.float32)
        # a row's norm is its own: many rows [T, D] as two halves on two threads
        halves = h.ndim == 2 and self._paired(h.shape[0])
        if out is None:
            def run(a, b):
                R.rms_norm(h[a:b], norm_w, eps, x[a:b])
        else:
            h2 = np.empty(h.shape, np.float32)

            def run(a, b):
                R.add_rms_norm(out[a:b], h[a:b], norm_w, eps, x[a:b], h2[a:b])
        if halves:
            _halves.pair(run, h.shape[0] // 2, h.shape[0])
        else:
            run(0, h.shape[0])
        return x, (h if out is None else h2)

    def norm_linear(self, out, h, norm_w, eps, w, bias=None, glu_ff=None):
        x, h = self.add_norm(out, h, norm_w, eps)
        if glu_ff is None:
            return self.linear(x, w, bias), h
        gu = self.linear(x, w)
        act = np.empty((gu.shape[0], glu_ff), np.float32)
        self._rmsnorm_cpu.swiglu(gu, glu_ff, act)
        return act, h

    def qkv_attend(self, qkv, nq, nkv, hd, pos, inv, k_pool, v_pool, rows, scale, norms=None,
                   eps=0.0, rot=None):
        """Without norms and partial RoPE, over a round planned for it (rows.cpu:
        kernels/attention_cpu.plan): one numba call; else the definition."""
        if (rot is None or rot == hd) and norms is None and rows.cpu is not None:
            out = np.empty((qkv.shape[0], nq, hd), np.float32)
            self._attention_cpu.round_attend(qkv, nq, nkv, hd, *rows.cpu[:2], k_pool, v_pool,
                                             *rows.cpu[2:], scale, out)
            return out
        T = qkv.shape[0]
        r = hd if rot is None else rot
        if (self._paired(T) and qkv.ndim == 2 and qkv.dtype == np.float32
                and qkv.shape[1] == (nq + 2 * nkv) * hd and r % 2 == 0 and 0 < r <= hd
                and (norms is None or all(w.dtype == np.float32 and w.shape == (hd,) for w in norms))):
            # Ops.qkv_attend's norms, RoPE and copies as one numba pass a row, two halves
            cos, sin = rope.cos_sin(np.asarray(pos), inv)
            if cos.shape[1] < r // 2:
                return super().qkv_attend(qkv, nq, nkv, hd, pos, inv, k_pool, v_pool, rows,
                                          scale, norms, eps, rot)
            qkv = np.ascontiguousarray(qkv)
            q = np.empty((T, nq, hd), np.float32)
            k = np.empty((T, nkv, hd), np.float32)
            v = np.empty((T, nkv, hd), np.float32)
            qw, kw = norms if norms is not None else (cos[0, :1], cos[0, :1])
            e = np.float32(eps)
            _halves.pair(lambda a, b: self._attention_cpu.prep_rows(
                qkv, nq, nkv, hd, r, cos, sin, qw, kw, norms is not None, e, q, k, v, a, b),
                T // 2, T)
            return self.write_and_attend(q, k, v, k_pool, v_pool, rows, scale)
        return super().qkv_attend(qkv, nq, nkv, hd, pos, inv, k_pool, v_pool, rows, scale,
                                  norms, eps, rot)
