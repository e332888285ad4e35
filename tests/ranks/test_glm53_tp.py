"""glm5next (GLM-5.3-Flash's family) at TP=2 on CPU ranks (real processes over HostComm)
equals TP=1: the KDA heads split (each rank keeps its own heads' states), the sparse latent
attention's heads split with its latent rows, pooled keys and the indexer's choice
replicated (every rank computes them from the same all-reduced streams), the mHC mix
replicated, the experts by width; every step's logits within float32 reordering of TP=1's
and the same greedy ids under the golden rule (tests/ranks/test_moe_tp.py's check). The
prompt and steps (16 + 12 rows) run past the dense pass (19 rows at index_topk 16, kpool 4)."""
from __future__ import annotations

import pytest
from test_moe_tp import tp_equals_tp1


def test_checkpoint_tp2_equals_tp1():
    """The tiny HF checkpoint (tools/refs/glm53_checkpoint.py): 4 KDA heads 2 + 2, 4 latent
    heads 2 + 2, experts of 96 columns 64 + 32."""
    from tools.refs import glm53_checkpoint as gc
    tp_equals_tp1(str(gc.build_once()[0]), 2)


def test_checkpoint_tp3_equals_tp1():
    """TP=3: 4 KDA heads 2 + 1 + 1, 4 latent heads 2 + 1 + 1, experts of 96 columns 32 + 32 + 32."""
    from tools.refs import glm53_checkpoint as gc
    tp_equals_tp1(str(gc.build_once()[0]), 3)


@pytest.mark.parametrize("tp", [2])
def test_q8_0_copy_tp_equals_tp1(tp, tmp_path, monkeypatch):
    """The GGUF's Q8_0 copy (tools/refs/kimi_checkpoint.q8_0_copy): the KDA layers' q | k | v
    kept as Q8_0 blocks, each rank's heads' rows taken as bytes (TP=3 would cut the dense MLP's
    128 columns out of whole blocks: refused at load, by name). On float32 x (TF_Q8_0_X=float,
    inherited by the ranks): a row-parallel product's partial sums meet in the all-reduce in
    another order than TP=1's one chain, and on q8_0 x (the default) one ulp of that can turn
    a q8_0 rounding of the next product's input (tests/ranks/test_moe_tp.py's MLA test says
    why; here it does, at TP=2: step 0's logits 0.05 apart)."""
    monkeypatch.setenv("TF_Q8_0_X", "float")
    from tools.refs import glm53_checkpoint as gc
    from tools.refs.kimi_checkpoint import q8_0_copy
    path = tmp_path / "glm53-tiny-Q8_0.gguf"
    q8_0_copy(gc.build_gguf_once()[0], path)
    tp_equals_tp1(str(path), tp)
