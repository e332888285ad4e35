"""A code-editing prompt: a file to be returned whole with one change (the drafts' best
case: the reply copies the prompt), and a free-prose chat prompt, for the default model.
Shared by the tests and bench/drafts.py."""
from __future__ import annotations

from pathlib import Path


SOURCE = Path(__file__).with_name("edit_source.txt")   # a frozen copy of a real module's head


def editing_prompt(chars: int | None = None) -> str:
    """A diff-like completion prompt: the file, then its edited copy begun with the one
    changed line; the model returns the rest of the file (the default model, 135M
    parameters, copies in this framing; asked in chat it summarises instead)."""
    text = SOURCE.read_text(encoding="utf-8")
    if chars is not None:
        text = text[:text.rindex("\n", 0, chars) + 1]
    first, rest = text.split("\n", 1)
    edited = first.replace("Pool:", "KV pool:", 1)
    return f"--- a/pool.py\n{text}\n+++ b/pool.py (edited)\n{edited}\n"


PROSE = [{"role": "user", "content": "Write a short story about a lighthouse keeper who "
          "finds a message in a bottle. Describe the sea, the weather and her thoughts."}]


def chat_ids(tok, messages) -> list:
    from server.text.chat_template import render_chat
    text = render_chat(tok.chat_template, messages, add_generation_prompt=True,
                       bos_token=tok.bos_token, eos_token=tok.eos_token, literal=tok.literal)
    return tok.literal.encode(text)
