"""A token as the logprobs blocks show it, where one token may be a piece of a character.

Byte-level BPE and SentencePiece's byte fallback split a multi-byte UTF-8 character over
several tokens; such a token alone decodes to U+FFFD, which says nothing about which
bytes it holds (and two different pieces would show the same). So a token whose bytes
(the tokenizer's `token_bytes`) are not UTF-8 on their own is shown as those bytes:

- chat (`logprobs.content[].token`, `top_logprobs[].token`): the bytes, each one that
  is not part of a whole character written `\\xNN` (OpenAI's chat form: a token of the
  bytes e4 bd is the string `\\xe4\\xbd`), and `bytes` the token's raw bytes;
- completions (`tokens`, the keys of `top_logprobs`) and `prompt_logprobs`'
  `decoded_token`: the same, after `bytes:` (OpenAI's legacy completions form,
  `bytes:\\xe4\\xbd`).

A whole token is its decoded text, and its `bytes` that text's UTF-8. `text` (the decoded
text, U+FFFD for a piece) is what text_offset counts. A tokenizer without `token_bytes`
(a duck-typed one) shows its decoded text.
"""
from __future__ import annotations

REPLACEMENT = "\ufffd"


class TokenTexts:
    """Token ids -> their shown forms, for one reply; each id is decoded once."""

    def __init__(self, tok):
        self._tok = tok
        self._bytes_of = getattr(tok, "token_bytes", None)
        self._memo: dict[int, tuple[str, bytes, bool]] = {}

    def _get(self, token_id: int) -> tuple[str, bytes, bool]:
        hit = self._memo.get(token_id)
        if hit is None:
            text = self._tok.decode([token_id])
            raw, piece = text.encode("utf-8"), False
            if REPLACEMENT in text and self._bytes_of is not None:
                b = bytes(self._bytes_of(token_id))
                try:
                    b.decode("utf-8")
                except UnicodeDecodeError:
                    raw, piece = b, True
            hit = self._memo[token_id] = (text, raw, piece)
        return hit

    def text(self, token_id: int) -> str:
        """The decoded text (what the reply's text holds of it; U+FFFD for a piece)."""
        return self._get(token_id)[0]

    def legacy(self, token_id: int) -> str:
        """/v1/completions' form (and prompt_logprobs' decoded_token)."""
        text, raw, piece = self._get(token_id)
        return "bytes:" + raw.decode("utf-8", "backslashreplace") if piece else text

    def chat(self, token_id: int) -> tuple[str, list[int]]:
        """Chat's (token, bytes)."""
        text, raw, piece = self._get(token_id)
        return (raw.decode("utf-8", "backslashreplace") if piece else text), list(raw)
