"""Stop strings (server/text/stops.py): the automaton gives exactly what the quadratic
matcher it replaced gave, for any stops, chunking, arming and flushes; and its time
grows with the text, not with the stops (issue 30: 380 stops of 10,000 characters
froze the API for minutes)."""
from __future__ import annotations

import time

from hypothesis import given, settings, strategies as st

from server.text.stops import StopMatcher, StopSet


class QuadraticStopMatcher:
    """The matcher stops.py replaced, kept as the reference: every push searched for every
    stop in the held tail plus the new text, and measured the longest suffix that is a
    proper prefix of a stop, stop by stop."""

    def __init__(self, stops, include_stop=False):
        self._stops = [s for s in stops if s]
        self._include = include_stop
        self._held = ""
        self.stopped = False
        self.matched = None

    def push(self, text, armed=True):
        if self.stopped:
            return "", True
        buf = self._held + text
        if not armed:
            self._held = ""
            return buf, False
        hits = [(i + len(s), i) for s, i in ((s, buf.find(s)) for s in self._stops) if i >= 0]
        if hits:
            self._held, self.stopped = "", True
            end, start = min(hits)
            self.matched = buf[start:end]
            return buf[:end if self._include else start], True
        keep = self._partial_tail(buf)
        self._held = buf[len(buf) - keep:]
        return buf[:len(buf) - keep], False

    def flush(self):
        out, self._held = ("" if self.stopped else self._held), ""
        return out

    def _partial_tail(self, buf):
        best = 0
        for s in self._stops:
            for n in range(min(len(s) - 1, len(buf)), best, -1):
                if buf.endswith(s[:n]):
                    best = n
                    break
        return best


ALPHABET = "ab<>/sé"
_stop = st.text(ALPHABET, min_size=0, max_size=7)
_ops = st.lists(st.tuples(st.sampled_from(["push", "push", "push", "unarmed", "flush"]),
                          st.text(ALPHABET, max_size=9)), max_size=14)


@settings(max_examples=1500, deadline=None)
@given(st.lists(_stop, max_size=6), _ops, st.booleans())
def test_the_automaton_answers_as_the_quadratic_matcher(stops, ops, include):
    new, old = StopMatcher(stops, include_stop=include), QuadraticStopMatcher(stops, include)
    for op, text in ops:
        if op == "flush":
            assert new.flush() == old.flush()
        else:
            armed = op == "push"
            assert new.push(text, armed) == old.push(text, armed), (op, text)
        assert new.stopped == old.stopped
        assert new.matched == old.matched          # which stop won (Anthropic's stop_sequence)
    assert new.flush() == old.flush()


@settings(max_examples=400, deadline=None)
@given(st.text("ab", max_size=60), st.lists(st.text("ab", min_size=1, max_size=12),
                                            min_size=1, max_size=5), st.data())
def test_random_chunkings_of_one_text_agree(text, stops, data):
    """Stops sharing long prefixes (over two letters), the text cut anywhere."""
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=10)))
    chunks = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]
    include = data.draw(st.booleans())
    new, old = StopMatcher(stops, include), QuadraticStopMatcher(stops, include)
    assert [new.push(c) for c in chunks] == [old.push(c) for c in chunks]
    assert new.flush() == old.flush()


def test_one_stop_set_serves_many_matchers():
    shared = StopSet(["</s>", "END", ""])
    assert shared.stops == ("</s>", "END")
    a, b = StopMatcher(shared), StopMatcher(shared)
    assert a.push("x</") == ("x", False)
    assert b.push("yEN") == ("y", False)
    assert a.push("s>") == ("", True) and b.push("D!") == ("", True)


def _issue_30_input(n_stops: int, length: int):
    """n_stops stops of `length` characters: all but one never get far, and the last is
    a run of "a" the reply (a model repeating itself) keeps growing, so the held tail is
    long: the worst case for a matcher that scans every stop's prefixes on each push.
    (The others share a prefix, so the automaton stays small enough for a unit test.)"""
    stops = ["b" * (length - 10) + f"{i:010d}" for i in range(n_stops - 1)]
    stops.append("a" * (length - 1) + "b")
    reply = "a" * (2 * length)
    return stops, [reply[i:i + 4] for i in range(0, len(reply), 4)]


def test_380_stops_of_10000_characters_take_time_linear_in_the_reply():
    """Issue 30's 3.8 MB of stops: the quadratic matcher spent minutes per reply (the
    receipt: stops-logprobs.md); the automaton builds in seconds, once, and walks the
    reply's 20,000 characters in milliseconds."""
    stops, chunks = _issue_30_input(380, 10_000)
    t0 = time.perf_counter()
    shared = StopSet(stops)
    built = time.perf_counter() - t0
    m = StopMatcher(shared)
    t0 = time.perf_counter()
    out = [m.push(c) for c in chunks]
    walked = time.perf_counter() - t0
    assert not m.stopped and "".join(e for e, _ in out) + m.flush() == "".join(chunks)
    assert walked < 0.5, walked                  # 5,000 pushes
    assert built < 5, built                      # 3.8 million characters, once per request
