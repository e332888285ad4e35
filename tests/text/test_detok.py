"""Streaming text: never half a character, always the full decode in the end; stops cut cleanly."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from server.text.detok import IncrementalDetokenizer
from server.text.stops import StopMatcher

from .cases import TEXT


def stream(tok, ids, **kw) -> list[str]:
    d = IncrementalDetokenizer(tok, **kw)
    return [d.push(i) for i in ids] + [d.flush()]


def test_unicode_case_streams_exactly_the_full_decode(smollm, golden_cases):
    case = next(c for c in golden_cases if c["name"] == "unicode")
    pieces = stream(smollm, case["prompt_ids"])
    assert "".join(pieces) == smollm.decode(case["prompt_ids"]) == case["text"]
    assert not any("\ufffd" in p for p in pieces)
    # 東 and 🙂 each span two tokens: the first half emits nothing, the second the character
    assert " 東" in pieces and " 🙂" in pieces


def test_golden_replies_stream(smollm, golden_cases):
    for case in golden_cases:
        assert "".join(stream(smollm, case["greedy_ids"])) == smollm.decode(case["greedy_ids"])


def test_skip_special_tokens(smollm):
    ids = smollm.encode("Hi<|im_end|>")
    assert "".join(stream(smollm, ids, skip_special_tokens=True)) == "Hi"
    assert "".join(stream(smollm, ids)) == "Hi<|im_end|>"


def test_broken_bytes_come_out_at_flush(smollm):
    # a lone UTF-8 lead byte (0xE6, 'æ' in the byte alphabet) never completes: held, then flushed
    lead = smollm.token_to_id("æ")
    d = IncrementalDetokenizer(smollm)
    assert d.push(lead) == ""
    assert d.flush() == "\ufffd"


@settings(max_examples=150, deadline=None)
@given(TEXT)
def test_stream_equals_decode_and_never_splits_a_character(smollm, text):
    ids = smollm.encode(text)
    pieces = stream(smollm, ids)
    assert "".join(pieces) == smollm.decode(ids)
    if "\ufffd" not in text:
        assert not any("\ufffd" in p for p in pieces)


# ---- stop strings ----

def run_stops(stops, chunks):
    m = StopMatcher(stops)
    out, stopped = [], False
    for c in chunks:
        emit, stopped = m.push(c)
        out.append(emit)
    if not stopped:
        out.append(m.flush())
    return "".join(out), stopped


def test_stop_string_split_across_pushes():
    m = StopMatcher(["</s>"])
    assert m.push("ab</") == ("ab", False)   # "</" might begin the stop: held
    assert m.push("s") == ("", False)
    assert m.push("> tail") == ("", True)    # the stop and all after it are dropped
    assert m.push("more") == ("", True)


def test_held_tail_released_when_it_is_not_a_stop():
    m = StopMatcher(["</s>"])
    assert m.push("a<") == ("a", False)
    assert m.push("b") == ("<b", False)
    assert m.push("x</") == ("x", False)
    assert m.flush() == "</"


def test_first_stop_to_complete_wins():
    assert run_stops(["world", "lo"], ["hello world"]) == ("hel", True)
    assert run_stops([">", "<><"], ["<><"]) == ("<", True)  # ">" completes before "<><"
    assert run_stops(["b", "abc", "ab"], ["xabc"]) == ("x", True)  # same end: the longer cut
    assert run_stops(["END", "\n\n"], ["one\n", "\ntwo END"]) == ("one", True)


def test_the_matched_stop_is_the_one_that_won():
    """Anthropic's stop_sequence names it (server/api/messages.py)."""
    for stops, chunks, want in ((["world", "lo"], ["hello world"], "lo"),
                                ([">", "<><"], ["<", "><"], ">"),
                                (["b", "abc", "ab"], ["xa", "bc"], "ab"),
                                (["zz"], ["abc"], None)):
        m = StopMatcher(stops)
        for c in chunks:
            m.push(c)
        assert m.matched == want, (stops, chunks)


def test_no_stops_and_empty_stops_pass_everything():
    assert run_stops([], ["a", "b"]) == ("ab", False)
    assert run_stops([""], ["a", "b"]) == ("ab", False)


def test_stop_at_the_very_start():
    assert run_stops(["Q:"], ["Q", ":", " next"]) == ("", True)


@settings(max_examples=300, deadline=None)
@given(st.text("ab<>/s", max_size=30), st.lists(st.text("ab<>/s", min_size=1, max_size=4), min_size=1, max_size=3),
       st.data())
def test_chunking_never_changes_the_result(text, stops, data):
    cuts = sorted(data.draw(st.lists(st.integers(0, len(text)), max_size=6)))
    chunks = [text[i:j] for i, j in zip([0] + cuts, cuts + [len(text)])]
    # reference: the first stop to complete, as if text arrived one character at a time
    ends = [e for e in range(len(text) + 1) if any(text[:e].endswith(s) for s in stops)]
    if ends:
        start = min(ends[0] - len(s) for s in stops if text[:ends[0]].endswith(s))
        expected = (text[:start], True)
    else:
        expected = (text, False)
    assert run_stops(stops, chunks) == expected
