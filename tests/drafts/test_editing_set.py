"""The editing set (tests/drafts/editing.py): every source in the stated token range by the
default model's tokenizer, and every prompt the diff-like framing of its source with
exactly one change asked for (the first line, one run of words replaced)."""
from __future__ import annotations

import difflib

import pytest

from editing import EDIT_SET, HEAD_TOKENS, SOURCE, TOKEN_RANGE, changed_line, head


@pytest.fixture(scope="module")
def tok():
    from server.engine.locate import ModelNotFound, resolve
    from server.text.tokenizer import Tokenizer
    try:
        return Tokenizer.from_gguf(resolve(None))
    except ModelNotFound as e:
        pytest.skip(str(e))


def test_set_is_the_old_prompt_and_four_more():
    assert EDIT_SET[0].source == SOURCE and EDIT_SET[0].name == "pool.py"
    assert len(EDIT_SET) >= 5
    assert len({t.source.read_text(encoding="utf-8") for t in EDIT_SET}) == len(EDIT_SET)


@pytest.mark.parametrize("task", EDIT_SET, ids=lambda t: t.name)
def test_source_in_token_range(task, tok):
    n = len(tok.encode(task.text()))
    assert TOKEN_RANGE[0] <= n <= TOKEN_RANGE[1], (task.name, n)


@pytest.mark.parametrize("task", EDIT_SET[1:], ids=lambda t: t.name)
def test_later_sources_are_whole_line_heads(task, tok):
    """Each later source is a head by the rule: whole lines, at most HEAD_TOKENS tokens."""
    text = task.text()
    assert text.endswith("\n")
    assert len(tok.encode(text)) <= HEAD_TOKENS
    assert head(text, tok) == text


@pytest.mark.parametrize("task", EDIT_SET, ids=lambda t: t.name)
def test_prompt_asks_one_change(task):
    src = task.text()
    p = task.prompt()
    old_header, new_header = f"--- a/{task.name}\n", f"\n+++ b/{task.name} (edited)\n"
    assert p.startswith(old_header) and p.count(new_header) == 1
    before, after = p[len(old_header):].split(new_header)
    assert before == src                        # the file, whole and unchanged
    assert after.endswith("\n") and after.count("\n") == 1   # then one line of the edited copy
    first, edited = src.split("\n", 1)[0], after[:-1]
    assert edited != first
    ops = [op for op in difflib.SequenceMatcher(None, first.split(" "), edited.split(" "),
                                                autojunk=False).get_opcodes() if op[0] != "equal"]
    assert len(ops) == 1, ops                    # one run of words changed, the rest equal


def test_changed_line_rule():
    assert changed_line('"""Pool: page ids.') == '"""KV pool: page ids.'
    assert changed_line('"""Prompt cache: a: b') == '"""KV prompt cache: a: b'
    with pytest.raises(ValueError):
        changed_line("import os")
