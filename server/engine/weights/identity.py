"""A model's identity: what the ranks compare before they run together.

The content hash is sha256 over the files' bytes, read in chunks (a 16 GB model never
sits in memory for it). Several files hash in the order given, each preceded by its
base name and size, so renaming a shard or moving bytes between shards changes it.

A one-file hash is remembered in $TF_CACHE_DIR (default ~/.cache/foldserve)/sha256.json
under the file's real path, size and mtime (ns): the default model's 0.4 s of hashing is
paid once, not at every start. Any change of size or mtime hashes anew; an unwritable
cache is no error.
"""
from __future__ import annotations

import hashlib
import json
import os

from server.shapes.spec import ModelSpec

CHUNK = 8 << 20


def _cache_path() -> str:
    from server.config import setting
    base = setting("TF_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "foldserve")
    return os.path.join(base, "sha256.json")


def hash_files(paths: list[str]) -> str:
    if len(paths) != 1:
        return _hash(paths)
    st = os.stat(paths[0])
    key = f"{os.path.realpath(paths[0])}|{st.st_size}|{st.st_mtime_ns}"
    cache = _cache_path()
    try:
        with open(cache, encoding="utf-8") as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    if isinstance(known, dict) and isinstance(known.get(key), str):
        return known[key]
    digest = _hash(paths)
    try:
        os.makedirs(os.path.dirname(cache), exist_ok=True)
        known = {k: v for k, v in known.items() if not k.startswith(key.split("|")[0] + "|")} \
            if isinstance(known, dict) else {}
        known[key] = digest
        known = dict(list(known.items())[-64:])          # a bounded memory
        tmp = f"{cache}.{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(known, f)
        os.replace(tmp, cache)
    except OSError:
        pass
    return digest


def _hash(paths: list[str]) -> str:
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
