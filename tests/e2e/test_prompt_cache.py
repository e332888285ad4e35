"""Resumed equals fresh: the second turn of a chat resumes from the prompt cache (the first
turn's prompt and reply rows kept) and its greedy reply equals the same request on a
server that keeps nothing (--prompt-cache-gib 0), byte for byte. On pages the kept pages
are shared; on windows the prefix is copied back into the stream's window (CopyStep)."""
from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.slow

SYSTEM = {"role": "system", "content": "You are a helpful AI assistant named SmolLM, trained by Hugging Face"}
CONVERSATIONS = [
    [SYSTEM, {"role": "user", "content": "Name three colours of the rainbow."}],
    [{"role": "system", "content": "You answer in one sentence."},
     {"role": "user", "content": "Why is the sky blue? Explain it to a child who asks a lot "
                                 "of questions about light, air and the sun."}],
]
FOLLOW_UPS = ["And three fruits?", "Now say it in other words."]


def chat(server, messages, max_tokens: int, **extra) -> dict:
    r = httpx.post(server.url + "/v1/chat/completions", timeout=120, json={
        "model": server.model, "messages": messages, "max_tokens": max_tokens,
        "temperature": 0, **extra})
    assert r.status_code == 200, r.text
    return r.json()


def complete(server, prompt, max_tokens: int) -> dict:
    r = httpx.post(server.url + "/v1/completions", timeout=120, json={
        "model": server.model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
        "ignore_eos": True})
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("conv", range(len(CONVERSATIONS)))
def test_second_turn_resumed_equals_cold(either, cold, conv):
    first = CONVERSATIONS[conv]
    one = chat(either, first, 16)
    reply = one["choices"][0]["message"]["content"]
    assert reply
    second = first + [{"role": "assistant", "content": reply},
                      {"role": "user", "content": FOLLOW_UPS[conv]}]

    warm = chat(either, second, 16)
    fresh = chat(cold, second, 16)
    cached = warm["usage"]["prompt_tokens_details"]["cached_tokens"]
    # at least the first turn's prompt, in whole pages of 16 rows
    assert cached >= one["usage"]["prompt_tokens"] // 16 * 16 > 0, warm["usage"]
    assert cached < warm["usage"]["prompt_tokens"]        # at least one token prefilled
    assert fresh["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert warm["usage"]["prompt_tokens"] == fresh["usage"]["prompt_tokens"]
    assert warm["choices"][0]["message"]["content"] == fresh["choices"][0]["message"]["content"]
    assert warm["usage"]["completion_tokens"] == fresh["usage"]["completion_tokens"]
    h = either.wait_idle()
    assert h["pages_kept"] > 0


def test_resumed_completion_across_many_pages(either, cold):
    """A long prompt, then the same prompt + its reply + more text: the resumed stream
    starts writing rows mid-window, several pages in."""
    base = ("In the beginning the clockmaker built a small clock of brass and glass. " * 8).strip()
    one = complete(either, base, 20)
    longer = base + one["choices"][0]["text"] + " Years later, the clockmaker"
    warm = complete(either, longer, 16)
    fresh = complete(cold, longer, 16)
    assert warm["usage"]["prompt_tokens_details"]["cached_tokens"] >= 64
    assert warm["choices"][0]["text"] == fresh["choices"][0]["text"]
    either.wait_idle()
