"""drafted == plain through `foldserve serve --tp 2` (and 3) on CPU ranks: the same requests with
"draft": false and with drafts give the same choices (text, token logprobs, finish
reasons), concurrently, on pages and on windows; /metrics counts the drafts (dummy:tiny on
a repetitive prompt, and the default model on an editing-style prompt). The tiny models'
servers run `--draft-row-cost 0` (every stream drafts as far as it may, as the in-process
tests' `serve` does: the most verify work; at the CPU's measured cost four concurrent
streams draft only what pays at the round's rate, server/drafts/pace.py)."""
from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from serve_procs import HOST, free_port, wait_health

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "drafts"))
from editing import editing_prompt  # noqa: E402

REP = [5, 6, 7, 8, 9, 10, 11, 12] * 4 + [5, 6, 7]


def bodies(prompt, n_tokens):
    return [dict(prompt=prompt, max_tokens=n_tokens, temperature=0, logprobs=2),
            dict(prompt=prompt, max_tokens=n_tokens, temperature=0.8, seed=4, logprobs=1),
            dict(prompt=prompt, max_tokens=n_tokens, temperature=0, frequency_penalty=0.4),
            dict(prompt=prompt, max_tokens=n_tokens, temperature=1.0, top_p=0.9, seed=9)]


def ask_all(url, reqs):
    with ThreadPoolExecutor(len(reqs)) as ex:
        rs = list(ex.map(lambda b: httpx.post(url + "/v1/completions", json=b, timeout=300), reqs))
    for r in rs:
        assert r.status_code == 200, r.text
    return [[{k: c[k] for k in ("text", "logprobs", "finish_reason")} for c in r.json()["choices"]]
            for r in rs]


def counter(url, name) -> float:
    for line in httpx.get(url + "/metrics").text.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exposed")


def check(url, prompt, n_tokens):
    reqs = bodies(prompt, n_tokens)
    plain = ask_all(url, [dict(b, draft=False) for b in reqs])
    assert counter(url, "vllm:spec_decode_num_draft_tokens_total") == 0
    drafted = ask_all(url, reqs)
    assert drafted == plain
    accepted = counter(url, "vllm:spec_decode_num_accepted_tokens_total")
    assert accepted > 0 and accepted == counter(url, "foldserve:spec_decode_num_accepted_tokens_total")
    assert counter(url, "vllm:spec_decode_num_draft_tokens_total") >= accepted


@pytest.mark.parametrize("model, pages, tp", [("dummy:tiny", "on", 2), ("dummy:tiny", "off", 2),
                                              ("dummy:tiny", "on", 3),
                                              ("dummy:tiny-qwen3moe", "on", 2),
                                              ("dummy:tiny-glm4moe", "off", 2)])
def test_tp_tiny_drafted_equals_plain(model, pages, tp, group):
    port = free_port()
    url = f"http://{HOST}:{port}"
    server = group.start(["--tp", str(tp), "--port", str(port), "--model", model,
                          "--context", "256", "--parallel", "4", "--join-timeout", "20",
                          "--draft", "ngram", "--draft-tokens", "6", "--draft-row-cost", "0"],
                         env={"TF_KV_PAGES": pages}, name="rank0")
    wait_health(url, [server], timeout=120)
    check(url, REP, 40)


@pytest.mark.slow
def test_tp2_default_model_editing_prompt(group):
    from server.engine.locate import ModelNotFound, resolve
    try:
        resolve(None)
    except ModelNotFound as e:
        pytest.skip(str(e))
    port = free_port()
    url = f"http://{HOST}:{port}"
    server = group.start(["--tp", "2", "--port", str(port), "--context", "1024",
                          "--parallel", "4", "--prompt-cache-gib", "0", "--join-timeout", "60"],
                         name="rank0")
    wait_health(url, [server], timeout=180)
    check(url, editing_prompt(1200), 80)


@pytest.mark.parametrize("model, pages, tp", [("dummy:tiny-glm4moe-mtp", "on", 2),
                                              ("dummy:tiny-deepseek3-mtp", "off", 2),
                                              ("dummy:tiny-deepseek3-mtp", "on", 3),
                                              ("dummy:tiny-glm4moe-mtp", "off", 3),
                                              ("dummy:tiny-glm4moe-mtp", "on", 1)])
def test_mtp_drafted_equals_plain(model, pages, tp, group):
    """--draft mtp (the NextN layer of the file, split over the ranks as the trunk's layers):
    the same choices with "draft": false and with MTP drafts; /metrics counts the drafts.
    The tiny NextN layers' weights are random, so few drafts are taken: the count is read,
    not asserted (tests/drafts/test_drafts_mtp.py sees taken ones verified too)."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    server = group.start(["--tp", str(tp), "--port", str(port), "--model", model,
                          "--context", "256", "--parallel", "4", "--join-timeout", "20",
                          "--draft", "mtp", "--draft-tokens", "4", "--draft-row-cost", "0"],
                         env={"TF_KV_PAGES": pages}, name="rank0")
    wait_health(url, [server], timeout=120)
    reqs = bodies(REP, 32)
    plain = ask_all(url, [dict(b, draft=False) for b in reqs])
    assert counter(url, "vllm:spec_decode_num_draft_tokens_total") == 0
    drafted = ask_all(url, reqs)
    assert drafted == plain
    n = counter(url, "vllm:spec_decode_num_draft_tokens_total")
    accepted = counter(url, "vllm:spec_decode_num_accepted_tokens_total")
    assert n > 0 and n == counter(url, "foldserve:spec_decode_num_draft_tokens_total")
    assert 0 <= accepted <= n
    print(f"{model} tp={tp}: {accepted:g} of {n:g} MTP drafted tokens accepted")
