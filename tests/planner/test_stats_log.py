"""The periodic stats line: rates over the interval, quiet when idle, KV split from the
prompt cache's kept pages."""
import logging
import threading

from server.stats_log import StatsLogger, kv_fractions, stats_line

IDLE = dict(prompt_tokens_done=100, generation_tokens_done=50, streams_busy=0, queue=0,
            pages_total=200, pages_free=180, pages_kept=20, paged=True, streams_total=4)


def test_idle_is_quiet_even_with_kept_pages():
    assert stats_line(IDLE, dict(IDLE), 10.0) is None


def test_a_busy_interval_gives_rates_running_waiting_and_kv():
    now = dict(IDLE, prompt_tokens_done=600, generation_tokens_done=250, streams_busy=3,
               queue=2, pages_free=130)
    assert stats_line(IDLE, now, 10.0) == (
        "stats: prompt 50.0 tokens/s, generation 20.0 tokens/s, running 3, waiting 2, "
        "KV 25.0% of pages in use (+10.0% kept by the prompt cache)")
    assert kv_fractions(now) == (0.25, 0.1)


def test_windows_name_the_windows_in_use():
    now = dict(IDLE, paged=False, streams_busy=3, generation_tokens_done=95)
    assert stats_line(IDLE, now, 10.0).endswith("running 3, waiting 0, KV windows 3 of 4 in use "
                                                 "(prompt cache 10.0% of its pages)")


def test_the_logger_logs_every_interval_while_busy(caplog):
    counter = {"n": 0}
    seen = threading.Event()

    def stats():
        counter["n"] += 10
        if counter["n"] > 30:
            seen.set()
        return dict(IDLE, generation_tokens_done=counter["n"], streams_busy=1)
    caplog.set_level(logging.INFO, logger="foldserve")
    logger = StatsLogger(stats, 0.05).start()
    assert seen.wait(5)
    logger.stop()
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("stats: ")]
    assert lines and all("running 1, waiting 0" in l for l in lines)
