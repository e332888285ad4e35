"""Tiny tokenizers written to a tmp dir, so the construction paths are tested without a model."""
from __future__ import annotations

import json
from pathlib import Path

import gguf
from tokenizers import Tokenizer, models, pre_tokenizers, processors, decoders, trainers

CORPUS = ["hello world", "hello there", "the world says hello", "12 + 34 = 46"] * 20
SPECIALS = ["<s>", "</s>", "<|im_end|>"]


def train_byte_bpe() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def write_hf_dir(d: Path, chat_template=None, template_file: str | None = None) -> Tokenizer:
    tok = train_byte_bpe()
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 0)])
    tok.save(str(d / "tokenizer.json"))
    cfg = {"bos_token": "<s>", "eos_token": {"content": "</s>", "special": True}}
    if chat_template is not None:
        cfg["chat_template"] = chat_template
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 2]}))
    if template_file is not None:
        (d / "chat_template.jinja").write_text(template_file)
    return tok


def write_gguf(path: Path, model="gpt2", pre="llama-bpe", add_bos=True, extra=None) -> Tokenizer:
    """A GGUF holding only tokenizer metadata, taken from a freshly trained byte-level BPE."""
    tok = train_byte_bpe()
    state = json.loads(tok.to_str())["model"]
    tokens = [t for t, _ in sorted(state["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in state["merges"]]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([3 if t in SPECIALS else 1 for t in tokens])
    w.add_token_merges(merges)
    w.add_bos_token_id(0)
    w.add_eos_token_id(1)
    w.add_add_bos_token(add_bos)
    for key, value in (extra or {}).items():
        w.add_key_value(key, value, _gguf_type(value))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return tok


def _gguf_type(v):
    T = gguf.GGUFValueType
    if isinstance(v, bool):
        return T.BOOL
    if isinstance(v, int):
        return T.INT64
    if isinstance(v, float):
        return T.FLOAT64
    if isinstance(v, str):
        return T.STRING
    return T.ARRAY
