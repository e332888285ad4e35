"""Tokenizer.token_bytes: the bytes each token stands for, so a piece of a character can be
shown as its bytes (server/api/logprob_tokens.py): byte-level BPE (the default model) and
SentencePiece byte fallback (a tiny GGUF vocabulary)."""
from __future__ import annotations

import pytest

TEXTS = ["你好😊 — ok", "naïve café", "plain ascii", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 ∑ ≠ 🇫🇷"]


@pytest.mark.parametrize("text", TEXTS)
def test_byte_level_tokens_join_to_the_texts_bytes(smollm, text):
    ids = smollm.encode(text, add_special_tokens=False)
    pieces = [smollm.token_bytes(i) for i in ids]
    assert b"".join(pieces) == text.encode("utf-8")
    for i, b in zip(ids, pieces):
        if "\ufffd" not in smollm.token_text(i):
            assert b == smollm.token_text(i).encode("utf-8")


def test_a_piece_of_a_character_is_its_bytes_not_ufffd(smollm):
    ids = smollm.encode("😊", add_special_tokens=False)
    assert len(ids) > 1                                   # the default model splits it
    assert all(smollm.token_text(i) == "\ufffd" for i in ids)
    assert b"".join(smollm.token_bytes(i) for i in ids) == "😊".encode()


def test_sentencepiece_byte_pieces_are_their_byte(tmp_path):
    from server.text.tokenizer import Tokenizer

    from .tiny import train_spm, write_spm_gguf
    sp = train_spm(tmp_path)
    write_spm_gguf(tmp_path / "t.gguf", sp)
    tok = Tokenizer.from_gguf(tmp_path / "t.gguf")
    text = "ok 😊 ∑"                                   # not in the tiny corpus: byte pieces
    ids = tok.encode(text, add_special_tokens=False)
    pieces = [tok.hf.id_to_token(i) for i in ids]
    assert any(p.startswith("<0x") for p in pieces), pieces
    got = [tok.token_bytes(i) for i in ids]
    assert b"".join(got).lstrip(b" ") == text.encode("utf-8")
    for p, b in zip(pieces, got):
        if p.startswith("<0x"):
            assert b == bytes([int(p[3:5], 16)])
