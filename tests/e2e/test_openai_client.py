"""The `openai` Python client against a real server with the real model: completions and
chat, whole and streamed, greedy replies equal to the golden file, usage right."""
from __future__ import annotations

import openai
import pytest

pytestmark = pytest.mark.slow


def case(golden, name: str) -> dict:
    return next(c for c in golden["cases"] if c["name"] == name)


def client_for(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0, timeout=60)


CHAT_HELLO = [
    {"role": "system", "content": "You are a helpful AI assistant named SmolLM, trained by Hugging Face"},
    {"role": "user", "content": "Hello! Who are you?"},
]


def test_completion_greedy_equals_golden(either, golden):
    c = case(golden, "capital")
    client = client_for(either)
    r = client.completions.create(model=either.model, prompt=c["text"], max_tokens=16,
                                  temperature=0)
    assert r.choices[0].text == " Paris.\n\nThe answer is: 2018-01" == c["greedy_text"]
    assert r.choices[0].finish_reason == "length"
    assert r.usage.prompt_tokens == len(c["prompt_ids"]) == 5
    assert r.usage.completion_tokens == 16
    assert r.usage.total_tokens == 21

    # the same prompt as token ids gives the same reply
    r = client.completions.create(model=either.model, prompt=c["prompt_ids"], max_tokens=16,
                                  temperature=0, logprobs=0)
    assert r.choices[0].text == c["greedy_text"]
    assert len(r.choices[0].logprobs.tokens) == r.usage.completion_tokens == 16
    assert "".join(r.choices[0].logprobs.tokens) == c["greedy_text"]


def test_completion_stream_with_usage(either, golden):
    c = case(golden, "count")
    n = c["exact_prefix"]
    client = client_for(either)
    chunks = list(client.completions.create(
        model=either.model, prompt=c["text"], max_tokens=n, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    text_chunks = [ch for ch in chunks if ch.choices]
    assert "".join(ch.choices[0].text for ch in text_chunks) == c["greedy_text"]
    assert text_chunks[-1].choices[0].finish_reason == "length"
    assert all(ch.usage is None for ch in chunks[:-1])
    last = chunks[-1]
    assert last.choices == []
    assert last.usage.prompt_tokens == len(c["prompt_ids"])
    assert last.usage.completion_tokens == n
    assert last.usage.total_tokens == len(c["prompt_ids"]) + n


def test_chat_greedy_equals_golden(either, golden):
    c = case(golden, "chat-hello")
    assert c["text"].startswith("<|im_start|>system\n" + CHAT_HELLO[0]["content"])
    want = c["greedy_text"].removesuffix("<|im_end|>")
    assert want != c["greedy_text"] and c["exact_prefix"] == len(c["greedy_ids"])
    client = client_for(either)
    r = client.chat.completions.create(model=either.model, messages=CHAT_HELLO, max_tokens=64,
                                       temperature=0)
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == want
    assert r.choices[0].finish_reason == "stop"
    assert r.usage.prompt_tokens == len(c["prompt_ids"]) == 36
    # generated tokens, the <|im_end|> that ended the reply included (as vLLM counts)
    assert r.usage.completion_tokens == len(c["greedy_ids"]) == 22
    assert r.usage.total_tokens == 58


def test_chat_stream_with_usage(either, golden):
    c = case(golden, "chat-hello")
    client = client_for(either)
    chunks = list(client.chat.completions.create(
        model=either.model, messages=CHAT_HELLO, max_tokens=64, temperature=0, stream=True,
        stream_options={"include_usage": True}))
    with_choices = [ch for ch in chunks if ch.choices]
    assert with_choices[0].choices[0].delta.role == "assistant"
    text = "".join(ch.choices[0].delta.content or "" for ch in with_choices)
    assert text == c["greedy_text"].removesuffix("<|im_end|>")
    assert with_choices[-1].choices[0].finish_reason == "stop"
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.prompt_tokens == len(c["prompt_ids"])
    assert last.usage.completion_tokens == len(c["greedy_ids"])


def test_chat_max_tokens_cuts_with_length(paged, golden):
    c = case(golden, "chat-hello")
    client = client_for(paged)
    r = client.chat.completions.create(model=paged.model, messages=CHAT_HELLO, max_tokens=5,
                                       temperature=0)
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5
    assert c["greedy_text"].startswith(r.choices[0].message.content)
    assert r.choices[0].message.content  # "Hello! I'm" or so: five tokens of the golden reply


def test_models_and_errors_through_the_client(paged):
    client = client_for(paged)
    assert [m.id for m in client.models.list().data] == [paged.model]
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=paged.model, prompt="x " * 600, max_tokens=600)
    assert e.value.body["code"] == "context_length_exceeded"
    assert "maximum context length is 1024 tokens" in e.value.body["message"]
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="not-" + paged.model, prompt="x", max_tokens=1)
