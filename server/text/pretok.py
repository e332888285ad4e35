"""GGUF `tokenizer.ggml.pre` names -> the HF pre-tokenizer that splits text the same way.

A byte-level BPE vocabulary only reproduces the reference ids when text is cut into
words exactly as at training time, so each `pre` value maps to the pre-tokenizer of
the model's own tokenizer.json. An unknown name is refused rather than guessed:
a near-miss regex gives plausible but wrong ids, which is the worst kind of bug.
"""
from __future__ import annotations

from tokenizers import Regex, normalizers, pre_tokenizers

# Llama 3 (tiktoken cl100k-like): letters with one leading non-letter, digits in 1..3.
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
                r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# Qwen2: as Llama 3 but every digit on its own.
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
               r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

# gpt-4o / gpt-oss (tiktoken o200k): its tokenizer.json's regex, as llama.cpp quotes it
# (src/llama-vocab.cpp, LLAMA_VOCAB_PRE_TYPE_GPT4O: no ignore_merges, no normalizer)
GPT4O_REGEX = (r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
               r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+")


def _gpt2():
    # ByteLevel's built-in regex is GPT-2's: 's|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), None


def _digits_then_gpt2():
    # StarCoder / SmolLM tokenizer.json: split every digit first, then the GPT-2 regex.
    return pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ]), None


def _split_then_bytes(regex: str, normalizer=None):
    def build():
        return pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]), normalizer() if normalizer else None
    return build


# name -> builder of (pre_tokenizer, normalizer or None)
PRE_TOKENIZERS = {
    "gpt2": _gpt2,
    "gpt-2": _gpt2,
    "olmo": _gpt2,
    "smollm": _digits_then_gpt2,
    "starcoder": _digits_then_gpt2,
    "refact": _digits_then_gpt2,
    "llama-bpe": _split_then_bytes(LLAMA3_REGEX),
    "llama3": _split_then_bytes(LLAMA3_REGEX),
    "dbrx": _split_then_bytes(LLAMA3_REGEX),
    "smaug-bpe": _split_then_bytes(LLAMA3_REGEX),
    "qwen2": _split_then_bytes(QWEN2_REGEX, normalizers.NFC),
    "deepseek-r1-qwen": _split_then_bytes(QWEN2_REGEX, normalizers.NFC),
    "gpt-4o": _split_then_bytes(GPT4O_REGEX),
}

# Llama 3 family tokenizers skip merging a word that is already a whole vocab entry.
IGNORE_MERGES = {"llama-bpe", "llama3", "dbrx", "smaug-bpe"}


class UnknownPreTokenizer(ValueError):
    pass


def build(pre: str | None):
    """(pre_tokenizer, normalizer or None) for a GGUF `pre` name; None means GPT-2's regex."""
    # Old GGUFs (before llama.cpp wrote `pre`) are GPT-2 style byte-level BPE.
    name = pre or "gpt2"
    if name not in PRE_TOKENIZERS:
        known = ", ".join(sorted(PRE_TOKENIZERS))
        raise UnknownPreTokenizer(
            f"tokenizer.ggml.pre = {name!r} is not known to foldserve (known: {known}); "
            f"load the model's tokenizer.json with Tokenizer.from_hf_dir instead")
    return PRE_TOKENIZERS[name]()
