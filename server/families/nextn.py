"""The MTP (NextN) layer of a checkpoint that carries one after its trunk: GLM-4.5/4.7
(`glm4moe`), DeepSeek-V3 / GLM-4.7-Flash (`deepseek2`). It drafts (server/drafts/mtp.py);
it never decides a token: every draft is verified against the trunk's own row.

Layer n = n_layers of the file (`model.layers.{n}.*`, GGUF `blk.{n}.*`), as DeepSeek-V3's
paper, vLLM's deepseek_mtp and llama.cpp's graph_mtp (src/models/glm4-moe.cpp,
deepseek2.cpp) run it. For position i, with h_i the trunk's last hidden state at i after
the final norm (what the LM head reads) and t_{i+1} the token at i + 1:

    x    = eh_proj([enorm(embed(t_{i+1})) | hnorm(h_i)])       [d]   (eh_proj: [d, 2d])
    y    = the family's decoder layer n on x at position i       (its own KV rows: layer n of
                                                                  the stream's pages)
    g    = shared_head.norm(y)                                  the next step's h
    logits = g @ the LM head                                    a guess at t_{i+2}

A draft of k tokens chains it: position i + j reads the g of position i + j - 1 and the
token drafted there. The embedding and the head are the trunk's (a file's own
`embed_tokens` / `shared_head.head` copies, where present, are the same matrices in
DeepSeek-V3 and GLM files and are not read).

Pure Python (see server/families): shapes, the split and the forward handed `ops`.
"""
from __future__ import annotations

from dataclasses import dataclass

NAME = "nextn"
ARCHS = ("glm4moe", "deepseek2")      # families whose files carry a NextN layer we run

# GGUF suffixes of a NextN block's own tensors (blk.{n}.nextn.*) -> ours (model.layers.{n}.*)
GGUF_NEXTN = {
    "nextn.eh_proj.weight": "eh_proj.weight",
    "nextn.enorm.weight": "enorm.weight",
    "nextn.hnorm.weight": "hnorm.weight",
    "nextn.shared_head_norm.weight": "shared_head.norm.weight",
}
# the trunk's copies a file may carry: not read (the trunk's own are used)
COPIES = ("nextn.embed_tokens.weight", "nextn.shared_head_head.weight",
          "embed_tokens.weight", "shared_head.head.weight")


@dataclass
class MtpWeights:
    enorm: object              # [d]
    hnorm: object              # [d]
    eh_proj: object            # [2d, d] as the shard's matrices are held (replicated)
    head_norm: object          # [d] shared_head.norm
    layer: object              # the family's layer record of layer n (its TP shard)
    li: int                    # n: the layer's index, and its KV rows' layer


def supported(spec) -> bool:
    return spec.arch in ARCHS and spec.nextn_layers > 0


def refusal(spec) -> str | None:
    """Why `--draft mtp` cannot run on this model (None: it can)."""
    who = spec.name or spec.arch
    if spec.arch not in ARCHS:
        return (f"--draft mtp: {who} ({spec.arch}) has no MTP layer foldserve runs (MTP: "
                f"{', '.join(ARCHS)} files with a NextN block); use --draft ngram or off")
    if spec.nextn_layers < 1:
        return (f"--draft mtp: {who}'s file carries no MTP / NextN layer (nextn_predict_layers "
                "0); use --draft ngram or off")
    return None


def with_mtp(spec, tp: int = 1):
    """spec with its MTP layer run (mtp_layers 1), or UnsupportedModel naming why not
    (`--draft mtp` on a model without one). Any TP: the layer splits as the trunk's."""
    from server.shapes.spec import UnsupportedModel
    why = refusal(spec)
    if why:
        raise UnsupportedModel(why)
    if spec.mtp_layers:
        return spec
    from dataclasses import replace
    return replace(spec, mtp_layers=1)


def own_shapes(spec) -> dict:
    """The NextN block's own tensors (beside its decoder layer's)."""
    d, p = spec.d_model, f"model.layers.{spec.n_layers}."
    return {p + "eh_proj.weight": (d, 2 * d), p + "enorm.weight": (d,),
            p + "hnorm.weight": (d,), p + "shared_head.norm.weight": (d,)}


def shapes(spec) -> dict:
    """Every tensor the MTP layer reads: its decoder layer (the family's layer n) and its own."""
    from server.families import family
    return {**family(spec).layer_shapes(spec, spec.n_layers), **own_shapes(spec)}


def shard(spec, sp, shard_) -> MtpWeights:
    """One TP shard of the MTP layer: its decoder layer split as the trunk's layers are;
    eh_proj and the norms replicated."""
    from server.families import family
    n, p = spec.n_layers, f"model.layers.{spec.n_layers}."
    get, dev = sp.get, sp.dev
    return MtpWeights(enorm=dev(get(p + "enorm.weight")), hnorm=dev(get(p + "hnorm.weight")),
                      eh_proj=dev(sp.orient(get(p + "eh_proj.weight"))),
                      head_norm=dev(get(p + "shared_head.norm.weight")),
                      layer=family(spec).shard_layer(spec, n, sp, shard_), li=n)


def forward(ops, m, W: MtpWeights, ids, hidden, r, kv):
    """The MTP layer over a round's rows `r` (its chunks' tokens are t_{i+1}, positions i):
    ids [T] the tokens, hidden [T, d] the h_i each row reads -> (g [T, d], the normed
    output each row hands the next draft step). Logits are the caller's (g @ the head)."""
    s, xp = m.spec, m.xp
    e = ops.embed(m.w.embed, ids)
    en = ops.rms_norm(e, W.enorm, s.rms_eps)
    hn = ops.rms_norm(hidden, W.hnorm, s.rms_eps)
    x = ops.linear(xp.ascontiguousarray(xp.concatenate([en, hn], axis=1)), W.eh_proj)
    from server.families import family
    h, out = family(s).forward_layer(ops, m, W.layer, W.li, x, None, r, kv)
    g, _ = ops.add_norm(out, h, W.head_norm, s.rms_eps)
    return g
