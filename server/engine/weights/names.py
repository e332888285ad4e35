"""The tensors a model holds, by Hugging Face name, with their shapes (its family's table).

Weights are in HF orientation [out_features, in_features]. Pure Python (no numpy), so
the planner can size a model without loading it.
"""
from __future__ import annotations

from server.families import family
from server.shapes.spec import ModelSpec
from .loaded import WeightsError

EMBED = "model.embed_tokens.weight"
NORM = "model.norm.weight"
HEAD = "lm_head.weight"


def layer_shapes(spec: ModelSpec, i: int) -> dict[str, tuple[int, ...]]:
    """Layer i's tensors, by the model's family (server/families)."""
    return family(spec).layer_shapes(spec, i)


def tensor_shapes(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor of `spec`, including lm_head.weight (which aliases the embedding when tied);
    with `spec.mtp_layers` (--draft mtp) the MTP layer's too (server/families/nextn.py)."""
    out = {EMBED: (spec.vocab, spec.d_model)}
    for i in range(spec.n_layers):
        out.update(layer_shapes(spec, i))
    if getattr(spec, "mtp_layers", 0):
        from server.families import nextn as mtp
        out.update(mtp.shapes(spec))
    out[NORM] = (spec.d_model,)
    out[HEAD] = (spec.vocab, spec.d_model)
    return out


def stored_names(spec: ModelSpec) -> list[str]:
    """The tensors a file must hold: lm_head only when it is not tied."""
    return [n for n in tensor_shapes(spec) if not (n == HEAD and spec.tie_embeddings)]


def n_floats(spec: ModelSpec) -> int:
    """Floats to hold the model in memory (a tied head costs nothing)."""
    def size(shape):
        k = 1
        for s in shape:
            k *= s
        return k
    layers = sum(size(s) for i in range(spec.n_layers) for s in layer_shapes(spec, i).values())
    if getattr(spec, "mtp_layers", 0):
        from server.families import nextn as mtp
        layers += sum(size(s) for s in mtp.shapes(spec).values())
    head = 0 if spec.tie_embeddings else spec.vocab * spec.d_model
    return layers + spec.vocab * spec.d_model + head + spec.d_model


def check_tensors(spec: ModelSpec, tensors: dict, source: str) -> None:
    """Every expected tensor is present at its shape, and nothing else is."""
    want = tensor_shapes(spec)
    missing = [n for n in want if tensors.get(n) is None]
    if missing:
        raise WeightsError(f"{source}: missing tensor(s) {', '.join(missing[:5])}"
                           + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    extra = [n for n in tensors if n not in want]
    if extra:
        raise WeightsError(f"{source}: unexpected tensor(s) {', '.join(extra[:5])} for a "
                           f"{spec.arch} model; foldserve would ignore their weights")
    for n, shape in want.items():
        got = tuple(tensors[n].shape)
        if got != shape:
            raise WeightsError(f"{source}: tensor {n} has shape {list(got)}, the config implies {list(shape)}")
