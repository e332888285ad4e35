"""Read a GGUF file's key/value metadata for the tokenizer, without touching its tensors.

The walk is server/gguf_header.py's (the one reader of a GGUF header: the loader and serve's
early read use it too); here the keys of the wanted prefixes are kept, arrays as lists. Why
not gguf.GGUFReader: it parses every field into numpy views and maps the tensor table, ~1.6 s
on the 135M default model (its vocab and merges are ~100k small strings); the header walk
reads the KV section in well under 0.2 s.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

from server.gguf_header import GGUFHeaderError, read


class GGUFMetadataError(ValueError):
    pass


def read_metadata(path: str | Path, prefixes: tuple[str, ...] = ("tokenizer.", "general."),
                  keep: Callable[[str], bool] | None = None) -> dict:
    """Keys starting with one of `prefixes` (or those `keep` says) -> python values (lists for
    arrays)."""
    try:
        return read(path, keep or (lambda key: key.startswith(prefixes))).values
    except GGUFHeaderError as e:
        raise GGUFMetadataError(f"{path}: {e}") from None
