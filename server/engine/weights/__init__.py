"""Model weights: load(model) -> Loaded, from a .gguf file, a Hugging Face folder or dummy:SHAPE.

Every source ends the same: float32 C-contiguous arrays under Hugging Face llama names
(a GGUF's quantized matrices as Blocks, its bytes as stored),
weights [out_features, in_features], lm_head.weight the very embedding array when tied.
"""
from __future__ import annotations

import os
import time

from server.shapes.spec import UnsupportedModel
from .dummy import dummy_identity, dummy_tensor, load_dummy
from .loaded import Loaded, WeightsError
from .names import n_floats, stored_names, tensor_shapes
from .progress import report

__all__ = ["load", "Loaded", "WeightsError", "UnsupportedModel", "dummy_tensor", "dummy_identity",
           "tensor_shapes", "stored_names", "n_floats"]


def load(model: str, *, progress: bool = True, mtp: bool = False) -> Loaded:
    """mtp: the file's MTP / NextN layer too (server/families/nextn.py), its spec's
    mtp_layers 1; refused by name where it has none."""
    start = time.monotonic()
    if not isinstance(model, str) or not model:
        raise WeightsError(f"model must be a path to a .gguf file, a Hugging Face folder or "
                           f"dummy:SHAPE; got {model!r}")
    if model.startswith("dummy:"):
        loaded = load_dummy(model, progress=progress, mtp=mtp)
    elif os.path.isdir(model):
        from .hf_loader import load_hf
        loaded = load_hf(model, progress=progress, mtp=mtp)
    elif os.path.isfile(model) and model.endswith(".gguf"):
        from .gguf_loader import load_gguf
        loaded = load_gguf(model, progress=progress, mtp=mtp)
    elif os.path.exists(model):
        raise WeightsError(f"{model!r} is neither a .gguf file nor a Hugging Face folder "
                           "(config.json + *.safetensors)")
    else:
        raise WeightsError(f"model {model!r} does not exist; pass a .gguf file, a Hugging Face "
                           "folder or dummy:SHAPE")
    loaded.load_seconds = time.monotonic() - start
    report(model, loaded.load_seconds)
    return loaded
