"""GLM-5.3-Flash's KV layout (server/shapes/kv_layout.py with pooled keys): bytes a row = the
sparse layers' and the MTP layer's latent rows plus their pooled keys; the fixed part = KDA
states and conv windows split by heads, the index rings on every rank; the plan's two
documented lines add up (docs/architecture.md)."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest

from server.plan_cli import main as plan_main
from server.planner.layout import Layout
from server.planner.units import GIB
from server.shapes.kv_layout import kv_spec
from server.shapes.shard import shard_of
from server.shapes.spec import shape

S = shape("glm-5.3-flash")


def test_the_shape_is_glm53():
    assert S.n_layers == 45 and S.n_kv_layers == 11 and S.nextn_layers == 1
    assert [i for i in range(45) if not S.is_linear_layer(i)] == list(range(3, 45, 4))
    assert 320e9 < S.n_params < 321e9 and 17.5e9 < S.n_active_params < 18e9


def test_bytes_a_row_are_latent_rows_and_pooled_keys():
    k = kv_spec(S, shard_of(S, 1, 0))
    # 11 sparse layers + the MTP layer: 512 latent values and 128 / 16 pooled values a row each
    assert k.n_layers == 12 and k.n_pooled_layers == 12
    assert k.elements_per_token == 12 * 512 + 12 * 128 // 16 == 6240
    assert k.bytes_per_token(4) == 24960 and k.bytes_per_token(2) == 12480
    shared = replace(S, index_shared=(7, 15))            # two layers reuse a choice: no pools
    ks = kv_spec(shared, shard_of(shared, 1, 0))
    assert ks.n_pooled_layers == 10 and ks.elements_per_token == 12 * 512 + 10 * 8


def test_the_fixed_part_splits_kda_heads_and_keeps_the_rings_whole():
    def parts(tp, r):
        k = kv_spec(S, shard_of(S, tp, r))
        ring = 12 * 16 * 2 * 128 * 4                   # a pool's k and gate rows, 12 layers
        return k.fixed_bytes - ring, k
    one, k1 = parts(1, 0)
    state = 34 * (64 * 128 * 128 + 3 * 3 * 64 * 128) * 4
    assert one == state
    for tp in (2, 3):
        got = [parts(tp, r) for r in range(tp)]
        assert sum(g[0] for g in got) == state                 # KDA heads split
        assert all(g[1].bytes_per_token(4) == k1.bytes_per_token(4) for g in got)  # replicated


def test_page_rows_must_hold_whole_pools():
    Layout.for_shard(S, 2, 0, 4, 512)
    with pytest.raises(ValueError, match="--page-rows 24 must be a multiple of glm-5.3-flash's index_kpool 16"):
        Layout.for_shard(S, 2, 0, 4, 24)


@pytest.mark.parametrize("tp, context, parallel, room", [(2, 131072, 4, 27), (3, 1048576, 8, 55)])
def test_the_documented_plans_add_up(capsys, tp, context, parallel, room):
    rc = plan_main(["--model", "dummy:glm-5.3-flash", "--tp", str(tp), "--context", str(context),
                    "--parallel", str(parallel), "--room", str(room), "--json"])
    assert rc == 0
    d = json.loads(capsys.readouterr().out)
    assert d["streams"] == parallel and d["bytes_per_token"] == 24960
    assert d["window_bytes"] in (0, context * 24960)          # whole windows, or pages
    assert d["used_bytes"] == d["pages"] * d["page_bytes"] + d["prompt_cache_bytes"] \
        + d["streams"] * (d["fixed_bytes"] + d["window_bytes"]) <= d["room_bytes"] == room * GIB
    for r in d["ranks"] if "ranks" in d else [d]:
        assert d["pages"] * r["page_bytes"] + d["streams"] * r["fixed_bytes"] \
            + d["prompt_cache_bytes"] <= room * GIB


def test_cuda_refuses_the_family_by_name(capsys):
    rc = plan_main(["--model", "dummy:glm-5.3-flash", "--tp", "2", "--room", "27",
                    "--device", "cuda"])
    assert rc == 2
    assert "GLM-5.3-Flash (glm5next" in capsys.readouterr().err
