"""The tiny Qwen3-Next HF folder served by `foldserve serve` (real processes on the CPU), with
a prompt cache of snapshot slots and pages (said at startup): greedy replies equal the
engine's own in-process continuation, at TP=1 and TP=2; n=2 choices and concurrent requests
of a growing conversation answer the same; a three-turn conversation resumes each turn from
the cache (each rank restoring its own heads' states from the slot ids rank 0 names) and
answers what a cold engine answers."""
from __future__ import annotations

import concurrent.futures as cf

import httpx
import pytest

from serve_procs import in_process_greedy

TURNS = ["the cat sat on the mat", "the cat sat on the mat and then the dog",
         "the cat sat on the mat and then the dog ran home to the farm",
         # repeats: n-gram drafts are proposed here (a refused one rolls the state back)
         "ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd ab cd"]


@pytest.fixture(scope="module")
def folder():
    from tools.refs import next_checkpoint as nc
    return nc.build_once()[0]


def in_process(path, text: str, n: int) -> str:
    """The engine's own greedy continuation, decoded (the reply's text)."""
    out, tok = in_process_greedy(path, text, n)
    assert len(out) == n
    return tok.decode(out)


@pytest.mark.parametrize("tp", [1, 2])
def test_serve_greedy_equals_in_process(folder, tp, group):
    n = 16
    want = {t: in_process(folder, t, n) for t in TURNS}
    # --draft-row-cost 0: every stream drafts as far as its n-grams let it (n-gram drafts on,
    # the family's default; this random model's replies rarely repeat, so few are made: the
    # rollback itself is proven in process, tests/drafts/test_drafts_recurrent.py)
    url, server = group.serve_model(folder, tp, "--parallel", "3", "--prompt-cache-gib", "0.01",
                                    "--draft-row-cost", "0")

    def ask(text):
        r = httpx.post(url + "/v1/completions", timeout=120,
                       json={"prompt": text, "max_tokens": n, "temperature": 0, "n": 2,
                             "ignore_eos": True, "skip_special_tokens": False})
        assert r.status_code == 200, r.text
        assert r.json()["usage"]["completion_tokens"] == 2 * n
        return [c["text"] for c in r.json()["choices"]]

    with cf.ThreadPoolExecutor(4) as ex:                 # the turns at once, twice
        got = list(ex.map(ask, TURNS + TURNS))
    for text, choices in zip(TURNS + TURNS, got):
        assert choices == [want[text], want[text]], text
    out = server.output                  # the plan's notes, said at startup
    assert "snapshot slots of" in out and "drafting off" not in out, out[-2000:]


def in_process_ids(path, ids, n: int) -> list:
    from server.engine.build import open_model
    from server.generate import generate
    from server.requests import SamplingParams
    opened = open_model(str(path), progress=False)
    return list(generate(opened, list(ids), SamplingParams(max_tokens=n, temperature=0.0,
                                                           ignore_eos=True)))


def test_conversation_resumed_at_tp2(folder, group):
    """Three turns as token ids (each prompt the last one, its reply and more words): turns 2
    and 3 resume past their prefix (cached_tokens > 0) on two ranks, and every reply equals
    the in-process cold continuation."""
    n, more = 6, [[100, 101, 102, 103, 104], [200, 201, 202, 203, 204, 205, 206]]
    url, server = group.serve_model(folder, 2, "--parallel", "2", "--page-rows", "4",
                                    "--prompt-cache-gib", "0.01")
    prompt, cached = [5, 17, 99, 3, 250, 41, 7, 7, 300, 12, 64], []
    for turn in range(3):
        want = in_process_ids(folder, prompt, n)
        r = httpx.post(url + "/v1/completions", timeout=120,
                       json={"prompt": prompt, "max_tokens": n, "temperature": 0,
                             "ignore_eos": True, "skip_special_tokens": False})
        assert r.status_code == 200, r.text
        from server.engine.build import open_model
        tok = open_model(str(folder), progress=False).tokenizer
        assert r.json()["choices"][0]["text"] == tok.decode(want), turn
        cached.append(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
        if turn < 2:
            prompt = prompt + want + more[turn]
    assert cached[0] == 0 and cached[1] > 0 and cached[2] > cached[1], cached


def test_drafts_for_a_recurrent_family():
    """A recurrent family drafts n-grams (on the CPU by default): a refused draft's rows
    are rolled back by a replay (tests/drafts/test_drafts_recurrent.py). One that pools
    indexer keys (GLM-5.3-Flash) has no replay yet: drafting defaults off there, and asked
    for by name it is refused."""
    import argparse
    from server.flags import draft_kind, drafts_for
    from server.shapes.spec import UnsupportedModel, shape
    a = argparse.Namespace(draft=None, device="cpu", draft_tokens=8)
    drafts_for(a, shape("tiny-qwen3next"))
    assert draft_kind(a) == "ngram"
    b = argparse.Namespace(draft=None, device="cpu", draft_tokens=8)
    drafts_for(b, shape("glm-5.3-flash"))
    assert draft_kind(b) == "off"
    with pytest.raises(UnsupportedModel, match="--draft ngram: .*cannot be rolled back"):
        drafts_for(argparse.Namespace(draft="ngram", device="cpu"), shape("glm-5.3-flash"))
