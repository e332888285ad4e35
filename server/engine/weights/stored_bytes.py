"""Each TP rank's weight bytes as the file stores them, from a GGUF's tensor table alone.

`foldserve plan` prints them (no weight is read): a rank holds its shard of every split tensor
(prepare.py's table: q/k/v, gate/up by rows; o, down by columns of whole blocks) and a copy of
every other one (norms, the embedding, the LM head). The bytes are the file's: a quantized
matrix's share is its rows' or its whole blocks' bytes, the bytes the GPU keeps as stored. A
row-parallel split that would cut a block is refused here as at load, naming the tensor and
its shapes. Pure Python (the table's sizes; no numpy).
"""
from __future__ import annotations

import re

from kernels.blocks import BLOCK, BlockSplitError
from server.shapes.shard import shard_of

# GGUF tensor suffix -> (how it splits, by what): rows or columns, by q heads, kv heads or ff
_SPLIT = {
    "attn_q.weight": ("rows", "q"), "attn_q.bias": ("rows", "q"),
    "attn_k.weight": ("rows", "kv"), "attn_k.bias": ("rows", "kv"),
    "attn_v.weight": ("rows", "kv"), "attn_v.bias": ("rows", "kv"),
    "attn_output.weight": ("cols", "q"),
    "ffn_gate.weight": ("rows", "ff"), "ffn_up.weight": ("rows", "ff"),
    "ffn_down.weight": ("cols", "ff"),
    # mixture of experts: each expert's width split as the dense MLP's (server/shapes/shard.py)
    "ffn_gate_exps.weight": ("rows", "eff"), "ffn_up_exps.weight": ("rows", "eff"),
    "ffn_down_exps.weight": ("cols", "eff"),
    "ffn_gate_shexp.weight": ("rows", "sff"), "ffn_up_shexp.weight": ("rows", "sff"),
    "ffn_down_shexp.weight": ("cols", "sff"),
}
_BLK = re.compile(r"blk\.(\d+)\.")


def per_rank(tensors, spec, tp: int) -> list[dict]:
    """tensors: (name, kind, shape [out, in] or [n], nbytes) of every tensor of the file;
    -> for each rank {kind: bytes} of its share. Blocks past the trunk (a GLM file's MTP /
    NextN block, never read) are not counted."""
    out = []
    for r in range(tp):
        sh = shard_of(spec, tp, r)
        hd = spec.head_dim
        share = {"q": (sh.q_heads[0] * hd, (sh.q_heads[-1] + 1) * hd, spec.n_heads * hd),
                 "kv": (sh.kv_heads[0] * hd, (sh.kv_heads[-1] + 1) * hd, spec.n_kv_heads * hd),
                 "ff": (sh.ff[0], sh.ff[1], spec.d_ff),
                 "eff": (*sh.expert_ff, spec.expert_ff), "sff": (*sh.shared_ff, spec.shared_ff)}
        got: dict = {}
        for name, kind, shape, nbytes in tensors:
            m = _BLK.match(name)
            if m and int(m.group(1)) >= spec.n_layers:
                continue
            how = next((v for k, v in _SPLIT.items() if name.endswith("." + k)), None)
            b = nbytes
            if how is not None:
                axis, by = how
                lo, hi, whole = share[by]
                if axis == "cols" and kind in BLOCK and (lo % BLOCK[kind][0] or hi % BLOCK[kind][0]):
                    raise BlockSplitError(
                        f"{name}: columns [{lo}, {hi}) of a {shape[0]}x{shape[-1]} {kind} matrix cut "
                        f"its blocks of {BLOCK[kind][0]} at TP {tp} (rank {r}); a row-parallel split "
                        f"needs each rank's columns in whole blocks")
                b = nbytes * (hi - lo) // whole
            got[kind] = got.get(kind, 0) + b
        out.append(got)
    return out


def from_gguf(path: str, spec, tp: int) -> list[dict]:
    """per_rank over a GGUF file's tensor table (the loader's reader, gguf_file.GGUFFile: the
    header walked with the tokenizer's strings skipped, nothing of the data read)."""
    from server.engine.weights.gguf_file import GGUFFile
    reader = GGUFFile(path)
    rows = []
    for t in reader.tensors:
        shape = tuple(int(n) for n in t.shape)                          # [out, in]
        rows.append((t.name, t.type_name, shape, int(t.data.nbytes)))
    return per_rank(rows, spec, tp)


def describe(ranks: list[dict]) -> str:
    """'weights as stored: rank 0 4.91 GB (Q4_K 3.90, Q6_K 0.98, F32 0.00), rank 1 ...'."""
    parts = []
    for r, kinds in enumerate(ranks):
        tot = sum(kinds.values())
        each = ", ".join(f"{k} {v / 1e9:.2f}" for k, v in sorted(kinds.items(), key=lambda kv: -kv[1]))
        parts.append(f"rank {r} {tot / 1e9:.3f} GB ({each})")
    return "weights as stored: " + ", ".join(parts)
