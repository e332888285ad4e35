"""Special tokens written in message content are text, never control tokens.

A chat template writes its own markers (`<|im_start|>`, `<|eot_id|>`, `[INST]`'s `<s>` ...)
around each message's content. Tokenizing the rendered prompt with special-token parsing
on would also turn a marker *written by a user* into the real control token, so
`hi<|im_end|>\\n<|im_start|>system\\n...` in a user message would forge a system turn. So:

  protect(messages)  every special token's text inside a string of the messages (and of
                     the template's extra variables: tools, documents) becomes a
                     placeholder of private-use characters, before rendering
  encode(rendered)   tokenizes the rendered prompt: the template's markers (the only
                     special tokens left in it) are control tokens; each stretch of text
                     between two markers that holds a placeholder is tokenized with
                     special-token parsing off, the placeholders back to their text, so
                     the user's `<|im_end|>` becomes the pieces `<`, `|`, `im`, ...

A prompt whose content holds no special token's text tokenizes exactly as before (the
whole text, special tokens parsed): the template's markers are the only ones there.
Special means the tokenizer's added tokens marked special (GGUF control tokens, and
tokenizer.json's `"special": true`); other added tokens (user-defined, `<think>` in some
vocabularies) stay matched whole, as in any text.

Placeholder: U+F0000 then one character U+F0001 + k for the k-th special token; a U+F0000
already in the content is written twice, so every string comes back exactly.
"""
from __future__ import annotations

import json
import re
import threading

from tokenizers import Tokenizer as HFTokenizer

MARK = "\U000F0000"
_BASE = 0xF0001
_RESTORE = re.compile(MARK + "(.)?", re.DOTALL)


class Literal:
    def __init__(self, hf: HFTokenizer):
        self._hf = hf
        added = hf.get_added_tokens_decoder()
        self._special = {i: t.content for i, t in added.items() if t.special}
        texts = sorted({t.content for t in added.values() if t.special and t.content},
                       key=lambda t: (-len(t), t))        # longest first: leftmost-longest
        self._texts = texts
        self._index = {t: k for k, t in enumerate(texts)}
        self._find = re.compile("|".join(map(re.escape, texts))) if texts else None
        self._plain: dict[bool, HFTokenizer] = {}           # special parsing off; by "first"
        self._lock = threading.Lock()

    @property
    def active(self) -> bool:
        return self._find is not None

    # ---- before rendering ----

    def protect(self, value):
        """A copy of value (str, dict, list, tuple, anything else as is) with every special
        token's text inside its strings replaced by a placeholder. Dict keys are kept."""
        if self._find is None:
            return value
        if isinstance(value, str):
            return self._protect_str(value)
        if isinstance(value, dict):
            return {k: self.protect(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.protect(v) for v in value)
        return value

    def _protect_str(self, s: str) -> str:
        if MARK in s:
            s = s.replace(MARK, MARK + MARK)
        return self._find.sub(lambda m: MARK + chr(_BASE + self._index[m.group(0)]), s)

    def restore(self, s: str) -> str:
        """The text protect() hid: placeholders back to the special tokens' text."""
        def back(m):
            c = m.group(1)
            if c == MARK:
                return MARK
            k = ord(c) - _BASE if c else -1
            return self._texts[k] if 0 <= k < len(self._texts) else ""   # a cut-off placeholder
        return _RESTORE.sub(back, s) if MARK in s else s

    # ---- after rendering ----

    def encode(self, rendered: str) -> list[int]:
        """Token ids of a prompt rendered from protect()ed messages (no BOS added: the
        template writes its own)."""
        enc = self._hf.encode(rendered, add_special_tokens=False)
        if MARK not in rendered:
            return list(enc.ids)
        out: list[int] = []
        run: list[int] = []
        gap_start = 0

        def flush(gap_end: int) -> None:
            text = rendered[gap_start:gap_end]
            if MARK in text:
                out.extend(self._plain_tokenizer(first=gap_start == 0).encode(
                    self.restore(text), add_special_tokens=False).ids)
            else:
                out.extend(run)

        for tid, (start, end) in zip(enc.ids, enc.offsets):
            # a marker the template wrote: a special token matched on its own text (an <unk>
            # the model makes of a placeholder has a special id too, but not its text)
            if tid in self._special and self._special[tid] in rendered[start:end]:
                flush(start)
                out.append(tid)
                run, gap_start = [], end
            else:
                run.append(tid)
        flush(len(rendered))
        return out

    def _plain_tokenizer(self, first: bool) -> HFTokenizer:
        """This vocabulary with special-token parsing off. Text between two markers is
        tokenized on its own exactly as inside the whole prompt, except under a Metaspace
        pre-tokenizer that prepends "▁" to the first stretch of a text only
        (prepend_scheme "first"): a later stretch gets the copy that never prepends."""
        with self._lock:
            if not self._plain:                 # built once, on the first prompt that needs it
                spec = self._hf.to_str()
                self._plain[True] = _without_special_parsing(spec)
                later = json.loads(spec)
                self._plain[False] = (_without_special_parsing(json.dumps(later))
                                      if _never_prepend(later.get("pre_tokenizer"))
                                      else self._plain[True])
            return self._plain[first]


def _without_special_parsing(spec: str) -> HFTokenizer:
    tok = HFTokenizer.from_str(spec)
    tok.encode_special_tokens = True
    return tok


def _never_prepend(node) -> bool:
    """Metaspace prepend_scheme "first" -> "never", in place; True if there was one."""
    found = False
    if isinstance(node, dict):
        if node.get("type") == "Metaspace" and node.get("prepend_scheme") == "first":
            node["prepend_scheme"] = "never"
            found = True
        for v in node.values():
            found = _never_prepend(v) or found
    elif isinstance(node, list):
        for v in node:
            found = _never_prepend(v) or found
    return found
