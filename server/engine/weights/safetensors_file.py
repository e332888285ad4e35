"""Read one .safetensors file into float32 arrays, bf16 included.

safetensors' numpy backend has no bfloat16 (numpy lacks the type), so bf16 tensors are
read from the file's own layout and widened: a bf16 is the top half of a float32.

    file: [u64 header length N][N bytes JSON header][data ...]
    header: {name: {"dtype": "BF16", "shape": [..], "data_offsets": [lo, hi]}, "__metadata__": ..}
"""
from __future__ import annotations

import json
import struct

import numpy as np
from safetensors import safe_open

from .loaded import WeightsError

_NATIVE = {"F32", "F16", "F64"}


def header(path: str) -> tuple[dict, int]:
    """(the tensor table, the offset where the data region begins)."""
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            raise WeightsError(f"{path}: too short to be a safetensors file")
        (n,) = struct.unpack("<Q", raw)
        table = json.loads(f.read(n))
    table.pop("__metadata__", None)
    return table, 8 + n


def bf16_to_float32(raw: np.ndarray) -> np.ndarray:
    # raw: uint16 bit patterns  ->  float32 with the same value (exact)
    return (raw.astype(np.uint32) << 16).view(np.float32)


def read_all(path: str, names: list[str] | None = None, on_tensor=None) -> tuple[dict, dict]:
    """({name: float32 array}, {name: {"shape", "dtype"} as stored}) for the named (or all) tensors."""
    table, data_start = header(path)
    wanted = list(table) if names is None else names
    stored = {n: {"shape": list(table[n]["shape"]), "dtype": table[n]["dtype"]} for n in wanted}
    out: dict[str, np.ndarray] = {}
    with safe_open(path, framework="np") as f, open(path, "rb") as raw:
        for name in wanted:
            info = table[name]
            dtype = info["dtype"]
            if dtype == "BF16":
                lo, hi = info["data_offsets"]
                raw.seek(data_start + lo)
                bits = np.frombuffer(raw.read(hi - lo), dtype="<u2")
                x = bf16_to_float32(bits).reshape(info["shape"])
            elif dtype in _NATIVE:
                x = np.array(f.get_tensor(name), dtype=np.float32, order="C", copy=True)
            else:
                raise WeightsError(f"{path}: tensor {name} is stored as {dtype}; foldserve reads "
                                   "F32, F16 and BF16 safetensors")
            out[name] = np.ascontiguousarray(x, dtype=np.float32)
            if on_tensor:
                on_tensor()
    return out, stored
