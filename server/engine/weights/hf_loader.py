"""Load a Hugging Face folder: config.json and one or more *.safetensors."""
from __future__ import annotations

import glob
import json
import os
import time

from .hf_config import read_config, spec_from_config
from .identity import hash_files, identity
from .loaded import Loaded, WeightsError
from .names import EMBED, HEAD, check_tensors
from .progress import Progress
from .safetensors_file import header, read_all

INDEX = "model.safetensors.index.json"
# buffers some checkpoints carry that are not weights
SKIPPED_SUFFIXES = ("rotary_emb.inv_freq",)


def shard_files(folder: str) -> dict[str, list[str]]:
    """{file path: [tensor names]} from the index when there is one, else every *.safetensors."""
    index = os.path.join(folder, INDEX)
    if os.path.isfile(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        files: dict[str, list[str]] = {}
        for name, fname in weight_map.items():
            files.setdefault(os.path.join(folder, fname), []).append(name)
        for p in files:
            if not os.path.isfile(p):
                raise WeightsError(f"{index} names {os.path.basename(p)}, which is not in {folder}")
        return dict(sorted(files.items()))
    paths = sorted(glob.glob(os.path.join(folder, "*.safetensors")))
    if not paths:
        raise WeightsError(f"{folder}: no *.safetensors files (foldserve does not read .bin/.pt checkpoints)")
    return {p: list(header(p)[0]) for p in paths}


def load_hf(folder: str, *, progress: bool = True) -> Loaded:
    start = time.monotonic()
    folder = os.path.abspath(folder)
    spec = spec_from_config(read_config(folder), os.path.join(folder, "config.json"))
    files = shard_files(folder)

    tensors, stored = {}, {}
    total = sum(len(v) for v in files.values())
    with Progress(f"loading {os.path.basename(folder)}", total, enabled=progress, start=start) as bar:
        for path, names in files.items():
            names = [n for n in names if not n.endswith(SKIPPED_SUFFIXES)]
            if spec.tie_embeddings:
                names = [n for n in names if n != HEAD]   # a tied head saved anyway: use the embedding
            got, kinds = read_all(path, names, on_tensor=bar.advance)
            tensors.update(got)
            stored.update(kinds)
    if spec.tie_embeddings:
        tensors[HEAD] = tensors.get(EMBED)   # the same object; None is reported as missing below
    check_tensors(spec, tensors, folder)
    content = hash_files([os.path.join(folder, "config.json"), *files])
    ident = identity(spec, stored, content, format="safetensors")
    return Loaded(spec=spec, tensors=tensors, source=folder, identity=ident, hf_dir=folder)
