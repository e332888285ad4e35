"""foldserve bench does not let httpx log a line per request."""
import logging

from server.cli import build_parser


def test_bench_silences_httpx_request_lines(caplog):
    logging.getLogger("httpx").setLevel(logging.NOTSET)
    caplog.set_level(logging.INFO)
    from server import bench
    args = build_parser().parse_args(["bench", "--url", "http://127.0.0.1:9", "--requests", "1",
                                      "--timeout", "2"])
    assert bench.run(args) == 1                     # nothing listens on port 9
    assert logging.getLogger("httpx").getEffectiveLevel() == logging.WARNING
    assert not [r for r in caplog.records if r.name == "httpx" and r.levelno < logging.WARNING]
