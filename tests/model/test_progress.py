"""The load's progress bar: drawn in place on a terminal, nothing in a log file."""
import io
import logging
import re

from server.engine.weights.progress import Progress


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_a_bar_redrawn_in_place():
    out = Tty()
    with Progress("loading m.gguf", 4, stream=out, start=0.0) as bar:   # started long ago
        for _ in range(4):
            bar.advance()
    text = out.getvalue()
    assert text.startswith("\rloading m.gguf [") and text.endswith("\n")
    assert "100.0%" in text and "#" * 30 in text and text.count("\n") == 1


def test_a_log_file_gets_log_lines_not_a_bar(caplog):
    """Not a terminal (a log file, the journal): a log line at most every LOG_EVERY_S."""
    out = io.StringIO()
    with caplog.at_level(logging.INFO, logger="foldserve"):
        with Progress("loading m.gguf", 4, stream=out, start=0.0) as bar:   # started long ago
            for _ in range(4):
                bar.advance()
    assert out.getvalue() == ""
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and re.fullmatch(r"loading m\.gguf: 25% \(\d+\.\d s\)", lines[0]), lines


def test_a_quick_load_logs_nothing(caplog):
    with caplog.at_level(logging.INFO, logger="foldserve"):
        with Progress("loading m.gguf", 4, stream=io.StringIO()) as bar:
            bar.advance(4)
    assert caplog.records == []


def test_a_quick_load_draws_nothing_even_on_a_terminal():
    out = Tty()
    with Progress("loading m.gguf", 4, stream=out) as bar:
        bar.advance(4)
    assert out.getvalue() == ""
