"""The GPU engine on GGUF blocks kept as stored == the GPU engine on the same weights
dequantized (the bf16 path), byte for byte: smollm2-135m-shaped dummy weights quantized by gguf
(Q8_0, Q4_1 as the default model's file, and q|k|v, gate|up of mixed kinds as Q4_K_M files
mix them), greedy replies and every logits row of a prefill of 100 tokens (the dequantize +
tensor-core GEMM path) and 40 (qgemv), then decode rounds of 3 streams (graph replays); and the
device holds the blocks' own bytes."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from server.shapes.spec import SHAPES
from tests.gpu.test_forward import engine, greedy

pytest.importorskip("gguf")
SPEC = SHAPES["smollm2-135m"]


def getters(kind_of):
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize
    from kernels.blocks import Blocks
    from server.engine.weights.dummy import dummy_tensor

    @functools.lru_cache(maxsize=None)
    def blocks(name):
        x = dummy_tensor(SPEC, name, 0)
        kind = kind_of(name) if x.ndim == 2 else None
        if kind is None:
            return x
        q = quantize(np.ascontiguousarray(x, dtype=np.float32), GGMLQuantizationType[kind])
        return Blocks(kind, x.shape[0], x.shape[1], q.reshape(x.shape[0], -1))

    def get_q(name):
        return blocks(name)

    def get_f(name):                   # the same weights as float32: the bf16 path
        b = blocks(name)
        return b.dequantize() if isinstance(b, Blocks) else b
    return get_q, get_f


KINDS = {
    "Q8_0": lambda n: "Q8_0",
    "Q4_1": lambda n: "Q4_1",
    "mixed": lambda n: "Q8_0" if ("v_proj" in n or "up_proj" in n) else "Q4_0",
}


@pytest.mark.parametrize("name", list(KINDS))
def test_quant_engine_equals_bf16_engine(name):
    from kernels import qmatmul_cuda as Q
    get_q, get_f = getters(KINDS[name])
    rng = np.random.default_rng(9)
    prompts = {0: (tuple(range(7, -1, -1)), tuple(int(t) for t in rng.integers(0, SPEC.vocab, 100))),
               1: (tuple(range(15, 7, -1)), tuple(int(t) for t in rng.integers(0, SPEC.vocab, 40))),
               2: (tuple(range(23, 15, -1)), tuple(int(t) for t in rng.integers(0, SPEC.vocab, 3)))}
    eq, ef = engine("cuda", get_q), engine("cuda", get_f)
    L = eq.weights.layers[0]
    assert Q.is_quant(L.wqkv) and Q.is_quant(L.wgu) and Q.is_quant(eq.weights.embed)
    if name == "mixed":
        assert isinstance(L.wqkv, Q.QStack) and isinstance(L.wgu, Q.QStack)
    stored = sum(get_q(n).nbytes for n in ["model.embed_tokens.weight"] +
                 [f"model.layers.{i}.{m}.weight" for i in range(SPEC.n_layers)
                  for m in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                            "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")])
    held = sum(w.nbytes for Lw in eq.weights.layers for w in (Lw.wqkv, Lw.wo, Lw.wgu, Lw.wdown)) \
        + eq.weights.embed.nbytes
    assert held == stored
    oq, rq = greedy(eq, prompts, 6)
    of, rf = greedy(ef, prompts, 6)
    assert oq == of
    assert rq == rf, "logits bytes differ between the quantized and the bf16 engine"
