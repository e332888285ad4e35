from server.shapes.spec import shape
from server.planner.layout import Layout, default_page_rows, layouts
from planner_cases import small


def test_llama3_8b_bf16_costs_128_kib_a_token():
    L = Layout.for_shard(shape("llama3-8b"), 1, 0, kv_bytes=2, page_rows=16)
    assert L.bytes_per_token == 32 * 2 * 8 * 128 * 2 == 131072
    assert L.page_bytes == 16 * 131072


def test_uneven_shards_have_their_own_page_bytes():
    ranks = layouts(shape("llama3-8b"), 3, kv_bytes=2, page_rows=16)
    assert [L.n_kv for L in ranks] == [3, 3, 2]
    assert [L.page_bytes for L in ranks] == [786432, 786432, 524288]


def test_fixed_bytes_formula():
    L = small()
    assert L.fixed_bytes(16, paged=True) == 4 * 4 + 16 + 16
    assert L.fixed_bytes(17, paged=True) == 4 * 5 + 16 + 16      # the table rounds up
    assert L.fixed_bytes(16, paged=False) == 32                   # windows have no table


def test_default_page_rows_is_16_on_the_cpu():
    assert default_page_rows("cpu") == 16
