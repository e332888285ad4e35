"""Bodies the fuzz found that stopped the real server's engine for good (every later
request: 503 rank_lost, and the request itself could hang). Each now gets its reply and
the server stays healthy."""
from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("temperature", [1.7e-188, 1e-38, 1e-6])
def test_tiny_temperature_is_greedy_and_keeps_the_engine(paged, golden, temperature):
    """A positive temperature under float32's reach divided the logits
    into inf, the draw saw NaN probabilities and the engine thread stopped for good (every
    later request: 503 rank_lost). Such a temperature now samples greedily."""
    c = next(c for c in golden["cases"] if c["name"] == "capital")
    r = httpx.post(paged.url + "/v1/completions", timeout=60, json={
        "model": paged.model, "prompt": c["text"], "max_tokens": 16, "temperature": temperature,
        "top_k": 25, "min_p": 0.1, "top_p": 0.7, "seed": 1})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == c["greedy_text"]
    assert paged.health()["status"] == "ok"


def test_negative_seed_samples_and_keeps_the_engine(paged):
    """The API takes seeds in [-2**63, 2**64) as OpenAI does; numpy refused a negative one
    inside the engine thread at admission, the engine stopped, and the request itself was
    in neither the waiting nor the running list, so its client waited forever."""
    def reply(seed):
        r = httpx.post(paged.url + "/v1/completions", timeout=30, json={
            "model": paged.model, "prompt": "Once upon a time", "max_tokens": 8,
            "temperature": 0.9, "seed": seed, "ignore_eos": True})
        assert r.status_code == 200, r.text
        return r.json()["choices"][0]["text"]

    a = reply(-1)
    assert a and reply(-1) == a                      # same seed, same reply
    assert reply(2**64 - 1) == a                     # its 64-bit two's complement
    assert reply(-2**63) and paged.health()["status"] == "ok"
    paged.wait_idle()
