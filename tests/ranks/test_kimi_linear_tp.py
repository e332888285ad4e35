"""kimilinear (KDA hybrid with NoPE latent attention) at TP=2 and TP=3 on CPU ranks (real
processes over HostComm) equals TP=1: each rank keeps its own KDA heads' states and conv
windows, the latent attention's heads split with its rows replicated, the experts by width;
every step's logits within float32 reordering of TP=1's and the same greedy ids under the
golden rule (tests/ranks/test_moe_tp.py's check). tiny-kimilinear's 2 KDA heads split 1 + 1;
tiny-kimilinear-h3's 3 split 2 + 1 and 1 + 1 + 1; the tiny checkpoint (HF folder and GGUF)
at TP=2 and TP=3."""
from __future__ import annotations

import pytest
from test_moe_tp import tp_equals_tp1


def test_tiny_tp2_equals_tp1():
    tp_equals_tp1("tiny-kimilinear", 2)


@pytest.mark.parametrize("tp", [2, 3])
def test_three_kda_heads_split(tp):
    tp_equals_tp1("tiny-kimilinear-h3", tp)


@pytest.mark.parametrize("tp", [2, 3])
def test_checkpoint_tp_equals_tp1(tp):
    """The tiny HF checkpoint (tools/refs/kimi_checkpoint.py): 4 KDA and 4 attention heads
    split 2 + 2 / 2 + 1 + 1, the experts' 96 columns 3 units of 32."""
    from tools.refs import kimi_checkpoint as kc
    tp_equals_tp1(str(kc.build_once()[0]), tp)


@pytest.mark.parametrize("tp", [2, 3])
def test_gguf_tp_equals_tp1(tp):
    """The same weights as GGUF kimi-linear (llama.cpp's names and layouts)."""
    from tools.refs import kimi_checkpoint as kc
    tp_equals_tp1(str(kc.build_gguf_once()[0]), tp)


def test_tp3_refused_by_name():
    """TP=3 exceeds tiny-kimilinear's 2 KDA heads: refused naming them."""
    from server.engine.build import open_model
    with pytest.raises(ValueError, match="linear-attention key heads"):
        open_model("dummy:tiny-kimilinear", tp=3, rank=0, progress=False)


@pytest.mark.parametrize("tp", [2])
def test_q8_0_copy_tp_equals_tp1(tp, tmp_path):
    """The GGUF's Q8_0 copy (kimi_checkpoint.q8_0_copy): the KDA layers' q | k | v kept as
    Q8_0 blocks, each rank's heads' rows taken as bytes (TP=3 would cut the dense MLP's
    128 columns out of whole blocks: refused at load, by name)."""
    from tools.refs import kimi_checkpoint as kc
    path = tmp_path / "kimi-linear-tiny-Q8_0.gguf"
    kc.q8_0_copy(kc.build_gguf_once()[0], path)
    tp_equals_tp1(str(path), tp)
