"""The key/value header of a GGUF file, walked once: the one reader of it for the tokenizer
(server/text/gguf_meta.py), the weights loader (server/engine/weights/gguf_file.py) and
serve's early read of the trained context (server/serve.py). numpy-free: the tokenizer's
side imports it; the loader hands in its own numeric-array form (`numbers`).

Why our own walk: gguf.GGUFReader builds a numpy view for every part of every field, and the
default model's vocabulary and merges are ~100,000 small strings (seconds before a single
weight). Each caller says per key whether its value is decoded (`keep`); a skipped value is
stepped over by its lengths, and every array's element count is known either way.

Layout (little-endian, GGUF v2/v3):
    magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv * (key, u32 type, value)
    string = u64 length + utf-8 bytes; array = u32 elem type + u64 count + elems
    (then the tensor table and the data: the loader's)
"""
from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

# GGUF value type id -> struct format of one scalar (8 = string, 9 = array are special)
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
STRING, ARRAY = 8, 9
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")


class GGUFHeaderError(ValueError):
    pass


def number_list(buf, pos: int, etype: int, count: int) -> list:
    """A numeric array as a Python list (the default form)."""
    return list(struct.unpack_from(f"<{count}{SCALAR[etype]}", buf, pos))


@dataclass
class Header:
    n_tensors: int
    values: dict = field(default_factory=dict)     # key -> value, for the keys kept
    counts: dict = field(default_factory=dict)     # key -> element count, for every array
    end: int = 0                                   # the byte after the KV section


def walk(buf, keep: Callable[[str], bool] = lambda key: True, numbers=number_list,
         strings: bool = True) -> Header:
    """The header of the GGUF bytes `buf` (a buffer from the file's first byte). keep(key):
    whether that key's value is decoded (else it is stepped over); numbers(buf, pos, etype,
    count): a kept numeric array's form (default a list); strings: whether kept string
    arrays are decoded (False: their value is None, their count still known). Values:
    str, int, float or bool; arrays as `numbers` gives them, lists of str, or lists of such."""
    if bytes(buf[:4]) != b"GGUF":
        raise GGUFHeaderError(f"not a GGUF file (magic {bytes(buf[:4])!r})")
    w = _Walk(buf, numbers, strings)
    version = w.u32()
    if version not in (2, 3):
        raise GGUFHeaderError(f"GGUF version {version} is not supported (need 2 or 3)")
    head = Header(w.u64())
    for _ in range(w.u64()):
        key = w.string()
        kept = keep(key)
        val = w.value(w.u32(), kept, key, head.counts)
        if kept:
            head.values[key] = val
    head.end = w.pos
    return head


def read(path: str | Path, keep: Callable[[str], bool] = lambda key: True, **kw) -> Header:
    """`walk` over the file at path (memory-mapped: only the header's pages are read)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        buf = memoryview(mm)
        try:
            return walk(buf, keep, **kw)
        finally:
            buf.release()


class _Walk:
    def __init__(self, buf, numbers, strings: bool):
        self.buf, self.pos, self.numbers, self.strings = buf, 4, numbers, strings

    def u32(self) -> int:
        v = _U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def u64(self) -> int:
        v = _U64.unpack_from(self.buf, self.pos)[0]
        self.pos += 8
        return v

    def string(self) -> str:
        n = self.u64()
        s = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        # llama.cpp tolerates invalid utf-8 in token strings; keep them readable, never crash
        return s.decode("utf-8", errors="replace")

    def string_array(self, count: int, keep: bool):
        """An array of strings in one tight walk (the vocabulary: ~100k of them), decoded
        from one bytes copy of the region where kept."""
        buf, pos, unpack = self.buf, self.pos, _U64.unpack_from
        start = pos
        if not keep:
            for _ in range(count):
                pos += 8 + unpack(buf, pos)[0]
            self.pos = pos
            return None
        spans = []
        add = spans.append
        for _ in range(count):
            n = unpack(buf, pos)[0]
            add(pos + 8)
            pos += 8 + n
            add(pos)
        self.pos = pos
        raw = bytes(buf[start:pos])
        it = iter(spans)
        # llama.cpp tolerates invalid utf-8 in token strings; keep them readable, never crash
        return [raw[a - start:b - start].decode("utf-8", errors="replace") for a, b in zip(it, it)]

    def value(self, vtype: int, keep: bool, key: str | None = None, counts: dict | None = None):
        if vtype in SCALAR:
            fmt = "<" + SCALAR[vtype]
            v = struct.unpack_from(fmt, self.buf, self.pos)[0]
            self.pos += struct.calcsize(fmt)
            return v
        if vtype == STRING:
            return self.string()
        if vtype == ARRAY:
            etype, count = self.u32(), self.u64()
            if counts is not None:
                counts[key] = count
            if etype in SCALAR:
                out = self.numbers(self.buf, self.pos, etype, count) if keep else None
                self.pos += struct.calcsize(SCALAR[etype]) * count
                return out
            if etype == STRING:
                return self.string_array(count, keep and self.strings)
            # nested arrays need a walk either way
            return [self.value(etype, keep) for _ in range(count)]
        raise GGUFHeaderError(f"unknown GGUF value type {vtype} at byte {self.pos}")
