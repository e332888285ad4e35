"""drafted == plain on the default model: an editing-style prompt (the reply copies the
file, so most drafts are taken) greedy and seeded-sampled, solo and among other streams,
on pages and on windows, and a structured-output request whose drafts the grammar
refuses where they break it."""
from __future__ import annotations

import pytest

from server.requests import SamplingParams as P

from drafts_run import serve
from editing import PROSE, chat_ids, editing_prompt

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def model(real_model):
    return real_model


def test_editing_prompt_drafted_equals_plain(model):
    tok = model.tokenizer
    edit = tok.encode(editing_prompt(1500))
    prose = chat_ids(tok, PROSE)
    reqs = [(edit, P(max_tokens=160, temperature=0.0, logprobs=2)),
            (edit, P(max_tokens=120, temperature=0.6, seed=5)),
            (prose, P(max_tokens=48, temperature=0.0))]
    for paged in (True, False):
        plain, _ = serve(model.engine, reqs, draft=False, paged=paged, context=1024,
                         page_rows=16, chunk=256)
        drafted, s = serve(model.engine, reqs, draft=True, paged=paged, context=1024,
                           page_rows=16, chunk=256)
        solo, _ = serve(model.engine, reqs[:1], draft=True, paged=paged, context=1024,
                        page_rows=16, chunk=256)
        for i, (p, d) in enumerate(zip(plain, drafted)):
            assert d == p, f"paged={paged} request {i}: drafted != plain"
        assert solo[0] == plain[0]
        text = tok.decode([t for t, *_ in plain[0] if t is not None])
        assert "A page is in exactly one state" in text          # it does copy the file
        # most of the copy came from drafts
        assert s.accepted_tokens_done > 0.4 * s.generation_tokens_done, s.stats()


def test_structured_output_with_drafts_equals_plain(model):
    from server.engine.grammar import compile_grammar
    tok = model.tokenizer
    schema = {"type": "object", "properties": {"name": {"type": "string"},
                                               "items": {"type": "array", "items": {"type": "integer"}}},
              "required": ["name", "items"]}
    ids = chat_ids(tok, [{"role": "user", "content":
                          'Repeat this JSON exactly: {"name": "lamp", "items": [1, 2, 3, 4, 5, 6, '
                          '7, 8, 9, 10, 11, 12]} {"name": "lamp", "items": [1, 2, 3, 4, 5, 6, 7, '
                          '8, 9, 10, 11, 12]}'}])

    def reqs():
        g = compile_grammar(tok, "json_schema", schema)
        return [(ids, P(max_tokens=80, temperature=0.0), {"grammar": g, "eos_ids": frozenset(tok.eos_ids)}),
                (ids, P(max_tokens=80, temperature=0.8, seed=3), {"grammar": g, "eos_ids": frozenset(tok.eos_ids)})]

    plain, _ = serve(model.engine, reqs(), draft=False, context=1024, page_rows=16, chunk=256)
    drafted, s = serve(model.engine, reqs(), draft=True, context=1024, page_rows=16, chunk=256)
    assert drafted == plain
    assert s.draft_tokens_done > 0


def test_forced_tool_call_with_drafts_equals_plain(model):
    """tool_choice "required"'s call grammar (server/api/tools.py, as a chat request with
    tools compiles it), greedy and seeded: drafted == plain, drafts made."""
    from server.api.tools import call_grammar
    from server.engine.grammar import compile_grammar
    tok = model.tokenizer
    tool = {"type": "function", "function": {
        "name": "set_items", "parameters": {
            "type": "object", "properties": {"name": {"type": "string"},
                                             "items": {"type": "array", "items": {"type": "integer"}}},
            "required": ["name", "items"]}}}
    ids = chat_ids(tok, [{"role": "user", "content":
                          "Call set_items twice, both times with name lamp and items 1, 2, 3, 4, "
                          "5, 6, 7, 8, 9, 10, 11, 12."}])

    def reqs():
        g = compile_grammar(tok, "lark", call_grammar([tool], True))
        extra = {"eos_ids": frozenset(tok.eos_ids)}
        return [(ids, P(max_tokens=96, temperature=0.0), {"grammar": g, **extra}),
                (ids, P(max_tokens=96, temperature=0.8, seed=3, logprobs=1),
                 {"grammar": compile_grammar(tok, "lark", call_grammar([tool], True)), **extra})]

    plain, _ = serve(model.engine, reqs(), draft=False, context=1024, page_rows=16, chunk=256)
    drafted, s = serve(model.engine, reqs(), draft=True, context=1024, page_rows=16, chunk=256)
    assert drafted == plain
    text = tok.decode([t for t, *_ in plain[0] if t is not None])
    assert text.startswith("<tool_call>\n"), text
    assert s.draft_tokens_done > 0, s.stats()
