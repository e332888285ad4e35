"""`foldserve plan` for mixture-of-experts models: each rank's expert bytes as the GGUF stores
them (equal to what the engine holds), the routed experts' activation room, the MoE dummy
shapes, and --device cuda refused by name."""
from __future__ import annotations

import json

import pytest

from server.engine.engine import Engine
from server.engine.prepare import weight_bytes
from server.engine.weights import load
from server.engine.weights.stored_bytes import from_gguf
from server.planner.layout import layouts, moe_floats
from server.shapes.shard import shard_of
from server.shapes.spec import shape

from .moe_files import write_gguf


@pytest.mark.parametrize("kind,tp", [("Q8_0", 1), ("Q8_0", 2), ("F32", 3)])
@pytest.mark.parametrize("name", ["tiny-qwen3moe", "tiny-glm4moe"])
def test_stored_bytes_are_what_each_rank_holds(tmp_path, name, kind, tp):
    """(Q8_0 at TP 3 would cut the 16-wide heads' blocks: refused, as for the llama family.)"""
    path = str(write_gguf(tmp_path / "m.gguf", shape(name), kind))
    stored = from_gguf(path, load(path, progress=False).spec, tp)
    for rank in range(tp):
        ld = load(path, progress=False)
        eng = Engine(ld.spec, ld.tensors.__getitem__, tp=tp, rank=rank,
                     all_reduce=(lambda a: a) if tp > 1 else None)
        held = weight_bytes(eng.weights)
        if kind == "Q8_0":
            assert held["Q8_0"] == stored[rank]["Q8_0"], (rank, held, stored[rank])
        else:          # F32 experts kept as F32 rows (Blocks), the rest float32 arrays
            assert held["F32"] + held["float32"] == stored[rank]["F32"], (rank, held, stored[rank])


def test_expert_bytes_split_not_copied(tmp_path):
    spec = shape("tiny-qwen3moe")
    path = str(write_gguf(tmp_path / "m.gguf", spec, "Q8_0"))
    one = from_gguf(path, spec, 1)[0]["Q8_0"]
    two = [r["Q8_0"] for r in from_gguf(path, spec, 2)]
    experts = spec.n_layers * spec.n_experts * 3 * spec.d_model * spec.expert_ff // 32 * 34
    embed = 2 * spec.vocab * spec.d_model // 32 * 34             # token_embd and output: copied
    # two ranks together hold the experts (and attention) once, the embeddings twice
    assert sum(two) == one + embed and experts > one / 2


def test_activation_room_counts_the_routed_experts():
    spec = shape("qwen3-30b-a3b")
    assert moe_floats(spec, shard_of(spec, 1, 0)) == 2 * 128 + 8 * (3 * 768 + 2048)
    # 768 columns split in units of 256 (Q4_K / Q6_K blocks): 512 and 256 at TP 2
    assert [shard_of(spec, 2, r).expert_ff for r in range(2)] == [(0, 512), (512, 768)]
    lay = layouts(spec, 2, 4, 16)
    assert lay[0].moe_floats == 2 * 128 + 8 * (3 * 512 + 2048) and lay[0].ff_rank == 0
    dense = layouts(shape("smollm2-135m"), 1, 4, 16)[0]
    assert dense.moe_floats == 0 and dense.ff_rank == 1536


def test_plan_prints_the_experts(capsys):
    from server.plan_cli import main
    assert main(["--model", "dummy:glm-4.5-air", "--room", "200", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["params"] == shape("glm-4.5-air").n_params and 10e9 < d["active_params"] < 15e9
    assert main(["--model", "dummy:qwen3-30b-a3b", "--room", "100"]) == 0
    out = capsys.readouterr().out
    assert "experts: 128 routed of FF 768, 8 a token (softmax router); 30.53 B weights held, 3.35 B a token" in out


def test_plan_refuses_cuda_for_moe(capsys):
    from server.plan_cli import main
    assert main(["--model", "dummy:qwen3-30b-a3b", "--room", "100", "--device", "cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "qwen3moe family (mixture of experts)" in err and "--device cpu" in err
