"""The experts' products of a MoE layer on the CPU in one parallel region each: every
chosen expert's gate|up over its group of token rows, then every down, as pieces (group,
chunk of 16 output rows) handed out by numba's prange, both cores on one request.

Each piece is kernels/blocks_vec.py's `rows` on the group's rows against the expert's rows
of blocks: the same function on the same x rows and weight rows as kernels/ops.moe's loop of
one product an expert, so the same bytes (tests/model/test_moe_engine.py compares them);
only the number of parallel regions entered changes (2 a layer instead of 2 a chosen
expert). For the kinds of kernels/blocks_vec.py (Q8_0, Q4_0, Q4_1, Q5_0 and the K-quants Q4_K, Q6_K:
a Q4_K_M file's experts) of a stack of experts (kernels/blocks.ExpertStack);
the kinds left to kernels/blocks_cpu.py (MXFP4, F16, BF16, F32) the same way through its
`grouped`, each piece its `chunk` (the function its one-expert product runs), so again the
loop's bytes.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import numpy as np
from numba import njit, prange

from kernels import blocks_vec
from kernels.blocks_vec import ROWS


def _make_grouped(kind, table):
    rows = blocks_vec._made("rows", kind, table)

    @njit(cache=True, parallel=True, boundscheck=False)
    def grouped(x, xsum, stack, experts, offs, out):
        """out[offs[g]:offs[g+1]] = x[offs[g]:offs[g+1]] times stack[experts[g]]^T, each g."""
        N = stack.shape[1]
        chunks = (N + ROWS - 1) // ROWS
        G = experts.shape[0]
        for p in prange(G * chunks):
            g = p // chunks
            c = p - g * chunks
            a = offs[g]
            b = offs[g + 1]
            rows(x[a:b], xsum[a:b], stack[experts[g]], out[a:b], c * ROWS, min(c * ROWS + ROWS, N))
    return blocks_vec.stable_pickle(grouped, "moe_grouped", kind, table)


blocks_vec.MAKERS["moe_grouped"] = _make_grouped


def _vec(kind) -> bool:
    return kind in blocks_vec.VEC_KINDS


def fits(stack) -> bool:
    if stack is None:
        return False
    if _vec(stack.kind):
        return True
    from kernels import blocks_cpu
    return stack.kind in blocks_cpu.GROUPED


def gate_up(x: np.ndarray, gate, up, experts: np.ndarray, offs: np.ndarray, q8: bool = False,
            q80: bool = False) -> np.ndarray:
    """A MoE layer's gate and up stacks (kernels.blocks.ExpertGateUp's) on the grouped rows x
    [R, K] -> [R, 2 N]: gate's products, then up's, side by side (each row's bytes those of
    grouped_matmul on each stack). q80 with two Q8_0 stacks: x quantized to q8_0 once for
    both."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    N = gate.data.shape[1]
    gu = np.empty((x.shape[0], 2 * N), np.float32)
    if q80 and gate.kind == "Q8_0" and up.kind == "Q8_0":
        from kernels import kquant_cpu
        q, dx = kquant_cpu.quantize_q80(x)
        gu[:, :N] = kquant_cpu.q80_grouped_q(q, dx, gate.data, experts, offs)
        gu[:, N:] = kquant_cpu.q80_grouped_q(q, dx, up.data, experts, offs)
        return gu
    gu[:, :N] = grouped_matmul(x, gate, experts, offs, q8, q80)
    gu[:, N:] = grouped_matmul(x, up, experts, offs, q8, q80)
    return gu


def grouped_matmul(x: np.ndarray, stack, experts: np.ndarray, offs: np.ndarray,
                   q8: bool = False, q80: bool = False) -> np.ndarray:
    """x [R, K] (rows grouped by expert, group g = rows offs[g]:offs[g+1]) -> [R, N]. q8: a
    K-quant stack against x quantized to int8 (kernels/kquant_cpu.py: each row's bytes those of
    kernels.qmatmul.cpu(x_row, expert, q8=True)); q80: a Q8_0 stack against x quantized to
    q8_0 (kernels/kquant_cpu.Q8_0_DEF: each row's bytes those of qmatmul.cpu(x_row, expert,
    q80=True))."""
    if q80 and stack.kind == "Q8_0":
        from kernels import kquant_cpu
        return kquant_cpu.q80_grouped(x, stack.data, experts, offs)
    if q8 and stack.kind in ("Q4_K", "Q6_K"):
        from kernels import kquant_cpu
        return kquant_cpu.grouped_matmul(x, stack.kind, stack.data, experts, offs)
    if not _vec(stack.kind):
        from kernels import blocks_cpu
        return blocks_cpu.grouped_matmul(x, stack.kind, stack.data, np.ascontiguousarray(experts, np.int64),
                                         np.ascontiguousarray(offs, np.int64))
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty((x.shape[0], stack.data.shape[1]), np.float32)
    xsum = np.empty((x.shape[0], x.shape[1] // 32), np.float32)
    if stack.kind == "Q4_1":
        blocks_vec.block_sums(x, xsum)
    experts = np.ascontiguousarray(experts, np.int64)
    offs = np.ascontiguousarray(offs, np.int64)
    if blocks_vec.CREW:                     # one crew round (kernels/blocks_vec.crew_grouped)
        return blocks_vec.crew_grouped(x, xsum, stack.kind, stack.data, experts, offs, out)
    kernel = blocks_vec._made("moe_grouped", stack.kind, blocks_vec.TABLE)
    kernel(x, xsum, stack.data, experts, offs, out)
    return out
