"""The ops the model calls, from one backend chosen once at startup: `backend(name)`.

- "numpy" (kernels/ops_cpu.Ops): the definitions (kernels/<op>.py's numpy forms, float32)
  over numpy arrays; a weight kept as its GGUF blocks (kernels/blocks.py: Blocks, MixedBlocks,
  ExpertStack, which exist only where numba is present: the loader dequantizes them
  otherwise) is multiplied as stored by the numba block kernels (kernels/qmatmul.py,
  kernels/moe_cpu.py), and the Gated DeltaNet scan runs its numba form where numba is present
  (kernels/gdn_cpu.py).
- "cpu" (kernels/ops_cpu.NumbaOps): "numpy" plus the numba forms of the norms, SwiGLU and
  attention (kernels/rmsnorm_cpu.py, attention_cpu.py), and the K-quants (Q4_K, Q6_K)
  multiplied against int8-quantized activations (kernels/kquant_cpu.py, llama.cpp's
  arithmetic for them; "numpy" keeps them in float32): the CPU over GGUF blocks.
- On either CPU backend, a family that opts in (its Q8_0_X8: moe, deepseek2, qwen3next,
  glm5_next) has every Q8_0 and Q5_0 product against x quantized to q8_0 (Ops.q80, set by
  server/engine/model.Model; kernels/kquant_cpu.Q8_0_DEF, llama.cpp's arithmetic for Q8_0, and
  for Q5_0 on its Q8_0 repack); the others keep float32 x.
- "cuda" (kernels/ops_cuda.CudaOps): cupy arrays, each op's CUDA form; imported on this
  path only (cupy is absent where no GPU is).

The engine asks once (server/engine/model.Model) and hands the object to the family's forward
(server/families: `forward_layer(ops, ...)`), which calls `ops.<op>(...)`. Inside a backend the
weight's own type picks the product (a float array, Blocks, MixedBlocks, an ExpertStack; on
the GPU a QWeight / QStack), by isinstance on the types its module imports. `kernels.init()`
runs before a CPU backend imports its numba modules.
"""
from __future__ import annotations

import kernels
from kernels import ops_cpu

BACKENDS = ("numpy", "cpu", "cuda")


def backend(name: str) -> "ops_cpu.Ops":
    """The ops of one backend ("numpy", "cpu" or "cuda"), chosen once at startup. "cpu" needs
    numba (RuntimeError saying why not); an unknown name is refused (ValueError naming it)."""
    if name == "cuda":
        from kernels import ops_cuda               # cupy: the GPU path only
        return ops_cuda.CudaOps()
    if name not in BACKENDS:
        raise ValueError(f"ops backend {name!r}: not one of {', '.join(BACKENDS)}")
    kernels.init()
    return ops_cpu.NumbaOps() if name == "cpu" else ops_cpu.Ops()


