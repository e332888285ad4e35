"""Tiny tokenizers written to a tmp dir, so the construction paths are tested without a model."""
from __future__ import annotations

import json
from pathlib import Path

import gguf
from tokenizers import Tokenizer, models, pre_tokenizers, processors, decoders, trainers

CORPUS = ["hello world", "hello there", "the world says hello", "12 + 34 = 46"] * 20
SPECIALS = ["<s>", "</s>", "<|im_end|>"]


def train_byte_bpe(specials=SPECIALS) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=list(specials),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def write_hf_dir(d: Path, chat_template=None, template_file: str | None = None,
                 specials=SPECIALS) -> Tokenizer:
    """specials: the first is BOS (id 0), the second EOS (id 1)."""
    tok = train_byte_bpe(specials)
    bos, eos = specials[0], specials[1]
    tok.post_processor = processors.TemplateProcessing(single=f"{bos} $A", special_tokens=[(bos, 0)])
    tok.save(str(d / "tokenizer.json"))
    cfg = {"bos_token": bos, "eos_token": {"content": eos, "special": True}}
    if chat_template is not None:
        cfg["chat_template"] = chat_template
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [1, 2]}))
    if template_file is not None:
        (d / "chat_template.jinja").write_text(template_file)
    return tok


def write_gguf(path: Path, model="gpt2", pre="llama-bpe", add_bos=True, extra=None,
               specials=SPECIALS) -> Tokenizer:
    """A GGUF holding only tokenizer metadata, taken from a freshly trained byte-level BPE;
    `specials` are its control tokens, the first BOS (id 0), the second EOS (id 1)."""
    tok = train_byte_bpe(specials)
    state = json.loads(tok.to_str())["model"]
    tokens = [t for t, _ in sorted(state["vocab"].items(), key=lambda kv: kv[1])]
    merges = [m if isinstance(m, str) else " ".join(m) for m in state["merges"]]
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    w.add_token_types([3 if t in specials else 1 for t in tokens])
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


# ---- SentencePiece ('llama') vocabularies ----

SPM_WORDS = ("the a an of to in is was it that he she they we you with for on as at by from "
             "hello world model token server cache page rank prompt reply stream text GPU "
             "tensor parallel batch round queue request answer question time year day "
             "Paris London Tokyo über café naïve résumé").split()
SPM_PUNCT = list(".,;:!?'\"()-") + ["...", " - "]
# made-up words from overlapping syllables, so pieces can be joined from several splits
SPM_SYLLABLES = "ka ri to ne sha qu ell ing tion st pr ou ae x zz th e a".split()


def spm_corpus(n_lines: int = 3000, seed: int = 0) -> list[str]:
    """English-like lines with numbers and punctuation; no CJK or emoji (those must fall back to bytes)."""
    import random
    rng = random.Random(seed)
    lines = []
    for _ in range(n_lines):
        words = []
        for _ in range(rng.randint(3, 14)):
            r = rng.random()
            if r < 0.1:
                words.append(str(rng.randint(0, 99999)))
            elif r < 0.4:
                words.append("".join(rng.choice(SPM_SYLLABLES) for _ in range(rng.randint(1, 5))))
            elif r < 0.2:
                words[-1:] = [(words[-1] if words else "") + rng.choice(SPM_PUNCT)]
            else:
                w = rng.choice(SPM_WORDS)
                words.append(w.capitalize() if rng.random() < 0.15 else w)
        lines.append(" ".join(words))
    return lines


def train_spm(d: Path, vocab_size: int = 1000, add_dummy_prefix: bool = True,
              user_defined=("<sep>",), control=("<ctl>",)):
    """A SentencePiece BPE model trained like Llama's (identity normalization, whitespace kept,
    digits split, byte fallback). Returns the loaded SentencePieceProcessor."""
    import sentencepiece as spm
    corpus = d / "corpus.txt"
    corpus.write_text("\n".join(spm_corpus()) + "\n", encoding="utf-8")
    prefix = d / ("spm" if add_dummy_prefix else "spm_noprefix")
    spm.SentencePieceTrainer.train(
        input=str(corpus), model_prefix=str(prefix), model_type="bpe", vocab_size=vocab_size,
        byte_fallback=True, character_coverage=1.0, normalization_rule_name="identity",
        remove_extra_whitespaces=False, add_dummy_prefix=add_dummy_prefix, split_digits=True,
        allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        user_defined_symbols=list(user_defined), control_symbols=list(control),
        minloglevel=2, num_threads=4)
    sp = spm.SentencePieceProcessor(model_file=str(prefix) + ".model")
    sp.user_defined = set(user_defined)  # the Python API cannot ask a piece's type for this one
    return sp


def spm_types(sp) -> list[int]:
    """GGUF token types of a SentencePiece model's pieces, as convert_hf_to_gguf.py writes them."""
    out = []
    for i in range(sp.get_piece_size()):
        out.append(2 if sp.is_unknown(i) else 3 if sp.is_control(i) else 6 if sp.is_byte(i)
                   else 5 if sp.is_unused(i) else 4 if sp.id_to_piece(i) in sp.user_defined else 1)
    return out


def write_spm_gguf(path: Path, sp, add_bos=None, add_space_prefix=None, scores=True) -> None:
    """A GGUF holding a SentencePiece model's tokenizer metadata; None leaves a key out (its default)."""
    n = sp.get_piece_size()
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tokenizer_model("llama")
    w.add_token_list([sp.id_to_piece(i) for i in range(n)])
    if scores:
        w.add_token_scores([sp.get_score(i) for i in range(n)])
    w.add_token_types(spm_types(sp))
    w.add_bos_token_id(sp.bos_id())
    w.add_eos_token_id(sp.eos_id())
    w.add_unk_token_id(sp.unk_id())
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
