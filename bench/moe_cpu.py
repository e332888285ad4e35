"""MoE files of real models' layer shapes, and llama.cpp's CPU speed on them (issue 31's targets).

    PYTHONPATH=$PWD python -m bench.moe_cpu [--shapes qwen3-30b-a3b glm-4.5-air] [--layers N]
        [--dir /tmp/moe-bench] [--llama-cpp /work/peers-build/llama.cpp] [--types Q8_0 Q4_K_M]
        [--threads 2] [--stages build,make,quantize,bench] [--rounds 3] [--out FILE.json]

Shapes: qwen3-30b-a3b, glm-4.5-air (Q8_0, then Q4_K_M by llama-quantize); gpt-oss-20b (MXFP4_MOE
experts written as MXFP4 blocks directly) and qwen3.5-35b-a3b (qwen35moe, Q8_0): `make_gptoss`,
`make_qwen35` over `write_random_gguf`.

Stages:
  build     untar shared/peers' llama.cpp into --llama-cpp's parent and build llama-bench,
            llama-quantize, llama-server, llama-results for the CPU (-DGGML_NATIVE=OFF with AVX2/FMA/F16C:
            the native build dies on these guests); skipped when llama-bench is there.
  make      a Q8_0 GGUF of the shape, depth cut to --layers, random weights written as Q8_0
            blocks directly (a f16 scale of std/73.6 and uniform int8: no float copy, so the
            30B-A3B shape's 0.64 GB a layer and the 4.5-Air's 2.35 GB stream to disk one tensor
            at a time), llama.cpp's names and keys (tools/refs/moe_checkpoint.py), SmolLM2's
            tokenizer padded with unused tokens to the shape's vocabulary.
  quantize  llama-quantize --allow-requantize to Q4_K_M (from the Q8_0 file).
  bench     side by side on each file, --rounds times alternately: llama-bench -t THREADS
            -p 512 -n 32 -r 1 (tg: b1 decode; pp512), then foldserve's engine on the same file
            and threads (`foldserve_numbers`: tg, pp512, b8) in a fresh process of its own
            (`fresh_numbers`), so the machine's load of the moment hits both; each round's
            ratios, each side's CPU share beside the other processes' (`Cpu`), and the medians.
            Each side is a child process started from the environment this one had at import
            (llama-bench no longer inherits kernels.init's GOMP_SPINCOUNT and NUMBA_* settings),
            and neither holds memory while the other runs (receipt 2026-12-05-moe-kquant: the
            "decode fell 4x after llama-bench" of issue 31 was the machine's other load, not
            state left in the process; the fresh process rules the latter out by construction).
            --base TREE: an earlier commit's foldserve (a `git archive` of it) a third each
            round, in its own process (before/after under the same load).
            Receipts: docs/receipts/2026-12-05-moe-speed/, 2026-12-05-moe-kernels/.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import server  # noqa: F401,I001  (first: OPENBLAS_NUM_THREADS=1 before numpy loads its BLAS, as serve runs)
import numpy as np

from tools.refs import moe_checkpoint as mc

ROOT = Path(__file__).resolve().parents[1]
# the environment before anything here calls kernels.init() (which sets GOMP_SPINCOUNT,
# NUMBA_SLP_VECTORIZE, NUMBA_CACHE_DIR where unset): what each side's child process starts from
ENV0 = dict(os.environ)
TARBALL = ROOT.parent / "shared/peers/llama.cpp-0c1e570.tgz"

# The layer shapes of the models (their config.json), depth set by --layers.
SHAPES = {
    "qwen3-30b-a3b": mc.MoeSpec(
        name="qwen3-30b-a3b", family="qwen3moe", seed=1, n_layer=48, hidden=2048, n_head=32,
        n_head_kv=4, head_dim=128, n_expert=128, n_expert_used=8, expert_ff=768, dense_ff=6144,
        vocab=151936, rope_theta=1e6, rms_eps=1e-6, max_pos=40960),
    "glm-4.5-air": mc.MoeSpec(
        name="glm-4.5-air", family="glm4moe", seed=2, n_layer=46, hidden=4096, n_head=96,
        n_head_kv=8, head_dim=128, n_expert=128, n_expert_used=8, expert_ff=1408, dense_ff=10944,
        vocab=151552, rope_theta=1e6, rms_eps=1e-5, max_pos=131072, n_shared=1, first_dense=1,
        n_group=1, topk_group=1, routed_scaling=1.0, partial_rotary=0.5, attention_bias=True,
        qk_norm=False),
}
DEFAULT_LAYERS = {"qwen3-30b-a3b": 4, "glm-4.5-air": 3}


def sh(cmd, **kw):
    print("+", " ".join(map(str, cmd)), flush=True)
    return subprocess.run(list(map(str, cmd)), check=True, **kw)


# ---------------------------------------------------------------- build

def build(llama_cpp: Path) -> None:
    bin_dir = llama_cpp / "build-cpu/bin"
    if (bin_dir / "llama-bench").exists():
        print(f"llama.cpp already built: {bin_dir}", flush=True)
        return
    if not llama_cpp.exists():
        llama_cpp.parent.mkdir(parents=True, exist_ok=True)
        sh(["tar", "xzf", TARBALL, "-C", llama_cpp.parent])
    sh(["cmake", "-S", llama_cpp, "-B", llama_cpp / "build-cpu", "-DGGML_CUDA=OFF", "-DGGML_NATIVE=OFF",
        "-DGGML_AVX2=ON", "-DGGML_FMA=ON", "-DGGML_F16C=ON", "-DLLAMA_USE_PREBUILT_UI=OFF",
        "-DLLAMA_BUILD_UI=OFF", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_OPENSSL=OFF", "-DCMAKE_BUILD_TYPE=Release"])
    sh(["cmake", "--build", llama_cpp / "build-cpu", "-j", str(os.cpu_count()), "--target",
        "llama-bench", "llama-quantize", "llama-server", "llama-results"])


# ---------------------------------------------------------------- make

def _tokenizer_kv(vocab: int) -> list:
    """SmolLM2's tokenizer keys with the token list padded to `vocab` by unused tokens."""
    import gguf
    out = []
    for key, v, t, sub in mc._tokenizer_kv(mc.default_gguf()):
        if key == "tokenizer.ggml.tokens":
            v = list(v) + [f"<|unused_{i}|>" for i in range(vocab - len(v))]
        elif key == "tokenizer.ggml.token_type":
            v = list(v) + [int(gguf.TokenType.UNUSED)] * (vocab - len(v))
        out.append((key, v, t, sub))
    return out


def _q8_0_random(rng: np.random.Generator, shape: tuple, std: float) -> np.ndarray:
    """Q8_0 blocks (f16 scale, 32 int8) of uniform int8 times std/73.6: values of std ~`std`."""
    n_blocks = int(np.prod(shape)) // 32
    blocks = np.empty((n_blocks, 34), dtype=np.uint8)
    blocks[:, :2] = np.full((n_blocks, 1), std / 73.6, dtype=np.float16).view(np.uint8)
    blocks[:, 2:] = np.frombuffer(rng.bytes(n_blocks * 32), dtype=np.uint8).reshape(n_blocks, 32)
    return blocks.reshape(*shape[:-1], shape[-1] // 32 * 34)


def make_gguf(spec: mc.MoeSpec, path: Path) -> None:
    """A Q8_0 GGUF of `spec` (llama.cpp's names, keys and per-tensor types), written tensor
    by tensor: only one tensor is in memory at a time."""
    import gguf
    shapes = mc.hf_weights(spec, shapes_only=True)
    layout = mc.gguf_layout(spec)

    def shape_of(hs):
        if len(hs) == 2 and hs[1] in (mc.KV_B_K, mc.KV_B_V):      # deepseek2's kv_b halves
            n, c = spec.n_head, spec.kv_lora_rank
            return (n, c, spec.qk_nope_head_dim) if hs[1] == mc.KV_B_K else (n, spec.v_head_dim, c)
        return shapes[hs[0]] if len(hs) == 1 else (len(hs),) + shapes[hs[0]]

    wr = gguf.GGUFWriter(str(path), spec.family)
    wr.add_type(gguf.GGUFType.MODEL)
    wr.add_name(spec.name)
    mc._add_arch_keys(wr, spec)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)
    for key, v, t, sub in _tokenizer_kv(spec.vocab):
        if sub is None:
            wr.add_key_value(key, v, t)
        else:
            wr.add_key_value(key, v, t, sub_type=sub)
    wr.add_quantization_version(gguf.GGML_QUANT_VERSION)
    plan = []
    for g, hs in layout:
        shape = shape_of(hs)
        kind = mc.gguf_type(g, shape, "Q8_0")
        assert kind in ("F32", "Q8_0"), (g, shape)
        plan.append((g, shape, kind))
        if kind == "F32":
            wr.add_tensor_info(g, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
        else:
            nbytes = int(np.prod(shape)) // 32 * 34
            wr.add_tensor_info(g, shape[:-1] + (shape[-1] // 32 * 34,), np.dtype(np.uint8), nbytes,
                               raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_ti_data_to_file()
    rng = np.random.default_rng(spec.seed)
    for g, shape, kind in plan:
        if kind == "F32":
            if g.endswith("norm.weight"):
                arr = np.ones(shape, np.float32)
            else:
                arr = (rng.standard_normal(shape, dtype=np.float32) * (1.0 / math.sqrt(shape[-1]))).astype(np.float32)
            wr.write_tensor_data(arr)
        else:
            wr.write_tensor_data(_q8_0_random(rng, shape, 1.0 / math.sqrt(shape[-1])))
    wr.close()


# ---------------------------------------------------------------- make: gpt-oss and qwen35moe shapes

def _mxfp4_random(rng: np.random.Generator, shape: tuple, std: float) -> np.ndarray:
    """MXFP4 blocks (e8m0 scale byte, 16 bytes of e2m1 nibbles) of uniform nibbles, the scale
    the power of two nearest std / 2.93 (the rms of ggml's kvalues times its half e8m0 unit)."""
    n_blocks = int(np.prod(shape)) // 32
    blocks = np.empty((n_blocks, 17), dtype=np.uint8)
    blocks[:, 0] = 128 + int(round(math.log2(std / 5.85)))
    blocks[:, 1:] = np.frombuffer(rng.bytes(n_blocks * 16), dtype=np.uint8).reshape(n_blocks, 16)
    return blocks.reshape(*shape[:-1], shape[-1] // 32 * 17)


_BLOCK = {"Q8_0": (34, _q8_0_random), "MXFP4": (17, _mxfp4_random)}


def write_random_gguf(path: Path, arch: str, name: str, add_keys, plan: list, vocab: int,
                      seed: int) -> None:
    """A GGUF of random weights, tensor by tensor (one in memory at a time): `add_keys(wr)`
    writes the architecture's keys, `plan` is [(GGUF name, numpy shape, "F32" | "Q8_0" |
    "MXFP4")] in file order. Norm weights ("norm.weight") are ones, "ssm_a" -U(1, 16), other F32 tensors normal
    of std 1/sqrt(last dim), block kinds of the same std; SmolLM2's tokenizer padded to `vocab`."""
    import gguf
    wr = gguf.GGUFWriter(str(path), arch)
    wr.add_type(gguf.GGUFType.MODEL)
    wr.add_name(name)
    add_keys(wr)
    for key, v, t, sub in _tokenizer_kv(vocab):
        if sub is None:
            wr.add_key_value(key, v, t)
        else:
            wr.add_key_value(key, v, t, sub_type=sub)
    wr.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for g, shape, kind in plan:
        if kind == "F32":
            wr.add_tensor_info(g, shape, np.dtype(np.float32), int(np.prod(shape)) * 4)
        else:
            bs = _BLOCK[kind][0]
            wr.add_tensor_info(g, shape[:-1] + (shape[-1] // 32 * bs,), np.dtype(np.uint8),
                               int(np.prod(shape)) // 32 * bs, raw_dtype=gguf.GGMLQuantizationType[kind])
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_ti_data_to_file()
    rng = np.random.default_rng(seed)
    for g, shape, kind in plan:
        std = 1.0 / math.sqrt(shape[-1])
        if kind == "F32":
            if g.endswith("norm.weight"):
                arr = np.ones(shape, np.float32)
            elif g.endswith(".ssm_a"):              # -exp(A_log), A uniform on [1, 16] as HF inits it
                arr = -rng.uniform(1.0, 16.0, shape).astype(np.float32)
            else:
                arr = (rng.standard_normal(shape, dtype=np.float32) * std).astype(np.float32)
            wr.write_tensor_data(arr)
        else:
            wr.write_tensor_data(_BLOCK[kind][1](rng, shape, std))
    wr.close()


def gptoss_spec(layers: int):
    """gpt-oss-20b's layer (its config.json: hidden 2880, 32 experts of FF 2880, top-4, 64 q /
    8 kv heads of 64, vocab 201,088, sliding window 128 on alternate layers from layer 0, YaRN
    32 over 4096, theta 150000), `layers` deep."""
    from tools.refs.gptoss_checkpoint import GptOssSpec
    return GptOssSpec(name=f"gpt-oss-20b-L{layers}", seed=37, n_layer=layers, hidden=2880, n_head=64,
                      n_head_kv=8, head_dim=64, n_expert=32, n_expert_used=4, expert_ff=2880,
                      sliding_window=128, vocab=201088, max_pos=131072)


def make_gptoss(layers: int, path: Path) -> None:
    """The gpt-oss-20b-shaped file as llama.cpp's converter + llama-quantize MXFP4_MOE make
    it: experts MXFP4, the other matrices Q8_0, router, biases, sinks and norms F32
    (tools/refs/gptoss_checkpoint.gguf_type's MXFP4 rule; its names and keys)."""
    from tools.refs import gptoss_checkpoint as gc
    spec = gptoss_spec(layers)
    d, E, ff, hd = spec.hidden, spec.n_expert, spec.expert_ff, spec.head_dim
    qo, kvo = spec.n_head * hd, spec.n_head_kv * hd
    shapes = [("token_embd.weight", (spec.vocab, d))]
    for i in range(layers):
        b = f"blk.{i}."
        shapes += [(b + "attn_norm.weight", (d,)), (b + "post_attention_norm.weight", (d,)),
                   (b + "ffn_gate_inp.weight", (E, d)), (b + "ffn_gate_inp.bias", (E,)),
                   (b + "ffn_gate_exps.weight", (E, ff, d)), (b + "ffn_up_exps.weight", (E, ff, d)),
                   (b + "ffn_down_exps.weight", (E, d, ff)), (b + "ffn_gate_exps.bias", (E, ff)),
                   (b + "ffn_up_exps.bias", (E, ff)), (b + "ffn_down_exps.bias", (E, d)),
                   (b + "attn_sinks.weight", (spec.n_head,))]
        for a, o, n in (("q", qo, d), ("k", kvo, d), ("v", kvo, d), ("output", d, qo)):
            shapes += [(b + f"attn_{a}.weight", (o, n)), (b + f"attn_{a}.bias", (o,))]
    shapes += [("output_norm.weight", (d,)), ("output.weight", (spec.vocab, d))]
    plan = [(g, sh_, gc.gguf_type(g, sh_, "MXFP4")) for g, sh_ in shapes]
    write_random_gguf(path, "gpt-oss", spec.name, lambda wr: gc.add_arch_keys(wr, spec), plan,
                      spec.vocab, spec.seed)


def qwen35_config(layers: int) -> dict:
    """Qwen3.5-35B-A3B's text config (transformers 5.25's Qwen3_5MoeTextConfig defaults:
    hidden 2048, 256 experts of FF 512 top-8 + a shared expert of 512, 16 q / 2 kv heads of
    256 with partial rotary 0.25, Gated DeltaNet 16 k heads / 32 v heads of 128, conv 4,
    vocab 248,320), `layers` deep (a multiple of 4: three linear layers, then a full one)."""
    if layers % 4:
        raise ValueError(f"--layers {layers}: the qwen3.5 shape keeps the 3:1 pattern, a multiple of 4")
    return {"num_hidden_layers": layers, "max_position_embeddings": 262144, "hidden_size": 2048,
            "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
            "rope_parameters": {"rope_theta": 1e7, "partial_rotary_factor": 0.25},
            "rms_norm_eps": 1e-6, "num_experts": 256, "num_experts_per_tok": 8,
            "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
            "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
            "linear_num_key_heads": 16, "linear_num_value_heads": 32, "vocab_size": 248320,
            "layer_types": ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)]}


def make_qwen35(layers: int, path: Path) -> None:
    """The Qwen3.5-35B-A3B-shaped file (GGUF qwen35moe) as the converter writes it at
    --outtype q8_0: tools/refs/next_gguf's names, shapes (attn_qkv, attn_gate, ssm_beta,
    ssm_alpha, ssm_conv1d [C, K], ...), keys and types (next_gguf.gguf_type's Q8_0 rule)."""
    from tools.refs import next_gguf as ng
    c = qwen35_config(layers)
    d, E, ff, sff = c["hidden_size"], c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
    nk, nv, dk, dv = (c["linear_num_key_heads"], c["linear_num_value_heads"],
                      c["linear_key_head_dim"], c["linear_value_head_dim"])
    hq, hkv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
    conv = 2 * nk * dk + nv * dv
    shapes = [("token_embd.weight", (c["vocab_size"], d)), ("output_norm.weight", (d,)),
              ("output.weight", (c["vocab_size"], d))]
    for i, kind in enumerate(c["layer_types"]):
        b = f"blk.{i}."
        shapes += [(b + "attn_norm.weight", (d,)), (b + "post_attention_norm.weight", (d,))]
        if kind == "linear_attention":
            shapes += [(b + "attn_qkv.weight", (conv, d)), (b + "attn_gate.weight", (nv * dv, d)),
                       (b + "ssm_beta.weight", (nv, d)), (b + "ssm_alpha.weight", (nv, d)),
                       (b + "ssm_conv1d.weight", (conv, c["linear_conv_kernel_dim"])),
                       (b + "ssm_dt.bias", (nv,)), (b + "ssm_a", (nv,)), (b + "ssm_norm.weight", (dv,)),
                       (b + "ssm_out.weight", (d, nv * dv))]
        else:
            shapes += [(b + "attn_q.weight", (2 * hq * hd, d)), (b + "attn_k.weight", (hkv * hd, d)),
                       (b + "attn_v.weight", (hkv * hd, d)), (b + "attn_output.weight", (d, hq * hd)),
                       (b + "attn_q_norm.weight", (hd,)), (b + "attn_k_norm.weight", (hd,))]
        shapes += [(b + "ffn_gate_inp.weight", (E, d)), (b + "ffn_gate_exps.weight", (E, ff, d)),
                   (b + "ffn_up_exps.weight", (E, ff, d)), (b + "ffn_down_exps.weight", (E, d, ff)),
                   (b + "ffn_gate_shexp.weight", (sff, d)), (b + "ffn_up_shexp.weight", (sff, d)),
                   (b + "ffn_down_shexp.weight", (d, sff)), (b + "ffn_gate_inp_shexp.weight", (1, d))]
    plan = [(g, sh_, ng.gguf_type(g, sh_, "Q8_0")) for g, sh_ in shapes]
    write_random_gguf(path, "qwen35moe", f"qwen3.5-35b-a3b-L{layers}",
                      lambda wr: ng.add_arch_keys(wr, c, "qwen35moe", "Q8_0", (11, 11, 10, 0)),
                      plan, c["vocab_size"], 35)


# GLM-5.3-Flash (transformers 5.25's Glm5NextTextConfig for the released model: hidden 4096,
# 45 layers with KDA where i % 4 != 3, 3 leading dense MLPs of 12288, then 288 experts of 2048
# top-8 + 1 shared, latent attention 64 heads (q_lora 1536, kv_lora 512, NoPE 256 / v 256),
# the DSA indexer 32 x 128 over keys pooled by 16 (index_topk 2048), KDA 64 heads of 128,
# 4 mHC streams, vocab 154,880); spec.py's "glm-5.3-flash" holds the same numbers.
GLM53 = dict(d=4096, dense_ff=12288, E=288, k=8, eff=2048, H=64, QL=1536, C=512, N=256, V=256,
             LH=64, LD=128, K=4, Hi=32, Di=128, kpool=16, topk=2048, hc=4, vocab=154880,
             max_pos=1048576, eps=1e-5)

# glm5-next tensors llama-quantize keeps in F32 (src/llama-quant.cpp at this commit: the
# mHC, the indexer, the KDA's small projections, kv_a and the kv_b halves), besides norms,
# the router and the convs: a Q8_0 file of llama.cpp's own holds these as F32
_GLM53_F32 = ("hc_", "indexer.attn_q_b", "indexer.attn_k", "indexer.proj", "indexer_compressor_gate",
              "indexer_compressor_ape", "ssm_f_a.weight", "ssm_f_b.weight", "ssm_g_a.weight",
              "ssm_g_b.weight", "ssm_beta.weight", "attn_kv_a_mqa.weight", "attn_k_b.weight",
              "attn_v_b.weight", "ffn_gate_inp.weight", "ssm_conv1d", "_norm.weight")


def glm53_type(name: str) -> str:
    """The type `llama-quantize ... Q8_0` gives a glm5-next tensor: Q8_0 for a weight matrix,
    F32 for norms, biases, the router, the convs and glm5-next's kept-F32 list."""
    if not name.endswith("weight") or name.endswith("norm.weight") or any(x in name for x in _GLM53_F32):
        return "F32"
    return "Q8_0"


def glm53_shapes(layers: int) -> list:
    """(GGUF name, numpy shape) in file order for a GLM-5.3-Flash-shaped file `layers` deep
    (tools/refs/glm53_checkpoint.gguf_tensors' names and layouts; every sparse layer a full
    indexer; no MTP block)."""
    g = GLM53
    d, E, H, LH, LD = g["d"], g["E"], g["H"], g["LH"], g["LD"]
    m = (2 + g["hc"]) * g["hc"]
    out = [("token_embd.weight", (g["vocab"], d)), ("output_norm.weight", (d,)),
           ("output.weight", (g["vocab"], d))]
    for i in range(layers):
        b = f"blk.{i}."
        out.append((b + "attn_norm.weight", (d,)))
        for part in ("hc_attn", "hc_ffn"):
            out += [(b + f"{part}_fn.weight", (m, g["hc"] * d)), (b + f"{part}_base.weight", (m,)),
                    (b + f"{part}_scale.weight", (3,))]
        if i % 4 != 3:
            out += [(b + f"attn_{x}.weight", (LH * LD, d)) for x in "qkv"]
            out += [(b + f"ssm_conv1d_{x}.weight", (1, LH * LD, 1, g["K"])) for x in "qkv"]
            out += [(b + "ssm_f_a.weight", (LD, d)), (b + "ssm_f_b.weight", (LH * LD, LD)),
                    (b + "ssm_beta.weight", (LH, d)), (b + "ssm_a", (LH,)),
                    (b + "ssm_dt.bias", (LH * LD,)), (b + "ssm_g_a.weight", (LD, d)),
                    (b + "ssm_g_b.weight", (LH * LD, LD)), (b + "ssm_norm.weight", (LD,)),
                    (b + "attn_output.weight", (d, LH * LD))]
        else:
            out += [(b + "attn_q_a.weight", (g["QL"], d)), (b + "attn_q_a_norm.weight", (g["QL"],)),
                    (b + "attn_q_b.weight", (H * g["N"], g["QL"])),
                    (b + "attn_kv_a_mqa.weight", (g["C"], d)), (b + "attn_kv_a_norm.weight", (g["C"],)),
                    (b + "attn_k_b.weight", (H, g["C"], g["N"])),
                    (b + "attn_v_b.weight", (H, g["V"], g["C"])),
                    (b + "attn_output.weight", (d, H * g["V"])),
                    (b + "indexer.k_norm.weight", (g["Di"],)), (b + "indexer.k_norm.bias", (g["Di"],)),
                    (b + "indexer.proj.weight", (g["Hi"], d)), (b + "indexer.attn_k.weight", (g["Di"], d)),
                    (b + "indexer.attn_q_b.weight", (g["Hi"] * g["Di"], g["QL"])),
                    (b + "indexer_compressor_gate.weight", (g["Di"], d)),
                    (b + "indexer_compressor_ape.weight", (g["kpool"], g["Di"]))]
        out.append((b + "ffn_norm.weight", (d,)))
        if i < 3:
            out += [(b + "ffn_gate.weight", (g["dense_ff"], d)), (b + "ffn_up.weight", (g["dense_ff"], d)),
                    (b + "ffn_down.weight", (d, g["dense_ff"]))]
            continue
        out += [(b + "ffn_gate_inp.weight", (E, d)), (b + "exp_probs_b.bias", (E,)),
                (b + "ffn_gate_exps.weight", (E, g["eff"], d)), (b + "ffn_up_exps.weight", (E, g["eff"], d)),
                (b + "ffn_down_exps.weight", (E, d, g["eff"])),
                (b + "ffn_gate_shexp.weight", (g["eff"], d)), (b + "ffn_up_shexp.weight", (g["eff"], d)),
                (b + "ffn_down_shexp.weight", (d, g["eff"]))]
    return out


def _glm53_keys(wr, layers: int) -> None:
    """glm5-next's keys as tools/refs/glm53_checkpoint.write_gguf writes them."""
    import gguf
    g, A = GLM53, "glm5-next"
    wr.add_block_count(layers)
    wr.add_context_length(g["max_pos"])
    wr.add_embedding_length(g["d"])
    wr.add_feed_forward_length(g["dense_ff"])
    wr.add_head_count(g["H"])
    wr.add_head_count_kv([0 if i % 4 != 3 else 1 for i in range(layers)])
    wr.add_layer_norm_rms_eps(g["eps"])
    wr.add_vocab_size(g["vocab"])
    wr.add_ssm_conv_kernel(g["K"])
    wr.add_kda_head_dim(g["LD"])
    wr.add_float32(f"{A}.kda.gate_lower_bound", -5.0)
    wr.add_q_lora_rank(g["QL"])
    wr.add_kv_lora_rank(g["C"])
    wr.add_rope_dimension_count(0)
    wr.add_key_length(g["C"])
    wr.add_value_length(g["C"])
    wr.add_key_length_mla(g["N"])
    wr.add_value_length_mla(g["V"])
    wr.add_expert_count(g["E"])
    wr.add_expert_used_count(g["k"])
    wr.add_expert_feed_forward_length(g["eff"])
    wr.add_expert_shared_count(1)
    wr.add_leading_dense_block_count(min(3, layers))
    wr.add_expert_weights_scale(2.5)
    wr.add_expert_weights_norm(True)
    wr.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    wr.add_float32(f"{A}.swiglu_clamp_exp", 10.0)
    wr.add_float32(f"{A}.swiglu_clamp_shexp", 10.0)
    wr.add_uint32(f"{A}.attention.indexer.head_count", g["Hi"])
    wr.add_uint32(f"{A}.attention.indexer.key_length", g["Di"])
    wr.add_uint32(f"{A}.attention.indexer.top_k", g["topk"])
    wr.add_uint32(f"{A}.attention.indexer.kpool", g["kpool"])
    wr.add_bool(f"{A}.attention.indexer.kpool_select_tail", True)
    wr.add_array(f"{A}.attention.indexer.types", [1] * layers)
    wr.add_uint32(f"{A}.hyper_connection.count", g["hc"])
    wr.add_uint32(f"{A}.hyper_connection.sinkhorn_iterations", 20)
    wr.add_float32(f"{A}.hyper_connection.epsilon", 1e-6)
    wr.add_file_type(gguf.LlamaFileType.MOSTLY_Q8_0)


def make_glm53(layers: int, path: Path) -> None:
    """The GLM-5.3-Flash-shaped Q8_0 file, `layers` deep (a multiple of 4: three KDA layers
    with the dense lead, then a sparse latent-attention layer with its full indexer and the
    MoE; 4 keeps one sparse layer, the 3 dense MLPs and one MoE layer of 288 experts): random
    weights as Q8_0 blocks where llama-quantize writes Q8_0 (glm53_type), F32 elsewhere."""
    if layers % 4:
        raise ValueError(f"--layers {layers}: the glm-5.3-flash shape keeps one sparse layer in "
                         "four, a multiple of 4")
    plan = [(n, s, glm53_type(n)) for n, s in glm53_shapes(layers)]
    write_random_gguf(path, "glm5-next", f"glm-5.3-flash-L{layers}",
                      lambda wr: _glm53_keys(wr, layers), plan, GLM53["vocab"], 53)


# The other shapes (--shapes): a maker and the one type it writes.
OTHER_SHAPES = {"gpt-oss-20b": (make_gptoss, "MXFP4_MOE"), "qwen3.5-35b-a3b": (make_qwen35, "Q8_0"),
                "glm-5.3-flash": (make_glm53, "Q8_0")}
DEFAULT_LAYERS.update({"gpt-oss-20b": 2, "qwen3.5-35b-a3b": 4, "glm-5.3-flash": 4})


def file_name(shape: str, layers: int, qtype: str) -> str:
    return f"{shape}-L{layers}-{qtype}.gguf"


# ---------------------------------------------------------------- bench

class Cpu:
    """CPU seconds over a span: the children's this process waited for (resource's
    RUSAGE_CHILDREN: the side just run) and the whole machine's busy time (/proc/stat), per
    wall second: `ours` (the side's cores) and `others` (everything else's)."""

    def __init__(self):
        import resource
        self.r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.b0, self.t0 = _busy(), time.perf_counter()

    def done(self) -> dict:
        import resource
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        wall = time.perf_counter() - self.t0
        ours = r1.ru_utime + r1.ru_stime - self.r0.ru_utime - self.r0.ru_stime
        return {"ours": ours / wall, "others": max(0.0, _busy() - self.b0 - ours) / wall, "wall_s": wall}


def _busy() -> float:
    v = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return (sum(v[:3]) + sum(v[5:7])) / os.sysconf("SC_CLK_TCK")


def llama_bench(llama_cpp: Path, gguf_path: Path, threads: int, reps: int = 2) -> dict:
    r = subprocess.run([str(llama_cpp / "build-cpu/bin/llama-bench"), "-m", str(gguf_path), "-t", str(threads),
                        "-p", "512", "-n", "32", "-r", str(reps), "-o", "json"],
                       check=True, capture_output=True, text=True, env=ENV0)
    rows = json.loads(r.stdout)
    out = {}
    for row in rows:
        key = "tg" if row["n_gen"] else f"pp{row['n_prompt']}"
        out[key] = {"tok_s": row["avg_ts"], "stdev": row["stddev_ts"]}
    return out


class Foldserve:
    """foldserve's engine on one GGUF (loaded once, the process's numba threads set to
    `threads`), timed the way llama-bench times llama.cpp: `tg` = batch-1 greedy decode of
    `n_gen` tokens after a 1-token prompt (llama-bench's tg: an empty context, then n_gen
    tokens), `pp512` = one 512-token prompt prefilled in one round, `b8` = 8 streams decoding
    together (tok/s over all 8, after each stream's 1-token prompt). The engine's own forward
    (server/engine/engine.py, the same Steps the server's scheduler sends it), greedy argmax of
    the returned logits fed back, so the head and the logits' copy are paid as a server pays
    them; no HTTP and no tokenizer (llama-bench has neither). Also times the MoE op's share
    (the engine backend's `moe` wrapped by a timer)."""

    def __init__(self, gguf_path: Path, threads: int, ctx: int = 1024):
        import numba

        from server.engine.engine import Engine
        from server.engine.weights import load
        from server.ranks.steps import PoolStep
        numba.set_num_threads(threads)
        t = time.time()
        ld = load(str(gguf_path), progress=False)
        self.spec = ld.spec
        self.eng = Engine(ld.spec, ld.tensors.__getitem__)
        self.ctx, self.B = ctx, 8
        self.eng.apply(PoolStep(True, self.B * ctx // 16, 16, (self.eng.page_bytes(16),), self.B, ctx))
        self.load_s = time.time() - t
        self.moe_s = 0.0
        ops = self.eng.model.ops                  # the engine's backend (kernels.ops.backend)

        def timer(inner):
            def timed(*a, **k):
                t0 = time.perf_counter()
                try:
                    return inner(*a, **k)
                finally:
                    self.moe_s += time.perf_counter() - t0
            return timed
        for op in ("moe", "moe_biased"):          # moe_biased: gpt-oss's experts
            if hasattr(ops, op):
                setattr(ops, op, timer(getattr(ops, op)))
        self.warm()

    def _begin(self, s):
        from server.ranks.steps import BeginStep
        pages = self.ctx // 16
        self.eng.apply(BeginStep(s, tuple(range(s * pages, (s + 1) * pages))))

    def _end(self, n):
        from server.ranks.steps import EndStep
        for s in range(n):
            self.eng.apply(EndStep(s))

    def warm(self):
        """Compile every kernel a mode uses (numba caches on disk; the first call still loads),
        the prefill at the timed 512 tokens: llama-bench's own warm-up runs the whole test once,
        and a shorter one leaves the long-chunk kernels (and a fresh tree's compiles) inside
        the timed round."""
        self.decode(1, 2)
        self.decode(8, 2)
        self.prefill(512)

    def decode(self, b: int, n_gen: int) -> tuple[float, float]:
        """b streams, a 1-token prompt each, then n_gen greedy steps: (tok/s, MoE share)."""
        from server.ranks.steps import Chunk, RoundStep
        for s in range(b):
            self._begin(s)
        logits = self.eng.apply(RoundStep(tuple(Chunk(s, 0, (1 + s,)) for s in range(b))))
        nxt = [int(np.argmax(logits[s])) for s in range(b)]
        self.moe_s = 0.0
        t = time.perf_counter()
        for k in range(n_gen):
            logits = self.eng.apply(RoundStep(tuple(Chunk(s, 1 + k, (nxt[s],)) for s in range(b))))
            nxt = [int(np.argmax(logits[s])) for s in range(b)]
        dt = time.perf_counter() - t
        self._end(b)
        return b * n_gen / dt, self.moe_s / dt

    def prefill(self, n: int) -> tuple[float, float]:
        from server.ranks.steps import Chunk, RoundStep
        self._begin(0)
        toks = tuple(int(t) for t in np.random.default_rng(n).integers(0, self.spec.vocab, n))
        self.moe_s = 0.0
        t = time.perf_counter()
        self.eng.apply(RoundStep((Chunk(0, 0, toks),)))
        dt = time.perf_counter() - t
        self._end(1)
        return n / dt, self.moe_s / dt


def foldserve_numbers(gguf_path: Path, threads: int, engine: Foldserve | None = None,
                      n_gen: int = 32, b8: bool = True) -> dict | None:
    """foldserve on the same file and threads: {"tg": tok/s at batch 1 (llama-bench's tg
    shape: 1-token prompt, n_gen tokens), "pp512": tok/s prefilling 512, "b8": tok/s of 8
    concurrent decodes, "*_moe": the MoE op's share of each}. One repetition; `engine`
    reuses a loaded Foldserve (the alternating runs of main); b8=False: no b8 (nan)."""
    f = engine or Foldserve(gguf_path, threads)
    tg, tg_moe = f.decode(1, n_gen)
    pp, pp_moe = f.prefill(512)
    b8, b8_moe = f.decode(8, n_gen) if b8 else (float("nan"), float("nan"))
    return {"tg": tg, "pp512": pp, "b8": b8, "tg_moe": tg_moe, "pp512_moe": pp_moe, "b8_moe": b8_moe}


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _med(xs):
    return float(np.median(xs)) if xs else float("nan")


def base_numbers(base: Path, gguf_path: Path, threads: int, b8: bool = True) -> dict:
    """foldserve_numbers from another source tree (`--base`: an earlier commit unpacked by
    `git archive`), in a subprocess of its own: that tree's engine loaded and warmed, then
    timed as this one's is."""
    code = ("import json, sys; from pathlib import Path; from bench.moe_cpu import foldserve_numbers; "
            f"print('RESULT', json.dumps(foldserve_numbers(Path({str(gguf_path)!r}), {threads}, b8={b8!r})))")
    env = dict(ENV0, PYTHONPATH=str(base))
    r = subprocess.run([sys.executable, "-c", code], cwd=base, env=env, check=True, capture_output=True, text=True)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def fresh_numbers(gguf_path: Path, threads: int, b8: bool = True, tree: Path = ROOT) -> dict:
    """foldserve_numbers in a new process of its own (this tree's code, the environment of
    ENV0): the engine loaded, warmed, timed, and the process gone before the next side runs."""
    code = ("import json; from pathlib import Path; from bench.moe_cpu import foldserve_numbers; "
            f"print('RESULT', json.dumps(foldserve_numbers(Path({str(gguf_path)!r}), {threads}, b8={b8!r})))")
    env = dict(ENV0, PYTHONPATH=str(tree))
    r = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"foldserve's side failed ({r.returncode}): {r.stderr[-3000:]}")
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def side_by_side(shape, layers, qt, f: Path, lcpp: Path, threads: int, rounds: int,
                 base: Path | None = None, b8: bool = True) -> dict:
    """llama-bench (-r 1) and foldserve on file f, alternated `rounds` times, each side a
    fresh child process (fresh_numbers: foldserve's engine loaded anew each round), so
    whatever load the machine carries hits both and neither side's process state or memory
    is there while the other runs; medians over the rounds, each round's ratios (the pair
    under the same load) and each side's CPU share beside the other processes' (`Cpu`). With
    `base`, that tree's foldserve a third in each round (base_numbers), its ratios beside."""
    per = []
    for r in range(rounds):
        l0 = _load()
        c = Cpu()
        ll = llama_bench(lcpp, f, threads, reps=1)
        cpu_ll = c.done()
        l1 = _load()
        c = Cpu()
        ours = fresh_numbers(f, threads, b8)
        cpu_ours = c.done()
        l2 = _load()
        per.append({"llama_cpp": {k: v["tok_s"] for k, v in ll.items()}, "foldserve": ours,
                    "loadavg": [l0, l1, l2], "cpu": {"llama_cpp": cpu_ll, "foldserve": cpu_ours}})
        if base is not None:
            c = Cpu()
            b = base_numbers(base, f, threads, b8)
            cpu_base = c.done()
            per[-1]["base"] = b
            per[-1]["cpu"]["base"] = cpu_base
            per[-1]["loadavg"].append(_load())
            print(f"  round {r + 1} base: tg {b['tg']:6.2f} ({b['tg'] / ll['tg']['tok_s']:.2f}x) pp512 "
                  f"{b['pp512']:7.2f} ({b['pp512'] / ll['pp512']['tok_s']:.2f}x) b8 {b['b8']:6.2f}  load {_load()}"
                  f"  cores: base {cpu_base['ours']:.2f} incl. load (others {cpu_base['others']:.2f})", flush=True)
        lt, lp = ll["tg"]["tok_s"], ll["pp512"]["tok_s"]
        print(f"  round {r + 1}: llama.cpp tg {lt:6.2f} pp512 {lp:7.2f} | foldserve tg {ours['tg']:6.2f} "
              f"({ours['tg'] / lt:.2f}x, MoE {ours['tg_moe']:.0%}) pp512 {ours['pp512']:7.2f} "
              f"({ours['pp512'] / lp:.2f}x, MoE {ours['pp512_moe']:.0%}) b8 {ours['b8']:6.2f} "
              f"(b8/b1 {ours['b8'] / ours['tg']:.2f}, MoE {ours['b8_moe']:.0%})  load {l0} | {l1} | {l2}"
              f"  cores: llama.cpp {cpu_ll['ours']:.2f} (others {cpu_ll['others']:.2f}), foldserve "
              f"{cpu_ours['ours']:.2f} incl. load (others {cpu_ours['others']:.2f})", flush=True)
    sides = ("llama_cpp", "foldserve") + (("base",) if base is not None else ())
    med = {side: {k: _med([p[side][k] for p in per]) for k in per[0][side]} for side in sides}
    L, F = med["llama_cpp"], med["foldserve"]
    ratios = {"tg": F["tg"] / L["tg"], "pp512": F["pp512"] / L["pp512"], "b8_over_b1": F["b8"] / F["tg"]}
    if base is not None:
        B = med["base"]
        ratios.update(base_tg=B["tg"] / L["tg"], base_pp512=B["pp512"] / L["pp512"])
        print(f"  base medians: tg {B['tg']:.2f} ({ratios['base_tg']:.2f}x) pp512 {B['pp512']:.2f} "
              f"({ratios['base_pp512']:.2f}x) b8 {B['b8']:.2f}", flush=True)
    print(f"{shape:14s} L{layers} {qt:7s} {f.stat().st_size / 1e9:5.2f} GB  medians of {rounds}:  "
          f"llama.cpp tg {L['tg']:.2f} pp512 {L['pp512']:.2f}  | foldserve tg {F['tg']:.2f} "
          f"({ratios['tg']:.2f}x) pp512 {F['pp512']:.2f} ({ratios['pp512']:.2f}x) b8 {F['b8']:.2f} "
          f"(b8/b1 {ratios['b8_over_b1']:.2f})", flush=True)
    return {"shape": shape, "layers": layers, "type": qt, "file": f.name, "bytes": f.stat().st_size,
            "threads": threads, "rounds": per, "median": med, "ratios": ratios}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", nargs="+", default=list(SHAPES), choices=list(SHAPES) + list(OTHER_SHAPES))
    ap.add_argument("--layers", type=int, default=None, help="depth (default: 4 for Qwen, 3 for GLM)")
    ap.add_argument("--dir", default="/tmp/moe-bench")
    ap.add_argument("--llama-cpp", default="/work/peers-build/llama.cpp")
    ap.add_argument("--types", nargs="+", default=["Q8_0", "Q4_K_M"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--stages", default="build,make,quantize,bench")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--base", default=None,
                    help="a source tree of an earlier commit (git archive): its foldserve a third each round")
    ap.add_argument("--no-b8", action="store_true", help="skip foldserve's b8 decode (slow shapes)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating rounds a file: llama-bench -r 1, then foldserve, each round")
    a = ap.parse_args(argv)
    stages = set(a.stages.split(","))
    lcpp, d = Path(a.llama_cpp), Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    if "build" in stages:
        build(lcpp)
    results = []
    for shape in a.shapes:
        layers = a.layers or DEFAULT_LAYERS[shape]
        if shape in OTHER_SHAPES:
            maker, qt = OTHER_SHAPES[shape]
            f = d / file_name(shape, layers, qt)
            if "make" in stages and not f.exists():
                t = time.time()
                maker(layers, f.with_suffix(".tmp"))
                f.with_suffix(".tmp").rename(f)
                print(f"made {f} ({f.stat().st_size / 1e9:.2f} GB, {time.time() - t:.0f} s)", flush=True)
            if "bench" in stages and f.exists():
                results.append(side_by_side(shape, layers, qt, f, lcpp, a.threads, a.rounds,
                                            Path(a.base) if a.base else None, not a.no_b8))
            continue
        spec = replace(SHAPES[shape], n_layer=layers, name=f"{shape}-L{layers}")
        q8 = d / file_name(shape, layers, "Q8_0")
        if "make" in stages and not q8.exists():
            t = time.time()
            make_gguf(spec, q8.with_suffix(".tmp"))
            q8.with_suffix(".tmp").rename(q8)
            print(f"made {q8} ({q8.stat().st_size / 1e9:.2f} GB, {time.time() - t:.0f} s)", flush=True)
        for qt in a.types:
            f = d / file_name(shape, layers, qt)
            if qt != "Q8_0" and "quantize" in stages and not f.exists():
                with open(f.with_suffix(".quantize.log"), "w") as log:
                    sh([lcpp / "build-cpu/bin/llama-quantize", "--allow-requantize", q8, f, qt, a.threads],
                       stdout=log, stderr=subprocess.STDOUT)
            if "bench" not in stages or not f.exists():
                continue
            results.append(side_by_side(shape, layers, qt, f, lcpp, a.threads, a.rounds,
                                        Path(a.base) if a.base else None, not a.no_b8))
    if a.out:
        Path(a.out).write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
