"""The GGUF tokenizer reproduces the reference (transformers) prompt ids exactly."""
from __future__ import annotations

import time

from hypothesis import given, settings

from server.text.tokenizer import Tokenizer

from .cases import TEXT


def test_golden_prompt_ids(smollm, golden_cases):
    for case in golden_cases:
        assert smollm.encode(case["text"]) == case["prompt_ids"], case["name"]


def test_golden_texts_round_trip(smollm, golden_cases):
    for case in golden_cases:
        assert smollm.decode(smollm.encode(case["text"])) == case["text"], case["name"]


def test_builds_fast(smollm_gguf):
    t0 = time.perf_counter()
    Tokenizer.from_gguf(smollm_gguf)
    assert time.perf_counter() - t0 < 2.0


def test_model_facts(smollm):
    # SmolLM2: bos <|im_start|>=1, eos <|im_end|>=2, and <|endoftext|>=0 also ends a reply
    assert smollm.bos_id == 1 and smollm.eos_id == 2
    assert smollm.eos_ids == {0, 2}
    assert smollm.bos_token == "<|im_start|>" and smollm.eos_token == "<|im_end|>"
    assert smollm.vocab_size == 49152
    assert smollm.chat_template and "<|im_start|>" in smollm.chat_template


def test_no_bos_added_when_model_says_not(smollm):
    # add_bos_token is False in this GGUF: encoding adds nothing either way
    assert smollm.encode("Hi", add_special_tokens=True) == smollm.encode("Hi", add_special_tokens=False)


def test_control_tokens_are_single_ids(smollm):
    assert smollm.encode("<|im_start|>user<|im_end|>") == [1, 4093, 2]
    assert smollm.decode([1, 4093, 2]) == "<|im_start|>user<|im_end|>"
    assert smollm.decode([1, 4093, 2], skip_special_tokens=True) == "user"


def test_digits_split_one_by_one(smollm):
    # the smollm pre-tokenizer isolates every digit: "2024" is four tokens
    assert [smollm.token_text(i) for i in smollm.encode("2024")] == ["2", "0", "2", "4"]


def test_token_text(smollm):
    assert smollm.token_text(2) == "<|im_end|>"
    assert smollm.token_text(smollm.encode(" Paris")[0]) == " Paris"


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_round_trip_any_text(smollm, text):
    assert smollm.decode(smollm.encode(text)) == text
