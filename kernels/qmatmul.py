"""x @ W^T for a weight kept as its GGUF blocks (kernels.blocks.Blocks, [out, in]).

`ref` is the definition: float64 x times the float64 of Blocks.dequantize() (the gguf
library's own dequantizer), rounded to float32 once. `cpu` runs the numba kernels of
kernels/blocks_cpu.py, which read the blocks as stored and sum in one fixed order per output
element (batch invariance by construction); tests/model/test_blocks_cpu.py holds them to
`ref`. Where numba is missing the CPU engine dequantizes the blocks at load instead (the
numpy 4-row-tile path of kernels/matmul.py), said once at startup.
"""
from __future__ import annotations

import numpy as np

_why_not: str | None = None
Q8_KINDS = ("Q4_K", "Q6_K")      # the kinds kernels/kquant_cpu.py multiplies against int8 x
Q80_KINDS = ("Q8_0", "Q5_0")     # the kinds its Q8_0_DEF multiplies against q8_0 x (kquant_cpu.Q80_KINDS)
_checked = False


def available() -> tuple[bool, str]:
    """(numba kernels usable, else why not)."""
    global _checked, _why_not
    if not _checked:
        _checked = True
        try:
            import kernels.blocks_cpu  # noqa: F401
        except Exception as e:        # numba absent, or an llvmlite that does not load
            _why_not = f"numba unavailable ({type(e).__name__}: {e})"
    return _why_not is None, _why_not or ""


def ref(x: np.ndarray, w, bias=None) -> np.ndarray:
    y = x.astype(np.float64) @ w.dequantize().astype(np.float64).T
    if bias is not None:
        y = y + bias
    return y.astype(np.float32)


def cpu(x: np.ndarray, w, bias=None, q8: bool = False, q80: bool = False) -> np.ndarray:
    """x times w as stored. q8: a K-quant (Q4_K, Q6_K) against x quantized to int8
    (kernels/kquant_cpu.py: integer dots, llama.cpp's arithmetic for these kinds); q80: a Q8_0
    or Q5_0 matrix against x quantized to q8_0 (kernels/kquant_cpu.Q8_0_DEF, llama.cpp's
    arithmetic for both); else, and for every other kind, the float32 kernels of
    kernels/blocks_cpu.py."""
    if q80 and w.kind in Q80_KINDS:
        from kernels import kquant_cpu
        y = kquant_cpu.q80_matmul(x, w.data, kind=w.kind)
    elif q8 and w.kind in Q8_KINDS:
        from kernels import kquant_cpu
        y = kquant_cpu.matmul(x, w.kind, w.data)
    else:
        from kernels.blocks_cpu import matmul
        y = matmul(x, w.kind, w.data)
    if bias is not None:
        y += bias
    return y


def rows(w, ids) -> np.ndarray:
    """Rows `ids` of W as float32 (the embedding: a gather, then those rows unpacked)."""
    from kernels.blocks_cpu import dequantize_rows
    return dequantize_rows(w.kind, np.ascontiguousarray(w.data[np.asarray(ids)]), w.cols)
