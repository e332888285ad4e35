"""Open a model for one rank: its weights on this rank's shard, its tokenizer, its identity."""
from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass

from server.engine import locate
from server.engine.engine import Engine
from server.shapes.spec import ModelSpec, UnsupportedModel, shape


@dataclass
class Opened:
    engine: Engine
    spec: ModelSpec
    tokenizer: object                # server.text.Tokenizer, or IdTokenizer (dummy shapes)
    identity: dict
    source: str
    name: str                     # the name the API serves it under
    load_seconds: float


def model_name(source: str) -> str:
    if source.startswith("dummy:"):
        return source
    base = os.path.basename(os.path.normpath(source))
    return base[:-5] if base.endswith(".gguf") else base


class IdTokenizer:
    """A dummy model has no vocabulary: its text is token ids written as <id>. Without it the
    API had no tokenizer to decode with and every dummy request ended in a 500."""
    eos_ids: frozenset = frozenset()
    bos_id = None
    chat_template = None

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        import re
        if not re.fullmatch(r"\s*(<\d+>\s*)*", text):
            raise ValueError("a dummy model has no vocabulary; send token ids, or text like <1><2>")
        return [int(t) for t in re.findall(r"<(\d+)>", text)]

    def decode(self, ids, skip_special_tokens: bool = False) -> str:
        return "".join(f"<{int(i)}>" for i in ids)


DEVICE_DUMMY_BYTES = 4 << 30


def _device_dummy(spec: ModelSpec, seed: int):
    """get(name) -> a cupy float32 tensor made on the GPU, seeded by (seed, name): the same
    numbers on every rank, so each rank's shard is a slice of one model."""
    import zlib

    import cupy
    from server.engine.weights.names import tensor_shapes
    shapes = tensor_shapes(spec)

    def get(name):
        if name == "lm_head.weight" and spec.tie_embeddings:
            name = "model.embed_tokens.weight"
        rs = cupy.random.RandomState(seed * 1000003 + zlib.crc32(name.encode()))
        x = rs.standard_normal(shapes[name], dtype=cupy.float32)
        if name.endswith("norm.weight"):
            return x * 0.02 + 1.0
        return x * (0.01 if name.endswith(".bias") else 0.02)
    return get


def _dummy_identity(spec: ModelSpec, source: str, seed: int) -> dict:
    from server.engine.weights.identity import identity
    from server.engine.weights.names import stored_names, tensor_shapes
    shapes = tensor_shapes(spec)
    stored = {n: {"shape": list(shapes[n]), "dtype": "F32"} for n in stored_names(spec)}
    content = hashlib.sha256(f"dummy:{spec.name}:seed={seed}".encode()).hexdigest()
    return identity(spec, stored, content, format="dummy", shape=spec.name, seed=seed)


def _refuse_moe_on_gpu(source: str) -> None:
    """UnsupportedModel (one line) when `source` is of a mixture-of-experts family: from the
    dummy shape, the GGUF header's general.architecture or config.json, no weight read."""
    from server.shapes.spec import ARCH_ALIASES, MOE_ARCHS, moe_on_gpu
    if source.startswith("dummy:"):
        from server.engine.weights.dummy import parse
        spec = shape(parse(source)[0])
        if spec.moe:
            raise UnsupportedModel(moe_on_gpu(spec))
        return
    arch = None
    if os.path.isdir(source):
        from server.engine.weights.hf_config import arch_of, read_config
        try:
            arch = arch_of(read_config(source), source)
        except Exception:               # the loader names what is wrong with the folder
            return
    elif source.endswith(".gguf") and os.path.isfile(source):
        from server.engine.weights.gguf_file import GGUFFile
        try:
            arch = str(GGUFFile(source).fields["general.architecture"].value)
        except Exception:
            return
    arch = ARCH_ALIASES.get(arch, arch)          # GGUF "gpt-oss" is our gptoss
    if arch == "glm5next":                       # named as the model it is
        from dataclasses import replace
        raise UnsupportedModel(moe_on_gpu(replace(shape("glm-5.3-flash"),
                                                  name=os.path.basename(os.path.normpath(source)))))
    if arch in MOE_ARCHS:
        raise UnsupportedModel(f"{os.path.basename(os.path.normpath(source))}: the {arch} family "
                               "(mixture of experts) runs on the CPU only until its GPU kernels "
                               "exist; use --device cpu")


def _with_mtp(spec: ModelSpec, mtp: bool, tp: int) -> ModelSpec:
    """spec with its MTP layer run (mtp_layers 1), or refused by name (flags.drafts_for)."""
    if not mtp:
        return spec
    from server.families.nextn import with_mtp
    return with_mtp(spec, tp)


def open_model(model: str | None, *, device: str = "cpu", tp: int = 1, rank: int = 0,
               all_reduce=None, progress: bool = True, mtp: bool = False) -> Opened:
    """mtp: with the file's MTP / NextN layer (server/families/nextn.py; --draft mtp), refused
    by name where it has none foldserve runs."""
    source = locate.resolve(model)
    if device == "cuda":                        # a MoE family is refused before any GPU is asked
        _refuse_moe_on_gpu(source)
    if device == "cuda":
        from server.engine.device import require_cuda
        require_cuda()
    t0 = time.monotonic()
    tokenizer = None
    if source.startswith("dummy:"):
        # made tensor by tensor (never the whole float32 model at once): a rank makes its shard
        from server.engine.weights.dummy import dummy_tensor, parse
        name, seed = parse(source)
        spec = _with_mtp(shape(name), mtp, tp)
        get = lambda n: dummy_tensor(spec, n, seed)
        ident = _dummy_identity(spec, source, seed)
        if device == "cuda" and spec.n_params * 4 > DEVICE_DUMMY_BYTES:
            # an 8B shape's float32 weights are 32 GB: make them on the device instead
            # (other numbers than the CPU's dummy, so the identity says which generator)
            get = _device_dummy(spec, seed)
            ident = {**ident, "sha256": ident["sha256"] + ":cupy", "generator": "cupy"}
        tokenizer = IdTokenizer(spec.vocab)
    else:
        from server.engine.weights import load
        loaded = load(source, progress=progress, mtp=mtp)
        spec, get, ident = loaded.spec, loaded.tensors.__getitem__, loaded.identity
        from server.text.tokenizer import Tokenizer
        tokenizer = (Tokenizer.from_gguf(loaded.gguf_path) if loaded.gguf_path
                     else Tokenizer.from_hf_dir(loaded.hf_dir))
    if device == "cuda" and spec.moe:
        from server.shapes.spec import moe_on_gpu
        raise UnsupportedModel(moe_on_gpu(spec))
    if device == "cuda":
        from kernels.attention import GPU_HEAD_DIMS
        if spec.head_dim not in GPU_HEAD_DIMS:
            raise UnsupportedModel(
                f"{model_name(source)}: head dim {spec.head_dim}; the GPU attention kernel is built "
                f"for head dims {', '.join(map(str, GPU_HEAD_DIMS))}: serve this model with --device cpu")
    engine = Engine(spec, get, tp=tp, rank=rank, device=device, all_reduce=all_reduce)
    return Opened(engine, spec, tokenizer, ident, source, model_name(source),
                  time.monotonic() - t0)
