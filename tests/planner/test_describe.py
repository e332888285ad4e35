from server.planner.describe import startup_line
from server.planner.plan import plan
from planner_cases import small


def test_pages_line():
    p = plan([small()], [400], context=15, parallel=2, prompt_cache_bytes=64, kv_pages="on")
    assert startup_line(p) == (
        "2 streams at once, the engine's own and 1 more taking 7 pages of 4 rows (224 bytes) as "
        "they need them (enough for one at a 15-token window), 48 bytes fixed each, a 64 bytes "
        "prompt cache (2 pages), of a 400 bytes room")


def test_windows_line_with_a_reserve():
    p = plan([small()], [500], context=15, parallel=3, kv_pages="off")
    assert startup_line(p, reserve_bytes=2 << 30) == (
        "3 streams at once, each in a whole window of 15 rows (120 bytes), 32 bytes fixed each, "
        "of 500 bytes left after a 2.0 GiB reserve")


def test_ranks_that_differ_are_named():
    p = plan([small(0, n_kv=2), small(1)], [2000, 1000], context=15, parallel=1, kv_pages="on")
    assert startup_line(p).endswith("; rank 1 of 2 governs (page bytes per rank: 64, 32)")
