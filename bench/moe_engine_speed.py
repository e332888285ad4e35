"""MoE CPU speed at a real layer shape with its depth cut: Q8_0 random blocks made in memory
(no file), the engine's forward timed at decode (batch 1 and 8) and prefill.

    python3 bench/moe_engine_speed.py --shape qwen3-30b-a3b --layers 4 [--vocab 151936]
    python3 bench/moe_engine_speed.py --write FILE.gguf --layers 4      # the same weights as a GGUF
    python3 bench/moe_engine_speed.py --model FILE.gguf                 # the engine on that file
        (the file carries the default model's tokenizer keys, vocab 49152, so llama-bench
        loads it: llama-bench -m FILE.gguf -p 512 -n 32 -t 2)

Prints tokens/s per mode and the share of a decode step spent in the MoE op. Random Q8_0
blocks: f16 scales ~ N(0, 1e-3), int8 quants uniform; the speed depends on the shapes only.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402


def q8_blocks(rng, rows, cols):
    from kernels.blocks import Blocks
    nb = cols // 32
    data = np.empty((rows, nb, 34), np.uint8)
    data[:, :, :2] = (rng.standard_normal((rows, nb, 1)) * 1e-3).astype(np.float16).view(np.uint8)
    data[:, :, 2:] = rng.integers(0, 256, (rows, nb, 32), dtype=np.uint8)
    return Blocks("Q8_0", rows, cols, data.reshape(rows, nb * 34))


def make(spec, seed=0):
    from kernels.blocks import Blocks
    from server.engine.weights.names import tensor_shapes
    rng = np.random.default_rng(seed)
    out = {}
    for n, shape in tensor_shapes(spec).items():
        if n.endswith("mlp.gate.weight"):          # the router: F32 rows, as the GGUF loader keeps it
            x = (0.02 * rng.standard_normal(shape)).astype(np.float32)
            out[n] = Blocks("F32", *shape, x.view(np.uint8))
        elif len(shape) == 2:
            out[n] = q8_blocks(rng, *shape)
        else:
            out[n] = (1.0 + 0.02 * rng.standard_normal(shape)).astype(np.float32) if n.endswith("norm.weight") \
                else (0.02 * rng.standard_normal(shape)).astype(np.float32)
    return out


GGUF_NAMES = {"input_layernorm.weight": "attn_norm.weight",
              "post_attention_layernorm.weight": "ffn_norm.weight",
              "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
              "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
              "self_attn.q_norm.weight": "attn_q_norm.weight",
              "self_attn.k_norm.weight": "attn_k_norm.weight", "mlp.gate.weight": "ffn_gate_inp.weight"}


def write(spec, path):
    """The qwen3moe weights of make() as a GGUF under llama.cpp's names and keys."""
    import gguf
    from tools.refs.moe_checkpoint import _copy_tokenizer_keys, default_gguf
    w = make(spec)
    wr = gguf.GGUFWriter(path, "qwen3moe")
    wr.add_block_count(spec.n_layers)
    wr.add_context_length(spec.max_context)
    wr.add_embedding_length(spec.d_model)
    wr.add_feed_forward_length(spec.d_ff)
    wr.add_head_count(spec.n_heads)
    wr.add_head_count_kv(spec.n_kv_heads)
    wr.add_rope_freq_base(spec.rope_theta)
    wr.add_layer_norm_rms_eps(spec.rms_eps)
    wr.add_expert_count(spec.n_experts)
    wr.add_expert_used_count(spec.n_experts_used)
    wr.add_key_length(spec.head_dim)
    wr.add_value_length(spec.head_dim)
    wr.add_expert_feed_forward_length(spec.expert_ff)
    _copy_tokenizer_keys(wr, default_gguf())
    Q8 = gguf.GGMLQuantizationType.Q8_0
    wr.add_tensor("token_embd.weight", w["model.embed_tokens.weight"].data, raw_dtype=Q8)
    wr.add_tensor("output_norm.weight", w["model.norm.weight"])
    wr.add_tensor("output.weight", w["lm_head.weight"].data, raw_dtype=Q8)
    for i in range(spec.n_layers):
        p = f"model.layers.{i}."
        for hf, g in GGUF_NAMES.items():
            x = w[p + hf]
            if hasattr(x, "kind") and x.kind == "Q8_0":
                wr.add_tensor(f"blk.{i}.{g}", x.data, raw_dtype=Q8)
            elif hasattr(x, "kind"):                       # the router's F32 rows
                wr.add_tensor(f"blk.{i}.{g}", np.ascontiguousarray(x.data).view(np.float32))
            else:
                wr.add_tensor(f"blk.{i}.{g}", x)
        for proj in ("gate", "up", "down"):
            data = np.stack([w[f"{p}mlp.experts.{e}.{proj}_proj.weight"].data
                             for e in range(spec.n_experts)])
            wr.add_tensor(f"blk.{i}.ffn_{proj}_exps.weight", data, raw_dtype=Q8)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen3-30b-a3b")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=0)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prefill", type=int, default=128)
    ap.add_argument("--write", help="write the weights as a GGUF here and stop")
    ap.add_argument("--model", help="time the engine on this GGUF instead of weights in memory")
    args = ap.parse_args()
    from server.engine.engine import Engine
    from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
    from server.shapes.spec import shape
    spec = replace(shape(args.shape), n_layers=args.layers, tie_embeddings=False)
    if args.vocab:
        spec = replace(spec, vocab=args.vocab)
    t0 = time.time()
    if args.write:
        write(replace(spec, vocab=49152), args.write)
        print(f"wrote {args.write} in {time.time() - t0:.1f} s")
        return
    if args.model:
        from server.engine.weights import load
        ld = load(args.model, progress=False)
        spec, w = ld.spec, ld.tensors
    else:
        w = make(spec)
    eng = Engine(spec, w.__getitem__)
    print(f"{args.shape} x {args.layers} layers, vocab {spec.vocab}: made in {time.time() - t0:.1f} s",
          flush=True)
    moe_t = [0.0]
    ops = eng.model.ops                      # the engine's backend (kernels.ops.backend)
    inner = ops.moe

    def timed(*a, **k):
        t = time.perf_counter()
        r = inner(*a, **k)
        moe_t[0] += time.perf_counter() - t
        return r
    ops.moe = timed
    B = 8
    ctx = 1024
    eng.apply(PoolStep(True, B * ctx // 16, 16, (eng.page_bytes(16),), B, ctx))
    rng = np.random.default_rng(1)
    for b in (1, 8):
        for s in range(b):
            eng.apply(BeginStep(s, tuple(range(s * ctx // 16, (s + 1) * ctx // 16))))
        prompt = [tuple(int(t) for t in rng.integers(0, spec.vocab, 8)) for _ in range(b)]
        eng.apply(RoundStep(tuple(Chunk(s, 0, prompt[s], True) for s in range(b))))
        eng.apply(RoundStep(tuple(Chunk(s, 8, (1,), True) for s in range(b))))   # warm
        moe_t[0] = 0.0
        t = time.perf_counter()
        for k in range(args.steps):
            eng.apply(RoundStep(tuple(Chunk(s, 9 + k, (1 + k,), True) for s in range(b))))
        dt = time.perf_counter() - t
        print(f"decode b{b}: {b * args.steps / dt:.2f} tok/s ({dt / args.steps * 1e3:.1f} ms a step, "
              f"MoE op {moe_t[0] / dt:.0%})", flush=True)
        for s in range(b):
            eng.apply(EndStep(s))
    eng.apply(BeginStep(0, tuple(range(ctx // 16))))
    p = tuple(int(t) for t in rng.integers(0, spec.vocab, args.prefill))
    moe_t[0] = 0.0
    t = time.perf_counter()
    eng.apply(RoundStep((Chunk(0, 0, p, True),)))
    dt = time.perf_counter() - t
    print(f"prefill {args.prefill}: {args.prefill / dt:.1f} tok/s (MoE op {moe_t[0] / dt:.0%})")


if __name__ == "__main__":
    main()
