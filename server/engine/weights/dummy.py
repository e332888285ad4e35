"""dummy:SHAPE: seeded random weights at a named real shape, nothing read from disk.

Each tensor comes from its own generator, seeded by (shape name, seed, tensor name), so
any subset can be produced alone and in any order: a rank makes only its shard's
tensors, and the GPU path can make one tensor at a time. Matrices ~ N(0, 0.02), norm
weights ~ 1 + N(0, 0.02), biases ~ N(0, 0.01).
"""
from __future__ import annotations

import hashlib
import time

import numpy as np

from server.shapes.spec import ModelSpec, shape
from .identity import identity
from .loaded import Loaded, WeightsError
from .names import EMBED, HEAD, n_floats, stored_names, tensor_shapes
from .progress import Progress

MEMORY_SHARE = 0.4   # refuse a CPU dummy larger than this share of available memory

__all__ = ["dummy_tensor", "dummy_identity", "tensor_shapes", "load_dummy", "parse"]


def _key(spec: ModelSpec) -> str:
    if spec.name:
        return spec.name
    return hashlib.sha256(repr(sorted(spec.as_dict().items())).encode()).hexdigest()[:16]


def _rng(spec: ModelSpec, name: str, seed: int) -> np.random.Generator:
    digest = hashlib.sha256(f"{_key(spec)}/{name}".encode()).digest()
    words = np.frombuffer(digest, dtype="<u4").tolist()
    return np.random.default_rng(np.random.SeedSequence([int(seed), *words]))


def dummy_tensor(spec: ModelSpec, name: str, seed: int = 0, dtype=np.float32) -> np.ndarray:
    """One tensor of dummy:SHAPE, the same bytes whenever and wherever it is asked for."""
    if name == HEAD and spec.tie_embeddings:
        name = EMBED
    shapes = tensor_shapes(spec)
    if name not in shapes:
        raise KeyError(f"{name!r} is not a tensor of {_key(spec)}")
    x = _rng(spec, name, seed).standard_normal(shapes[name], dtype=np.float32)
    if name.endswith("norm.weight"):        # input/post_attention layernorm, model.norm, q/k norm
        x *= 0.02
        x += 1.0
    elif name.endswith(".bias"):
        x *= 0.01
    elif name.endswith("conv1d.weight"):    # Gated DeltaNet's short conv: taps of order 1
        x *= 0.5
    elif name.endswith(("A_log", "dt_bias")):   # decays exp(-e^A softplus(a + dt)) in (0, 1)
        x *= 0.5
    else:
        x *= 0.02
    return x if dtype == np.float32 else x.astype(dtype)


def available_memory() -> int:
    from server.engine.room import host_available    # one reading of /proc/meminfo for the house
    return host_available()


def parse(model: str) -> tuple[str, int]:
    """"dummy:SHAPE" or "dummy:SHAPE:SEED" -> (shape name, seed)."""
    rest = model.removeprefix("dummy:")
    name, _, seed = rest.partition(":")
    try:
        return name, int(seed or 0)
    except ValueError:
        raise WeightsError(f"{model!r}: the seed after the shape must be an integer "
                           "(dummy:SHAPE or dummy:SHAPE:SEED)") from None


def load_dummy(model: str, *, progress: bool = True, mtp: bool = False) -> Loaded:
    """mtp: with the shape's MTP layer (mtp_layers 1; refused by name without one)."""
    start = time.monotonic()
    shape_name, seed = parse(model)
    spec = shape(shape_name)
    if mtp:
        from server.families.nextn import with_mtp
        spec = with_mtp(spec)
    need = n_floats(spec) * 4
    avail = available_memory()
    if need > MEMORY_SHARE * avail:
        raise WeightsError(
            f"{model}: float32 weights need {need / 2**30:.1f} GiB, more than "
            f"{MEMORY_SHARE:.0%} of the {avail / 2**30:.1f} GiB available; on the CPU use a "
            "smaller shape (dummy:tiny, dummy:smollm2-135m), or run on a GPU, where dummy "
            "weights are made per tensor on the device")
    names = stored_names(spec)
    tensors = {}
    with Progress(f"making {model}", len(names), enabled=progress, start=start) as bar:
        for n in names:
            tensors[n] = dummy_tensor(spec, n, seed)
            bar.advance()
    if spec.tie_embeddings:
        tensors[HEAD] = tensors[EMBED]
    return Loaded(spec=spec, tensors=tensors, source=f"dummy:{shape_name}",
                  identity=dummy_identity(spec, seed))


def dummy_identity(spec: ModelSpec, seed: int = 0) -> dict:
    """The identity of dummy:SHAPE at `seed`, without making any tensor (what ranks compare)."""
    shapes = tensor_shapes(spec)
    stored = {n: {"shape": list(shapes[n]), "dtype": "F32"} for n in stored_names(spec)}
    content = hashlib.sha256(f"dummy:{_key(spec)}:seed={seed}".encode()).hexdigest()
    return identity(spec, stored, content, format="dummy", shape=_key(spec), seed=seed)
