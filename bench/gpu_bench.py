"""One run on one GPU: the ceilings, ours, and Hugging Face transformers on the same shapes
and the same random weights. Prints a table last; writes raw results to --out.

  PYTHONUNBUFFERED=1 python3 bench/gpu_bench.py --out DIR [--quick]

Ours runs through server.engine.model.Model (the serving forward, CUDA graphs on decode)
over a paged KVStore; the weights are made once in torch (seeded normal, 0.02) and shared
with transformers' LlamaForCausalLM, so both run the same numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp

from bench.cudatime import Results, cuda_ms as _cuda_ms, graph_ms  # noqa: E402
import torch  # noqa: E402

from kernels import matmul_cuda, rope  # noqa: E402
from kernels.common_cuda import BF16  # noqa: E402
from server.engine.kvstore import KVStore  # noqa: E402
from server.engine.model import LayerWeights, Model, ShardWeights  # noqa: E402
from server.engine.logits import DeviceLogits  # noqa: E402
from server.shapes.spec import SHAPES  # noqa: E402

R = Results()
log = R.log
matmul_cuda.KEEP_PLAIN = True          # ours vs plain cuBLAS on the same weights


def cuda_ms(fn, reps=10, warm=2):
    return _cuda_ms(fn, reps, warm)


def ceilings():
    n = 1 << 30                                             # 4 GiB of float32 each way
    a = cp.random.random(n // 4 * 1, dtype=cp.float32)
    b = cp.empty_like(a)
    ms = cuda_ms(lambda: b.__setitem__(Ellipsis, a))
    log("copy_TBps", 2 * a.nbytes / ms / 1e9)
    del a, b
    x = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    y = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = cuda_ms(lambda: x @ y)
    log("matmul_TFLOPs_torch", 2 * 8192 ** 3 / ms / 1e9)
    del x, y
    torch.cuda.empty_cache()


def to_cp(t):
    """torch bf16 (contiguous) -> cupy bf16, sharing memory through DLPack (int16 view)."""
    return cp.from_dlpack(t.contiguous().view(torch.int16)).view(BF16)


def hf_model(spec, seed):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=spec.vocab, hidden_size=spec.d_model, intermediate_size=spec.d_ff,
                      num_hidden_layers=spec.n_layers, num_attention_heads=spec.n_heads,
                      num_key_value_heads=spec.n_kv_heads, head_dim=spec.head_dim,
                      rms_norm_eps=spec.rms_eps, max_position_embeddings=spec.max_context,
                      tie_word_embeddings=spec.tie_embeddings,
                      rope_parameters=dict(rope_type="default", rope_theta=spec.rope_theta))
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)
    with torch.device("cuda"):
        torch.set_default_dtype(torch.bfloat16)
        m = LlamaForCausalLM(cfg)
        torch.set_default_dtype(torch.float32)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.02 * torch.randn_like(p))
            else:
                p.normal_(0, 0.02)
    return m.eval()


def our_model(spec, hf):
    L = []
    with torch.no_grad():
        for layer in hf.model.layers:
            a, mlp = layer.self_attn, layer.mlp
            # the GPU stores matrices [out, in] (server/engine/prepare.py), as torch does
            wqkv = torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight], 0).contiguous()
            wgu = torch.cat([mlp.gate_proj.weight, mlp.up_proj.weight], 0).contiguous()
            L.append(LayerWeights(
                attn_norm=to_cp(layer.input_layernorm.weight), wqkv=to_cp(wqkv), bqkv=None,
                q_norm=None, k_norm=None, wo=to_cp(a.o_proj.weight),
                mlp_norm=to_cp(layer.post_attention_layernorm.weight), wgu=to_cp(wgu),
                wdown=to_cp(mlp.down_proj.weight)))
        head = hf.lm_head.weight
        w = ShardWeights(embed=to_cp(hf.model.embed_tokens.weight), norm=to_cp(hf.model.norm.weight),
                         lm_head=to_cp(head), layers=L, nq=spec.n_heads, nkv=spec.n_kv_heads,
                         ff=spec.d_ff)
    inv = cp.asarray(rope.inv_freq(spec.head_dim, spec.rope_theta, spec.rope_scaling))
    return Model(spec, w, inv, cp)


def read_bytes(spec):
    """Weight bytes one decode step reads: every layer, the final norm, the LM head (bf16)."""
    return 2 * (spec.n_params - spec.vocab * spec.d_model * (0 if spec.tie_embeddings else 1))


def kv_store(spec, streams, context, P=16):
    pages = streams * context // P
    return KVStore(cp, spec.n_layers, spec.n_kv_heads, spec.head_dim, BF16, paged=True,
                   pages=pages, page_rows=P, streams=streams, context=context)


def ours_decode(tag, spec, model, prompt_len=128, new=256, batch=1, context=1024):
    P = 16
    kv = kv_store(spec, batch, context, P)
    per = context // P
    tables = [tuple(range(s * per, (s + 1) * per)) for s in range(batch)]
    rng = np.random.default_rng(0)
    prompts = [tuple(int(t) for t in rng.integers(0, spec.vocab, prompt_len)) for _ in range(batch)]
    # prefill in chunks of at most 2048 rows a round
    for s in range(batch):
        model.forward([(tables[s], P, 0, prompts[s], True)], kv)
    cp.cuda.Device().synchronize()
    toks = [prompts[s][-1] for s in range(batch)]
    pos = prompt_len
    for _ in range(2):                  # warm-up: graph capture and first calls stay out
        lg = model.forward([(tables[s], P, pos, (toks[s],), True) for s in range(batch)], kv)
        toks = DeviceLogits(lg).argmax_rows()                   # the server's greedy path
        pos += 1
    t0 = time.perf_counter()
    out = []
    for i in range(new):
        lg = model.forward([(tables[s], P, pos, (toks[s],), True) for s in range(batch)], kv)
        toks = DeviceLogits(lg).argmax_rows()                   # the server's greedy path
        out.append(toks[0])
        pos += 1
    dt = time.perf_counter() - t0
    log(f"{tag}_ms_per_step", 1e3 * dt / new)
    log(f"{tag}_tokens_per_s", batch * new / dt)
    log(f"{tag}_graphs", "on" if model.graphs.graphs and not model.graphs.failed
        else f"off ({model.graphs.failed})")
    return out, kv


def ours_prefill(tag, spec, model, n=2048):
    P = 16
    kv = kv_store(spec, 1, n, P)
    ids = tuple(int(t) for t in np.random.default_rng(1).integers(0, spec.vocab, n))
    ms = cuda_ms(lambda: model.forward([(tuple(range(n // P)), P, 0, ids, True)], kv), reps=3, warm=1)
    log(f"{tag}_ms", ms)
    del kv
    return ms


def gemm_stage(tag, spec, model, M):
    """The prefill's GEMMs alone (all layers, M rows), invariant vs plain cuBLAS."""
    from kernels.common_cuda import as_bf16
    x = as_bf16(cp.asarray(np.random.default_rng(2).standard_normal((M, spec.d_ff)).astype(np.float32)))
    L = model.w.layers[0]
    shapes = [(spec.d_model, L.wqkv), (spec.head_dim * spec.n_heads, L.wo), (spec.d_model, L.wgu),
              (spec.d_ff, L.wdown)]
    def run():
        for k, w in shapes:
            matmul_cuda.cuda(x[:, :k], w)
    ms = cuda_ms(run, reps=5) * spec.n_layers
    log(f"{tag}_gemms_ms", ms)
    return ms


def stages(tag, spec, model, M, L):
    """Where a decode step of M rows at length L goes: the GEMMs alone (invariant tiles and
    plain cuBLAS, every layer and the LM head) and the attention kernel alone."""
    from kernels import attention_cuda
    rng = np.random.default_rng(3)
    from kernels.common_cuda import as_bf16
    x = as_bf16(cp.asarray(rng.standard_normal((M, spec.d_ff)).astype(np.float32)))
    L0 = model.w.layers[0]
    shapes = [(spec.d_model, L0.wqkv), (spec.head_dim * spec.n_heads, L0.wo), (spec.d_model, L0.wgu),
              (spec.d_ff, L0.wdown)]
    xs = [cp.ascontiguousarray(x[:, :k]) for k, _ in shapes]
    for inv in (True, False):
        matmul_cuda.INVARIANT = inv
        # device time (graph replays), no host between launches
        ms = graph_ms(lambda: [matmul_cuda.cuda(a, w) for a, (_, w) in zip(xs, shapes)], reps=10, inner=2)
        head = graph_ms(lambda: matmul_cuda.cuda(xs[0], model.w.lm_head), reps=5, inner=1)
        log(f"{tag}_gemms_{'invariant' if inv else 'plain'}_ms", ms * spec.n_layers + head)
    matmul_cuda.INVARIANT = True
    P = 16
    kv = kv_store(spec, M, -(-(L + 1) // P) * P, P)
    kv.K.view(cp.uint16)[...] = 0
    kv.V.view(cp.uint16)[...] = 0
    per = kv.K.shape[1] // M
    chunks = [(tuple(range(s * per, (s + 1) * per)), P, L, (0,), True) for s in range(M)]
    rmap = attention_cuda.round_map(chunks, spec.n_heads // spec.n_kv_heads)
    q = cp.asarray(rng.standard_normal((M, spec.n_heads, spec.head_dim)).astype(np.float32))
    attention_cuda.cuda_round(q, kv.k(0), kv.v(0), rmap, 0.088)      # compile outside the capture
    ms = graph_ms(lambda: attention_cuda.cuda_round(q, kv.k(0), kv.v(0), rmap, 0.088), reps=10, inner=1)
    log(f"{tag}_attention_ms", ms * spec.n_layers)
    del kv


def gemm_sweep(spec, model):
    """Ours (invariant) against plain cuBLAS, all layers' GEMMs at several row counts, with
    the bandwidth floor (weight bytes / copy rate) and the compute floor beside them."""
    from kernels.common_cuda import as_bf16
    x = as_bf16(cp.asarray(np.random.default_rng(4).standard_normal((2048, spec.d_ff)).astype(np.float32)))
    L0 = model.w.layers[0]
    shapes = [(spec.d_model, L0.wqkv), (spec.head_dim * spec.n_heads, L0.wo), (spec.d_model, L0.wgu),
              (spec.d_ff, L0.wdown)]
    wbytes = sum(w.nbytes for _, w in shapes) * spec.n_layers
    flop1 = sum(2 * w.shape[0] * w.shape[1] for _, w in shapes) * spec.n_layers
    log("llama3_gemms_bytes_floor_ms", wbytes / R.get("copy_TBps", 4.27) / 1e9)
    for M in (1, 8, 16, 32, 64, 128, 512, 2048):
        xs = [cp.ascontiguousarray(x[:M, :k]) for k, _ in shapes]
        for inv in (True, False):
            matmul_cuda.INVARIANT = inv
            ms = graph_ms(lambda: [matmul_cuda.cuda(a, w) for a, (_, w) in zip(xs, shapes)], reps=5, inner=2)
            log(f"llama3_gemms_{'ours' if inv else 'plain'}_M{M}_ms", ms * spec.n_layers)
        matmul_cuda.INVARIANT = True
        log(f"llama3_gemms_M{M}_TFLOPs_ours", flop1 * M / (R[f"llama3_gemms_ours_M{M}_ms"] / 1e3) / 1e12)


def hf_decode(tag, spec, hf, prompt_len=128, new=64):
    ids = torch.randint(0, spec.vocab, (1, prompt_len), device="cuda",
                        generator=torch.Generator("cuda").manual_seed(0))
    with torch.no_grad():
        hf.generate(ids, max_new_tokens=4, min_new_tokens=4, do_sample=False)   # warm
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        hf.generate(ids, max_new_tokens=1, min_new_tokens=1, do_sample=False)
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        hf.generate(ids, max_new_tokens=new, min_new_tokens=new, do_sample=False)
        torch.cuda.synchronize()
        t2 = time.perf_counter()
    log(f"{tag}_ms_per_step", 1e3 * ((t2 - t1) - (t1 - t0)) / (new - 1))


def hf_prefill(tag, spec, hf, n=2048):
    ids = torch.randint(0, spec.vocab, (1, n), device="cuda")
    with torch.no_grad():
        def f():
            hf(ids, use_cache=False, logits_to_keep=1)
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        f(); f()
        ts = []
        for _ in range(3):
            s.record(); f(); e.record(); e.synchronize(); ts.append(s.elapsed_time(e))
    log(f"{tag}_ms", float(np.median(ts)))


def step(name, fn, *a, **k):
    try:
        return fn(*a, **k)
    except Exception:
        log(f"{name}_error", traceback.format_exc(limit=4).strip().splitlines()[-1])
        traceback.print_exc()
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    log("device", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    step("ceilings", ceilings)
    bw = R.get("copy_TBps", 4.27) * 1e12
    rate = R.get("matmul_TFLOPs_torch", 770) * 1e12

    for shape in ("smollm2-135m", "llama3-8b"):
        spec = SHAPES[shape]
        t = shape.split("-")[0]
        hf = step(f"{t}_build", hf_model, spec, 0)
        if hf is None:
            continue
        model = our_model(spec, hf)
        log(f"{t}_decode_floor_ms", read_bytes(spec) / bw * 1e3)
        step(f"{t}_stages_b1", stages, f"{t}_b1_L384", spec, model, 1, 384)
        matmul_cuda.INVARIANT = True
        ours = step(f"{t}_ours", ours_decode, f"{t}_ours_b1_decode", spec, model)
        matmul_cuda.INVARIANT = False
        model.graphs.graphs.clear()
        step(f"{t}_ours_plain", ours_decode, f"{t}_ours_plain_cublas_b1_decode", spec, model)
        matmul_cuda.INVARIANT = True
        model.graphs.graphs.clear()
        step(f"{t}_hf", hf_decode, f"{t}_hf_eager_b1_decode", spec, hf)
        if shape == "llama3-8b":
            log("llama3_prefill2048_floor_ms", 2 * spec.n_params * 2048 / rate * 1e3)
            step("sweep", gemm_sweep, spec, model)
            step("pf", ours_prefill, "llama3_ours_prefill2048", spec, model)
            step("gi", gemm_stage, "llama3_prefill2048_invariant", spec, model, 2048)
            matmul_cuda.INVARIANT = False
            step("pfp", ours_prefill, "llama3_ours_plain_cublas_prefill2048", spec, model)
            step("gp", gemm_stage, "llama3_prefill2048_plain", spec, model, 2048)
            matmul_cuda.INVARIANT = True
            step("hfp", hf_prefill, "llama3_hf_eager_prefill2048", spec, hf)
            if not a.quick:
                model.graphs.graphs.clear()
                step("b64", ours_decode, "llama3_ours_static64_decode", spec, model,
                     prompt_len=512, new=64, batch=64, context=1024)
                step("st64", stages, "llama3_b64_L576", spec, model, 64, 576)
                matmul_cuda.INVARIANT = False
                model.graphs.graphs.clear()
                step("b64p", ours_decode, "llama3_ours_plain_cublas_static64_decode", spec, model,
                     prompt_len=512, new=32, batch=64, context=1024)
                matmul_cuda.INVARIANT = True
                kvb = 64 * (512 + 288) * 2 * spec.n_layers * spec.n_kv_heads * spec.head_dim * 2
                log("llama3_static64_step_floor_ms", (read_bytes(spec) + kvb) / bw * 1e3)
            pool = cp.get_default_memory_pool()
            wbytes = sum(x.nbytes for L in model.w.layers for x in
                         (L.wqkv, L.wo, L.wgu, L.wdown, L.attn_norm, L.mlp_norm))
            wbytes += model.w.embed.nbytes + model.w.lm_head.nbytes + model.w.norm.nbytes
            kv = kv_store(spec, 1, 1024)
            plan = 1024 * spec.n_layers * 2 * spec.n_kv_heads * spec.head_dim * 2
            log("llama3_kv_pool_bytes_1024rows", kv.nbytes)
            log("llama3_kv_pool_bytes_planned", plan)
            log("llama3_weight_bytes", wbytes)
            log("cupy_pool_held_bytes_peak_proxy", pool.total_bytes())
            log("torch_max_allocated_bytes", torch.cuda.max_memory_allocated())
            free, total = cp.cuda.runtime.memGetInfo()
            log("device_used_bytes_now", total - free)
        del model, hf
        cp.get_default_memory_pool().free_all_blocks()
        torch.cuda.empty_cache()
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(R, f, indent=1)
    print("\n== summary ==")
    for k, v in R.items():
        print(f"{k:48s} {v:.4g}" if isinstance(v, float) else f"{k:48s} {v}")


if __name__ == "__main__":
    main()
