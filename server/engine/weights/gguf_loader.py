"""Load a .gguf file: quantized matrices kept as stored (Blocks), the rest as float32;
rename to HF; undo llama.cpp's q/k row order (a row permutation: Blocks.take_rows)."""
from __future__ import annotations

import os
import time
from dataclasses import replace

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize

from server.shapes.spec import ModelSpec
from . import permute, rope_scaling
from .gguf_spec import Fields, spec_from_gguf
from .blocks import BLOCK, Blocks
from .gguf_file import GGUFFile
from .gguf_names import IGNORED, hf_name
from .identity import hash_files, identity
from .loaded import Loaded, WeightsError
from .names import EMBED, HEAD, check_tensors
from .progress import Progress


def to_float32(t, path: str) -> np.ndarray:
    """One GGUF tensor as a float32 C-contiguous array in numpy shape order."""
    qtype = GGMLQuantizationType(t.ggml_type)
    try:
        x = dequantize(t.data, qtype)
    except NotImplementedError:
        raise WeightsError(f"{path}: tensor {t.name} is stored as {qtype.name}, which gguf "
                           "cannot dequantize; convert the model to F16, Q8_0, Q4_K or similar") from None
    x = x.reshape(t.shape)
    if qtype == GGMLQuantizationType.F32 or not x.flags.c_contiguous or x.dtype != np.float32:
        x = np.array(x, dtype=np.float32, order="C", copy=True)   # F32 is a view of the mmap
    return x


def as_stored(t, path: str):
    """A 2-D tensor of a block type as Blocks over the file's bytes (no copy); else float32."""
    kind = GGMLQuantizationType(t.ggml_type).name
    if kind in BLOCK and len(t.dims) == 2:
        rows, cols = t.shape
        return Blocks(kind, rows, cols, t.data.reshape(rows, -1))
    return to_float32(t, path)


def load_gguf(path: str, *, progress: bool = True) -> Loaded:
    start = time.monotonic()
    try:
        reader = GGUFFile(path)
    except Exception as e:                    # bad magic, truncated file, unknown type
        raise WeightsError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from e
    by_name = {t.name: t for t in reader.tensors}
    spec, raw_arch = spec_from_gguf(Fields(reader, path), set(by_name))

    unknown = [n for n in by_name if hf_name(n) is None and n not in IGNORED]
    if unknown:
        raise WeightsError(f"{path}: tensor(s) {', '.join(unknown[:5])} are not part of a {spec.arch} "
                           "model as foldserve knows it")

    spec = _rope_scaling(spec, reader, by_name, raw_arch, path)
    permuted = raw_arch in permute.PERMUTED_ARCHS or spec.arch in permute.PERMUTED_ARCHS

    tensors: dict = {}
    stored: dict[str, dict] = {}
    with Progress(f"loading {os.path.basename(path)}", len(by_name),
                  enabled=progress, start=start) as bar:
        for name, t in by_name.items():
            stored[name] = {"shape": [int(s) for s in t.shape], "dtype": t.type_name}
            if name in IGNORED:
                bar.advance()
                continue
            x = as_stored(t, path)
            hf = hf_name(name)
            if permuted and hf.endswith(("q_proj.weight", "k_proj.weight")):
                heads = spec.n_heads if "q_proj" in hf else spec.n_kv_heads
                x = permute.from_gguf(x, heads)
            tensors[hf] = x
            bar.advance()
    if spec.tie_embeddings:
        tensors[HEAD] = tensors[EMBED]
    check_tensors(spec, tensors, path)
    ident = identity(spec, stored, hash_files([path]), format="gguf")
    return Loaded(spec=spec, tensors=tensors, source=path, identity=ident, gguf_path=path)


def _rope_scaling(spec: ModelSpec, reader, by_name, a: str, path: str) -> ModelSpec:
    meta = Fields(reader, path)
    orig = meta.get(f"{a}.rope.scaling.original_context_length")
    if "rope_freqs.weight" in by_name:
        div = to_float32(by_name["rope_freqs.weight"], path)
        found = rope_scaling.recover(div, spec.head_dim, spec.rope_theta, orig)
        if found is None:
            raise WeightsError(f"{path}: rope_freqs.weight does not match Llama 3.1 rope scaling "
                               "with the usual factors; foldserve cannot reproduce this model's rope")
        return replace(spec, rope_scaling=found)
    if meta.get(f"{a}.rope.scaling.type") == "llama3":
        factor = float(meta.need(f"{a}.rope.scaling.factor"))
        return replace(spec, rope_scaling=(factor, 1.0, 4.0, int(orig or 8192)))
    return spec
