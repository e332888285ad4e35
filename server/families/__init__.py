"""Model families: each one module holding a family's tensors and shapes per layer, its GGUF
and Hugging Face names, its tensor-parallel split, its layer weights record and its forward
as calls on a `kernels.ops` backend. The rest of the house asks the table, never the arch:

    names.layer_shapes  -> family.layer_shapes     (the tensors a checkpoint must hold)
    gguf_names          -> family.GGUF_LAYER, family.GGUF_EXPERTS
    ModelSpec.n_params  -> family.n_params
    prepare             -> family.shard_layer      (one TP shard of a layer)
    Model.run           -> family.forward_layer    (one layer of the round)
    Model (fused?)      -> family.cpu_stages       (its CPU stages: the fused round is composed
                                                   from them, kernels/forward_cpu.compose)

Pure Python: a family module imports neither numpy nor kernels (the forward is handed the
`ops` backend, kernels.ops.backend's, and the split helpers by its callers), so the planner
may size a model with it.
"""
from __future__ import annotations

from server.families import deepseek2, glm5_next, gpt_oss, kimi_linear, llama, moe, qwen3next

FAMILIES = {
    "llama": llama, "mistral": llama, "qwen2": llama, "qwen3": llama,
    "qwen3moe": moe, "glm4moe": moe,
    "deepseek2": deepseek2,
    "gptoss": gpt_oss,
    "qwen3next": qwen3next,
    "kimilinear": kimi_linear,
    "glm5next": glm5_next,
}


def family(spec_or_arch):
    """The family module of a ModelSpec (or an arch string)."""
    arch = spec_or_arch if isinstance(spec_or_arch, str) else spec_or_arch.arch
    try:
        return FAMILIES[arch]
    except KeyError:
        raise ValueError(f"no family serves arch {arch!r}; known: {', '.join(FAMILIES)}") from None
