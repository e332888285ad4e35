"""Tokenizer construction from a HF folder and from small GGUFs, and clear refusals."""
from __future__ import annotations

import gguf
import pytest

from server.text.gguf_meta import GGUFMetadataError, read_metadata
from server.text.pretok import UnknownPreTokenizer
from server.text.tokenizer import Tokenizer, TokenizerError

from .tiny import write_gguf, write_hf_dir

CHATML = "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}"


def test_hf_dir_reads_tokens_template_and_stops(tmp_path):
    ref = write_hf_dir(tmp_path, chat_template=CHATML)
    tok = Tokenizer.from_hf_dir(tmp_path)
    assert tok.bos_id == 0 and tok.bos_token == "<s>"
    assert tok.eos_id == 1 and tok.eos_token == "</s>"
    assert tok.eos_ids == {1, 2}  # eos, generation_config's list, and <|im_end|>
    assert tok.chat_template == CHATML
    ids = tok.encode("hello world")
    assert ids[0] == 0 and ids == ref.encode("hello world").ids  # the tokenizer.json adds BOS
    assert tok.encode("hello world", add_special_tokens=False) == ids[1:]
    assert tok.decode(ids, skip_special_tokens=True) == "hello world"
    assert tok.encode("<|im_end|>", add_special_tokens=False) == [2]


def test_hf_dir_template_sources(tmp_path):
    named = [{"name": "tool_use", "template": "T"}, {"name": "default", "template": "D"}]
    write_hf_dir(tmp_path, chat_template=named)
    assert Tokenizer.from_hf_dir(tmp_path).chat_template == "D"
    write_hf_dir(tmp_path, chat_template="in config", template_file="in file")
    assert Tokenizer.from_hf_dir(tmp_path).chat_template == "in file"


def test_hf_dir_without_tokenizer_json(tmp_path):
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        Tokenizer.from_hf_dir(tmp_path)


def test_small_gguf_matches_its_source_tokenizer(tmp_path):
    ref = write_gguf(tmp_path / "t.gguf", pre="gpt2", add_bos=True)
    tok = Tokenizer.from_gguf(tmp_path / "t.gguf")
    for text in ["hello world", "the world says hello", "12 + 34 = 46", "unseen wörds 🙂"]:
        assert tok.encode(text) == [0] + ref.encode(text).ids  # add_bos_token: True
        assert tok.encode(text, add_special_tokens=False) == ref.encode(text).ids
        assert tok.decode(tok.encode(text), skip_special_tokens=True) == text
    assert tok.eos_ids == {1, 2}


@pytest.mark.parametrize("model", ["bert", "t5", "rwkv"])
def test_refuses_other_tokenizer_models(tmp_path, model):
    write_gguf(tmp_path / "t.gguf", model=model)
    with pytest.raises(TokenizerError, match=f"tokenizer.ggml.model = '{model}'.*from_hf_dir"):
        Tokenizer.from_gguf(tmp_path / "t.gguf")


def test_refuses_unknown_pre_tokenizer(tmp_path):
    write_gguf(tmp_path / "t.gguf", pre="mystery-bpe")
    with pytest.raises(UnknownPreTokenizer, match="'mystery-bpe'.*known:.*smollm"):
        Tokenizer.from_gguf(tmp_path / "t.gguf")


@pytest.mark.parametrize("pre", ["llama-bpe", "qwen2", "smollm", "gpt2", None])
def test_known_pre_tokenizers_build_and_round_trip(tmp_path, pre):
    write_gguf(tmp_path / "t.gguf", pre=pre)
    tok = Tokenizer.from_gguf(tmp_path / "t.gguf")
    text = "Hello world, 12345 says  hi\n\n"
    assert tok.decode(tok.encode(text, add_special_tokens=False)) == text


def test_metadata_reader_agrees_with_gguf_reader(tmp_path):
    extra = {"general.i": -7, "general.f": 0.5, "general.b": True, "general.s": "東京",
             "general.ai": [1, 2, 3], "general.as": ["a", "b"], "other.skipped": 3}
    write_gguf(tmp_path / "t.gguf", extra=extra)
    ours = read_metadata(tmp_path / "t.gguf")
    theirs = gguf.GGUFReader(str(tmp_path / "t.gguf")).fields
    assert "other.skipped" not in ours
    for key, value in ours.items():
        assert value == theirs[key].contents(), key
    assert ours["general.s"] == "東京" and ours["general.ai"] == [1, 2, 3]


def test_metadata_reader_refuses_other_files(tmp_path):
    (tmp_path / "x.bin").write_bytes(b"NOPE" + bytes(20))
    with pytest.raises(GGUFMetadataError, match="not a GGUF"):
        read_metadata(tmp_path / "x.bin")


GPT4O_TEXTS = ["Hello world, 12345 says  hi\n\n", "I'M here: they'LL see DON'T", "camelCaseHTTPServer",
               "x/y\n\n/z  ", "naïve café — Ünïcödé 東京 123456", "a\r\nb  \tc", "  leading", "don't stop"]


def test_gpt4o_pre_tokenizer_splits_as_its_regex():
    """gpt-oss's `gpt-4o` pre-tokenizer: the HF Split over its regex cuts text exactly as the
    `regex` module's findall of the same pattern (the tiktoken o200k regex llama.cpp quotes)."""
    import regex
    from tokenizers import pre_tokenizers, Regex
    from server.text.pretok import GPT4O_REGEX
    split = pre_tokenizers.Split(Regex(GPT4O_REGEX), behavior="isolated", invert=False)
    for text in GPT4O_TEXTS:
        assert [w for w, _ in split.pre_tokenize_str(text)] == regex.findall(GPT4O_REGEX, text), text


def test_gpt4o_gguf_round_trips(tmp_path):
    write_gguf(tmp_path / "t.gguf", pre="gpt-4o")
    tok = Tokenizer.from_gguf(tmp_path / "t.gguf")
    for text in GPT4O_TEXTS:
        assert tok.decode(tok.encode(text, add_special_tokens=False)) == text
