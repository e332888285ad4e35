"""The forward on one TP shard, over an array module (numpy or cupy): the embedding, each
layer by its family (server/families: `forward_layer`, a list of calls on the kernels.ops
backend chosen once here), the final norm and the LM head.

Tensor parallel as a transformation of the weights (server/engine/prepare.py, by the
family's `shard_layer`): q/k/v and gate/up are column-parallel, o and down row-parallel
with an all-reduce after them; the embedding, the norms and the LM head are replicated.
The code below is the same at TP=1.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from kernels import ops
from kernels.blocks import Blocks
from server.engine.rows import Rows, as_chunks
from server.families import family
from server.families.llama import LayerWeights  # noqa: F401  (the llama record, for benches)
from server.ranks.steps import EVERY_ROW

log = logging.getLogger("foldserve")


@dataclass
class ShardWeights:
    embed: object          # [vocab, d]
    norm: object           # [d]
    lm_head: object        # [d, vocab] (GPU: [vocab, d], the embedding itself when tied)
    layers: list
    nq: int                # q heads on this shard
    nkv: int               # kv heads on this shard
    ff: int                # intermediate columns on this shard
    expert_ff: int = 0     # each routed expert's intermediate columns on this shard
    shared_ff: int = 0     # the shared expert's
    mtp: object = None     # the MTP layer (server/families/nextn.py's MtpWeights), --draft mtp


class Model:
    def __init__(self, spec, weights: ShardWeights, inv_freq, xp, all_reduce=None):
        self.spec, self.w, self.inv, self.xp = spec, weights, inv_freq, xp
        self.all_reduce = all_reduce          # None at TP=1
        self.scale = spec.head_dim ** -0.5
        if spec.rope_yarn:       # YaRN's attention factor scales cos and sin: q.k by its square
            from kernels.rope import yarn_inv_freq
            mscale = yarn_inv_freq(spec.rot, spec.rope_theta, *spec.rope_yarn)[1]
            self.scale *= mscale * mscale
        if spec.attn_scale_mul != 1.0:                # YaRN's mscale**2 (deepseek2)
            self.scale *= spec.attn_scale_mul
        self.graphs = None
        self.hidden = None        # --draft mtp: the last round's rows after the final norm
        self.family = family(spec)
        self.routing = None
        if spec.moe:
            from kernels.moe import Routing
            self.routing = Routing(spec.router, spec.n_experts_used, spec.norm_topk_prob,
                                   spec.routed_scaling_factor, spec.n_group, spec.topk_group)
        # the CPU over GGUF blocks (numba present): norms, SwiGLU and attention as numba
        # calls too (the "cpu" ops backend: kernels/rmsnorm_cpu.py, attention_cpu.py); float
        # models keep the numpy definitions. The backend is chosen here, once.
        first = weights.layers[0] if weights.layers else None
        self.fast = xp is np and isinstance(getattr(first, "wqkv", None), Blocks)
        self.ops = ops.backend("cuda" if xp is not np else "cpu" if self.fast else "numpy")
        log.info("%s: %s ops (%s)", spec.name or spec.arch, self.ops.name, self.ops.describe())
        # the plain llama layer at TP=1 over 32-element blocks: the whole round in one numba
        # call (kernels/forward_cpu.py: the same functions, the same bytes, no Python between)
        self.fused = None
        if self.fast:
            self.fused = self._fused(weights, all_reduce)
        # the family's Q8_0 products against q8_0 x (kernels/kquant_cpu.Q8_0_DEF, llama.cpp's
        # arithmetic: every Q8_0 matrix kept as blocks, dense and experts) on either CPU backend
        # where numba runs the blocks (the MLA and hybrid families serve on "numpy": no wqkv):
        # families opt in (Q8_0_X8); the others keep float32 x, and TF_Q8_0_X=float turns it
        # off for every family (the ranks compare it: the fingerprint)
        from server.config import q8_0_x
        if (xp is np and getattr(self.ops, "numba", False) and getattr(self.family, "Q8_0_X8", False)
                and q8_0_x() == "auto"):
            self.ops.q80 = True
        if xp is not np:
            from kernels.matmul_packed_cuda import pack_weights
            pack_weights(weights)                       # GEMM matrices in mma fragment order
            # decode rounds replay CUDA graphs
            from server.engine.graphs import DecodeGraphs
            self.graphs = DecodeGraphs(self)

    def _fused(self, weights, all_reduce):
        """kernels/forward_cpu.Fused composed from every layer's stages (the family's
        cpu_stages) where each has a fused form (forward_cpu.FORMS), the lists compose and
        Fused.fits; else None, and why said once."""
        from kernels.forward_cpu import FORMS, STAGE_NAMES, Fused, compose
        spec, name = self.spec, self.spec.name or self.spec.arch
        stages = [tuple(self.family.cpu_stages(spec, L)) for L in weights.layers]
        unknown = sorted({s for st in stages for s in st} - set(STAGE_NAMES))
        if unknown:
            raise ValueError(f"{spec.arch}: cpu_stages names {unknown}, not among "
                             f"kernels/forward_cpu.STAGE_NAMES")
        unfused = sorted({s for st in stages for s in st} - set(FORMS))
        why = None
        if unfused:
            why = f"stages without a fused form: {', '.join(unfused)}"
        else:
            try:
                compose(stages, {})
            except ValueError as e:
                why = f"its stages do not compose: {e}"
        if why is None and not Fused.fits(weights, all_reduce, stages):
            why = "TP > 1, or a role's matrices not of one 32-element kind"
        if why is None:
            lists = list(dict.fromkeys(stages))
            log.info("%s: the CPU round runs fused (kernels/forward_cpu.py), composed from %s",
                     name, "; ".join(" | ".join(st) for st in lists))
            return Fused(weights, spec, stages)
        log.info("%s: the %s family's CPU round runs op by op (%s)", name, spec.arch, why)
        return None

    def forward(self, chunks, kv) -> object:
        """chunks: [RoundChunk] (server/engine/rows.py) over `kv` (a KVStore view with
        k(layer), v(layer) pools). Returns logits [n_wanted, vocab] (float32)."""
        chunks = as_chunks(chunks)
        if self.graphs is not None:
            logits = self.graphs.run(chunks, kv)       # decode rounds: CUDA graph replay
            if logits is not NotImplemented:
                return logits
        return self.run(self.rows(chunks), kv)

    def rows(self, chunks, width=None) -> Rows:
        """The round's row description: host lists, and device arrays on the GPU."""
        xp = self.xp
        chunks = as_chunks(chunks)
        spans, o = [], 0                                   # rows of each chunk in the round
        for c in chunks:
            spans.append((o, o + len(c.tokens)))
            o += len(c.tokens)
        ids = xp.asarray([t for c in chunks for t in c.tokens], dtype=xp.int32)
        pos = xp.asarray([c.start + i for c in chunks for i in range(len(c.tokens))], dtype=xp.int32)
        want = [i for (a, b), c in zip(spans, chunks) if c.logits
                for i in (range(a, b) if c.logits == EVERY_ROW else (b - 1,))]
        sel = xp.asarray(want, dtype=xp.int32) if want else None
        dev = cpu = None
        if xp is not np:
            from kernels.attention_cuda import round_map
            dev = round_map(chunks, self.spec.n_heads // self.spec.n_kv_heads, pos, width)
        elif self.fast and chunks:
            from kernels.attention_cpu import plan
            cpu = plan(chunks, spans, pos, self.inv)
        return Rows(chunks, spans, ids, pos, sel, dev, cpu)

    def run(self, r: Rows, kv):
        """The forward over a prepared round; device work only (CUDA graphs capture this)."""
        w, s = self.w, self.spec
        h = self.ops.embed(w.embed, r.ids)                 # h: [T, d] float32
        if self.fused is not None and r.cpu is not None:
            return self.fused.run(h, r, kv, self.scale)
        out = None
        begin = getattr(self.family, "begin_round", None)  # glm5next: h as mHC's streams
        if begin is not None:
            h = begin(self.ops, self, h)
        layer = self.family.forward_layer
        for li, L in enumerate(w.layers):
            h, out = layer(self.ops, self, L, li, h, out, r, kv)
        end = getattr(self.family, "end_round", None)      # glm5next: the streams' mean
        if end is not None:
            h, out = end(self.ops, self, h, out)
        if w.mtp is not None:     # the MTP layer reads every row's h_i (server/engine/mtp_pass.py)
            self.hidden = self.ops.add_norm(out, h, w.norm, s.rms_eps)[0]
        if r.sel is None:
            return None
        # the wanted rows only: h += out; logits = rmsnorm(h) W_head   [n_wanted, vocab]
        return self.ops.norm_linear(None if out is None else out[r.sel], h[r.sel], w.norm,
                                    s.rms_eps, w.lm_head)[0]
