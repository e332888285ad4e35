"""stored_bytes: each rank's weight bytes as the file stores them (what `foldserve plan`
prints for a GGUF), and a row-parallel split that would cut a block refused with the shapes."""
from __future__ import annotations

import os

import pytest

from kernels.blocks import BLOCK, BlockSplitError
from server.engine.weights.stored_bytes import describe, per_rank
from server.shapes.spec import ModelSpec, shape


def _nb(kind, rows, cols):
    blk, nb = BLOCK[kind]
    return rows * cols // blk * nb


def _table(spec, kind="Q4_K", down="Q6_K"):
    d, hd, f = spec.d_model, spec.head_dim, spec.d_ff
    t = [("token_embd.weight", "Q6_K", (spec.vocab, d), _nb("Q6_K", spec.vocab, d)),
         ("output_norm.weight", "F32", (d,), 4 * d)]
    for i in range(spec.n_layers):
        p = f"blk.{i}."
        for name, k, rows, cols in (("attn_q", kind, spec.n_heads * hd, d), ("attn_k", kind, spec.n_kv_heads * hd, d),
                                    ("attn_v", down, spec.n_kv_heads * hd, d), ("attn_output", kind, d, spec.n_heads * hd),
                                    ("ffn_gate", kind, f, d), ("ffn_up", kind, f, d), ("ffn_down", down, d, f)):
            t.append((p + name + ".weight", k, (rows, cols), _nb(k, rows, cols)))
        t += [(p + "attn_norm.weight", "F32", (d,), 4 * d), (p + "ffn_norm.weight", "F32", (d,), 4 * d)]
    return t


def test_one_rank_holds_the_files_bytes():
    spec = shape("llama3-8b")
    t = _table(spec)
    (r0,) = per_rank(t, spec, 1)
    assert sum(r0.values()) == sum(n for *_, n in t)
    assert r0["Q6_K"] == sum(n for _, k, _, n in t if k == "Q6_K")


@pytest.mark.parametrize("tp", [2, 4, 8])
def test_split_tensors_share_their_bytes_and_the_rest_is_copied(tp):
    spec = shape("llama3-8b")
    t = _table(spec)
    ranks = per_rank(t, spec, tp)
    split = sum(n for name, _, _, n in t if "blk." in name and not name.endswith("norm.weight"))
    copied = sum(n for *_, n in t) - split
    assert sum(sum(r.values()) for r in ranks) == split + tp * copied
    # even shards here: every rank the same bytes, a 1/tp share of each split tensor
    assert all(sum(r.values()) == split // tp + copied for r in ranks)
    assert "rank 0 " in describe(ranks) and f"rank {tp - 1} " in describe(ranks)


def test_a_row_parallel_split_that_cuts_a_block_is_refused_naming_the_tensor():
    # 4 heads of 64 at TP 2: o_proj's columns [0, 128) of 256, but Q4_K blocks are 256 wide
    spec = ModelSpec("llama", 1, 256, 4, 4, 64, 512, 64, rope_theta=10000.0, max_context=512,
                     tie_embeddings=True, name="cut")
    t = _table(spec, kind="Q4_K", down="Q4_K")
    with pytest.raises(BlockSplitError, match=r"blk\.0\.attn_output\.weight: columns \[0, 128\) of a 256x256 Q4_K"):
        per_rank(t, spec, 2)
    # the same shapes in Q8_0 (blocks of 32) split cleanly
    assert len(per_rank(_table(spec, kind="Q8_0", down="Q8_0"), spec, 2)) == 2


def test_plan_prints_the_default_models_bytes_per_rank(capsys):
    from server.engine.locate import ModelNotFound, resolve
    try:
        path = resolve(None)
    except ModelNotFound as e:
        pytest.skip(str(e))
    if not str(path).endswith(".gguf") or not os.path.isfile(path):
        pytest.skip("the default model is not a GGUF file here")
    from gguf import GGUFReader
    total = sum(int(t.n_bytes) for t in GGUFReader(str(path), "r").tensors)
    from server.plan_cli import main
    assert main(["--model", str(path), "--tp", "1", "--room", "4", "--context", "2048"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.startswith(f"weights as stored: rank 0 {total / 1e9:.3f} GB (")
    assert main(["--model", str(path), "--tp", "3", "--room", "4", "--context", "2048"]) == 0
    line = capsys.readouterr().out.splitlines()[-1]
    assert line.count("rank ") == 3
