"""qwen3next (Gated DeltaNet hybrid) at TP=2 on CPU ranks (real processes over HostComm)
equals TP=1: each rank keeps its own linear heads' states (k heads split whole, their v heads
with them), the full layers split as llama's, the experts by width; every step's logits
within float32 reordering of TP=1's and the same greedy ids under the golden rule. TP=3
exceeds tiny-qwen3next's 2 key heads and is refused by name (tests/model/test_qwen3next.py);
tiny-qwen3next-k3 (3 key heads, 6/3 attention heads) splits at TP=2 (2 + 1 key heads) and
TP=3."""
from __future__ import annotations

import pytest
from test_moe_tp import tp_equals_tp1


def test_tiny_tp2_equals_tp1():
    tp_equals_tp1("tiny-qwen3next", 2)


@pytest.mark.parametrize("tp", [2, 3])
def test_three_key_heads_split(tp):
    tp_equals_tp1("tiny-qwen3next-k3", tp)


def test_checkpoint_tp2_equals_tp1():
    """The tiny HF checkpoint (tools/refs/next_checkpoint.py, zero-centred norms)."""
    from tools.refs import next_checkpoint as nc
    tp_equals_tp1(str(nc.build_once()[0]), 2)


def test_gguf_q8_0_tp2_equals_tp1():
    """The GGUF (llama.cpp's names, Q8_0: tools/refs/next_gguf.py) split over two ranks."""
    from tools.refs import next_gguf as ng
    tp_equals_tp1(str(ng.build_once("Q8_0")[0]), 2)


def test_gguf_qwen35moe_q8_0_tp2_equals_tp1(monkeypatch):
    """The qwen35moe GGUF (v heads tiled, ssm_beta / ssm_alpha apart), Q8_0: its linear
    layers' rebuilt in_proj_qkvz and in_proj_ba kept as blocks, split by k heads over two
    ranks. On float32 x (TF_Q8_0_X=float, inherited by the ranks): on q8_0 x the all-reduce's
    other summation order turns a q8_0 rounding here (test_moe_tp's MLA test says why)."""
    monkeypatch.setenv("TF_Q8_0_X", "float")
    from tools.refs import next_gguf as ng
    tp_equals_tp1(str(ng.build_once("Q8_0", "qwen35moe")[0]), 2)
