"""SentencePiece GGUFs ('llama' vocabularies) tokenize as the SentencePiece library does.

A small BPE model is trained here, Llama's way (identity normalization, whitespace kept,
digits split, byte fallback), written into a GGUF, and read back with Tokenizer.from_gguf.
The points where we follow HF's fast tokenizer and llama.cpp rather than SentencePiece
(server/text/spm.py lists them) are pinned by their own tests; hypothesis checks the rest.
"""
from __future__ import annotations

import time

import pytest
from hypothesis import assume, given, settings, strategies as st

from server.text.detok import IncrementalDetokenizer
from server.text.spm import spm_merges
from server.text.tokenizer import Tokenizer

from .tiny import spm_types, train_spm, write_spm_gguf

pytest.importorskip("sentencepiece")


@pytest.fixture(scope="module")
def sp_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("spm")


@pytest.fixture(scope="module")
def sp(sp_dir):
    t0 = time.perf_counter()
    proc = train_spm(sp_dir)
    assert time.perf_counter() - t0 < 5.0
    return proc


@pytest.fixture(scope="module")
def tok(sp, sp_dir) -> Tokenizer:
    write_spm_gguf(sp_dir / "t.gguf", sp)  # add_bos_token and add_space_prefix left to their defaults
    return Tokenizer.from_gguf(sp_dir / "t.gguf")


@pytest.fixture(scope="module")
def sp_noprefix(sp_dir):
    return train_spm(sp_dir, add_dummy_prefix=False)


@pytest.fixture(scope="module")
def tok_noprefix(sp_noprefix, sp_dir) -> Tokenizer:
    write_spm_gguf(sp_dir / "np.gguf", sp_noprefix, add_bos=False, add_space_prefix=False)
    return Tokenizer.from_gguf(sp_dir / "np.gguf")


# Text: the training words, and what lies around and outside them: leading, trailing and
# repeated spaces, made-up words, tabs and newlines (never in a SentencePiece corpus line, so bytes),
# digits, punctuation, accents, CJK, emoji, control characters, any other code point.
# U+2581 "▁" is left out: it is a space to both tokenizers and comes back as " ".
FRAGMENTS = ["the", "hello", " world", "Paris", "über", "café", "  ", " ", "\n", "\n\n", "\t",
             "kari", "shaqu", "tionst", "zzth", "ae", "0", "12", "2024", "3.14", ",", ".", "!", "?", "...", "'", '"', "(", ")", "-",
             "東京", "日本語", "🙂", "👍🏽", "é", "ß", "Ω", "\u3000", "\xa0", "\r", "\x00", "<", ">"]
CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\u2581")
TEXT = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(CHARS, min_size=1, max_size=3)),
                max_size=14).map("".join)
SPECIAL_TEXT = ("<unk>", "<s>", "</s>", "<ctl>", "<sep>")


def _plain(text: str) -> bool:
    return not any(s in text for s in SPECIAL_TEXT)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_encode_matches_sentencepiece(sp, tok, text):
    assume(_plain(text))
    ids = sp.encode(text)
    assert tok.encode(text, add_special_tokens=False) == ids
    assert tok.encode(text) == [sp.bos_id()] + ids  # add_bos_token defaults to true for llama
    assert tok.decode(ids) == sp.decode(ids) == text
    assert tok.decode([sp.bos_id()] + ids, skip_special_tokens=True) == text


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_without_space_prefix(sp_noprefix, tok_noprefix, text):
    # add_space_prefix = false (SentencePiece's add_dummy_prefix off, as in Gemma), add_bos false
    assume(_plain(text))
    ids = sp_noprefix.encode(text)
    assert tok_noprefix.encode(text) == ids
    assert tok_noprefix.decode(ids) == sp_noprefix.decode(ids) == text


def test_named_cases(sp, tok):
    for text in ["", " ", "   ", " hello", "hello ", "hello  world", "a\n\nb", "\nhello",
                 "Hello, world! 12345", "東京 🙂 x", "über-café (2024)", "x\x00y", "\t\r x\u3000y\xa0"]:
        assert tok.encode(text, add_special_tokens=False) == sp.encode(text), repr(text)
        assert tok.decode(tok.encode(text), skip_special_tokens=True) == text, repr(text)
    # outside the corpus: byte fallback, one <0xNN> per UTF-8 byte
    assert [tok.token_text(i) for i in tok.encode("東", add_special_tokens=False)[1:]] == ["\ufffd"] * 3
    assert tok.encode("東", add_special_tokens=False)[1:] == [sp.piece_to_id(f"<0x{b:02X}>")
                                                            for b in "東".encode()]


def test_model_facts(sp, tok):
    assert (tok.bos_id, tok.eos_id) == (sp.bos_id(), sp.eos_id()) == (1, 2)
    assert (tok.bos_token, tok.eos_token) == ("<s>", "</s>")
    assert tok.eos_ids == {2}
    assert tok.vocab_size == sp.get_piece_size()
    word = tok.encode("hello", add_special_tokens=False)
    assert len(word) == 1 and sp.id_to_piece(word[0]) == "▁hello"
    # a lone token keeps its space (llama.cpp's token_to_piece); decode strips it at the start
    assert tok.token_text(word[0]) == " hello" and tok.decode(word) == "hello"
    assert tok.token_text(1) == "<s>" and tok.token_to_id("▁hello") == word[0]


def test_add_bos_false_is_obeyed(sp, sp_dir):
    write_spm_gguf(sp_dir / "nobos.gguf", sp, add_bos=False, add_space_prefix=True)
    tok = Tokenizer.from_gguf(sp_dir / "nobos.gguf")
    assert tok.encode("hello world") == sp.encode("hello world")


def test_special_and_user_defined_pieces(sp, tok):
    # Where we follow HF's fast (legacy) Llama tokenizer and llama.cpp, not SentencePiece:
    # control pieces and <unk> in the text are those tokens (SentencePiece spells them out),
    # and the text after any whole-matched piece gets its own "▁".
    sep, ctl, unk = (sp.piece_to_id(p) for p in ("<sep>", "<ctl>", "<unk>"))
    a, b = sp.encode("a")[-1], sp.encode("b")[-1]          # "▁a", "▁b"
    assert sp.id_to_piece(a) == "▁a" and sp.id_to_piece(b) == "▁b"
    assert tok.encode("a<ctl>b", add_special_tokens=False) == [a, ctl, b]
    assert ctl not in sp.encode("a<ctl>b")
    assert tok.encode("<s>a", add_special_tokens=False) == [1, a]
    assert tok.encode("a<unk>", add_special_tokens=False) == [a, unk]
    # user-defined: both match it whole; SentencePiece continues with "b", we with "▁b"
    assert sp.encode("a<sep>b") == [a, sep, sp.piece_to_id("b")]
    assert tok.encode("a<sep>b", add_special_tokens=False) == [a, sep, b]
    # decode keeps specials as text unless told, and the "▁" after one is a space
    assert tok.decode([1, a, 2]) == "<s> a</s>"
    assert tok.decode([1, a, 2], skip_special_tokens=True) == "a"
    assert tok.decode([a, sep, b]) == "a<sep> b"
    assert sp.decode([1, a, 2]) == "a"
    assert tok.eos_ids == {2} and 3 not in tok.eos_ids


def test_literal_meta_space_is_a_space(sp, tok):
    assert tok.encode("a▁b", add_special_tokens=False) == sp.encode("a▁b") == sp.encode("a b")
    assert tok.decode(sp.encode("a▁b")) == sp.decode(sp.encode("a▁b")) == "a b"


def test_streaming_equals_full_decode(sp, tok):
    text = "hello 東京 world 🙂, 2024!\n"
    ids = tok.encode(text)
    d = IncrementalDetokenizer(tok)
    pieces = [d.push(i) for i in ids] + [d.flush()]
    assert "".join(pieces) == tok.decode(ids)
    assert not any("\ufffd" in p for p in pieces)


def test_a_streamed_reply_keeps_its_leading_space(tok):
    # the reply's first token "▁world" decodes alone as "world"; after the prompt's last token
    # it is " world", which is what the reply's text is
    prompt, reply = tok.encode("hello"), tok.encode("hello world again", add_special_tokens=False)[1:]
    d = IncrementalDetokenizer(tok, context=prompt[-1:])
    streamed = "".join([d.push(i) for i in reply] + [d.flush()])
    whole = tok.decode(prompt + reply, skip_special_tokens=True)
    assert streamed == whole[len(tok.decode(prompt, skip_special_tokens=True)):] == " world again"
    alone = IncrementalDetokenizer(tok)
    assert "".join([alone.push(i) for i in reply] + [alone.flush()]) == "world again"


def test_merges_follow_scores():
    # "abc" can be joined as a+bc or ab+c; both are listed, after the higher-scored "bc"
    # and "ab", ties by ids; control and byte pieces never take part.
    tokens = ["<s>", "<0x61>", "a", "b", "c", "ab", "bc", "abc", "<s>a"]
    scores = [0.0, 0.0, -10.0, -11.0, -12.0, -2.0, -1.0, -3.0, -0.5]
    types = [3, 6, 1, 1, 1, 1, 1, 1, 3]
    assert spm_merges(tokens, scores, types) == [("b", "c"), ("a", "b"), ("a", "bc"), ("ab", "c")]


def test_scores_missing(sp, sp_dir):
    # no scores: id order stands in (trained SentencePiece BPE scores fall with the id)
    write_spm_gguf(sp_dir / "noscores.gguf", sp, scores=False)
    tok = Tokenizer.from_gguf(sp_dir / "noscores.gguf")
    assert tok.encode("hello world", add_special_tokens=False) == sp.encode("hello world")
    assert len(spm_types(sp)) == sp.get_piece_size()


def test_builds_fast(sp_dir, sp, tok):
    t0 = time.perf_counter()
    Tokenizer.from_gguf(sp_dir / "t.gguf")
    assert time.perf_counter() - t0 < 1.0
