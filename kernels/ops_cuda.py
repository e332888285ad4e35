"""The "cuda" ops backend (kernels.ops.backend("cuda")): cupy arrays in and out, each op's
CUDA form (`kernels/<op>_cuda.py`). Imported by that call only: cupy is absent where the GPU
is. A weight kept as GGUF blocks on the device (kernels/qmatmul_cuda.QWeight / QStack) takes
the block kernels; a bf16 one the GEMMs. The ops the GPU does not run (mixture-of-experts,
latent attention, sinks and windows, partial RoPE, Gated DeltaNet) are refused by name.
"""
from __future__ import annotations

from kernels import attention_cuda, common_cuda, kv_write_cuda, matmul_cuda, matmul_fused_cuda
from kernels import matmul_pi_cuda, qmatmul_cuda, rmsnorm_cuda, rope_cuda
from kernels.ops_cpu import Ops


class CudaOps(Ops):
    name = "cuda"

    def __init__(self):
        self.numba, self.why_not = False, "the GPU"

    def describe(self) -> str:
        return "CUDA (cupy)"

    def embed(self, table, ids):
        # table: [vocab, d] -> [T, d] float32
        if qmatmul_cuda.is_quant(table):
            return qmatmul_cuda.rows(table, ids)
        return common_cuda.rows_of(table, ids)

    def linear(self, x, w, bias=None):
        if qmatmul_cuda.is_quant(w):
            return qmatmul_cuda.cuda(x, w, bias)
        return matmul_cuda.cuda(x, w, bias)

    def rms_norm(self, x, w, eps):
        return rmsnorm_cuda.cuda(x, w, eps)

    def add_rms_norm(self, x, residual, w, eps):
        return rmsnorm_cuda.add_cuda(x, residual, w, eps)

    def apply_rope(self, x, positions, inv):
        return rope_cuda.cuda(x, positions, inv)

    def norm_linear(self, out, h, norm_w, eps, w, bias=None, glu_ff=None):
        """At up to 16 rows one GEMM launch norms the rows as it loads them
        (kernels/matmul_fused_cuda.cuda_norm); at prefill rows y may be a matmul_pi_cuda.Pi
        (for `linear`). Over GGUF blocks: the norm, then the block GEMM."""
        if not qmatmul_cuda.is_quant(w):
            return matmul_fused_cuda.cuda_norm(out, h, norm_w, eps, w, bias, glu_ff, pi_out=True)
        return super().norm_linear(out, h, norm_w, eps, w, bias, glu_ff)

    def gate_up_silu(self, x, w, ff, limit=0.0):
        """At decode sizes one GEMM launch with SwiGLU in its epilogue
        (kernels/matmul_fused_cuda.cuda_glu); over GGUF blocks the GEMM, then swiglu_cuda
        (cuda_glu's bytes). A clamped SwiGLU (limit) runs on the CPU only."""
        if limit:
            raise NotImplementedError("a clamped SwiGLU runs on the CPU only")
        if qmatmul_cuda.is_quant(w):
            return qmatmul_cuda.glu(x, w, ff)
        return matmul_fused_cuda.cuda_glu(x, w, ff)

    def write_kv(self, k_pool, v_pool, table, page_rows, start, k, v):
        kv_write_cuda.cuda(k_pool, v_pool, table, page_rows, start, k, v)

    def attend(self, q, k_pool, v_pool, table, page_rows, start, scale):
        return attention_cuda.cuda(q, k_pool, v_pool, table, page_rows, start, scale)

    def write_and_attend(self, q, k, v, k_pool, v_pool, rows, scale):
        """rows.dev (a RoundMap): one launch each for all chunks."""
        kv_write_cuda.cuda_round(k_pool, v_pool, rows.dev, k, v)
        return attention_cuda.cuda_round(q, k_pool, v_pool, rows.dev, scale)

    def qkv_attend(self, qkv, nq, nkv, hd, pos, inv, k_pool, v_pool, rows, scale, norms=None,
                   eps=0.0, rot=None):
        """Without norms and partial RoPE, RoPE and the KV write are one launch
        (kernels/kv_write_cuda.rope_round); prefill rows give the output in pi order for the
        o GEMM."""
        if (rot is None or rot == hd) and norms is None:
            T = qkv.shape[0]
            q = kv_write_cuda.rope_round(qkv, nq, nkv, hd, inv, k_pool, v_pool, rows.dev)
            pi = hd % 32 == 0 and matmul_cuda.tma_rows(T, nq * hd, nq * hd)
            out = attention_cuda.cuda_round(q, k_pool, v_pool, rows.dev, scale, pi)
            return matmul_pi_cuda.Pi(out) if pi else out
        return super().qkv_attend(qkv, nq, nkv, hd, pos, inv, k_pool, v_pool, rows, scale,
                                  norms, eps, rot)

    def contiguous(self, x):
        return x

    def rope_part(self, x, positions, inv, rot=None):
        if rot is None or rot == x.shape[-1]:
            return self.apply_rope(x, positions, inv)
        raise NotImplementedError("partial RoPE runs on the CPU only")

    def moe(self, *a, **k):
        raise NotImplementedError("mixture-of-experts layers run on the CPU only")

    def moe_biased(self, *a, **k):
        raise NotImplementedError("mixture-of-experts layers run on the CPU only")

    def mla_attend(self, *a, **k):
        raise NotImplementedError("latent attention runs on the CPU only")

    def qkv_attend_sinks(self, *a, **k):
        raise NotImplementedError("attention sinks and sliding windows run on the CPU only")

    def mhc_expand(self, *a, **k):
        raise NotImplementedError("mHC streams run on the CPU only")

    mhc_head = mhc_pre = mhc_post = mhc_expand

    def dsa_attend(self, *a, **k):
        raise NotImplementedError("sparse latent attention runs on the CPU only")

    def gdn_chunk(self, *a, **k):
        raise NotImplementedError("Gated DeltaNet layers run on the CPU only")

    def gdn_round(self, *a, **k):
        raise NotImplementedError("Gated DeltaNet layers run on the CPU only")

    def kda_chunk(self, *a, **k):
        raise NotImplementedError("Kimi Delta Attention layers run on the CPU only")

    def kda_round(self, *a, **k):
        raise NotImplementedError("Kimi Delta Attention layers run on the CPU only")

    def sigmoid(self, x):
        raise NotImplementedError("sigmoid gates run on the CPU only")
