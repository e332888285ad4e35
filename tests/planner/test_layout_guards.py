"""Layout and modes guards: every byte count term, the shard's own numbers, each mode
value (case, blanks) with its note, and the refusal's words."""
from __future__ import annotations

import pytest

from server.config import ConfigError
from server.shapes.shard import shard_for
from server.shapes.spec import shape
from server.planner import layout as lay
from server.planner.layout import Layout, cdiv, default_page_rows, layouts
from server.planner.modes import PAGES_FROM_RANKS, resolve_kv_pages


def test_cdiv():
    assert [cdiv(a, 4) for a in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]


def test_every_term_of_fixed_bytes():
    L = Layout(rank=1, n_layers=3, n_kv=2, head_dim=5, kv_bytes=2, page_rows=4, vocab=7,
               d_model=11, ff_rank=13, prefill_chunk=17)
    assert L.bytes_per_token == 3 * 2 * 2 * 5 * 2 == 120
    assert L.page_bytes == 480 and L.pages_for(9) == 3 and L.pages_for(8) == 2
    sampling = 4 * 7 * 4
    scratch = 17 * (4 * 11 + 3 * 13) * 4
    assert L.fixed_bytes(9, paged=True) == 4 * 3 + sampling + scratch
    assert L.fixed_bytes(9, paged=False) == sampling + scratch
    assert (lay.TABLE_ENTRY_BYTES, lay.SAMPLING_VECTORS, lay.ACT_DMODEL_ROWS, lay.ACT_FF_ROWS,
            lay.FLOAT_BYTES) == (4, 4, 4, 3, 4)
    assert Layout(0, 1, 1, 1, 4, 4, 1, 1, 0).prefill_chunk == 256


def test_for_shard_takes_the_shards_numbers():
    spec = shape("llama3-8b")
    for tp in (1, 2, 3):
        for r in range(tp):
            L = Layout.for_shard(spec, tp, r, kv_bytes=2, page_rows=8, prefill_chunk=64)
            s = shard_for(spec.n_heads, spec.n_kv_heads, spec.d_ff, tp, r)
            assert (L.rank, L.n_layers, L.n_kv, L.head_dim, L.kv_bytes, L.page_rows, L.vocab,
                    L.d_model, L.ff_rank, L.prefill_chunk) == (
                r, spec.n_layers, s.n_kv, spec.head_dim, 2, 8, spec.vocab, spec.d_model,
                s.ff[1] - s.ff[0], 64)
    assert Layout.for_shard(spec, 1, 0, 2, 1).page_rows == 1
    assert Layout.for_shard(spec, 1, 0, 2, 16).prefill_chunk == 256
    with pytest.raises(ValueError, match=r"^--page-rows 0 must be at least 1$"):
        Layout.for_shard(spec, 1, 0, 2, 0)
    ls = layouts(spec, 3, kv_bytes=4, page_rows=16, prefill_chunk=32)
    assert [L.rank for L in ls] == [0, 1, 2] and {L.prefill_chunk for L in ls} == {32}
    assert {L.kv_bytes for L in ls} == {4} and {L.page_rows for L in ls} == {16}
    assert layouts(spec, 1, 2, 16)[0].prefill_chunk == 256


def test_default_page_rows():
    assert default_page_rows() == 16 and default_page_rows("cuda") == 16
    assert default_page_rows("tpu") == 16 and lay.KV_BYTES == {"cpu": 4, "cuda": 2}


@pytest.mark.parametrize("value, ranks, fit, want", [
    ("off", 3, False, ("off", "")), ("0", 5, False, ("off", "")), (" OFF ", 1, True, ("off", "")),
    ("on", 1, True, ("on", "")), ("On", 2, True, ("on", "")),
    ("all", 1, True, ("on", "TF_KV_PAGES=all is the same as on: every stream on pages")),
    ("ALL", 1, True, ("on", "TF_KV_PAGES=all is the same as on: every stream on pages")),
    ("auto", 3, True, ("on", "TF_KV_PAGES=auto: pages at 3 ranks")),
    ("auto", 4, True, ("on", "TF_KV_PAGES=auto: pages at 4 ranks")),
    ("Auto", 2, False, ("on", "TF_KV_PAGES=auto: pages, whole windows for the requested streams do not fit")),
    ("auto", 2, True, ("off", "")), ("", 1, False, ("on", "TF_KV_PAGES=auto: pages, whole windows "
                                                     "for the requested streams do not fit")),
    (None, 1, True, ("off", "")),
])
def test_each_value_and_its_note(value, ranks, fit, want):
    assert resolve_kv_pages(value, ranks, fit) == want
    assert PAGES_FROM_RANKS == 3


@pytest.mark.parametrize("value", ["yes", "1", "pages", "o n"])
def test_other_values_are_refused_with_the_list(value):
    with pytest.raises(ConfigError) as e:
        resolve_kv_pages(value, 1, True)
    assert str(e.value) == f"TF_KV_PAGES={value!r} is not allowed; use one of: auto, on, off, 0, all"
