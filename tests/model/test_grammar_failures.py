"""A grammar's failure is its own request's 400, wherever it happens: refused by a limit
before the engine sees it (grammar_limits), by the compiler's time budget
(grammar_compiler), at its first token while compiling, in a round's masks computed
together (prepare_many), or in the middle of a reply (the scheduler ends that request
alone with status 400, code invalid_grammar)."""
from __future__ import annotations

import asyncio
import json
import threading
import time

import numpy as np
import pytest

from server.engine import grammar_compiler, grammar_limits
from server.engine.grammar import (Constraint, GrammarError, compile_grammar, limits,
                                   ll_tokenizer, prepare_many)

# ---- the limits: each names itself and its number ----

LIMITED = [
    ("lark", "start: r0\n" + "".join(f'r{i}: "x"\n' for i in range(1000)), "1001 rules; at most 1000"),
    ("gbnf", "root ::= r0\n" + "".join(f'r{i} ::= "x"\n' for i in range(1000)),
     "1001 rules; at most 1000"),
    ("lark", 'start: "' + "x" * 70_000 + '"', "70009 bytes; at most 65536"),
    ("regex", "(x{200}){100}", "20000; at most 10000"),
    ("regex", r"(\d{10}[(]{10}){1001}", "10010; at most 10000"),   # siblings do not multiply
    ("lark", "start: /(x{200}){100}/", "20000; at most 10000"),
    ("lark", 'start: ("a"~200)~10..100', "20000; at most 10000"),
    ("choice", [f"o{i}" for i in range(10_001)], "10001 options; at most 10000"),
    ("choice", ["x" * 300_000], "300000 bytes together; at most 262144"),
    ("json_schema", {"$defs": {f"d{i}": {"type": "null"} for i in range(1001)}},
     "1001 $defs / definitions; at most 1000"),
    ("json_schema", {"type": "string", "pattern": "(a{101}){100}"}, "10100; at most 10000"),
    ("json_schema", {"enum": ["x" * 300_000]}, "300013 bytes as JSON; at most 262144"),
    ("lark", 'start: %json {"$defs": {' + ", ".join(f'"d{i}": {{}}' for i in range(1001)) + "}}",
     "its %json schemas: 1001 $defs / definitions; at most 1000"),
]


@pytest.mark.parametrize("kind,spec,said", LIMITED)
def test_each_limit_is_named_with_its_number(kind, spec, said):
    why = grammar_limits.problem(kind, spec)
    assert why is not None and said in why, why


def test_schema_depth_is_counted_without_recursion():
    s = {"type": "null"}
    for _ in range(5000):                      # far past Python's recursion limit
        s = {"type": "array", "items": s}
    assert "at most 64" in grammar_limits.problem("json_schema", s)
    assert grammar_limits.problem("json_schema", json.dumps({"type": "null"})) is None


def test_a_lark_grammars_json_schemas_count_as_schemas_not_as_its_text():
    from server.api.tools import call_grammar
    wide = {"type": "object", "properties": {f"p{i}": {"type": "string", "description": "x" * 200}
                                             for i in range(40)}}
    tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": wide}}
             for i in range(20)]
    text = call_grammar(tools, True)
    assert len(text) > 3 * grammar_limits.GRAMMAR_BYTES      # 20 tools of 40 described fields
    assert grammar_limits.problem("lark", text) is None


def test_real_grammars_are_within_the_limits():
    from server.api.tools import call_grammar
    tools = [{"type": "function", "function": {"name": f"f{i}", "parameters": {
        "type": "object", "properties": {"a": {"type": "string", "pattern": r"^\d{3}-\d{4}$"}}}}}
        for i in range(50)]
    assert grammar_limits.problem("lark", call_grammar(tools, True)) is None
    json_gbnf = r'''root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
'''
    assert grammar_limits.problem("gbnf", json_gbnf) is None
    assert grammar_limits.problem("regex", r"[0-9]{4}-[0-9]{2}-[0-9]{2}") is None
    assert grammar_limits.problem("choice", ["yes", "no"]) is None


def test_repeat_product():
    r = grammar_limits.repeat_product
    assert r("(x{1000}){1000}") == 1_000_000
    assert r("((x{10}){10}){10}") == 1000
    assert r("(a|b{3}){4}") == 12 and r("x{10}y{20}") == 20 and r("(x{2,}){3}") == 6
    assert r(r"\{5\}") == 1 and r("[{(]{3}") == 3 and r("(x{1,7})+") == 7
    assert r("(a~10)~5") == 1 and r("(a~10)~5", "lark") == 50   # ~ is Lark's, a literal in a regex
    assert r('start: [("a"{100})]{100}', "lark") == 10_000       # [optional] is a Lark group
    assert r('start: /(x{10}){10}/{10} "{5000}"', "lark") == 1000  # a /regex/ atom; strings skipped
    assert r('start: "a" // (x{99}){99}', "lark") == 1             # a comment
    assert r('root ::= [{(]{3} "{9999}" # {9999}', "gbnf") == 3


# ---- the compiler thread ----

def test_the_compiler_hands_back_results_and_exceptions():
    assert grammar_compiler.run(lambda a, b: a + b, 2, 3) == 5
    with pytest.raises(ZeroDivisionError):
        grammar_compiler.run(lambda: 1 / 0)


def test_a_job_past_its_budget_is_a_timeout_and_one_never_started_is_busy():
    gate = threading.Event()
    with pytest.raises(grammar_compiler.CompileTimeout):
        grammar_compiler.run(gate.wait, 5, budget_s=0.05)
    hold = threading.Thread(target=lambda: pytest.raises(grammar_compiler.CompileTimeout,
                                                         grammar_compiler.run, gate.wait, 5,
                                                         budget_s=0.05))
    hold.start()
    hold.join()                                # now every worker waits on the gate
    try:
        with pytest.raises(grammar_compiler.CompilerBusy):
            grammar_compiler.run(lambda: 1, budget_s=0.05)
    finally:
        gate.set()
    t = time.monotonic()
    while time.monotonic() - t < 5:            # the workers come back
        try:
            assert grammar_compiler.run(lambda: 7, budget_s=1) == 7
            break
        except grammar_compiler.CompilerBusy:
            pass


def test_the_compile_budget_is_a_grammar_error(tok, monkeypatch):
    ll_tokenizer(tok)                          # the tokenizer's twin is not the grammar's time
    monkeypatch.setattr(grammar_compiler, "BUDGET_S", 0.02)
    run = grammar_compiler.run

    def slow_run(fn, *args, budget_s=None):   # a compile that takes 0.3 s whatever the host
        def slow(*a):
            time.sleep(0.3)
            return fn(*a)
        return run(slow, *args, budget_s=budget_s)

    monkeypatch.setattr(grammar_compiler, "run", slow_run)
    with pytest.raises(GrammarError, match="compiling took longer than 0.02 s") as e:
        compile_grammar(tok, "choice", [f"option {i}" for i in range(50)])
    assert (e.value.status, e.value.code) == (400, "invalid_grammar")


# ---- at the first token, and in a round's masks together ----

CYCLE = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}


def test_the_first_mask_and_first_token_are_tried_while_compiling(tok):
    with pytest.raises(GrammarError, match="fails at its first token: NoExtensionBias"):
        compile_grammar(tok, "json_schema", CYCLE)
    with pytest.raises(GrammarError, match="fails at its first token: .*Too many items"):
        compile_grammar(tok, "gbnf", 'root ::= "a" root')
    g = compile_grammar(tok, "regex", "[0-9]{3}")
    c = g.constraint()
    assert c._ready                            # the first mask came with the grammar
    fresh = Constraint(g._matcher.deep_copy(), g.llt.vocab_size)
    fresh.prepare()
    assert c.words().tobytes() == fresh.words().tobytes()


def test_a_matcher_failing_among_a_rounds_masks_fails_alone(tok):
    import llguidance
    from server.engine.grammar import grammar_text
    llt = ll_tokenizer(tok)
    good = [compile_grammar(tok, "regex", r"[a-z]{2,5}").constraint() for _ in range(2)]
    bad = Constraint(llguidance.LLMatcher(llt, grammar_text("json_schema", CYCLE), log_level=0,
                                          limits=limits()), llt.vocab_size)
    for c in good:
        c.consume(int(np.flatnonzero(c.allowed(tok.vocab_size))[0]))
    prepare_many([good[0], bad, good[1]])      # on llguidance's threads, together
    twin = compile_grammar(tok, "regex", r"[a-z]{2,5}").constraint()
    twin.consume(int(np.flatnonzero(twin.allowed(tok.vocab_size))[0]))
    twin.prepare()
    for c in good:
        assert c.words().tobytes() == twin.words().tobytes()
    with pytest.raises(GrammarError) as e:
        bad.allowed(tok.vocab_size)
    assert (e.value.status, e.value.code) == (400, "invalid_grammar")
    assert "<" not in str(e.value) and "\n" not in str(e.value)


# ---- in the middle of a reply ----

class BreaksAt:
    """A stand-in grammar: any token, until its `at`-th, which breaks it."""

    def __init__(self, at: int):
        self.at = at

    def constraint(self):
        at = self.at

        class C:
            done, n = False, 0

            def prepare(self):
                pass

            def allowed(self, n):
                return np.ones(n, dtype=bool)

            def words(self):
                raise AssertionError("host rounds only")

            def consume(self, token):
                self.n += 1
                if self.n == at:
                    raise GrammarError(f"token {token} breaks the grammar: lexer error")
        return C()


def test_a_grammar_failing_mid_reply_ends_its_request_alone_with_a_400():
    from server.engine.build import open_model
    from server.planner.admission import Admission
    from server.ranks.steps import PoolStep
    from server.requests import GenRequest, SamplingParams
    from server.scheduler import Scheduler
    from server.step_driver import LocalDriver
    eng = open_model("dummy:tiny", progress=False).engine
    adm = Admission(paged=True, pages=32, page_rows=4, streams=4, context=64)
    sched = Scheduler(LocalDriver(eng), adm, context=64, prefill_chunk=8)
    eng.apply(PoolStep(True, 32, 4, (eng.page_bytes(4),), 4, 64))
    sched.start()

    async def one(rid, grammar):
        req = GenRequest(rid, [5, 6, 7, 8, 9], SamplingParams(max_tokens=6, temperature=0.8,
                                                               seed=1), grammar=grammar)
        return [ev async for ev in sched.generate(req)]

    async def both():
        return await asyncio.gather(one("bad", BreaksAt(3)), one("good", None))

    try:
        bad, good = asyncio.run(both())
    finally:
        sched.stop()
    end = bad[-1]
    assert (end.finish_reason, end.error_code, end.code) == ("error", 400, "invalid_grammar")
    assert "breaks the grammar" in end.error and "after 2 tokens" in end.error
    assert len(bad) == 3                       # two tokens, then the end
    assert good[-1].finish_reason == "length" and len(good) == 7
    assert adm.pool.free == adm.pool.total
    adm.check_integrity()


def test_ten_thousand_choices_compile_and_take_only_an_option(tok):
    """The most options the limit allows: one lexeme, not 10,000 Earley items (llguidance
    refuses a row of over 2,000), in well under the compile budget."""
    opts = [f"option {i}" for i in range(grammar_limits.CHOICES)]
    t = time.monotonic()
    c = compile_grammar(tok, "choice", opts).constraint()
    assert time.monotonic() - t < grammar_compiler.BUDGET_S / 2
    for t in tok.hf.encode("option 9999", add_special_tokens=False).ids:
        assert c.allowed(tok.vocab_size)[t]
        c.consume(t)
    assert c.done


def test_a_reason_is_the_engines_one_line():
    from server.engine.grammar import REASON_CHARS, reason
    panic = ("panic: assertion failed: grammar.symbols.len() < u16::MAX as usize - 10\n"
             "<backtrace>\n   0: <unknown>\n   1: <unknown>\n")        # as llguidance gave it
    assert reason(panic) == "panic: assertion failed: grammar.symbols.len() < u16::MAX as usize - 10"
    state = ("parser error: Too many items (limit 50000; ff_tokens)\n<state>\nTokens: \u27e6aaaa\u27e7\n"
             'Parser: {\n  "compute_time_us": 0,\n')
    assert reason(state) == "parser error: Too many items (limit 50000; ff_tokens)"
    assert reason("NoExtensionBias <non-verbose/>") == "NoExtensionBias"
    parse = 'regex parse error:\n    ((\n     ^\nerror: unclosed group'
    assert reason(parse) == "regex parse error: (( error: unclosed group"
    assert len(reason("x" * 1000)) == REASON_CHARS and reason("") == "the grammar engine failed"
