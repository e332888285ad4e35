"""A model's identity: what the ranks compare before they run together.

The content hash is sha256 over the files' bytes, read in chunks (a 16 GB model never
sits in memory for it). Several files hash in the order given, each preceded by its
base name and size, so renaming a shard or moving bytes between shards changes it.
"""
from __future__ import annotations

import hashlib
import os

from server.shapes.spec import ModelSpec

CHUNK = 8 << 20


def hash_files(paths: list[str]) -> str:
    h = hashlib.sha256()
    for p in paths:
        if len(paths) > 1:
            h.update(f"{os.path.basename(p)}:{os.path.getsize(p)}\n".encode())
        with open(p, "rb") as f:
            while chunk := f.read(CHUNK):
                h.update(chunk)
    return h.hexdigest()


def identity(spec: ModelSpec, stored: dict[str, dict], content_hash: str, **more) -> dict:
    """stored: {name as stored: {"shape": [...], "dtype": "Q4_1"}}; shapes in numpy (row-major) order."""
    return {
        "architecture": spec.arch,
        "config": spec.as_dict(),
        "tensors": stored,
        "sha256": content_hash,
        **more,
    }
