"""Read a GGUF file's key/value metadata without touching its tensors.

Why our own reader: gguf.GGUFReader parses every field into numpy views and maps
the tensor table, which costs ~1.6 s on the 135M default model because the vocab
and merges are ~100k small strings. The tokenizer only needs the header's KV
section, which a plain struct walk reads in well under 0.2 s.

Layout (little-endian, GGUF v2/v3):
    magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv | n_kv * (key, u32 type, value)
    string = u64 length + utf-8 bytes; array = u32 elem type + u64 count + elems
"""
from __future__ import annotations

import mmap
import struct
from pathlib import Path

# GGUF value type id -> struct format of one scalar (8 = string, 9 = array are special)
_SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9


class GGUFMetadataError(ValueError):
    pass


class _Cursor:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def take(self, fmt: str):
        (v,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return v

    def string(self) -> str:
        n = self.take("Q")
        s = self.buf[self.pos:self.pos + n]
        self.pos += n
        # llama.cpp tolerates invalid utf-8 in token strings; keep them readable, never crash
        return bytes(s).decode("utf-8", errors="replace")

    def strings(self, count: int, keep: bool):
        """An array of strings in one tight walk (the vocabulary: ~100k of them), decoded
        from one bytes copy of the region."""
        buf, pos, unpack = self.buf, self.pos, struct.Struct("<Q").unpack_from
        start = pos
        spans = []
        add = spans.append
        for _ in range(count):
            n = unpack(buf, pos)[0]
            add(pos + 8)
            pos += 8 + n
            add(pos)
        self.pos = pos
        if not keep:
            return None
        raw = bytes(buf[start:pos])
        it = iter(spans)
        # llama.cpp tolerates invalid utf-8 in token strings; keep them readable, never crash
        return [raw[a - start:b - start].decode("utf-8", errors="replace") for a, b in zip(it, it)]

    def value(self, vtype: int, keep: bool):
        if vtype in _SCALAR:
            return self.take(_SCALAR[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype, count = self.take("I"), self.take("Q")
            if etype in _SCALAR:
                fmt = _SCALAR[etype]
                size = struct.calcsize(fmt) * count
                out = list(struct.unpack_from(f"<{count}{fmt}", self.buf, self.pos)) if keep else None
                self.pos += size
                return out
            if etype == _STRING:
                return self.strings(count, keep)
            # nested arrays need a walk either way
            return [self.value(etype, keep) for _ in range(count)]
        raise GGUFMetadataError(f"unknown GGUF value type {vtype} at byte {self.pos}")


def read_metadata(path: str | Path, prefixes: tuple[str, ...] = ("tokenizer.", "general.")) -> dict:
    """Keys starting with one of `prefixes` -> python values (lists for arrays)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        if mm[:4] != b"GGUF":
            raise GGUFMetadataError(f"{path}: not a GGUF file (magic {bytes(mm[:4])!r})")
        cur = _Cursor(memoryview(mm))
        cur.pos = 4
        version = cur.take("I")
        if version not in (2, 3):
            raise GGUFMetadataError(f"{path}: GGUF version {version} is not supported (need 2 or 3)")
        cur.take("Q")  # tensor count: not ours
        n_kv = cur.take("Q")
        out = {}
        try:
            for _ in range(n_kv):
                key = cur.string()
                keep = key.startswith(prefixes)
                val = cur.value(cur.take("I"), keep)
                if keep:
                    out[key] = val
        finally:
            cur.buf.release()
        return out
