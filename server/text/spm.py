"""SentencePiece vocabularies from GGUF (`tokenizer.ggml.model = "llama"`) as a `tokenizers` BPE.

Llama 2, Mistral, TinyLlama and their kin ship a SentencePiece model; the GGUF keeps its
pieces, scores and types, but no merge list. This builds what Hugging Face's fast Llama
tokenizer (legacy mode) builds from the same data:

    normalizer     prepend "▁" (when add_space_prefix), then every " " -> "▁"
    pre-tokenizer  none: the whole normalized text is one word, as SentencePiece sees it
    model          BPE, byte_fallback (the <0xNN> pieces), fuse_unk, merges derived below
    decoder        "▁" -> " ", <0xNN> -> bytes, fuse, strip one leading " " (add_space_prefix)

Where this differs from the SentencePiece library itself (tests/text/test_tokenizer_spm.py
pins each point):
  * Control pieces (<s>, </s>, ...) and <unk> written in the text are matched as those
    tokens; SentencePiece spells them as plain text. Each text run after such a token gets
    its own "▁" prefix, as llama.cpp (is_prev_special) and HF's legacy tokenizer do.
  * User-defined pieces are matched whole in the text, as by SentencePiece, but the run
    after one gets its own "▁" too (HF, llama.cpp); SentencePiece adds none there.
  * decode() keeps control tokens as their text unless skip_special_tokens; SentencePiece
    drops them, and writes <unk> as " ⁇ ".
  * A literal "▁" (U+2581) in the input is a space to both, so it comes back as " ".
  * Only the merge order of two different pairs whose merged pieces have the *same*
    score can differ (see spm_merges); SentencePiece's trained BPE scores are distinct.
`tokenizer.ggml.remove_extra_whitespaces` is ignored, as llama.cpp ignores it for SPM.
"""
from __future__ import annotations

from tokenizers import AddedToken, decoders, models, normalizers
from tokenizers import Tokenizer as HFTokenizer

from .tokenizer_error import TokenizerError

# GGUF token_type values (llama.cpp's llama_token_type)
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
SPACE = "\u2581"  # "▁", SentencePiece's whitespace symbol


def spm_merges(tokens: list[str], scores: list[float], types: list[int]) -> list[tuple[str, str]]:
    """The BPE merge list that makes `tokenizers` segment as SentencePiece does.

    SentencePiece's BPE encoder starts from single characters and repeatedly joins the
    adjacent pair whose concatenation is a vocabulary piece of the highest score (equal
    scores: the leftmost pair). `tokenizers`' BPE repeatedly applies the adjacent pair
    of lowest rank in its merge list (equal rank, i.e. the same pair: leftmost). The
    two agree when
      1. the list holds every pair (a, b) with a, b and a+b all pieces: the encoder's
         symbols are always pieces, so any adjacent pair it could join is listed. That
         means every split of every piece into two pieces, not only the split the
         trainer happened to make ("▁the" = "▁t"+"he" = "▁th"+"e" = "▁"+"the" ...);
      2. ranks follow the merged piece's score, highest first.
    Pairs of equal score (the splits of one piece, or pieces sharing a score) still need
    distinct ranks; they are ordered by the pieces' ids, left then right. Only when two
    such pairs compete in one word can the result differ from SentencePiece, which
    would pick by position instead.

    Only normal pieces take part: SentencePiece keeps control, unknown and byte pieces
    out of its piece table, so they are never produced by joining (bytes come only from
    byte fallback). User-defined pieces are matched whole before the BPE ever runs, and
    unused ones are never emitted.
    """
    ids = {t: i for i, t in enumerate(tokens) if types[i] == NORMAL}
    found = []  # (-score of merged piece, left id, right id, left, right)
    for piece, pid in ids.items():
        score = scores[pid]
        for cut in range(1, len(piece)):
            left, right = piece[:cut], piece[cut:]
            li, ri = ids.get(left), ids.get(right)
            if li is not None and ri is not None:
                found.append((-score, li, ri, left, right))
    found.sort(key=lambda m: m[:3])
    return [(left, right) for _, _, _, left, right in found]


def build_spm(meta: dict, tokens: list[str], types: list[int], path) -> HFTokenizer:
    """The `tokenizers` object for a GGUF's SentencePiece vocabulary (special tokens included)."""
    scores = meta.get("tokenizer.ggml.scores")
    if scores is None:
        # No scores: llama.cpp reads 0.0 for all, which leaves no order at all. Trained
        # SentencePiece BPE scores fall with the id, so id order is the best guess.
        scores = [-float(i) for i in range(len(tokens))]
    if len(scores) != len(tokens):
        raise TokenizerError(f"{path}: {len(tokens)} tokens but {len(scores)} scores")
    add_space_prefix = bool(meta.get("tokenizer.ggml.add_space_prefix", True))

    unk_id = meta.get("tokenizer.ggml.unknown_token_id")
    if not (isinstance(unk_id, int) and 0 <= unk_id < len(tokens)):
        unk_id = next((i for i, t in enumerate(types) if t == UNKNOWN), None)
    # A duplicated piece string keeps its first id (the later copy is unreachable anyway).
    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    hf = HFTokenizer(models.BPE(vocab, spm_merges(tokens, scores, types),
                                unk_token=tokens[unk_id] if unk_id is not None else None,
                                fuse_unk=True, byte_fallback=True))
    norm = [normalizers.Replace(" ", SPACE)]
    if add_space_prefix:
        norm.insert(0, normalizers.Prepend(SPACE))
    hf.normalizer = normalizers.Sequence(norm)
    # Strip works on each token it is given, so it must come after Fuse has joined them.
    dec = [decoders.Replace(SPACE, " "), decoders.ByteFallback(), decoders.Fuse()]
    if add_space_prefix:
        dec.append(decoders.Strip(" ", 1, 0))
    hf.decoder = decoders.Sequence(dec)

    # Control pieces and <unk> are special: matched whole in the raw text, dropped by
    # skip_special_tokens (llama.cpp matches UNKNOWN pieces whole as well).
    hf.add_special_tokens([AddedToken(tokens[i], special=True, normalized=False)
                           for i, t in enumerate(types) if t in (CONTROL, UNKNOWN)])
    # User-defined pieces are matched whole too, in the raw text; the run after one gets
    # its own "▁" as after a control token (HF's converter and llama.cpp do the same).
    # SentencePiece matches them in the normalized text and adds no "▁" after them.
    # (normalized=True cannot give SentencePiece's way: the normalizer would turn the
    # token's own text into "▁<sep>".)
    hf.add_tokens([AddedToken(tokens[i], special=False, normalized=False)
                   for i, t in enumerate(types) if t == USER_DEFINED])
    return hf


def piece_text(hf: HFTokenizer, token_id: int) -> str:
    """One token's text with its "▁" shown as a space, not stripped as at a text's start
    (llama.cpp's token_to_piece): "▁Paris" -> " Paris"."""
    piece = hf.id_to_token(token_id)
    if piece is None:
        return ""
    return decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(),
                              decoders.Fuse()]).decode([piece])
