"""The MoE families' forward in plain numpy float64: the definition, op by op.

    logits = forward(spec, weights, ids)     # (len(ids), vocab), causal, every position

`weights` are the HF-named float32 arrays (moe_checkpoint.hf_weights or a safetensors
file); `spec` a moe_checkpoint.MoeSpec. Meant to be read: it is what transformers 5.25's
Qwen3MoeForCausalLM and Glm4MoeForCausalLM compute, written without their machinery, and
tests/model/test_moe_checkpoints.py holds it to the recorded references (so a third
implementation agrees with transformers and llama.cpp on the records' meaning).

Per layer: x += o_proj(attn(rope(qk_norm(q, k)), v)) of rmsnorm(x); x += ffn(rmsnorm(x)),
where ffn is a dense SwiGLU MLP for the first `first_dense` layers and otherwise the MoE:
- qwen3moe: p = softmax(h Wr^T); top-k of p; weights p_top / sum(p_top); out = sum_e w_e * E_e(h).
- glm4moe:  s = sigmoid(h Wr^T); choice = s + e_score_correction_bias (selection only);
  groups of n_expert/n_group, a group's score the sum of its 2 best choice scores, the
  topk_group best groups kept; top-k of choice among them; weights s_top / (sum + 1e-20)
  (norm_topk_prob) times routed_scaling_factor; out = sum_e w_e * E_e(h) + shared(h).
E_e(h) = down_e(silu(gate_e h) * up_e h). RoPE is NeoX-style (rotate_half) on the first
rope_dim = head_dim * partial_rotary dims of each head, inv_freq theta^(-2i/rope_dim).
Ties in a top-k are broken towards the lower index (numpy's stable sort).
- deepseek2 (DeepseekV3ForCausalLM, Glm4MoeLiteForCausalLM): glm4moe's router and MLP
  (DeepseekV2ForCausalLM: the softmax router, plain top-k, times routed_scaling_factor); multi-head latent attention
  in its textbook (unabsorbed) form, `mla_attention` (foldserve runs the absorbed form,
  kernels/mla.py): q = q_b(rmsnorm(q_a h)), [c | k_pe] = kv_a h, [k_nope | v] = kv_b
  rmsnorm(c) per head, RoPE interleaved (pairs 2i, 2i+1) on q_pe and the shared k_pe,
  scores (q_nope.k_nope + q_pe.k_pe) / sqrt(qk_nope + qk_rope).
"""
from __future__ import annotations

import numpy as np


def rmsnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1.0 + np.exp(-x))


def rope(x: np.ndarray, pos: np.ndarray, rope_dim: int, theta: float) -> np.ndarray:
    """x: (T, heads, head_dim); NeoX rotation of the first rope_dim dims."""
    half = rope_dim // 2
    inv = 1.0 / theta ** (np.arange(0, rope_dim, 2, dtype=np.float64) / rope_dim)
    ang = pos[:, None].astype(np.float64) * inv[None, :]            # (T, half)
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    x1, x2 = x[..., :half], x[..., half:rope_dim]
    out = x.copy()
    out[..., :half] = x1 * cos - x2 * sin
    out[..., half:rope_dim] = x2 * cos + x1 * sin
    return out


def _topk(scores: np.ndarray, k: int) -> np.ndarray:
    return np.argsort(-scores, axis=-1, kind="stable")[..., :k]


def route(spec, w: dict, p: str, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(expert ids (T, k), their weights (T, k)) for the MoE layer with prefix p."""
    logits = h @ w[p + "mlp.gate.weight"].T
    k = spec.n_expert_used
    if spec.softmax_router:          # Qwen3-MoE, DeepSeek-V2 (greedy top-k, one group)
        e = np.exp(logits - logits.max(-1, keepdims=True))
        prob = e / e.sum(-1, keepdims=True)
        idx = _topk(prob, k)
        top = np.take_along_axis(prob, idx, -1)
        top = top / top.sum(-1, keepdims=True) if spec.norm_topk_prob else top
        return idx, top * spec.routed_scaling
    s = 1.0 / (1.0 + np.exp(-logits))
    choice = s + w[p + "mlp.gate.e_score_correction_bias"]
    g = spec.n_group
    per = spec.n_expert // g
    grouped = choice.reshape(-1, g, per)
    group_score = np.sort(grouped, axis=-1)[..., -2:].sum(-1)          # (T, g)
    keep = _topk(group_score, spec.topk_group)
    mask = np.zeros_like(group_score, dtype=bool)
    np.put_along_axis(mask, keep, True, -1)
    masked = np.where(np.repeat(mask, per, axis=-1), choice, -np.inf)
    idx = _topk(masked, k)
    top = np.take_along_axis(s, idx, -1)
    if spec.norm_topk_prob:
        top = top / (top.sum(-1, keepdims=True) + 1e-20)
    return idx, top * spec.routed_scaling


def _mlp(w: dict, p: str, h: np.ndarray) -> np.ndarray:
    return (silu(h @ w[p + "gate_proj.weight"].T) * (h @ w[p + "up_proj.weight"].T)) @ w[p + "down_proj.weight"].T


def moe(spec, w: dict, p: str, h: np.ndarray) -> np.ndarray:
    idx, wt = route(spec, w, p, h)
    out = np.zeros_like(h)
    for t in range(h.shape[0]):
        for j in range(idx.shape[1]):
            out[t] += wt[t, j] * _mlp(w, f"{p}mlp.experts.{idx[t, j]}.", h[t:t + 1])[0]
    if spec.n_shared:
        out += _mlp(w, p + "mlp.shared_experts.", h)
    return out


def attention(spec, w: dict, p: str, h: np.ndarray, pos: np.ndarray) -> np.ndarray:
    T, D = h.shape[0], spec.head_dim
    a = p + "self_attn."

    def proj(x):
        y = h @ w[f"{a}{x}_proj.weight"].T
        return y + w[f"{a}{x}_proj.bias"] if spec.attention_bias else y
    q = proj("q").reshape(T, spec.n_head, D)
    k = proj("k").reshape(T, spec.n_head_kv, D)
    v = proj("v").reshape(T, spec.n_head_kv, D)
    if spec.qk_norm:
        q = rmsnorm(q, w[a + "q_norm.weight"], spec.rms_eps)
        k = rmsnorm(k, w[a + "k_norm.weight"], spec.rms_eps)
    q, k = rope(q, pos, spec.rope_dim, spec.rope_theta), rope(k, pos, spec.rope_dim, spec.rope_theta)
    rep = spec.n_head // spec.n_head_kv
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)        # head h uses kv head h // rep
    scores = np.einsum("thd,shd->hts", q, k) / np.sqrt(D)
    scores = np.where(np.tril(np.ones((T, T), bool))[None], scores, -np.inf)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    scores /= scores.sum(-1, keepdims=True)
    o = np.einsum("hts,shd->thd", scores, v).reshape(T, spec.n_head * D)
    return o @ w[a + "o_proj.weight"].T


def rope_interleaved(x: np.ndarray, pos: np.ndarray, theta: float) -> np.ndarray:
    """x: (T, heads, R); pairs (2i, 2i+1) rotated by pos * theta^(-2i/R)."""
    R = x.shape[-1]
    inv = 1.0 / theta ** (np.arange(0, R, 2, dtype=np.float64) / R)
    f = pos[:, None].astype(np.float64) * inv[None, :]
    cos, sin = np.cos(f)[:, None, :], np.sin(f)[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = b * cos + a * sin
    return out


def mla_attention(spec, w: dict, p: str, h: np.ndarray, pos: np.ndarray) -> np.ndarray:
    T, H = h.shape[0], spec.n_head
    N, R, V, C = spec.qk_nope_head_dim, spec.qk_rope_head_dim, spec.v_head_dim, spec.kv_lora_rank
    a = p + "self_attn."
    if spec.q_lora_rank:
        q = rmsnorm(h @ w[a + "q_a_proj.weight"].T, w[a + "q_a_layernorm.weight"], spec.rms_eps)
        q = q @ w[a + "q_b_proj.weight"].T
    else:
        q = h @ w[a + "q_proj.weight"].T
    q = q.reshape(T, H, N + R)
    ckv = h @ w[a + "kv_a_proj_with_mqa.weight"].T
    c = rmsnorm(ckv[:, :C], w[a + "kv_a_layernorm.weight"], spec.rms_eps)
    kv = (c @ w[a + "kv_b_proj.weight"].T).reshape(T, H, N + V)
    k_nope, v = kv[..., :N], kv[..., N:]
    q_pe = rope_interleaved(q[..., N:], pos, spec.rope_theta)
    k_pe = rope_interleaved(ckv[:, None, C:], pos, spec.rope_theta)[:, 0]        # (T, R)
    scores = (np.einsum("thd,shd->hts", q[..., :N], k_nope)
              + np.einsum("thd,sd->hts", q_pe, k_pe)) / np.sqrt(N + R)
    scores = np.where(np.tril(np.ones((T, T), bool))[None], scores, -np.inf)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    scores /= scores.sum(-1, keepdims=True)
    o = np.einsum("hts,shd->thd", scores, v).reshape(T, H * V)
    return o @ w[a + "o_proj.weight"].T


def forward(spec, weights: dict, ids) -> np.ndarray:
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    ids = np.asarray(ids)
    pos = np.arange(len(ids))
    x = w["model.embed_tokens.weight"][ids]
    for i in range(spec.n_layer):
        p = f"model.layers.{i}."
        attn = mla_attention if spec.family == "deepseek2" else attention
        x = x + attn(spec, w, p, rmsnorm(x, w[p + "input_layernorm.weight"], spec.rms_eps), pos)
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], spec.rms_eps)
        x = x + (moe(spec, w, p, h) if spec.is_moe_layer(i) else _mlp(w, p + "mlp.", h))
    return rmsnorm(x, w["model.norm.weight"], spec.rms_eps) @ w["lm_head.weight"].T


def mtp_forward(spec, weights: dict, ids) -> np.ndarray:
    """The MTP (NextN) layer n = spec.n_layer over a sequence, float64: row i (0 .. T - 2)
    guesses ids[i + 2] from the trunk's hidden state at i after the final norm and the
    embedding of ids[i + 1] (DeepSeek-V3's MTP module; vLLM's deepseek_mtp; llama.cpp's
    graph_mtp, src/models/glm4-moe.cpp):

        x = eh_proj([rmsnorm(embed(ids[i+1]), enorm) | rmsnorm(h_i, hnorm)])
        x = the family's decoder layer n on x, position i (causal over the MTP rows)
        logits = rmsnorm(x, shared_head.norm) @ lm_head^T     -> (T - 1, vocab)

    `weights` hold the trunk's and model.layers.{n}.{eh_proj,enorm,hnorm,shared_head.norm}
    with the layer's decoder tensors (server/families/nextn.py reads the same names)."""
    w = {k: np.asarray(v, dtype=np.float64) for k, v in weights.items()}
    ids = np.asarray(ids)
    T = len(ids)
    pos = np.arange(T)
    x = w["model.embed_tokens.weight"][ids]
    attn = mla_attention if spec.family == "deepseek2" else attention
    for i in range(spec.n_layer + 1):
        p = f"model.layers.{i}."
        if i == spec.n_layer:                        # the MTP layer: rows 0 .. T - 2
            hn = rmsnorm(x[:-1], w["model.norm.weight"], spec.rms_eps)
            e = w["model.embed_tokens.weight"][ids[1:]]
            x = np.concatenate([rmsnorm(e, w[p + "enorm.weight"], spec.rms_eps),
                                rmsnorm(hn, w[p + "hnorm.weight"], spec.rms_eps)], axis=1)
            x = x @ w[p + "eh_proj.weight"].T
            pos = pos[:-1]
        x = x + attn(spec, w, p, rmsnorm(x, w[p + "input_layernorm.weight"], spec.rms_eps), pos)
        h = rmsnorm(x, w[p + "post_attention_layernorm.weight"], spec.rms_eps)
        x = x + (moe(spec, w, p, h) if spec.is_moe_layer(i) else _mlp(w, p + "mlp.", h))
    p = f"model.layers.{spec.n_layer}."
    return rmsnorm(x, w[p + "shared_head.norm.weight"], spec.rms_eps) @ w["lm_head.weight"].T
