"""The tiny Kimi-Linear HF folder served by `foldserve serve` (real processes on the CPU):
greedy replies equal the engine's own in-process continuation at TP=1 and TP=2 (and the
GGUF of the same weights at TP=2), n=2 choices
and concurrent requests alike, the prompt cache asked for, and n-gram drafts on (a refused
draft's KDA state rolled back by a replay). The check is tests/ranks/
test_qwen3next_serve.py's, run on this folder."""
from __future__ import annotations

import argparse

import pytest

from test_qwen3next_serve import test_serve_greedy_equals_in_process as serve_equals_in_process


@pytest.fixture(scope="module")
def folder():
    from tools.refs import kimi_checkpoint as kc
    return kc.build_once()[0]


@pytest.mark.parametrize("tp", [1, 2])
def test_serve_greedy_equals_in_process(folder, tp, group):
    serve_equals_in_process(folder, tp, group)


def test_serve_gguf_greedy_equals_in_process(group):
    """The GGUF (its tokenizer from the file's gpt2 keys) at TP=2."""
    from tools.refs import kimi_checkpoint as kc
    serve_equals_in_process(kc.build_gguf_once()[0], 2, group)


def test_drafts_on():
    from server.flags import draft_kind, drafts_for
    from server.shapes.spec import shape
    a = argparse.Namespace(draft=None, device="cpu", draft_tokens=8)
    drafts_for(a, shape("tiny-kimilinear"))
    assert draft_kind(a) == "ngram"
