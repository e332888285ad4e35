"""One tokenizer over the `tokenizers` library, built from a GGUF or from a HF folder.

A GGUF holds either a byte-level BPE vocabulary (`tokenizer.ggml.model = gpt2`: tokens and
merges) or a SentencePiece one (`llama`: tokens, scores and types, built in spm.py).

Both roads end in the same object, so the rest of the house never asks where the
vocabulary came from. BOS is added by the wrapped tokenizer's post-processor, and only
when the model says so (GGUF `add_bos_token`, or the tokenizer.json's own template):
prompts that already carry BOS from a chat template must be encoded with
add_special_tokens=False, or the model sees it twice.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from tokenizers import AddedToken, decoders, models, processors
from tokenizers import Tokenizer as HFTokenizer

from . import pretok, spm
from .gguf_meta import read_metadata
from .tokenizer_error import TokenizerError
from .literal import Literal

# GGUF token_type values (llama.cpp's llama_token_type)
CONTROL, USER_DEFINED = 3, 4

# SentencePiece byte-fallback pieces: one byte each
_BYTE_PIECE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


def _byte_level_decoder() -> dict[str, int]:
    """Byte-level BPE's symbol -> byte (GPT-2's bytes_to_unicode, inverted): printable
    Latin-1 bytes stand for themselves, the other 68 for U+0100 onwards."""
    bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
          *range(ord("®"), ord("ÿ") + 1)]
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


_BYTE_LEVEL = _byte_level_decoder()

# End-of-turn markers that stop generation in common chat formats besides the model's eos.
END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<|endoftext|>", "<|end|>",
               "<end_of_turn>", "</s>")


# gpt-oss's harmony vocabulary (it has both): a reply ends at <|return|> or <|call|>, while
# <|end|> closes one message of several (analysis, then final) and never the reply
HARMONY_MARK, HARMONY_ENDS, HARMONY_MESSAGE_END = ("<|channel|>", "<|return|>"), \
    ("<|return|>", "<|call|>"), "<|end|>"


def harmony_stops(ids_of: dict, eos_ids: set) -> set:
    """The stop ids of a vocabulary (ids_of: a whole-matched token's text -> id): unchanged,
    but for a harmony vocabulary <|return|> and <|call|> joined and <|end|> taken out (as
    llama.cpp's vocabulary drops <|end|> from its end-of-generation set for gpt-oss)."""
    if not all(t in ids_of for t in HARMONY_MARK):
        return eos_ids
    out = set(eos_ids) | {ids_of[t] for t in HARMONY_ENDS if t in ids_of}
    out.discard(ids_of.get(HARMONY_MESSAGE_END))
    return out


class Tokenizer:
    def __init__(self, hf: HFTokenizer, *, bos_id: int | None, eos_id: int | None,
                 eos_ids: set[int], chat_template: str | None, spm: bool = False):
        self._hf = hf
        self._spm = spm  # SentencePiece: a lone token's "▁" is its leading space
        self._bos_id = bos_id
        self._eos_id = eos_id  # the model's own eos; eos_ids adds end-of-turn markers
        self._eos_ids = frozenset(eos_ids | ({eos_id} if eos_id is not None else set()))
        self._chat_template = chat_template
        self._literal: Literal | None = None

    # ---- construction ----

    @classmethod
    def from_gguf(cls, path: str | Path) -> "Tokenizer":
        meta = read_metadata(path, prefixes=("tokenizer.",))
        kind = meta.get("tokenizer.ggml.model")
        if kind not in ("gpt2", "llama"):
            raise TokenizerError(
                f"{path}: tokenizer.ggml.model = {kind!r}; foldserve reads only byte-level BPE "
                f"('gpt2') and SentencePiece ('llama') vocabularies from GGUF. Load the model's "
                f"tokenizer.json with Tokenizer.from_hf_dir instead.")
        tokens = meta.get("tokenizer.ggml.tokens")
        if not tokens:
            raise TokenizerError(f"{path}: GGUF lacks tokenizer.ggml.tokens")
        types = meta.get("tokenizer.ggml.token_type") or [1] * len(tokens)
        if len(types) != len(tokens):
            raise TokenizerError(f"{path}: {len(tokens)} tokens but {len(types)} token types")
        if kind == "llama":
            hf = spm.build_spm(meta, tokens, types, path)
            vocab = hf.get_vocab()
            add_bos_default = True  # llama.cpp's default for SPM vocabularies
        else:
            hf, vocab = cls._gpt2_bpe(meta, tokens, types, path)
            add_bos_default = meta.get("tokenizer.ggml.pre") in pretok.IGNORE_MERGES

        def token_id(key):
            v = meta.get(key)
            return v if isinstance(v, int) and 0 <= v < len(tokens) else None

        bos, eos = token_id("tokenizer.ggml.bos_token_id"), token_id("tokenizer.ggml.eos_token_id")
        add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", add_bos_default))
        add_eos = bool(meta.get("tokenizer.ggml.add_eos_token", False))
        _set_post_processor(hf, tokens, bos if add_bos else None, eos if add_eos else None)

        eos_ids = {i for i in (eos, token_id("tokenizer.ggml.eot_token_id"),
                               token_id("tokenizer.ggml.eom_token_id")) if i is not None}
        # only whole-matched tokens: a plain vocab piece spelled "</s>" is text, not a stop
        eos_ids |= {vocab[t] for t in END_OF_TURN if t in vocab and types[vocab[t]] in (CONTROL, USER_DEFINED)}
        whole = {t: vocab[t] for t in HARMONY_ENDS + HARMONY_MARK + (HARMONY_MESSAGE_END,)
                 if t in vocab and types[vocab[t]] in (CONTROL, USER_DEFINED)}
        eos_ids = harmony_stops(whole, eos_ids)
        return cls(hf, bos_id=bos, eos_id=eos, eos_ids=eos_ids,
                   chat_template=meta.get("tokenizer.chat_template"),
                   spm=kind == "llama")

    @staticmethod
    def _gpt2_bpe(meta: dict, tokens: list[str], types: list[int], path) -> tuple[HFTokenizer, dict]:
        merges = meta.get("tokenizer.ggml.merges")
        if merges is None:
            raise TokenizerError(f"{path}: GGUF lacks tokenizer.ggml.merges")
        pre = meta.get("tokenizer.ggml.pre")
        pre_tok, normalizer = pretok.build(pre)
        vocab = {t: i for i, t in enumerate(tokens)}
        # Byte-level symbols never contain a plain space, so each merge splits in exactly two.
        pairs = [tuple(m.split(" ", 1)) for m in merges]
        hf = HFTokenizer(models.BPE(vocab, pairs, fuse_unk=False, byte_fallback=False,
                                    ignore_merges=pre in pretok.IGNORE_MERGES))
        hf.pre_tokenizer = pre_tok
        if normalizer is not None:
            hf.normalizer = normalizer
        hf.decoder = decoders.ByteLevel()
        # Control tokens are special (matched whole, dropped by skip_special_tokens);
        # user-defined ones are matched whole too but kept in decoded text, as llama.cpp does.
        hf.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                               for i, t in enumerate(types) if t == CONTROL])
        hf.add_tokens([AddedToken(tokens[i], special=False, normalized=False)
                       for i, t in enumerate(types) if t == USER_DEFINED])
        return hf, vocab

    @classmethod
    def from_hf_dir(cls, path: str | Path) -> "Tokenizer":
        d = Path(path)
        if not (d / "tokenizer.json").is_file():
            raise TokenizerError(f"{d}: no tokenizer.json (foldserve needs the fast-tokenizer file)")
        hf = HFTokenizer.from_file(str(d / "tokenizer.json"))
        cfg = _read_json(d / "tokenizer_config.json")

        def token_of(name):
            v = cfg.get(name)
            content = v.get("content") if isinstance(v, dict) else v
            return hf.token_to_id(content) if isinstance(content, str) else None

        bos, eos = token_of("bos_token"), token_of("eos_token")
        eos_ids = {eos} if eos is not None else set()
        # generation_config.json often lists several stop ids (Llama 3: eos and eot)
        gen_eos = _read_json(d / "generation_config.json").get("eos_token_id")
        eos_ids |= set(gen_eos if isinstance(gen_eos, list) else [gen_eos] if isinstance(gen_eos, int) else [])
        added = {tok.content: i for i, tok in hf.get_added_tokens_decoder().items()}
        eos_ids |= {added[t] for t in END_OF_TURN if t in added}
        eos_ids = harmony_stops(added, eos_ids)
        return cls(hf, bos_id=bos, eos_id=eos, eos_ids=eos_ids, chat_template=_hf_chat_template(d, cfg))

    # ---- use ----

    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        # encode_batch_fast lets go of the GIL while it works (encode does not): a long
        # prompt tokenized on the API's worker thread then leaves the event loop free. Its
        # ids are encode_batch's; it skips the character offsets, which made a 4 MB prompt
        # take 13 s instead of 2.6 s and its Encoding's release (under the GIL) 170 ms, not 10
        return self._hf.encode_batch_fast([text], add_special_tokens=add_special_tokens)[0].ids

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return self._hf.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_text(self, token_id: int) -> str:
        """The text of one token alone; a piece of a multi-byte character shows as U+FFFD.

        A SentencePiece token keeps its leading space ("▁Paris" -> " Paris"), which
        decode() strips at the start of a text."""
        if self._spm and token_id not in self._hf.get_added_tokens_decoder():
            return spm.piece_text(self._hf, token_id)
        return self._hf.decode([token_id], skip_special_tokens=False)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes one token stands for, a piece of a multi-byte character included
        (llama.cpp's token_to_piece): token_text's UTF-8 where that text is whole, else
        the byte-level BPE symbols mapped back to their bytes, or a SentencePiece byte
        piece ("<0xE2>") to its byte."""
        text = self.token_text(token_id)
        if "\ufffd" not in text or token_id in self._hf.get_added_tokens_decoder():
            return text.encode("utf-8")
        piece = self._hf.id_to_token(token_id) or ""
        m = _BYTE_PIECE.fullmatch(piece)
        if m:
            return bytes([int(m[1], 16)])
        byte_level = isinstance(self._hf.decoder, decoders.ByteLevel)
        if byte_level and all(c in _BYTE_LEVEL for c in piece):
            return bytes(_BYTE_LEVEL[c] for c in piece)
        return text.encode("utf-8")

    def token_to_id(self, token: str) -> int | None:
        return self._hf.token_to_id(token)

    @property
    def literal(self) -> Literal:
        """Special tokens in chat message content as text (literal.py): protect the
        messages before rendering, encode the rendered prompt with it."""
        if self._literal is None:
            self._literal = Literal(self._hf)
        return self._literal

    @property
    def bos_id(self) -> int | None:
        return self._bos_id

    @property
    def eos_id(self) -> int | None:
        return self._eos_id

    @property
    def eos_ids(self) -> frozenset[int]:
        return self._eos_ids

    @property
    def bos_token(self) -> str:
        """BOS as text, for chat templates that write it themselves ('' when none)."""
        return self._hf.id_to_token(self._bos_id) if self._bos_id is not None else ""

    @property
    def eos_token(self) -> str:
        return self._hf.id_to_token(self._eos_id) if self._eos_id is not None else ""

    @property
    def vocab_size(self) -> int:
        return self._hf.get_vocab_size(with_added_tokens=True)

    @property
    def chat_template(self) -> str | None:
        return self._chat_template

    @property
    def hf(self) -> HFTokenizer:
        return self._hf


def _set_post_processor(hf: HFTokenizer, tokens, bos: int | None, eos: int | None) -> None:
    if bos is None and eos is None:
        return
    single, pair, special = "$A", "$A $B:1", []
    if bos is not None:
        single, pair = f"{tokens[bos]} {single}", f"{tokens[bos]} $A {tokens[bos]}:1 $B:1"
        special.append((tokens[bos], bos))
    if eos is not None:
        single, pair = f"{single} {tokens[eos]}", f"{pair} {tokens[eos]}:1"
        if eos != bos:
            special.append((tokens[eos], eos))
    hf.post_processor = processors.TemplateProcessing(single=single, pair=pair, special_tokens=special)


def _read_json(p: Path) -> dict:
    if not p.is_file():
        return {}
    with open(p, encoding="utf-8") as f:
        v = json.load(f)
    return v if isinstance(v, dict) else {}


def _hf_chat_template(d: Path, cfg: dict) -> str | None:
    # Newer repos keep the template beside the config; older ones inside it.
    if (d / "chat_template.jinja").is_file():
        return (d / "chat_template.jinja").read_text(encoding="utf-8")
    t = _read_json(d / "chat_template.json").get("chat_template") or cfg.get("chat_template")
    if isinstance(t, list):  # named templates: [{"name": "default", "template": ...}, ...]
        named = {e.get("name"): e.get("template") for e in t if isinstance(e, dict)}
        t = named.get("default") or next(iter(named.values()), None)
    return t if isinstance(t, str) else None
