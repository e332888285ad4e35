"""A model's markup written into a Lark grammar for llguidance: a marker the vocabulary has
as an added token (special or not: llguidance takes every added token as a special one,
which no text spells) is written as that token, `<|channel|>`; any other as its text, a
quoted string. The grammars over a model's markup (harmony_grammar.py, glm_grammar.py) and
the reasoning wrapper (server/engine/grammar.py's after_reasoning) ask here."""
from __future__ import annotations

import json


def added_tokens(tok) -> set[str]:
    """The vocabulary's added tokens' texts (none for a tokenizer without an HF one inside)."""
    hf = getattr(tok, "hf", None)
    return {t.content for t in hf.get_added_tokens_decoder().values()} if hf is not None else set()


def lark_markers(tok, markers) -> dict[str, str]:
    """Each of `markers` as Lark: its token where the vocabulary adds it, else its text."""
    have = added_tokens(tok)
    return {m: (m if m in have else json.dumps(m)) for m in markers}
