"""Blocks through the TP split: each rank's matrices, dequantized, are the float32 split's
(column-parallel = take_rows, row-parallel = take_cols on whole blocks); a split that would
cut a block is refused at load, naming the tensor and the shapes."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import quantize

from server.engine.prepare import shard_weights
from server.shapes.shard import shard_for
from server.shapes.spec import SHAPES
from server.engine.weights import WeightsError, dummy_tensor, tensor_shapes
from kernels.blocks import Blocks
from server.engine.weights.permute import from_gguf, to_gguf


def as_blocks(x: np.ndarray, kind: str) -> Blocks:
    q = quantize(x.astype(np.float32), GGMLQuantizationType[kind])
    return Blocks(kind, x.shape[0], x.shape[1], np.ascontiguousarray(q.reshape(x.shape[0], -1)))


def model(spec, kind):
    dense, blocks = {}, {}
    for n in tensor_shapes(spec):
        x = dummy_tensor(spec, n, 0)
        if x.ndim == 2:
            b = as_blocks(x, kind)
            blocks[n], dense[n] = b, b.dequantize()
        else:
            blocks[n] = dense[n] = x
    return dense, blocks


def flat(sw):
    out = [sw.embed, sw.lm_head, sw.norm]
    for L in sw.layers:
        out += [L.attn_norm, L.wqkv, L.wo, L.mlp_norm, L.wgu, L.wdown]
    return [a.dequantize() if isinstance(a, Blocks) else a for a in out]


@pytest.mark.parametrize("tp", [1, 2, 3])
@pytest.mark.parametrize("kind", ["Q8_0", "Q4_1"])
def test_blocks_split_is_the_float_split(tp, kind):
    spec = replace(SHAPES["tiny"], n_heads=6, n_kv_heads=3, d_ff=192)   # 192 = 3 x 2 x 32
    dense, blocks = model(spec, kind)
    for rank in range(tp):
        shard = shard_for(spec.n_heads, spec.n_kv_heads, spec.d_ff, tp, rank)
        want = flat(shard_weights(spec, dense.__getitem__, shard, out_in=True))
        kept = shard_weights(spec, blocks.__getitem__, shard, out_in=True, keep_blocks=True)
        assert isinstance(kept.layers[0].wqkv, Blocks) and isinstance(kept.layers[0].wdown, Blocks)
        for a, b in zip(flat(kept), want):
            assert np.array_equal(a, b)


def test_a_split_that_cuts_blocks_is_refused_naming_the_shapes():
    spec = replace(SHAPES["tiny"], d_ff=96)            # tp=2: 48 columns of down each, blocks of 32
    _, blocks = model(spec, "Q8_0")
    shard = shard_for(spec.n_heads, spec.n_kv_heads, spec.d_ff, 2, 0)
    with pytest.raises(WeightsError, match=r"down_proj.*\[0, 48\) of a 64x96 Q8_0"):
        shard_weights(spec, blocks.__getitem__, shard, keep_blocks=True)


def test_row_permutation_of_blocks_is_the_float_permutation():
    x = np.random.default_rng(1).standard_normal((9 * 64, 64)).astype(np.float32)
    b = as_blocks(to_gguf(x, 9), "Q4_1")
    assert np.array_equal(from_gguf(b, 9).dequantize(), from_gguf(b.dequantize(), 9))


def test_a_backend_without_blocks_gets_them_dequantized_with_one_warning(caplog):
    """keep_blocks=False (the GPU until its kernels over blocks land): the float split, and
    one warning naming the cost."""
    spec = replace(SHAPES["tiny"], n_heads=6, n_kv_heads=3, d_ff=192)
    dense, blocks = model(spec, "Q4_1")
    shard = shard_for(spec.n_heads, spec.n_kv_heads, spec.d_ff, 2, 1)
    with caplog.at_level("WARNING", logger="foldserve"):
        got = shard_weights(spec, blocks.__getitem__, shard, out_in=True, keep_blocks=False, why="for the test")
    want = shard_weights(spec, dense.__getitem__, shard, out_in=True)
    assert not any(isinstance(a, Blocks) for a in flat(got))
    for a, b in zip(flat(got), flat(want)):
        assert np.array_equal(a, b)
    said = [r.getMessage() for r in caplog.records if "dequantizing" in r.getMessage()]
    assert len(said) == 1 and "for the test" in said[0] and "MB" in said[0]
