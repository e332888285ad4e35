"""Turn Hugging Face-named tensors into one shard's weights: the table-driven TP split.

  q_proj [H*hd, d]    rows of this shard's q heads    -> column-parallel
  k/v_proj [KV*hd, d] rows of this shard's kv heads   -> column-parallel
  o_proj [d, H*hd]    columns of this shard's q heads -> row-parallel (all-reduce after)
  gate/up [ff, d]     rows [lo, hi) of ff            -> column-parallel
  down [d, ff]        columns [lo, hi) of ff         -> row-parallel (all-reduce after)
On the CPU every matrix is stored transposed ([in, out]) so the forward is x @ W (numpy);
on the GPU it stays [out, in], the orientation our tensor-core GEMM reads (x @ W^T), and a
tied LM head is then the embedding array itself.

A matrix kept as its GGUF blocks (kernels.blocks.Blocks, [out, in] always)
splits the same way: column-parallel = take_rows, row-parallel = take_cols on whole blocks
(a split that would cut a block is refused here, at load, naming the tensor and shapes).
Where the backend reads no Blocks (`keep_blocks` False: the GPU until its kernels over blocks
land, or the CPU without numba) they are dequantized as they arrive, said once in a line
naming the cost.
"""
from __future__ import annotations

import logging

import numpy as np

from server.engine.model import ShardWeights
from server.shapes.shard import Shard
from kernels.blocks import BlockSplitError, Blocks, ExpertGateUp, ExpertStack, MixedBlocks, \
    concat_cols, concat_rows, hugepage_copy
from server.engine.weights.loaded import WeightsError

log = logging.getLogger("foldserve")


def _xp(a):
    """numpy, or cupy when the tensors were made on the device (dummy 8B shapes)."""
    if type(a).__module__.startswith("cupy"):
        import cupy
        return cupy
    return np


def _dense(parts):
    """Parts of one matrix, float32: Blocks among them dequantized (mixed kinds, Q4_K_M's
    Q6_K v beside Q4_K q and k, cannot share one Blocks)."""
    if any(isinstance(p, Blocks) for p in parts):
        kinds = sorted({p.kind if isinstance(p, Blocks) else str(p.dtype) for p in parts})
        log.warning("dequantizing a matrix of mixed kinds %s to float32 (its blocks cannot be "
                    "stacked as one)", "+".join(kinds))
    return [p.dequantize() if isinstance(p, Blocks) else p for p in parts]


def _cat(parts, axis=0, mixed=False):
    if all(isinstance(p, Blocks) for p in parts) and len({p.kind for p in parts}) == 1:
        return concat_rows(parts) if axis == 0 else concat_cols(parts)
    if mixed and axis == 0 and all(isinstance(p, Blocks) for p in parts):
        return MixedBlocks(parts)
    parts = _dense(parts)
    return _xp(parts[0]).concatenate(parts, axis=axis)


def _contig(a):
    return a if isinstance(a, (Blocks, MixedBlocks)) else _xp(a).ascontiguousarray(a)


def _rows(w, heads, hd: int):
    if isinstance(w, Blocks):
        return w.take_rows(np.concatenate([np.arange(h * hd, (h + 1) * hd) for h in heads]))
    return _cat([w[h * hd:(h + 1) * hd] for h in heads], axis=0)


def _take(w, lo: int, hi: int):
    return w.take_rows(slice(lo, hi)) if isinstance(w, Blocks) else w[lo:hi]


def _cols(w, lo: int, hi: int, name: str):
    """Columns [lo, hi) of a row-parallel matrix; Blocks only in whole blocks."""
    if not isinstance(w, Blocks):
        return w[:, lo:hi]
    try:
        return w.take_cols(lo, hi)
    except BlockSplitError as e:
        raise WeightsError(f"{name}: {e}") from None


def _head_cols(w, heads, hd: int, name: str):
    heads = list(heads)
    if heads == list(range(heads[0], heads[-1] + 1)):        # one range (every split today)
        return _cols(w, heads[0] * hd, (heads[-1] + 1) * hd, name)
    return _cat([_cols(w, h * hd, (h + 1) * hd, name) for h in heads], axis=1)


class _Dequantized:
    """get(name) with Blocks dequantized as they arrive (unless the backend reads them), the
    cost said once. `keep` is a bool or a callable -> (bool, why), asked at the first Blocks
    only (a float32 model never imports the CPU kernels' JIT)."""

    def __init__(self, get, keep, why: str):
        self.get, self.keep, self.why, self.stored, self.floats = get, keep, why, 0, 0

    def __call__(self, name):
        a = self.get(name)
        if isinstance(a, Blocks):
            if callable(self.keep):
                self.keep, self.why = self.keep()
            if self.keep:
                return a
            self.stored += a.nbytes
            self.floats += a.rows * a.cols * 4
            return a.dequantize()
        return a

    def said(self):
        if self.stored:
            log.warning("dequantizing the model's quantized blocks to float32 %s: %.0f MB as "
                        "stored -> %.0f MB (%.1fx the memory and bytes a step)", self.why,
                        self.stored / 1e6, self.floats / 1e6, self.floats / self.stored)


def shard_weights(spec, get, shard: Shard, to_device=lambda a: a, out_in: bool = False,
                  keep_blocks=False, why: str = "", mixed: bool = False) -> ShardWeights:
    """get(name) -> float32 ndarray in HF orientation, or Blocks (lets dummy weights come one
    at a time). out_in: keep matrices [out, in] (the GPU) instead of [in, out] (the CPU);
    Blocks are [out, in] whatever out_in. keep_blocks: the backend reads Blocks (a bool, or a
    callable -> (bool, why) asked at the first Blocks); else they are dequantized on arrival,
    with one warning saying `why` and the cost. mixed (with keep_blocks): a fused matrix whose
    parts differ in kind comes to to_device as MixedBlocks, else it is dequantized with a
    warning."""
    deq = _Dequantized(get, keep_blocks, why)
    sw = _shard_weights(spec, deq, shard, to_device, out_in, mixed and bool(keep_blocks))
    deq.said()
    return sw


class Split:
    """The split helpers a family's shard_layer uses (server/families): get a tensor, take
    heads' rows, a column range, concatenate, orient for the backend, move to the device."""

    def __init__(self, get, to_device, out_in: bool, mixed: bool):
        self.get, self.dev, self.mixed, self.out_in = get, to_device, mixed, out_in
        self.orient = _contig if out_in else (lambda a: _contig(a if isinstance(a, (Blocks, MixedBlocks)) else a.T))

    rows = staticmethod(_rows)
    take = staticmethod(_take)
    cols = staticmethod(_cols)
    head_cols = staticmethod(_head_cols)

    def cat(self, parts, axis=0, mixed=False):
        return _cat(parts, axis=axis, mixed=mixed and self.mixed)

    @staticmethod
    def join_rows(a, b):
        """(a | b as one matrix, then a and b as views of its rows) where both are Blocks of one
        kind and width: one product then reads both, each output element still its own row's
        one chain (kernels/blocks_cpu.py), so the same bytes, and no second copy held; else
        None."""
        if isinstance(a, Blocks) and isinstance(b, Blocks) and a.kind == b.kind and a.cols == b.cols:
            j = concat_rows([a, b])
            return j, j.take_rows(slice(0, a.rows)), j.take_rows(slice(a.rows, j.rows))
        return None

    @staticmethod
    def kv_b_dense(w_ukt, w_uv, nope: int, c: int):
        """kv_b_heads' pair (W_UK transposed [H, C, N], W_UV [H, V, C]; float32 or Q8_0 rows
        as stored) -> (W_UK [H, N, C], W_UV transposed [H, C, V]) float32, contiguous: the
        forms kernels/dsa.py multiplies by."""
        def dense(a, cols):
            a = np.asarray(a)
            if a.dtype == np.uint8:                       # Q8_0 rows as stored
                H, R = a.shape[:2]
                a = Blocks("Q8_0", H * R, cols, a.reshape(H * R, -1)).dequantize().reshape(H, R, cols)
            return np.ascontiguousarray(np.asarray(a, np.float32).transpose(0, 2, 1))
        return dense(w_ukt, nope), dense(w_uv, c)

    @staticmethod
    def kv_b_heads(w, n_heads: int, heads, nope: int, v: int, c: int):
        """Latent attention's kv_b [n_heads (nope + v), c] -> (W_UK transposed [H_r, c, nope],
        W_UV [H_r, v, c]) of `heads` (the CPU only): float32, or, where the GGUF keeps both
        halves as Q8_0 (gguf_loader.KvBHalves) and numba loads, their Q8_0 rows as stored
        (uint8 [H_r, c, nope / 32 * 34], [H_r, v, c / 32 * 34]: kernels/mla_cpu.py reads either
        to the same bytes)."""
        hs = list(heads)
        if hasattr(w, "k_b"):
            from kernels import qmatmul
            if qmatmul.available()[0]:
                kb = w.k_b.data.reshape(n_heads, c, -1)
                vb = w.v_b.data.reshape(n_heads, v, -1)
                return np.ascontiguousarray(kb[hs]), np.ascontiguousarray(vb[hs])
        w = w.dequantize() if hasattr(w, "dequantize") else w
        kv_b = np.asarray(w, np.float32).reshape(n_heads, nope + v, c)
        return (np.ascontiguousarray(kv_b[hs, :nope].transpose(0, 2, 1)),
                np.ascontiguousarray(kv_b[hs, nope:]))

    @staticmethod
    def is_blocks(w) -> bool:
        """Whether w is kept as the file's blocks (Blocks or MixedBlocks: the backend reads
        them as stored), not a float array."""
        return isinstance(w, (Blocks, MixedBlocks))

    @staticmethod
    def f32(w):
        """A tensor as float32 numpy (Blocks dequantized)."""
        w = w.dequantize() if hasattr(w, "dequantize") else w
        return np.asarray(w, np.float32)

    @staticmethod
    def stack(parts):
        """Row-stacked float32 parts, one contiguous array."""
        return np.ascontiguousarray(np.concatenate(parts))

    @staticmethod
    def gated_q(w, n_heads: int, heads, hd: int):
        """Qwen3-Next's q_proj [n_heads * 2 hd, d], each head's rows [q | gate] -> (q rows,
        gate rows) of `heads` (the CPU only): Blocks as stored (rows taken as bytes), else
        float32."""
        heads = list(heads)
        q = np.concatenate([np.arange(2 * h * hd, (2 * h + 1) * hd) for h in heads])
        if isinstance(w, Blocks):
            return w.take_rows(q), w.take_rows(q + hd)
        w = Split.f32(w)
        return w[q], w[q + hd]

    @staticmethod
    def gdn_linear(get, a: str, nk: int, nv: int, dk: int, dv: int, lo: int, hi: int) -> dict:
        """A Gated DeltaNet layer's tensors (prefix a = 'model.layers.N.linear_attn.') for k
        heads [lo, hi) and their v heads, [out, in]: HF's in_proj_qkvz rows (per k head
        [q | k | v (r dv) | z (r dv)]) regrouped as q | k | v | z of these heads, in_proj_ba's
        (per k head [b (r) | a (r)]) as b | a, the conv's channels (q all | k all | v all) as
        this rank's q | k | v, and A_log, dt_bias of its v heads. in_proj_qkvz and in_proj_ba
        kept as Blocks stay Blocks (their rows taken as bytes, kernels.blocks), else float32;
        the rest float32."""
        r = nv // nk
        f = lambda n: Split.f32(get(a + n))
        hs = range(lo, hi)
        w = 2 * dk + 2 * r * dv                       # rows a k head in in_proj_qkvz
        span = lambda off, n: np.concatenate([h * w + off + np.arange(n) for h in hs])
        rows = np.concatenate([span(0, dk), span(dk, dk), span(2 * dk, r * dv),
                               span(2 * dk + r * dv, r * dv)])
        bspan = lambda off: np.concatenate([h * 2 * r + off + np.arange(r) for h in hs])
        brows = np.concatenate([bspan(0), bspan(r)])

        def take(name, idx):
            m = get(a + name)
            if isinstance(m, Blocks):
                return m.take_rows(idx)
            return np.ascontiguousarray(Split.f32(m)[idx])
        conv = f("conv1d.weight")[:, 0, :]
        K = nk * dk
        cw = np.concatenate([conv[lo * dk:hi * dk], conv[K + lo * dk:K + hi * dk],
                             conv[2 * K + lo * r * dv:2 * K + hi * r * dv]])
        vs = slice(lo * r, hi * r)
        c = np.ascontiguousarray
        return dict(wqkvz=take("in_proj_qkvz.weight", rows), wba=take("in_proj_ba.weight", brows),
                    conv_w=c(cw), A_log=c(f("A_log")[vs]),
                    dt_bias=c(f("dt_bias")[vs]), gnorm=c(f("norm.weight")))

    def experts_gate_up(self, gates: list, ups: list) -> list:
        """A layer's experts' gate and up (this shard's rows, [out, in]): on the CPU, where
        they are Blocks of one kind and shape, an ExpertGateUp (the two stacks as the file
        holds them, no fused copy); else each expert's gate|up fused (as shard_mlp makes it)
        and `experts` of those."""
        parts = gates + ups
        if not self.out_in and parts and all(isinstance(p, Blocks) for p in parts) and \
                len({(p.kind, p.rows, p.cols) for p in parts}) == 1:
            return ExpertGateUp(gates, ups)
        return self.experts([self.dev(self.orient(self.cat([g, u], axis=0, mixed=True)))
                             for g, u in zip(gates, ups)])

    def experts(self, parts: list) -> list:
        """A layer's experts (one matrix each): an ExpertStack where they are Blocks of one
        kind and shape (one array, read by kernels/moe_cpu.py), else the list as it is."""
        if parts and all(isinstance(p, Blocks) for p in parts) and \
                len({(p.kind, p.rows, p.cols) for p in parts}) == 1:
            return ExpertStack(parts)
        return parts


def _shard_weights(spec, get, shard, to_device, out_in, mixed=False) -> ShardWeights:
    from server.families import family
    fam = family(spec)
    sp = Split(get, to_device, out_in, mixed)
    layers = [fam.shard_layer(spec, i, sp, shard) for i in range(spec.n_layers)]
    lo, hi = shard.ff
    orient = sp.orient
    embed = get("model.embed_tokens.weight")
    head = embed if spec.tie_embeddings else get("lm_head.weight")
    embed_dev = to_device(embed)
    if (out_in or isinstance(embed, Blocks)) and spec.tie_embeddings:
        lm_head = embed_dev                          # [vocab, d] is already [out, in]
    else:
        lm_head = to_device(orient(head))
    if isinstance(lm_head, Blocks) and isinstance(lm_head.data, np.ndarray):
        # the CPU streams the whole head every decode step: its bytes on 2 MiB pages
        # (kernels/blocks.hugepage_copy; the same bytes)
        lm_head = Blocks(lm_head.kind, lm_head.rows, lm_head.cols, hugepage_copy(lm_head.data))
        if spec.tie_embeddings and isinstance(embed_dev, Blocks):
            embed_dev = lm_head
    norm = get("model.norm.weight")
    if getattr(spec, "zero_centred_norms", False):     # HF Qwen3-Next: (1 + w)
        norm = norm + 1
    mtp_w = None
    if getattr(spec, "mtp_layers", 0):               # --draft mtp: the NextN layer too
        from server.families import nextn as mtp
        mtp_w = mtp.shard(spec, sp, shard)
    return ShardWeights(embed=embed_dev, norm=to_device(norm),
                        lm_head=lm_head, layers=layers,
                        nq=shard.n_q, nkv=shard.n_kv, ff=hi - lo,
                        expert_ff=shard.expert_ff[1] - shard.expert_ff[0],
                        shared_ff=shard.shared_ff[1] - shard.shared_ff[0], mtp=mtp_w)


def weight_bytes(sw: ShardWeights) -> dict:
    """{kind: bytes} of a shard's weights as held (each array once, a tied head with its
    embedding): GGUF blocks by their kind ("Q4_K", a stack "Q4_K+Q6_K"), arrays by dtype."""
    seen, out = set(), {}

    def add(w):
        if w is None or id(w) in seen:
            return
        seen.add(id(w))
        kind = getattr(w, "kind", None)
        if kind is None:
            kind = str(getattr(w, "dtype", type(w).__name__))
        out[kind] = out.get(kind, 0) + int(w.nbytes)
    mtp = getattr(sw, "mtp", None)
    for L in sw.layers + ([mtp.layer] if mtp is not None else []):
        for f in L.__dataclass_fields__:           # the family's record, field by field
            w = getattr(L, f)
            if isinstance(w, ExpertStack):
                add(w)                               # its views share one array
                continue
            if isinstance(w, ExpertGateUp):          # two stacks, each one array
                add(w.gate)
                add(w.up)
                continue
            for part in (w if isinstance(w, list) else [w]):      # MixedBlocks (CPU): each part's kind
                add(part)
    for w in (sw.embed, sw.norm, sw.lm_head):
        add(w)
    if mtp is not None:                              # the MTP layer's own (--draft mtp)
        for w in (mtp.enorm, mtp.hnorm, mtp.eh_proj, mtp.head_norm):
            add(w)
    return out


def describe_weight_bytes(sw: ShardWeights) -> str:
    """'4.62 GB: Q4_K 3.90 GB, Q4_K+Q6_K 0.12 GB, ...' (largest first)."""
    b = weight_bytes(sw)
    parts = ", ".join(f"{k} {v / 1e9:.2f} GB" for k, v in sorted(b.items(), key=lambda kv: -kv[1]))
    return f"{sum(b.values()) / 1e9:.2f} GB: {parts}"
