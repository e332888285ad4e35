"""Blocks: a weight matrix kept as its GGUF file stores it (quantized blocks, never dequantized).

A matrix of `rows` x `cols` elements in GGML type `kind` is `rows` rows of `row_bytes` bytes
each; a row is cols / block elements in blocks of `block_bytes` bytes, exactly the file's bytes
(GGUF lists the innermost dimension first, so a stored row is one output feature of a
[out, in] weight: HF orientation). Row operations (take rows, concatenate rows, permute rows)
are byte copies; a column range must start and end on a block boundary, else it is refused
with the shapes named.

`data` is a C-contiguous uint8 array [rows, row_bytes] (numpy on the host; a device array once
a backend has moved it). The kernels that read it are the backend's; `dequantize` here is the
definition they are tested against.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# kind -> (elements a block, bytes a block); the GGML types served as stored
BLOCK = {
    "Q8_0": (32, 34),
    "Q4_0": (32, 18),
    "Q4_1": (32, 20),
    # Q5_0 (ggml's block_q5_0; llama-quantize's Q4_K_M takes it for rows not a multiple of
    # 256): f16 d, then qh (4 bytes, a little-endian uint32: bit j is element j's fifth bit,
    # bit j + 16 element j + 16's), then 16 bytes qs (elements 0..15 in the low nibbles, 16..31
    # in the high); value = d * ((nibble | fifth bit << 4) - 16)
    "Q5_0": (32, 22),
    "Q4_K": (256, 144),
    "Q6_K": (256, 210),
    # MXFP4 (gpt-oss experts): 32 e2m1 values of 4 bits and one e8m0 scale byte, the scale
    # first, then 16 bytes: elements 0..15 in the low nibbles, 16..31 in the high
    "MXFP4": (32, 17),
    # NVFP4 (ggml's block_nvfp4, GGML type 40): 64 e2m1 values in four sub-blocks of 16, each
    # with its own unsigned E4M3 scale byte: 4 scale bytes, then 32 bytes; sub-block s is
    # bytes 4 + 8 s .. 4 + 8 s + 7, its elements 0..7 in their low nibbles, 8..15 in the high.
    # No global scale inside the blocks: llama.cpp keeps NVFP4's per-tensor scale_2 as a
    # separate `<name>.scale` tensor multiplying the product (not read by foldserve yet).
    "NVFP4": (64, 36),
    # plain floats, kept as stored where the loader keeps them so (a GGUF's 3-D expert
    # tensors: kernels/blocks_cpu.py reads their rows as it reads blocks)
    "F16": (1, 2),
    "BF16": (1, 2),
    "F32": (1, 4),
}
QUANT = ("Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q4_K", "Q6_K", "MXFP4", "NVFP4")  # the block kinds a 2-D matrix stays in


class BlockSplitError(ValueError):
    """A split or slice that would cut a block."""


@dataclass(frozen=True)
class Blocks:
    kind: str            # "Q8_0", "Q4_0", "Q4_1", "Q5_0", "Q4_K", "Q6_K", "MXFP4", "NVFP4" (or F16, BF16, F32 rows)
    rows: int
    cols: int
    data: np.ndarray     # uint8 [rows, row_bytes]

    def __post_init__(self):
        if self.kind not in BLOCK:
            raise ValueError(f"Blocks: {self.kind} is not one of {', '.join(BLOCK)}")
        blk, _ = BLOCK[self.kind]
        if self.cols % blk:
            raise BlockSplitError(f"Blocks: {self.cols} columns is not a whole number of "
                                  f"{self.kind} blocks of {blk}")
        if tuple(self.data.shape) != (self.rows, self.row_bytes):
            raise ValueError(f"Blocks: data shape {tuple(self.data.shape)} != "
                             f"({self.rows}, {self.row_bytes}) for {self.kind} {self.rows}x{self.cols}")

    @property
    def shape(self) -> tuple[int, int]:
        return (self.rows, self.cols)

    @property
    def block(self) -> int:
        return BLOCK[self.kind][0]

    @property
    def row_bytes(self) -> int:
        blk, nbytes = BLOCK[self.kind]
        return self.cols // blk * nbytes

    @property
    def nbytes(self) -> int:
        return self.rows * self.row_bytes

    def take_rows(self, index) -> "Blocks":
        """Rows by a slice (a view where the rows are contiguous), a list or an index array (a
        byte copy)."""
        data = np.ascontiguousarray(self.data[index])
        return Blocks(self.kind, int(data.shape[0]), self.cols, data)

    def take_cols(self, lo: int, hi: int) -> "Blocks":
        """Columns [lo, hi): whole blocks only, else BlockSplitError naming the shapes."""
        blk, nbytes = BLOCK[self.kind]
        if lo % blk or hi % blk or not 0 <= lo < hi <= self.cols:
            raise BlockSplitError(f"columns [{lo}, {hi}) of a {self.rows}x{self.cols} {self.kind} "
                                  f"matrix cut its blocks of {blk}; a row-parallel split of this "
                                  f"tensor needs each rank's columns in whole blocks")
        data = np.ascontiguousarray(self.data[:, lo // blk * nbytes: hi // blk * nbytes])
        return Blocks(self.kind, self.rows, hi - lo, data)

    def permute_rows(self, order) -> "Blocks":
        """Row r of the result is row order[r] (a permutation: every row once)."""
        order = np.asarray(order)
        if sorted(order.tolist()) != list(range(self.rows)):
            raise ValueError(f"permute_rows: not a permutation of {self.rows} rows")
        return self.take_rows(order)

    def dequantize(self) -> np.ndarray:
        """The definition: float32 [rows, cols], by the gguf library's own dequantizer."""
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize
        x = dequantize(self.data, GGMLQuantizationType[self.kind])
        return np.ascontiguousarray(x.reshape(self.rows, self.cols), dtype=np.float32)


def concat_rows(parts: list[Blocks]) -> Blocks:
    """Stack matrices of one kind and width (q|k|v, gate|up); mixed kinds are refused."""
    kinds = {p.kind for p in parts}
    cols = {p.cols for p in parts}
    if len(kinds) != 1 or len(cols) != 1:
        raise ValueError(f"concat_rows: parts differ in kind or width: "
                         f"{[(p.kind, p.rows, p.cols) for p in parts]}")
    data = np.ascontiguousarray(np.concatenate([p.data for p in parts], axis=0))
    return Blocks(parts[0].kind, int(data.shape[0]), parts[0].cols, data)


def concat_cols(parts: list[Blocks]) -> Blocks:
    """Columns side by side (o_proj's columns of a shard's heads when they are not one range);
    each part is whole blocks by construction, so this is a byte concatenation of rows."""
    kinds = {p.kind for p in parts}
    rows = {p.rows for p in parts}
    if len(kinds) != 1 or len(rows) != 1:
        raise ValueError(f"concat_cols: parts differ in kind or height: "
                         f"{[(p.kind, p.rows, p.cols) for p in parts]}")
    data = np.ascontiguousarray(np.concatenate([p.data for p in parts], axis=1))
    return Blocks(parts[0].kind, parts[0].rows, sum(p.cols for p in parts), data)


class MixedBlocks(list):
    """Row-stacked parts of one fused matrix (q|k|v, gate|up) kept as Blocks of different
    kinds (Q4_K_M's Q6_K v beside Q4_K q and k): a backend multiplies each part as stored
    and the outputs sit side by side (the CPU: kernels.ops.linear, one product a part; the
    GPU: kernels/qmatmul_cuda.QStack, one launch a kind)."""

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self)

    def merged(self) -> "MixedBlocks":
        """Neighbouring parts of one kind as one Blocks (Q4_K q|k beside a Q6_K v: two parts,
        one product fewer on the CPU); the same rows in the same order."""
        runs = [[self[0]]]
        for p in self[1:]:
            if p.kind == runs[-1][-1].kind:
                runs[-1].append(p)
            else:
                runs.append([p])
        return MixedBlocks([r[0] if len(r) == 1 else concat_rows(r) for r in runs])

    @property
    def nbytes(self) -> int:
        return sum(int(p.nbytes) for p in self)


def _root(a):
    """The object that holds a view's memory (the end of its .base chain)."""
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def _in_place(parts: list):
    """The experts' bytes as one C-contiguous [n, rows, row_bytes] array without a copy, where
    every part is a C-contiguous view of one buffer and each follows the one before it with
    no gap (a GGUF's 3-D expert tensor as mapped, gguf_loader.experts_as_stored): a strided
    view from the first part over that span; else None."""
    d0 = parts[0].data
    if not all(p.data.flags.c_contiguous and p.data.shape == d0.shape and p.data.dtype == d0.dtype
               and p.data.flags.writeable for p in parts):
        return None
    step, root = d0.nbytes, _root(d0)
    at = d0.__array_interface__["data"][0]
    for e, p in enumerate(parts):
        if p.data.__array_interface__["data"][0] != at + e * step or _root(p.data) is not root:
            return None
    return np.lib.stride_tricks.as_strided(d0, shape=(len(parts),) + d0.shape,
                                           strides=(step,) + d0.strides)


class ExpertStack(list):
    """A MoE layer's experts of one kind and shape as one array: `data` uint8
    [n_experts, rows, row_bytes], and the list of each expert's Blocks (views of it). The CPU
    multiplies a round's groups of rows by many experts in one call (kernels/moe_cpu.py).
    Where the experts lie one after another in one buffer (a GGUF's expert tensor as mapped)
    `data` is a view over them (`in_place`: no copy, the file's pages read where they are);
    else one contiguous copy."""

    def __init__(self, parts: list):
        kinds = {(p.kind, p.rows, p.cols) for p in parts}
        if len(kinds) != 1 or not all(isinstance(p, Blocks) for p in parts):
            raise ValueError(f"ExpertStack: experts differ in kind or shape: {sorted(kinds)}")
        (self.kind, self.rows, self.cols), = kinds
        view = _in_place(parts)
        self.in_place = view is not None
        self.data = view if view is not None else np.ascontiguousarray(np.stack([p.data for p in parts]))
        super().__init__(Blocks(self.kind, self.rows, self.cols, self.data[e])
                         for e in range(len(parts)))

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)


class ExpertGateUp(list):
    """A MoE layer's gate|up experts kept as the file's two stacks (`gate`, `up`: ExpertStack,
    each in place where the file's expert tensors allow): each expert's gate|up as a
    MixedBlocks [gate rows, up rows] (kernels.ops.linear multiplies the parts side by side: the
    fused matrix's columns), and the CPU's grouped products run on each stack (kernels/ops_cpu.
    moe: gate then up, each row's dot the one the fused stack gave). Saves the fused copy of
    every expert's gate|up that one [n, 2 ff, row_bytes] stack needs."""

    def __init__(self, gates: list, ups: list):
        self.gate, self.up = ExpertStack(gates), ExpertStack(ups)
        if (self.gate.kind, self.gate.cols) != (self.up.kind, self.up.cols) or \
                len(self.gate) != len(self.up):
            raise ValueError("ExpertGateUp: gate and up experts differ in kind, width or count")
        self.kind, self.rows, self.cols = self.gate.kind, self.gate.rows + self.up.rows, self.gate.cols
        super().__init__(MixedBlocks([g, u]) for g, u in zip(self.gate, self.up))

    @property
    def nbytes(self) -> int:
        return self.gate.nbytes + self.up.nbytes


HUGE = 2 << 20           # the x86-64 transparent huge page


def hugepage_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of `a` (the same bytes, shape and dtype) in a private anonymous map
    advised MADV_HUGEPAGE and starting on a 2 MiB boundary, so the kernel backs it with 2 MiB
    pages where it has them (this host's THP is "madvise": plain numpy arrays get none); `a`
    itself where the platform has no such advice (the same bytes either way).

    For a matrix every decode step reads whole (the LM head): a file-mapped weight lies in
    the page cache in whatever pages the kernel left it (often 4 KiB ones), which stream
    slower than 2 MiB pages (0.80-0.83x on the 2-core Intel guest, receipt 2026-12-05-hyb33).
    The copy costs its bytes in memory; the file's pages stay reclaimable cache."""
    import mmap
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is None or not hasattr(mmap, "MAP_PRIVATE") or a.nbytes < HUGE:
        return a
    m = mmap.mmap(-1, a.nbytes + HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    try:
        m.madvise(advice)
    except OSError:
        pass                                   # no THP in this kernel: a plain copy
    buf = np.frombuffer(m, np.uint8)
    off = (-buf.ctypes.data) % HUGE
    out = buf[off:off + a.nbytes].view(a.dtype).reshape(a.shape)
    out[...] = a
    return out
