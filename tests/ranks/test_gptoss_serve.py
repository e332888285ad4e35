"""gpt-oss served by `foldserve serve` (real processes on the CPU): the tiny checkpoint
(tools/refs/gptoss_checkpoint.py) as its MXFP4 GGUF and its HF folder, at TP=1 and (the
GGUF) TP=2 over ranks. /v1/completions' greedy tokens equal the engine's own greedy
continuation in-process (40 tokens past a 3-token prompt: the sliding window of 8 and the
streams' rings wrap several times); the plan keeps the window layers in rings and turns the
prompt cache (asked for by default) off, saying so; /v1/chat/completions answers."""
from __future__ import annotations

import httpx
import pytest

from serve_procs import in_process_greedy

PROMPT = "hello world says"
N = 40


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from tools.refs import gptoss_checkpoint as g
    d = tmp_path_factory.mktemp("gptoss-serve")
    spec = g.SPECS["gptoss-tiny"]
    g.write_hf(spec, d / "hf")
    return {"MXFP4": g.write_gguf(spec, d / "gptoss-tiny-MXFP4.gguf", "MXFP4"), "hf": d / "hf"}


@pytest.mark.parametrize("form, tp", [("MXFP4", 1), ("hf", 1), ("MXFP4", 2)])
def test_served_greedy_equals_the_engine(files, form, tp, group):
    path = files[form]
    want = in_process_greedy(path, PROMPT, N)[0]
    url, server = group.serve_model(path, tp, "--parallel", "2", timeout=180)
    r = httpx.post(url + "/v1/completions", timeout=180,
                   json={"prompt": PROMPT, "max_tokens": N, "temperature": 0, "ignore_eos": True,
                         "logprobs": 0, "skip_special_tokens": False})
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    # each token's text as the server shows it ("bytes:\\x9e" for a piece of a character),
    # and the whole text: the ids' own decoding
    got = [t for t in choice["logprobs"]["tokens"]]
    want_text = httpx.post(url + "/detokenize", json={"tokens": want}).json()["prompt"]
    assert len(got) == N and choice["text"] == want_text
    for tok, i in zip(got, want):
        one = httpx.post(url + "/detokenize", json={"tokens": [i]}).json()["prompt"]
        assert tok == one or tok.startswith("bytes:"), (tok, one)
    c = httpx.post(url + "/v1/chat/completions", timeout=180,
                   json={"messages": [{"role": "user", "content": "hello there"}],
                         "max_tokens": 4, "temperature": 0})
    assert c.status_code == 200, c.text
    assert c.json()["choices"][0]["message"]["role"] == "assistant"
    log = server.output
    assert "the 2 window layers' last 8 rows a stream" in log, log[-3000:]
    assert "no prompt cache: the window layers keep a stream's last rows only" in log
