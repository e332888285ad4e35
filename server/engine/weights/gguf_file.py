"""A GGUF file read as it lies: the KV header walked once, the tensor table, the data mapped.

Why not gguf.GGUFReader: it builds a numpy view for every part of every field, and the
default model's vocabulary and merges are ~100,000 small strings (6.2 s of field parts on
the 2-core machine, before a single weight). The loader needs the scalars, the counts of the
string arrays and the tensors' bytes; the KV header is walked by server/gguf_header.py (the
one GGUF header reader: the tokenizer's too) keeping every key, with string arrays skipped by
their lengths (their contents are the tokenizer's) and numeric arrays as numpy arrays; the
data section is one copy-on-write memory map (np.memmap mode "c": writable views for the
kernels, nothing read until used).

Layout (little-endian, GGUF v2/v3):
    magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv * (key, u32 type, value)
    | n_tensors * (name, u32 n_dims, n_dims * u64 dims (innermost first), u32 type, u64 offset)
    | padding to general.alignment (32) | tensor data (each offset from the data start)
"""
from __future__ import annotations

import struct

import numpy as np

from server.gguf_header import GGUFHeaderError, walk

_NP = {0: np.uint8, 1: np.int8, 2: np.uint16, 3: np.int16, 4: np.uint32, 5: np.int32,
       6: np.float32, 7: np.bool_, 10: np.uint64, 11: np.int64, 12: np.float64}
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


class GGUFFormatError(ValueError):
    pass


class Field:
    """One KV entry: contents() as GGUFReader's field gives it; len(data) its element count."""

    def __init__(self, value, count: int = 1):
        self.value, self.data = value, range(count)

    def contents(self):
        return self.value


class Tensor:
    def __init__(self, name: str, dims: tuple, ggml_type: int, offset: int):
        self.name, self.dims, self.ggml_type, self.offset = name, dims, ggml_type, offset
        self.data: np.ndarray | None = None     # uint8 view of its bytes (set by GGUFFile)

    @property
    def shape(self) -> tuple:
        """numpy (row-major) order: [out, in] for a weight."""
        return tuple(reversed(self.dims))

    @property
    def type_name(self) -> str:
        from gguf import GGMLQuantizationType
        return GGMLQuantizationType(self.ggml_type).name


class GGUFFile:
    def __init__(self, path: str):
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
        self.path = path
        self.mm = np.memmap(path, dtype=np.uint8, mode="c")
        self.mm = self.mm.view(np.ndarray)      # plain views: memmap's finalizer costs per slice
        buf = memoryview(self.mm)
        try:
            head = walk(buf, numbers=_numbers, strings=False)     # every key; string arrays counted
        except GGUFHeaderError as e:
            buf.release()
            raise GGUFFormatError(f"{path}: {e}") from None
        self.fields: dict[str, Field] = {k: Field(v, head.counts.get(k, 1))
                                         for k, v in head.values.items()}
        self._buf, self.pos = buf, head.end
        self.tensors: list[Tensor] = []
        for _ in range(head.n_tensors):
            name = self._str()
            nd = self._u32()
            dims = tuple(self._u64() for _ in range(nd))
            self.tensors.append(Tensor(name, dims, self._u32(), self._u64()))
        align = int(self.fields["general.alignment"].value) if "general.alignment" in self.fields else 32
        start = -(-self.pos // align) * align
        for t in self.tensors:
            try:
                blk, nbytes = GGML_QUANT_SIZES[GGMLQuantizationType(t.ggml_type)]
            except (ValueError, KeyError):
                raise GGUFFormatError(f"{path}: tensor {t.name} has GGML type {t.ggml_type}, "
                                      "which this gguf library does not know") from None
            n = int(np.prod(t.dims, dtype=np.int64))
            size = n // blk * nbytes
            lo = start + t.offset
            if lo + size > len(self.mm):
                raise GGUFFormatError(f"{path}: tensor {t.name} runs past the end of the file "
                                      "(truncated download?)")
            t.data = self.mm[lo:lo + size]
        self._buf.release()
        del self._buf

    # --- the tensor table's walk (the KV header is server/gguf_header's) ---
    def _u32(self) -> int:
        v = _U32.unpack_from(self._buf, self.pos)[0]
        self.pos += 4
        return v

    def _u64(self) -> int:
        v = _U64.unpack_from(self._buf, self.pos)[0]
        self.pos += 8
        return v

    def _str(self) -> str:
        n = self._u64()
        s = bytes(self._buf[self.pos:self.pos + n])
        self.pos += n
        return s.decode("utf-8", errors="replace")


def _numbers(buf, pos: int, etype: int, count: int):
    """A numeric array as the loader keeps it: a numpy copy (a list when short)."""
    dt = np.dtype(_NP[etype]).newbyteorder("<")
    arr = np.frombuffer(buf, dtype=dt, count=count, offset=pos).copy()
    return arr.tolist() if count <= 64 else arr
