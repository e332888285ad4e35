"""The ops the model calls, dispatched by array type: numpy -> the reference, cupy -> CUDA.

Each op's module holds both forms. The model is one code path over either.
"""
from __future__ import annotations

import numpy as np

from kernels import attention, kv_write, matmul, qmatmul, rmsnorm, rope, swiglu
from server.engine.weights.blocks import Blocks, ExpertStack, MixedBlocks


def _cpu(x) -> bool:
    return isinstance(x, np.ndarray)


def _gpu(module):
    # CUDA forms live beside their references as `<op>_cuda.py`, imported only on the GPU
    import importlib
    return importlib.import_module(f"kernels.{module}_cuda")


def _quant(w) -> bool:
    # GGUF blocks kept on the device (kernels/qmatmul_cuda.QWeight / QStack)
    return hasattr(w, "planes") or hasattr(w, "parts")


def embed(table, ids):
    # table: [vocab, d] -> [T, d] float32
    if _quant(table):
        return _gpu("qmatmul").rows(table, ids)
    if isinstance(table, Blocks):                  # CPU: the rows unpacked from their blocks
        return qmatmul.rows(table, ids)
    return table[ids] if _cpu(table) else _gpu("common").rows_of(table, ids)


def linear(x, w, bias=None):
    if _quant(w):
        return _gpu("qmatmul").cuda(x, w, bias)
    if isinstance(w, Blocks):                      # CPU: numba over the blocks as stored
        return qmatmul.cpu(x, w, bias)
    if isinstance(w, MixedBlocks):                 # CPU: each part as stored, side by side
        y = np.concatenate([qmatmul.cpu(x, p) for p in w], axis=1)
        if bias is not None:
            y += bias
        return y
    return matmul.ref(x, w, bias) if _cpu(x) else _gpu("matmul").cuda(x, w, bias)


def rms_norm(x, w, eps):
    return rmsnorm.ref(x, w, eps) if _cpu(x) else _gpu("rmsnorm").cuda(x, w, eps)


def add_rms_norm(x, residual, w, eps):
    return rmsnorm.add_ref(x, residual, w, eps) if _cpu(x) else _gpu("rmsnorm").add_cuda(x, residual, w, eps)


def apply_rope(x, positions, inv):
    return rope.ref(x, positions, inv) if _cpu(x) else _gpu("rope").cuda(x, positions, inv)


def norm_linear(out, h, norm_w, eps, w, bias=None, glu_ff=None, fast=False):
    """A sublayer's input: h' = out + h (h alone when out is None), then rmsnorm(h') times W
    (gate|up with SwiGLU when glu_ff). Returns (y, h'). On the GPU at up to 16 rows one GEMM
    launch norms the rows as it loads them (kernels/matmul_fused_cuda.cuda_norm). fast (the CPU
    over GGUF blocks): the norm and SwiGLU as numba calls (kernels/rmsnorm_cpu.py)."""
    if not _cpu(h) and not _quant(w):  # at prefill rows y may be a matmul_pi_cuda.Pi (for `linear`)
        return _gpu("matmul_fused").cuda_norm(out, h, norm_w, eps, w, bias, glu_ff, pi_out=True)
    x, h = add_norm(out, h, norm_w, eps, fast)
    if fast:
        from kernels import rmsnorm_cpu as R
        if glu_ff is None:
            return linear(x, w, bias), h
        gu = linear(x, w)
        act = np.empty((gu.shape[0], glu_ff), np.float32)
        R.swiglu(gu, glu_ff, act)
        return act, h
    return (linear(x, w, bias) if glu_ff is None else gate_up_silu(x, w, glu_ff)), h


def add_norm(out, h, norm_w, eps, fast=False):
    """(rmsnorm(h'), h') with h' = out + h (h alone when out is None); fast: the numba forms
    (kernels/rmsnorm_cpu.py)."""
    if fast:
        from kernels import rmsnorm_cpu as R
        x = np.empty(h.shape, np.float32)
        if out is None:
            R.rms_norm(h, norm_w, eps, x)
        else:
            h2 = np.empty(h.shape, np.float32)
            R.add_rms_norm(out, h, norm_w, eps, x, h2)
            h = h2
        return x, h
    return (rms_norm(h, norm_w, eps), h) if out is None else add_rms_norm(out, h, norm_w, eps)


def moe(x, router, router_bias, experts_gu, experts_down, ff, routing, shared_gu=None,
        shared_down=None, shared_ff=0):
    """A mixture-of-experts MLP on the normed rows x [T, d] -> [T, d] (this shard's partial
    sum under TP): the router (replicated), each token's chosen experts in ascending id,
    tokens grouped by expert for the products, then + the shared expert (kernels/moe.py)."""
    from kernels import moe as M
    if not _cpu(x):
        raise NotImplementedError("mixture-of-experts layers run on the CPU only")
    logits = linear(x, router)                                  # [T, E]
    ids, wts = M.route(logits, routing, router_bias)
    T, k = ids.shape
    y = np.zeros((T, k, x.shape[1]), np.float32)
    groups = M.groups(ids)
    if _grouped(experts_gu) and _grouped(experts_down):
        # every expert's product in one parallel region (kernels/moe_cpu.py): the same bytes
        from kernels.moe_cpu import grouped_matmul
        rows = np.concatenate([r for _, r, _ in groups])
        slots = np.concatenate([s for _, _, s in groups])
        experts = np.array([e for e, _, _ in groups], np.int64)
        offs = np.cumsum([0] + [len(r) for _, r, _ in groups])
        gu = grouped_matmul(x[rows], experts_gu, experts, offs)
        act = swiglu.ref(gu[:, :ff], gu[:, ff:])
        y[rows, slots] = grouped_matmul(act, experts_down, experts, offs)
    else:
        for e, rows, slots in groups:
            act = gate_up_silu(np.ascontiguousarray(x[rows]), experts_gu[e], ff)
            y[rows, slots] = linear(act, experts_down[e])
    out = M.combine(y, wts)
    if shared_gu is not None:
        out += linear(gate_up_silu(x, shared_gu, shared_ff), shared_down)
    return out


def mla_attend(q, ckv, kv_norm, eps, w_ukt, w_uv, nope, pool, rows, inv, scale):
    """A round's multi-head latent attention (the absorbed form for every position): q
    [T, H, N + R] (this shard's heads), ckv [T, C + R], W_UK transposed [H, C, N] and W_UV
    [H, V, C] (float32, or Q8_0 rows as stored) -> [T, H V]; the rows' latent rows written to
    pool first. CPU only: kernels/mla_cpu.py (numba) where numba loads, else the numpy
    definition (kernels/mla.py; the same numbers within rounding, not the same bytes:
    mla_cpu's docstring)."""
    if not _cpu(q):
        raise NotImplementedError("latent attention runs on the CPU only")
    ok, _ = qmatmul.available()
    if ok:
        from kernels import mla_cpu
        return mla_cpu.round_attend(q, ckv, kv_norm, eps, w_ukt, w_uv, nope, pool, rows, inv,
                                    scale)
    from kernels import mla
    return mla.round_attend(q, ckv, kv_norm, eps, np.ascontiguousarray(w_ukt.transpose(0, 2, 1)),
                            np.ascontiguousarray(w_uv.transpose(0, 2, 1)), nope, pool, rows, inv,
                            scale)


def moe_biased(x, router, router_bias, experts_gu, gu_bias, experts_down, down_bias, ff,
               routing, limit, alpha):
    """gpt-oss's MoE MLP on the normed rows x [T, d] -> [T, d] (this shard's partial sum
    under TP): logits = x Wr + br, routed by kernels/moe.route (topk_softmax); each chosen
    expert's y = down(clamped_swiglu(x gate|up + b_gu)) + b_down (b_down None: a rank past
    0), grouped by expert, summed per token in ascending expert id (kernels/moe.combine)."""
    from kernels import moe as M
    if not _cpu(x):
        raise NotImplementedError("mixture-of-experts layers run on the CPU only")
    logits = linear(x, router, router_bias)                     # [T, E]
    ids, wts = M.route(logits, routing)
    T, k = ids.shape
    y = np.zeros((T, k, x.shape[1]), np.float32)
    for e, rows, slots in M.groups(ids):
        gu = linear(np.ascontiguousarray(x[rows]), experts_gu[e], gu_bias[e])
        act = swiglu.clamped(gu[:, :ff], gu[:, ff:], limit, alpha)
        y[rows, slots] = linear(act, experts_down[e], None if down_bias is None else down_bias[e])
    return M.combine(y, wts)


def qkv_attend_sinks(qkv, nq, nkv, hd, pos, inv, k_pool, v_pool, rows, scale, sinks, window,
                     ring=False):
    """gpt-oss's attention from the fused qkv rows -> [T, nq, hd]: q and k rotated, k and v
    written, then each chunk's rows attend with the sinks and (window > 0) their last
    `window` rows only (kernels/attention.ref). The CPU's numpy definition, chunk by chunk.

    ring (a window layer of the KV window kind, server/shapes/kv_layout.py): the pools are
    the streams' rings, read through each chunk's `ring` table, and a chunk is written and
    read page_rows rows at a time (a ring of W + P - 1 rows then never loses a row one of the
    piece's queries reads). A row's numbers are its own (attention.ref), so the pieces change
    nothing but the addresses."""
    if not _cpu(qkv):
        raise NotImplementedError("attention sinks and sliding windows run on the CPU only")
    T = qkv.shape[0]
    q = np.ascontiguousarray(qkv[:, : nq * hd].reshape(T, nq, hd))
    k = np.ascontiguousarray(qkv[:, nq * hd:(nq + nkv) * hd].reshape(T, nkv, hd))
    v = np.ascontiguousarray(qkv[:, (nq + nkv) * hd:].reshape(T, nkv, hd))
    q = apply_rope(q, pos, inv)
    k = apply_rope(k, pos, inv)
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
            out[x:y] = attention.ref(q[x:y], k_pool, v_pool, c.ring, P, at, scale, sinks, window)
    return out


def gate_up_silu(x, w, ff):
    """silu(x Wg) * (x Wu) from the fused gate|up matrix (gate columns then up): on the GPU at
    decode sizes one GEMM launch with SwiGLU in its epilogue (kernels/matmul_fused_cuda.cuda_glu)."""
    if _quant(w):                    # the GEMM, then swiglu_cuda: cuda_glu's bytes
        return _gpu("qmatmul").glu(x, w, ff)
    if _cpu(x):
        gu = linear(x, w)
        return swiglu.ref(gu[:, :ff], gu[:, ff:])
    return _gpu("matmul_fused").cuda_glu(x, w, ff)


def write_kv(k_pool, v_pool, table, page_rows, start, k, v):
    if _cpu(k):
        kv_write.ref(k_pool, v_pool, table, page_rows, start, k, v)
    else:
        _gpu("kv_write").cuda(k_pool, v_pool, table, page_rows, start, k, v)


def attend(q, k_pool, v_pool, table, page_rows, start, scale):
    if _cpu(q):
        return attention.ref(q, k_pool, v_pool, table, page_rows, start, scale)
    return _gpu("attention").cuda(q, k_pool, v_pool, table, page_rows, start, scale)


def write_and_attend(q, k, v, k_pool, v_pool, rows, scale):
    """A round's KV writes and attention: rows.spans/rows.chunks on the CPU (chunk by chunk,
    write then attend), rows.dev (a RoundMap: one launch each for all chunks) on the GPU."""
    if _cpu(q):
        out = np.empty(q.shape, dtype=q.dtype)
        for (a, b), c in zip(rows.spans, rows.chunks):
            kv_write.ref(k_pool, v_pool, c.table, c.page_rows, c.start, k[a:b], v[a:b])
            out[a:b] = attention.ref(q[a:b], k_pool, v_pool, c.table, c.page_rows, c.start, scale)
        return out
    _gpu("kv_write").cuda_round(k_pool, v_pool, rows.dev, k, v)
    return _gpu("attention").cuda_round(q, k_pool, v_pool, rows.dev, scale)


def qkv_attend(qkv, nq, nkv, hd, pos, inv, k_pool, v_pool, rows, scale, norms=None, eps=0.0,
               rot=None):
    """The fused qkv GEMM's rows -> attention output [T, nq, hd]: q and k normed (Qwen3:
    norms = (q_norm, k_norm)) and rotated (the first `rot` dims of each head: GLM's partial
    RoPE; all when None), k and v written, then attention. On the GPU without norms, RoPE and
    the KV write are one launch (kernels/kv_write_cuda.rope_round)."""
    T = qkv.shape[0]
    partial = rot is not None and rot != hd
    if not partial and _cpu(qkv) and norms is None and getattr(rows, "cpu", None) is not None:
        from kernels import attention_cpu       # the CPU over GGUF blocks: one numba call
        out = np.empty((T, nq, hd), np.float32)
        attention_cpu.round_attend(qkv, nq, nkv, hd, *rows.cpu[:2], k_pool, v_pool, *rows.cpu[2:],
                                   scale, out)
        return out
    if not partial and not _cpu(qkv) and norms is None:
        q = _gpu("kv_write").rope_round(qkv, nq, nkv, hd, inv, k_pool, v_pool, rows.dev)
        mm = _gpu("matmul")              # prefill rows: the output in pi order for the o GEMM
        pi = hd % 32 == 0 and mm.tma_rows(T, nq * hd, nq * hd)
        out = _gpu("attention").cuda_round(q, k_pool, v_pool, rows.dev, scale, pi)
        return _gpu("matmul_pi").Pi(out) if pi else out
    q = qkv[:, : nq * hd].reshape(T, nq, hd)
    k = qkv[:, nq * hd:(nq + nkv) * hd].reshape(T, nkv, hd)
    v = qkv[:, (nq + nkv) * hd:].reshape(T, nkv, hd)
    if norms is not None:
        q = rms_norm(q.reshape(-1, hd), norms[0], eps).reshape(T, nq, hd)
        k = rms_norm(k.reshape(-1, hd), norms[1], eps).reshape(T, nkv, hd)
    if _cpu(qkv):                                      # the GPU kernels read strided rows
        q, k, v = (np.ascontiguousarray(a) for a in (q, k, v))
    q = rope_part(q, pos, inv, rot)
    k = rope_part(k, pos, inv, rot)
    return write_and_attend(q, k, v, k_pool, v_pool, rows, scale)


def gdn_chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk):
    """One stream's chunk through a Gated DeltaNet layer (kernels/gdn.py: the definition),
    its conv window and state updated in place; the numba form where numba is present."""
    if not _cpu(mix):
        raise NotImplementedError("Gated DeltaNet layers run on the CPU only")
    ok, _ = qmatmul.available()
    if ok:
        from kernels import gdn_cpu
        return gdn_cpu.chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk)
    from kernels import gdn
    return gdn.chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk)


def gdn_round(qkvz, ba, conv_w, A_log, dt_bias, norm_w, eps, nk, fixed, rows, name=""):
    """A round's Gated DeltaNet layer: qkvz [T, q|k|v|z], ba [T, b|a] (this rank's heads) ->
    [T, nv dv], each chunk through `gdn_chunk` over its stream's slot of `fixed` (the layer's
    (state, conv window) arrays, [streams, ...]: the KV store's fixed part)."""
    state, conv = fixed
    nv, C = A_log.shape[0], conv_w.shape[0]
    o = np.empty((qkvz.shape[0], nv * state.shape[-1]), np.float32)
    for (a, b), c in zip(rows.spans, rows.chunks):
        slot = getattr(c, "slot", -1)
        if slot < 0:
            raise ValueError(f"{name}: a chunk without a stream slot reached a recurrent "
                             "layer; its state is kept a stream (RoundChunk.slot)")
        o[a:b] = gdn_chunk(qkvz[a:b, :C], qkvz[a:b, C:], ba[a:b, :nv], ba[a:b, nv:], conv_w,
                           A_log, dt_bias, norm_w, eps, conv[slot], state[slot], nk)
    return o


def sigmoid(x):
    """1 / (1 + exp(-x)), float32, elementwise (the CPU)."""
    return np.float32(1) / (np.float32(1) + np.exp(-x))


def contiguous(x):
    return np.ascontiguousarray(x) if _cpu(x) else x


def _grouped(experts) -> bool:
    """Experts the CPU multiplies in one call: an ExpertStack of a 32-element kind."""
    if not isinstance(experts, ExpertStack):
        return False
    from kernels import moe_cpu
    return moe_cpu.fits(experts)


def rope_part(x, positions, inv, rot=None):
    """RoPE on the first `rot` dims of each head (all when None), the rest as they are."""
    if rot is None or rot == x.shape[-1]:
        return apply_rope(x, positions, inv)
    if not _cpu(x):
        raise NotImplementedError("partial RoPE runs on the CPU only")
    out = x.copy()
    out[..., :rot] = apply_rope(np.ascontiguousarray(x[..., :rot]), positions, inv)
    return out
