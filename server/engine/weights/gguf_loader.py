"""Load a .gguf file: quantized matrices kept as stored (Blocks), the rest as float32;
rename to HF; undo llama.cpp's q/k row order (a row permutation: Blocks.take_rows).

A mixture-of-experts file's 3-D expert tensors ([n_experts, out, in], any kind of
kernels.blocks.BLOCK: Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q6_K, MXFP4, NVFP4, F16, BF16, F32) become one Blocks per expert over the file's bytes (views
of the map, never dequantized). A GLM file's MTP / NextN blocks (blk.N.* for N past the
trunk, `{arch}.nextn_predict_layers` of them) are not run: they are counted, their bytes
left unread in the file, and one startup line says so."""
from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, replace

import numpy as np
from gguf import GGMLQuantizationType
from gguf.quants import dequantize

from server.shapes.spec import ModelSpec
from . import permute, rope_scaling
from .gguf_spec import Fields, spec_from_gguf
from kernels.blocks import BLOCK, QUANT, Blocks
from .gguf_file import GGUFFile
from .gguf_names import IGNORED, block_of, expert_tensor, hf_name
from .identity import hash_files, identity
from .loaded import Loaded, WeightsError
from .names import EMBED, HEAD, check_tensors
from .progress import Progress

log = logging.getLogger("foldserve")


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
    if kind in QUANT and len(t.dims) == 2:
        rows, cols = t.shape
        return Blocks(kind, rows, cols, t.data.reshape(rows, -1))
    return to_float32(t, path)


def router_as_stored(t, path: str):
    """A MoE router (ffn_gate_inp, F32 in llama.cpp's files) as Blocks of its kind: the CPU
    reads it with the block kernels like the experts (OpenBLAS between numba's parallel
    regions costs more than the product: their spinning threads contend)."""
    kind = GGMLQuantizationType(t.ggml_type).name
    if kind in BLOCK and len(t.dims) == 2 and t.shape[1] % 32 == 0:
        rows, cols = t.shape
        return Blocks(kind, rows, cols, t.data.reshape(rows, -1))
    return as_stored(t, path)


def experts_as_stored(t, path: str) -> list:
    """A 3-D expert tensor [n_experts, out, in] as one Blocks [out, in] per expert: views of
    the file's bytes (any kind kernels/blocks_cpu.py reads, plain floats included)."""
    kind = GGMLQuantizationType(t.ggml_type).name
    if kind not in BLOCK or len(t.dims) != 3:
        raise WeightsError(f"{path}: expert tensor {t.name} is {kind} of {len(t.dims)} dims; "
                           f"foldserve reads 3-D expert tensors of {', '.join(BLOCK)}")
    n, rows, cols = t.shape
    data = t.data.reshape(n, rows, -1)
    return [Blocks(kind, rows, cols, data[e]) for e in range(n)]


KV_B_PARTS = (".attn_k_b.weight", ".attn_v_b.weight")


@dataclass(frozen=True)
class KvBHalves:
    """kv_b_proj as a deepseek2 GGUF stores it, both halves Q8_0: attn_k_b [H, C, N] (W_UK
    transposed: H C rows of N) and attn_v_b [H, V, C] (W_UV: H V rows of C), each Blocks over
    the file's bytes. `shape` is kv_b_proj's; `dequantize()` the joined float32 kv_b_proj
    (what the loader gives for any other type). The CPU's latent attention reads the halves
    as stored (prepare.Split.kv_b_heads, kernels/mla_cpu.py): 3.8x fewer bytes a decode step
    than float32, and the same products (a Q8_0 value is exact in float32)."""
    k_b: Blocks
    v_b: Blocks
    n_heads: int

    @property
    def shape(self) -> tuple:
        return (self.k_b.cols * self.n_heads + self.v_b.rows, self.v_b.cols)

    def dequantize(self) -> np.ndarray:
        H, N, C = self.n_heads, self.k_b.cols, self.v_b.cols
        kb = self.k_b.dequantize().reshape(H, C, N)
        vb = self.v_b.dequantize().reshape(H, -1, C)
        x = np.concatenate([kb.transpose(0, 2, 1), vb], axis=1)
        return np.ascontiguousarray(x.reshape(-1, C), dtype=np.float32)


def join_kv_b(spec: ModelSpec, by_name: dict, tensors: dict, path: str) -> None:
    """deepseek2 and kimi-linear (a family with GGUF_KV_B): llama.cpp's converter splits
    kv_b_proj [H (N + V), C] into attn_k_b [H, C, N] (transposed) and attn_v_b [H, V, C]; join
    them back, float32 (small: H (N + V) rows of the latent width), as
    model.layers.i.self_attn.kv_b_proj.weight; both halves Q8_0: kept as stored (KvBHalves)."""
    for i in range(spec.n_layers + spec.mtp_layers):   # the MTP layer's too (--draft mtp)
        k, v = f"blk.{i}.attn_k_b.weight", f"blk.{i}.attn_v_b.weight"
        if k not in by_name or v not in by_name:
            continue                       # check_tensors names the missing kv_b_proj
        tk, tv = by_name[k], by_name[v]
        if GGMLQuantizationType(tk.ggml_type).name == "Q8_0" == GGMLQuantizationType(tv.ggml_type).name \
                and len(tk.shape) == 3 and len(tv.shape) == 3:
            H, C, N = (int(x) for x in tk.shape)
            V = int(tv.shape[1])
            tensors[f"model.layers.{i}.self_attn.kv_b_proj.weight"] = KvBHalves(
                Blocks("Q8_0", H * C, N, tk.data.reshape(H * C, -1)),
                Blocks("Q8_0", H * V, C, tv.data.reshape(H * V, -1)), H)
            continue
        kb, vb = to_float32(tk, path), to_float32(tv, path)
        x = np.concatenate([kb.transpose(0, 2, 1), vb], axis=1)
        tensors[f"model.layers.{i}.self_attn.kv_b_proj.weight"] = np.ascontiguousarray(
            x.reshape(-1, x.shape[2]))


def load_gguf(path: str, *, progress: bool = True, mtp: bool = False) -> Loaded:
    """mtp: the NextN block is read too (server/families/nextn.py: its decoder layer under
    model.layers.{n_layers}.*, its nextn.* tensors as that layer's eh_proj / enorm / hnorm /
    shared_head.norm; the trunk's embedding and head copies it may carry are not read)."""
    start = time.monotonic()
    try:
        reader = GGUFFile(path)
    except Exception as e:                    # bad magic, truncated file, unknown type
        raise WeightsError(f"{path}: not a readable GGUF file ({type(e).__name__}: {e})") from e
    by_name = {t.name: t for t in reader.tensors}
    spec, raw_arch = spec_from_gguf(Fields(reader, path), set(by_name))

    arch = spec.arch
    trunk = spec.n_layers                   # blocks past it: MTP / NextN (nextn_layers of them)
    unused = [n for n in by_name if (block_of(n) or 0) >= trunk and block_of(n) is not None
              and block_of(n) < trunk + spec.nextn_layers]
    nextn: dict = {}                        # --draft mtp: the NextN block's own tensors
    if mtp:
        from server.families import nextn as mtp_layer
        spec = mtp_layer.with_mtp(spec)
        own = {n: n.split(".", 2)[2] for n in unused if block_of(n) == trunk}
        nextn = {n: f"model.layers.{trunk}.{mtp_layer.GGUF_NEXTN[sfx]}"
                 for n, sfx in own.items() if sfx in mtp_layer.GGUF_NEXTN}
        unused = [n for n in unused if block_of(n) != trunk
                  or own[n] in mtp_layer.COPIES]      # the trunk's copies: not read
    from server.families import family
    fam = family(arch)
    kv_b = {n for n in by_name if getattr(fam, "GGUF_KV_B", None) and n.endswith(KV_B_PARTS)}
    fix = getattr(fam, "gguf_tensor", None)   # a family's own stored forms (kimi-linear's)
    if arch == "qwen3next":                  # rebuilt into HF's layout below
        from . import gguf_qwen3next
        tiled = raw_arch == "qwen35moe"
        joined = gguf_qwen3next.JOINED35 if tiled else gguf_qwen3next.JOINED
        kv_b = {n for n in by_name if n.endswith(joined) and n not in unused}
    unknown = [n for n in by_name if n not in unused and n not in IGNORED and n not in kv_b
               and n not in nextn and hf_name(n, arch) is None and expert_tensor(n, arch) is None]
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
            if name in IGNORED or name in unused:
                bar.advance()
                continue
            if name in kv_b:                 # joined into kv_b_proj (qwen3next: HF's layout) below
                bar.advance()
                continue
            if name in nextn:
                tensors[nextn[name]] = as_stored(t, path)
                bar.advance()
                continue
            ex = expert_tensor(name, arch)
            if ex is not None:
                layer, proj = ex
                suffix = proj if "." in proj else proj + ".weight"
                # 2-D: one bias row an expert (gpt-oss), float32; 3-D: one Blocks an expert
                parts = to_float32(t, path) if len(t.dims) == 2 else experts_as_stored(t, path)
                for e, b in enumerate(parts):
                    tensors[f"model.layers.{layer}.mlp.experts.{e}.{suffix}"] = b
                bar.advance()
                continue
            x = router_as_stored(t, path) if name.endswith(".ffn_gate_inp.weight") else as_stored(t, path)
            hf = hf_name(name, arch)
            if fix is not None:
                x = fix(hf, x)
            if permuted and hf.endswith(("q_proj.weight", "k_proj.weight")):
                heads = spec.n_heads if "q_proj" in hf else spec.n_kv_heads
                x = permute.from_gguf(x, heads)
            tensors[hf] = x
            bar.advance()
    if kv_b and arch == "qwen3next":
        gguf_qwen3next.join(spec, by_name, tensors, path, to_float32, tiled, as_stored)
    elif kv_b:
        join_kv_b(spec, by_name, tensors, path)
    if spec.tie_embeddings:
        tensors[HEAD] = tensors[EMBED]
    if mtp:
        log.info("%s: the MTP/NextN block blk.%d drafts (--draft mtp)%s", os.path.basename(path),
                 trunk, f"; {len(unused)} tensor(s) of it not read (the trunk's embedding and "
                 "head copies, or further NextN blocks)" if unused else "")
    elif unused:
        log.info("%s: the MTP/NextN block%s %s (%d tensors, %.1f MB as stored) not run: no "
                 "speculative decoding from it; its bytes stay unread in the file",
                 os.path.basename(path), "s" if spec.nextn_layers > 1 else "",
                 ", ".join(f"blk.{trunk + i}" for i in range(spec.nextn_layers)), len(unused),
                 sum(int(by_name[n].data.nbytes) for n in unused) / 1e6)
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
