"""prepare.weight_bytes: a shard's weights as held, by kind (GGUF blocks as stored)."""
from __future__ import annotations

import numpy as np

from server.engine.model import LayerWeights, ShardWeights
from server.engine.prepare import describe_weight_bytes, weight_bytes
from kernels.blocks import Blocks


def test_weight_bytes_counts_blocks_as_stored_and_each_array_once():
    q = Blocks("Q4_K", 8, 256, np.zeros((8, 144), dtype=np.uint8))
    v = Blocks("Q6_K", 8, 256, np.zeros((8, 210), dtype=np.uint8))
    norm = np.zeros(256, dtype=np.float32)
    L = LayerWeights(attn_norm=norm, wqkv=q, bqkv=None, q_norm=None, k_norm=None, wo=v,
                     mlp_norm=np.zeros(256, dtype=np.float32), wgu=q, wdown=v)
    emb = Blocks("Q8_0", 16, 256, np.zeros((16, 8 * 34), dtype=np.uint8))
    sw = ShardWeights(embed=emb, norm=norm, lm_head=emb, layers=[L], nq=1, nkv=1, ff=4)
    b = weight_bytes(sw)
    assert b == {"Q4_K": 8 * 144, "Q6_K": 8 * 210, "Q8_0": 16 * 272, "float32": 2 * 1024}
    assert describe_weight_bytes(sw).startswith(f"{sum(b.values()) / 1e9:.2f} GB: ")
