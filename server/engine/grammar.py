"""Constrained decoding: a grammar (JSON schema, regex, choice, Lark or GBNF) compiled by
llguidance into a per-request matcher, and the token mask it gives before each draw.

Why llguidance: docs/receipts/2026-12-01-grammar-engine/README.md (no torch, ~1 ms
compiles, ~0.05-0.2 ms masks at a 49,152 vocabulary on this host's CPU).

    g = compile_grammar(tok, "json_schema", schema)     # GrammarError: the reason
    c = g.constraint()                                  # one per reply (state of the parse)
    allowed = c.allowed(vocab)                          # bool [vocab]; eos only once accepting
    c.consume(token)                                    # after the draw
    c.done                                              # the grammar can take nothing more

The mask is computed on the host from the tokens so far alone, so a constrained reply
is the same whatever else runs in the round (solo == concurrent). The tokenizer's
llguidance twin is built once per tokenizer (~0.6 s for this vocabulary) and cached.

compile_grammar cannot take the process down: the grammar's size and depth are checked
first (grammar_limits), the engine compiles it on a large-stack thread within a time
budget (grammar_compiler), and the first mask is computed there too, with one token of
the longest and of the lowest id it allows consumed on copies, so a grammar that fails at
its first token is a GrammarError here, not an error in the middle of a reply. Every
GrammarError is a client's error (status 400, code invalid_grammar) and carries a short
reason, never the engine's state dump.
"""
from __future__ import annotations

import json
import threading

import numpy as np

from server.text.lark_markers import added_tokens

from . import grammar_compiler, grammar_limits

_LOCK = threading.Lock()
_TOKENIZERS: dict[int, object] = {}
_EXECUTOR: list = []                  # llguidance's thread pool for many masks at once


# JSON comes out as json.dumps writes it (", " and ": ", no newlines): a small model
# offered free whitespace can spend its whole max_tokens on it. A schema's own
# "x-guidance" settings win over these.
JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}

# A JSON number's digits are bounded, as llama.cpp's json-schema-to-grammar bounds them:
# llguidance's number is `-?(0|[1-9][0-9]*)(\.[0-9]+)?...`, and a small model that starts
# `10.000` can write zeros until max_tokens (`{"x": [10.0000000...` cut by "length": the
# reply never parses). Every number or integer in a schema without a bound of its own gets
# |x| <= 10**15 - 1 (15 integer digits: every such integer is exact in a double), and a
# number without a multipleOf gets multipleOf 1e-10 (at most 10 fraction digits; 1e-12
# already fails in llguidance, whose multipleOf coefficient is a u32). Both only narrow the
# schema, so a reply that follows the bounded one follows the caller's. A bounded number
# has no exponent form (llguidance's ranges have none).
INT_DIGITS = 15
FRACTION_DIGITS = 10
_BIG = 10 ** INT_DIGITS - 1
_SUB_ONE = ("additionalProperties", "items", "additionalItems", "contains", "then", "else",
            "unevaluatedProperties", "unevaluatedItems")
_SUB_LIST = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SUB_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
# left alone: "not" and "if" (a narrower schema there would widen the whole), and
# "propertyNames" (strings only)


def _num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _subschemas(schema: dict, fn) -> dict:
    """A copy of `schema` with each direct subschema s under keyword k replaced by fn(s, k)."""
    out = dict(schema)
    for k in _SUB_ONE:
        if isinstance(out.get(k), dict):
            out[k] = fn(out[k], k)
    for k in _SUB_LIST:
        if isinstance(out.get(k), list):
            out[k] = [fn(s, k) for s in out[k]]
    for k in _SUB_MAP:
        if isinstance(out.get(k), dict):
            out[k] = {name: fn(s, k) for name, s in out[k].items()}
    return out


def bound_numbers(schema):
    """A copy of `schema` with every unbounded number bounded (INT_DIGITS, FRACTION_DIGITS)."""
    if not isinstance(schema, dict):
        return schema
    out = _subschemas(schema, lambda s, k: bound_numbers(s))
    t = out.get("type")
    types = {t} if isinstance(t, str) else {x for x in t if isinstance(x, str)} \
        if isinstance(t, list) else set()                  # the engine judges odd types
    if not types & {"number", "integer"} or "enum" in out or "const" in out:
        return out
    lo = [v for v in (out.get("minimum"), out.get("exclusiveMinimum")) if _num(v)]
    hi = [v for v in (out.get("maximum"), out.get("exclusiveMaximum")) if _num(v)]
    if not lo:                          # below the caller's maximum, however low it is
        out["minimum"] = -_BIG if not hi or max(hi) > -_BIG else max(hi) - _BIG
    if not hi:
        out["maximum"] = _BIG if not lo or min(lo) < _BIG else min(lo) + _BIG
    if "number" in types and "multipleOf" not in out:
        out["multipleOf"] = 10.0 ** -FRACTION_DIGITS
    return out


# An object that lists its `properties` and says nothing of `additionalProperties` is
# closed (`additionalProperties: false`), as llama.cpp's grammars and vLLM's default
# backend (xgrammar) close it: open, a model invents keys until max_tokens. A schema
# opens one with `additionalProperties: true` (or a schema for the extra values). Left
# as written: objects without `properties` (nothing to close them to), objects that say
# `patternProperties` or `unevaluatedProperties`, or that compose (`allOf`, `anyOf`,
# `oneOf`, `$ref`), and the members of an `allOf` (closing each would refuse the keys the
# others add); also anything under `not` or `if`, as in bound_numbers.
_COMPOSED = ("allOf", "anyOf", "oneOf", "$ref", "patternProperties", "unevaluatedProperties")


def close_objects(schema, in_all_of: bool = False):
    """A copy of `schema` with its open-by-omission objects closed (see above)."""
    if not isinstance(schema, dict):
        return schema
    out = _subschemas(schema, lambda s, k: close_objects(s, in_all_of=k == "allOf"))
    t = out.get("type")
    objecty = t == "object" or (isinstance(t, list) and "object" in t) or t is None
    if (objecty and isinstance(out.get("properties"), dict) and not in_all_of
            and "additionalProperties" not in out and not any(k in out for k in _COMPOSED)):
        out["additionalProperties"] = False
    return out


def engine_schema(schema: dict) -> dict:
    """The schema as it goes to llguidance: open-by-omission objects closed, numbers
    bounded, our JSON_OPTIONS unless the schema's own x-guidance says otherwise."""
    own = schema.get("x-guidance") or {}
    if not isinstance(own, dict):
        raise GrammarError("x-guidance must be an object")
    out = bound_numbers(close_objects(schema))
    out["x-guidance"] = {**JSON_OPTIONS, **own}
    return out


_ANY = {"anyOf": [{"type": "object", "additionalProperties": {"$ref": "#/$defs/any"}},
                  {"type": "array", "items": {"$ref": "#/$defs/any"}},
                  {"type": "string"}, {"type": "number"}, {"type": "boolean"}, {"type": "null"}]}
# json_object: any JSON object, its numbers bounded like a schema's
JSON_OBJECT = {"$defs": {"any": _ANY}, "type": "object",
               "additionalProperties": {"$ref": "#/$defs/any"}}


class GrammarError(ValueError):
    """The grammar or schema does not compile, or failed while a reply followed it; str() is
    the reason. A client's error: `status` and `code` are what the API answers."""
    status = 400
    code = "invalid_grammar"


REASON_CHARS = 200


def reason(err: str) -> str:
    """The engine's error, short and on one line: its text before the parser state or
    backtrace llguidance may append, without the lines that only point (^) at a place."""
    err = err or ""
    for mark in ("<state>", "<backtrace>", "<non-verbose/>"):
        err = err.split(mark, 1)[0]
    lines = []
    for line in err.splitlines():
        if line.strip(" ^~|"):
            lines.append(" ".join(line.split()))
    text = " ".join(lines) or "the grammar engine failed"
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 3] + "..."


_LIMITS: list = []


def limits():
    """llguidance's parser limits: its defaults, without the state dump in error messages."""
    if not _LIMITS:
        _LIMITS.append(_llg().LLParserLimits(verbose_errors=False))
    return _LIMITS[0]


def _llg():
    import llguidance
    return llguidance


def ll_tokenizer(tok):
    """llguidance's view of our tokenizer (server.text.Tokenizer: an HF `tokenizers` inside)."""
    key = id(tok)
    with _LOCK:
        cached = _TOKENIZERS.get(key)
        if cached is not None and cached[0] is tok:
            return cached[1]
        llg = _llg()
        hf = getattr(tok, "hf", None)
        if hf is None:
            raise GrammarError("this server's tokenizer has no HF tokenizer inside; "
                               "constrained decoding is not available")
        eos = sorted(getattr(tok, "eos_ids", ()) or ()) or None
        llt = llg.LLTokenizer(hf.to_str(), n_vocab=getattr(tok, "vocab_size", None),
                              eos_token=eos)
        _TOKENIZERS[key] = (tok, llt)
        return llt


def grammar_text(kind: str, spec) -> str:
    """kind: json_schema | json_object | regex | choice | lark | gbnf -> llguidance's grammar."""
    llg = _llg()
    M = llg.LLMatcher
    try:
        if kind == "json_schema":
            schema = json.loads(spec) if isinstance(spec, str) else spec
            if not isinstance(schema, dict):
                raise GrammarError("a JSON schema must be an object")
            return M.grammar_from_json_schema(engine_schema(schema))
        if kind == "json_object":
            return M.grammar_from_json_schema(engine_schema(JSON_OBJECT))
        if kind == "regex":
            return M.grammar_from_regex(spec)
        if kind == "choice":
            if not spec or not all(isinstance(s, str) for s in spec):
                raise GrammarError("a choice is a non-empty list of strings")
            # one terminal: its options are one lexeme (a DFA), not one Earley item each
            # (llguidance refuses a row of over 2,000 items: 2,001 options as rules)
            return M.grammar_from_lark("start: CHOICE\nCHOICE: "
                                       + " | ".join(json.dumps(s) for s in spec))
        if kind == "lark":
            return M.grammar_from_lark(spec)
        if kind == "gbnf":
            return llg.grammar_from("gbnf", spec)   # Lark text passes through as Lark
    except GrammarError:
        raise
    except (ValueError, TypeError) as e:
        raise GrammarError(reason(str(e))) from e
    except Exception as e:                       # llguidance's GBNF converter: plain Exception
        raise GrammarError(reason(str(e) or type(e).__name__)) from e
    raise GrammarError(f"unknown grammar kind {kind!r}")


class Grammar:
    """A compiled grammar: constraint() gives a fresh parse state for one reply, a copy of
    the matcher compile_grammar built and its first mask (no second compilation)."""

    def __init__(self, llt, text: str, kind: str, matcher, first: np.ndarray):
        self.llt, self.text, self.kind = llt, text, kind
        self._matcher, self._first = matcher, first      # never advanced: copied per reply

    def constraint(self) -> "Constraint":
        return Constraint(self._matcher.deep_copy(), self.llt.vocab_size, self._first)


_TOKEN_BYTES: dict[int, tuple] = {}


def token_bytes(llt) -> np.ndarray:
    """int32 [vocab]: each token's length in bytes (cached per llguidance tokenizer)."""
    with _LOCK:
        got = _TOKEN_BYTES.get(id(llt))
        if got is not None and got[0] is llt:
            return got[1]
    n = np.array([len(llt.decode_bytes([i])) for i in range(llt.vocab_size)], dtype=np.int32)
    with _LOCK:
        _TOKEN_BYTES[id(llt)] = (llt, n)
    return n


def _build(llt, kind: str, spec, reasoning: str | None = None,
           think_tokens: bool = False) -> Grammar:
    """The grammar compiled (after_reasoning's wrapper around it where `reasoning` is
    given), its first mask computed and its first token tried (the compiler thread runs
    this): GrammarError for any failure up to there."""
    text = grammar_text(kind, spec)
    if reasoning is not None:
        text = after_reasoning(text, reasoning, think_tokens)
    m = _llg().LLMatcher(llt, text, log_level=0, limits=limits())
    if m.is_error():
        raise GrammarError(reason(m.get_error()))
    words = np.full((llt.vocab_size + 31) // 32, -1, dtype=np.int32)
    m.unsafe_compute_mask_ptr(words.ctypes.data, words.nbytes)
    if m.is_error():
        raise GrammarError(f"fails at its first token: {reason(m.get_error())}")
    bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:llt.vocab_size].astype(bool)
    if not bits.any():
        raise GrammarError("allows no token at its start")
    # the first token: the longest allowed (the most work for the engine) and the lowest
    ok = np.flatnonzero(bits)
    ok = ok[~np.isin(ok, list(llt.eos_tokens))]
    if len(ok):
        longest = int(ok[np.argmax(token_bytes(llt)[ok])])
        scratch = np.empty_like(words)
        for t in dict.fromkeys((longest, int(ok[0]))):
            c = m.deep_copy()
            c.consume_token(t)
            if not c.is_error() and not c.is_stopped():
                c.unsafe_compute_mask_ptr(scratch.ctypes.data, scratch.nbytes)
            if c.is_error():
                raise GrammarError(f"fails at its first token: {reason(c.get_error())}")
    return Grammar(llt, text, kind, m, words)


# A reasoning model's reply: free text up to `</think>` (the first one: lazy), then the
# grammar as its own sub-grammar (`@answer`). "inside": the prompt opened `<think>`;
# "outside": the reply may open it itself, or answer at once.
_REASONING = {
    "inside": 'start: reason WS @answer\n',
    "outside": 'start: think @answer\nthink: "<think>" reason WS |\n',
}
_REASONING_TAIL = 'reason[lazy]: /(?s:.*)<\\/think>/\nWS: /[ \\t\\n]*/\n'
# the same where the vocabulary has <think> and </think> as added tokens (Qwen3's, GLM's):
# llguidance takes an added token as a special one, which no text spells, so the markers
# are written as tokens and the reasoning's text runs up to the closing one
_REASONING_TOKENS = {
    "inside": 'start: REASON </think> WS @answer\n',
    "outside": 'start: think @answer\nthink: <think> REASON </think> WS |\n',
}
_REASONING_TOKENS_TAIL = 'REASON: /(.|\\n)*/\nWS: /[ \\t\\n]*/\n'
THINK_MARKERS = ("<think>", "</think>")


def after_reasoning(text: str, where: str, think_tokens: bool = False) -> str:
    """llguidance's grammar text that leaves the reasoning free and applies `text` (a
    grammar_text result) from the end of `</think>` on (vLLM's rule for structured
    outputs with a reasoning parser). think_tokens: <think> and </think> are the
    vocabulary's added tokens (written as tokens, not text)."""
    if where not in _REASONING:
        raise ValueError(f"reasoning is 'inside' or 'outside', not {where!r}")
    try:
        top = json.loads(text)
    except ValueError:
        top = None
    if isinstance(top, dict) and isinstance(top.get("grammars"), list) and top["grammars"]:
        subs = [dict(g) for g in top["grammars"]]
    else:
        subs = [{"lark_grammar": text}]
    subs[0]["name"] = "answer"
    wrapper = {"lark_grammar": _REASONING_TOKENS[where] + _REASONING_TOKENS_TAIL if think_tokens
               else _REASONING[where] + _REASONING_TAIL}
    return json.dumps({"grammars": [wrapper, *subs]})


def compile_grammar(tok, kind: str, spec, reasoning: str | None = None) -> Grammar:
    """The grammar, compiled and tried at its first token; GrammarError (status 400) if it
    passes a limit (grammar_limits), does not compile, takes the engine over
    grammar_compiler.BUDGET_S, or fails at its first token. grammar_compiler.CompilerBusy
    (a 503) if every compiler thread stayed busy that long.
    reasoning: None (the grammar from the reply's first token), or "inside" / "outside"
    (after_reasoning: the grammar from the end of the reply's `</think>`)."""
    why = grammar_limits.problem(kind, spec)
    if why:
        raise GrammarError(f"too large: {why}")
    llt = ll_tokenizer(tok)
    try:
        think_tokens = reasoning is not None and set(THINK_MARKERS) <= added_tokens(tok)
        return grammar_compiler.run(_build, llt, kind, spec, reasoning, think_tokens)
    except grammar_compiler.CompileTimeout as e:
        raise GrammarError(str(e)) from e


class Constraint:
    def __init__(self, matcher, vocab: int, first: np.ndarray | None = None):
        self.m, self.vocab = matcher, vocab
        self._words = np.full((vocab + 31) // 32, -1, dtype=np.int32)
        self._ready = False                       # _words hold the current state's mask
        self._bits: np.ndarray | None = None     # the same mask unpacked, once asked for
        if first is not None:                     # the start state's mask, computed already
            self._words[:], self._ready = first, True

    @property
    def done(self) -> bool:
        """Stopped: the grammar is complete and takes no more tokens (only eos)."""
        return self.m.is_stopped()

    def prepare(self) -> None:
        """Compute the next mask now (the scheduler calls it while a round runs)."""
        if self._ready or self.m.is_error():
            return
        w = self._words
        self.m.unsafe_compute_mask_ptr(w.ctypes.data, w.nbytes)
        self._ready, self._bits = True, None

    def allowed(self, n: int) -> np.ndarray:
        """Bool [n]: the tokens the grammar allows next (ids past its vocabulary: none)."""
        if self.m.is_error():
            raise GrammarError(f"the grammar failed: {reason(self.m.get_error())}")
        self.prepare()
        if self._bits is None:
            self._bits = np.unpackbits(self._words.view(np.uint8), bitorder="little").astype(bool)
        bits = self._bits
        out = np.zeros(n, dtype=bool)
        k = min(n, self.vocab)
        out[:k] = bits[:k]
        return out

    def words(self) -> np.ndarray:
        """The allowed tokens as uint32 words (bit i % 32 of word i // 32), llguidance's own
        bitmask, for the device sampler (kernels/sample_cuda.py) to apply."""
        if self.m.is_error():
            raise GrammarError(f"the grammar failed: {reason(self.m.get_error())}")
        self.prepare()
        w = self._words.view(np.uint32).copy()
        if self.vocab % 32:                       # ids past its vocabulary: none
            w[-1] &= np.uint32((1 << (self.vocab % 32)) - 1)
        return w

    def consume(self, token: int) -> None:
        if self.done:
            return
        self._ready, self._bits = False, None
        if not self.m.consume_token(int(token)):
            raise GrammarError(f"token {token} breaks the grammar: {reason(self.m.get_error())}")


def prepare_many(constraints) -> None:
    """The next masks of many constraints at once: llguidance fills their rows of one
    bitmask on its own threads (fill_next_token_bitmask_par), outside the GIL, where one by
    one `prepare` calls take a host thread ~0.1 ms a row. Each mask is a function of its
    matcher's state alone, so the words are those of `prepare` (tests/model/test_grammar_many.py)."""
    todo = [c for c in constraints if not c._ready and not c.m.is_error()]
    if len(todo) < 2:
        for c in todo:
            Constraint.prepare(c)
        return
    import llguidance.numpy as lln
    with _LOCK:
        if not _EXECUTOR:
            _EXECUTOR.append(_llg().LLExecutor())
    by_width: dict[int, list] = {}
    for c in todo:                            # one bitmask per mask width (vocabulary)
        by_width.setdefault(c._words.shape[0], []).append(c)
    for width, cs in by_width.items():
        words = np.full((len(cs), width), -1, dtype=np.int32)
        lln.fill_next_token_bitmask_par(_EXECUTOR[0], [(c.m, i) for i, c in enumerate(cs)], words)
        for i, c in enumerate(cs):
            c._words, c._ready, c._bits = words[i], True, None
