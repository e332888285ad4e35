"""The writer the tiny HF checkpoints made with numpy share (tools/refs/next_checkpoint.py,
next35_checkpoint.py, kimi_checkpoint.py, glm53_checkpoint.py; moe_checkpoint.py has its own,
which gptoss_checkpoint.py shares):

- rng(model, name): the generator a tensor is drawn from, seeded by sha256 of "model/name";
- makers(model, w, d): put / lin / mlp, drawing float32 tensors into the dict w by name;
- write_folder(out_dir, config, weights, write_tokenizer): config.json (sorted keys, indent 2),
  model.safetensors (the tensors by sorted name, metadata format "pt") and the tokenizer's
  files; returns {file name: sha256};
- gguf_tokenizer_keys(wr, folder, config): the folder's tokenizer.json as GGUF `gpt2` keys;
- finish_gguf(wr): write a GGUFWriter's header, keys and tensors, and close it;
- build_once(cache, model, write): write() into a tools/refs/scratch.py folder, once a process,
  and build_gguf_once: the F32 GGUF beside it, once;
- sibling(name): tools/refs/<name>.py loaded by its path.

The same bytes on every run: the tests compare the files' sha256 with the records.
The modules that use it load it by its path (sibling's way), never as tools.refs.tiny_hf: the
recorders run them in a reference venv whose sys.path must not hold the repo's root (its
`kernels` package would hide the one transformers imports). Needs numpy (safetensors and gguf
where they write).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np


def sibling(name: str):
    """tools/refs/<name>.py loaded by its path (a new module object each call)."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def rng(model: str, name: str) -> np.random.Generator:
    """Tensor `name`'s generator in checkpoint `model`: seeded by the eight little-endian
    32-bit words of sha256("model/name")."""
    words = np.frombuffer(hashlib.sha256(f"{model}/{name}".encode()).digest(), "<u4").tolist()
    return np.random.default_rng(np.random.SeedSequence(words))


def makers(model: str, w: dict, d: int | None = None):
    """(put, lin, mlp), writing float32 tensors into w:
    put(name, shape, std, offset=0): normal(0, 1) * std + offset from rng(model, name);
    lin(name, out_f, in_f, gain=1): put of (out_f, in_f) with std gain / sqrt(in_f);
    mlp(prefix, f): lin of prefix gate_proj / up_proj [f, d] and down_proj [d, f]."""
    def put(name, shape, std, offset=0.0):
        w[name] = (rng(model, name).standard_normal(shape) * std + offset).astype(np.float32)

    def lin(name, out_f, in_f, gain=1.0):
        put(name, (out_f, in_f), gain / np.sqrt(in_f))

    def mlp(p, f):
        lin(p + "gate_proj.weight", f, d)
        lin(p + "up_proj.weight", f, d)
        lin(p + "down_proj.weight", d, f)

    return put, lin, mlp


def sha256_file(p) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def write_folder(out_dir, config: dict, weights: dict, write_tokenizer) -> dict[str, str]:
    """Write the HF folder (made if missing): config.json, model.safetensors, then
    write_tokenizer(folder)'s files; returns {file name: sha256} of every file in it."""
    from safetensors.numpy import save_file
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file({k: np.ascontiguousarray(v) for k, v in sorted(weights.items())},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    write_tokenizer(out)
    return {p.name: sha256_file(p) for p in sorted(out.iterdir()) if p.is_file()}


def gguf_tokenizer_keys(wr, folder, config: dict) -> None:
    """The folder's tokenizer.json as GGUF `gpt2` keys (byte-level BPE, GPT-2's regex: pre
    `gpt-2`; the added tokens typed control), config's vocab_size and bos / eos / pad ids, no
    BOS added, tokenizer_config.json's chat template."""
    folder = Path(folder)
    tok = json.loads((folder / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    tokens = [None] * config["vocab_size"]
    for t, i in vocab.items():
        tokens[i] = t
    for t in tok.get("added_tokens", []):
        tokens[t["id"]] = t["content"]
    specials = {t["id"] for t in tok.get("added_tokens", [])}
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("gpt-2")
    wr.add_token_list(tokens)
    wr.add_token_types([3 if i in specials else 1 for i in range(len(tokens))])
    wr.add_token_merges(merges)
    wr.add_bos_token_id(config["bos_token_id"])
    wr.add_eos_token_id(config["eos_token_id"])
    wr.add_pad_token_id(config["pad_token_id"])
    wr.add_add_bos_token(False)
    wr.add_chat_template(json.loads((folder / "tokenizer_config.json").read_text())["chat_template"])


def finish_gguf(wr) -> None:
    """Write the GGUFWriter's header, key/value section and tensors, and close it."""
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()


def build_once(cache: dict, model: str, write) -> tuple[Path, dict]:
    """(folder, write(folder)) for a `<scratch>/foldserve-<model>-*/hf` folder, written once a
    process (cache["hf"]): for tests. tools/refs/scratch.py removes it at the process' exit."""
    from tools.refs import scratch
    if "hf" not in cache:
        d = scratch.folder(f"foldserve-{model}-") / "hf"
        cache["hf"] = (d, write(d))
    return cache["hf"]


def build_gguf_once(cache: dict, model: str, build_once, write_gguf) -> tuple[Path, str]:
    """(path, write_gguf(folder, path)) for `<model>-F32.gguf` beside build_once()'s folder,
    written once a process (cache["gguf"]): for tests."""
    if "gguf" not in cache:
        d = build_once()[0]
        p = d.parent / f"{model}-F32.gguf"
        cache["gguf"] = (p, write_gguf(d, p))
    return cache["gguf"]
