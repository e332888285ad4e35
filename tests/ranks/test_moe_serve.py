"""A mixture-of-experts GGUF served by `foldserve serve` (real processes on the CPU):
/v1/completions and /v1/chat/completions answer, greedy replies equal the engine's own
greedy continuation of the same ids in-process, and TP=2 replies equal TP=1's."""
from __future__ import annotations

import sys
from pathlib import Path

import httpx
import pytest

from serve_procs import in_process_greedy

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))       # tests/ (model, text)

PROMPT = "hello world says"


@pytest.fixture(scope="module", params=["tiny-qwen3moe", "tiny-glm4moe"])
def moe_gguf(request, tmp_path_factory):
    import json
    from model.moe_files import spec_with_vocab, write_gguf
    from server.shapes.spec import shape
    from text.tiny import train_byte_bpe
    tok = train_byte_bpe()
    vocab = len(json.loads(tok.to_str())["model"]["vocab"])
    spec = spec_with_vocab(shape(request.param), vocab)
    path = tmp_path_factory.mktemp("moe-serve") / f"{request.param}-q8_0.gguf"
    return write_gguf(path, spec, "Q8_0", tokenizer=tok)


@pytest.mark.parametrize("tp", [1, 2])
def test_completions_and_chat_from_a_moe_gguf(moe_gguf, tp, group, monkeypatch):
    # float32 x for the TP=2 == TP=1 comparison (TF_Q8_0_X=float, the served ranks inherit
    # it): on q8_0 x the all-reduce's summation order can turn a q8_0 rounding (tiny-qwen3moe
    # does at TP=2; tests/ranks/test_moe_tp.py's MLA test says why)
    monkeypatch.setenv("TF_Q8_0_X", "float")
    n = 8
    want, tok = in_process_greedy(moe_gguf, PROMPT, n)
    url, server = group.serve_model(moe_gguf, tp, "--parallel", "2", "--prompt-cache-gib", "0")
    r = httpx.post(url + "/v1/completions", timeout=120,
                   json={"prompt": PROMPT, "max_tokens": n, "temperature": 0, "ignore_eos": True,
                         "logprobs": 0, "skip_special_tokens": False})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    from server.api.logprob_tokens import TokenTexts
    shown = TokenTexts(tok)                     # a piece of a character shows as `bytes:\xNN`
    want_tokens = [shown.legacy(i) for i in want]
    assert choice["logprobs"]["tokens"] == want_tokens
    assert choice["finish_reason"] == "length"
    c = httpx.post(url + "/v1/chat/completions", timeout=120,
                   json={"messages": [{"role": "user", "content": "hello there"}], "max_tokens": 4,
                         "temperature": 0})
    assert c.status_code == 200, c.text
    msg = c.json()["choices"][0]["message"]
    assert msg["role"] == "assistant" and isinstance(msg["content"], str)
    assert c.json()["usage"]["completion_tokens"] >= 1
