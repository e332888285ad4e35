"""Load a Hugging Face folder: config.json and one or more *.safetensors."""
from __future__ import annotations

import glob
import json
import logging
import os
import re
import time

from .hf_config import read_config, spec_from_config
from .identity import hash_files, identity
from .loaded import Loaded, WeightsError
from .names import EMBED, HEAD, check_tensors
from .progress import Progress
from .safetensors_file import header, read_all

log = logging.getLogger("foldserve")

INDEX = "model.safetensors.index.json"
_LAYER = re.compile(r"model\.layers\.(\d+)\.")
_FUSED = re.compile(r"(model\.layers\.\d+\.mlp\.experts)\.(gate_up_proj|down_proj)(\.weight)?")
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


def load_hf(folder: str, *, progress: bool = True, mtp: bool = False) -> Loaded:
    """mtp: the MTP layer model.layers.{n_layers}.* is read too (server/families/nextn.py;
    the trunk's embed_tokens / shared_head.head copies it may carry are not)."""
    start = time.monotonic()
    folder = os.path.abspath(folder)
    spec = spec_from_config(read_config(folder), os.path.join(folder, "config.json"))
    keep: set = set()
    if mtp:
        from server.families import nextn as mtp_layer
        spec = mtp_layer.with_mtp(spec)
        keep = set(mtp_layer.shapes(spec))
    files = shard_files(folder)

    tensors, stored, unused = {}, {}, []
    from server.families import family
    skip = getattr(family(spec), "hf_skip", None)        # glm5next: the image part
    skipped = 0
    if skip is not None:
        for path in files:
            keep = [n for n in files[path] if not skip(n)]
            skipped += len(files[path]) - len(keep)
            files[path] = keep
        if skipped:
            log.info("%s: the image part (%d tensors) not read: foldserve serves the text "
                     "part, and refuses a request's image parts by name",
                     os.path.basename(folder), skipped)
    total = sum(len(v) for v in files.values())
    with Progress(f"loading {os.path.basename(folder)}", total, enabled=progress, start=start) as bar:
        for path, names in files.items():
            names = [n for n in names if not n.endswith(SKIPPED_SUFFIXES)]
            if spec.nextn_layers:             # GLM's MTP layers after the trunk: not run
                extra = [n for n in names if (m := _LAYER.match(n)) and n not in keep
                         and spec.n_layers <= int(m.group(1)) < spec.n_layers + spec.nextn_layers]
                unused += extra
                names = [n for n in names if n not in set(extra)]
            if spec.tie_embeddings:
                names = [n for n in names if n != HEAD]   # a tied head saved anyway: use the embedding
            got, kinds = read_all(path, names, on_tensor=bar.advance)
            tensors.update(got)
            stored.update(kinds)
    if spec.tie_embeddings:
        tensors[HEAD] = tensors.get(EMBED)   # the same object; None is reported as missing below
    if spec.arch == "gptoss":
        split_gptoss_experts(tensors)
    else:
        split_fused_experts(tensors)
    rename = getattr(family(spec), "hf_rename", None)
    if rename is not None:               # a family whose saved names are not the shared ones
        tensors = {rename(n): t for n, t in tensors.items()}
    if spec.arch == "qwen3next":             # Qwen3.5's split projections -> Qwen3-Next's
        from .gguf_qwen3next import join_split_projections
        join_split_projections(spec, tensors, folder)
    if mtp:
        log.info("%s: the MTP/NextN layer %d drafts (--draft mtp)", os.path.basename(folder),
                 spec.n_layers)
    elif unused:
        log.info("%s: the MTP/NextN layer(s) %s (%d tensors) not run: no speculative decoding "
                 "from them; their bytes stay unread", os.path.basename(folder),
                 ", ".join(str(spec.n_layers + i) for i in range(spec.nextn_layers)), len(unused))
    check_tensors(spec, tensors, folder)
    content = hash_files([os.path.join(folder, "config.json"), *files])
    ident = identity(spec, stored, content, format="safetensors")
    return Loaded(spec=spec, tensors=tensors, source=folder, identity=ident, hf_dir=folder)


def split_fused_experts(tensors: dict) -> None:
    """transformers 5's fused expert parameters (mlp.experts.gate_up_proj [E, 2 ff, d],
    mlp.experts.down_proj [E, d, ff]) -> the per-expert names (mlp.experts.{e}.*_proj.weight)."""
    for name in [n for n in tensors if _FUSED.fullmatch(n)]:
        m = _FUSED.fullmatch(name)
        x = tensors.pop(name)
        if x.ndim != 3:
            raise WeightsError(f"{name}: shape {list(x.shape)}, expected [experts, out, in]")
        for e in range(x.shape[0]):
            p = f"{m.group(1)}.{e}."
            if m.group(2) == "down_proj":
                tensors[p + "down_proj.weight"] = x[e]
            else:
                ff = x.shape[1] // 2
                tensors[p + "gate_proj.weight"] = x[e, :ff]
                tensors[p + "up_proj.weight"] = x[e, ff:]


_GPTOSS = re.compile(r"(model\.layers\.\d+\.mlp\.experts)\.(gate_up_proj|down_proj)(_bias)?")


def split_gptoss_experts(tensors: dict) -> None:
    """GptOssForCausalLM's fused experts -> the per-expert names, [out, in]: gate_up_proj
    [E, d, 2 ff] (x @ W; gate and up interleaved column by column: gate = 0::2, up = 1::2)
    and its bias [E, 2 ff] likewise; down_proj [E, ff, d] and its bias [E, d]."""
    import numpy as np
    for name in [n for n in tensors if _GPTOSS.fullmatch(n)]:
        m = _GPTOSS.fullmatch(name)
        x = tensors.pop(name)
        bias = m.group(3) is not None
        if x.ndim != (2 if bias else 3):
            raise WeightsError(f"{name}: shape {list(x.shape)}, expected [experts, "
                               + ("out]" if bias else "in, out]"))
        for e in range(x.shape[0]):
            p = f"{m.group(1)}.{e}."
            if m.group(2) == "down_proj":
                if bias:
                    tensors[p + "down_proj.bias"] = x[e]
                else:
                    tensors[p + "down_proj.weight"] = np.ascontiguousarray(x[e].T)
            elif bias:
                tensors[p + "gate_proj.bias"] = np.ascontiguousarray(x[e, 0::2])
                tensors[p + "up_proj.bias"] = np.ascontiguousarray(x[e, 1::2])
            else:
                tensors[p + "gate_proj.weight"] = np.ascontiguousarray(x[e][:, 0::2].T)
                tensors[p + "up_proj.weight"] = np.ascontiguousarray(x[e][:, 1::2].T)
