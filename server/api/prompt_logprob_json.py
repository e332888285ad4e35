"""prompt_logprobs as vLLM answers them: one entry per prompt token, None for the first
(nothing precedes it), else {token id as a string: {"logprob", "rank", "decoded_token"}}
holding the prompt token itself first, then the top `prompt_logprobs` alternatives
(ranks 1..k; the prompt token appears once when it is among them).

Once per request: on chat the response carries the list (vLLM's place); on
/v1/completions choice 0 does and the other choices have null (with a list of prompts,
once per prompt: each prompt's first choice carries its list) (vLLM copies it into every
choice: the same list n times, 122 MB for a 7,000-token prompt at 20 alternatives and
n=16, where once is 7.8 MB).

The size is bounded before the request runs (`check_size`): at most MAX_ENTRIES entries
of prompt logprobs in one reply (in each prompt's part of it, with a list of prompts),
counting echo's (every choice's logprobs block starts with the prompt's tokens and their
alternatives).
"""
from __future__ import annotations

from .errors import invalid
from .logprob_tokens import TokenTexts

# 50-70 bytes of JSON an entry: a reply of at most ~18 MB. A full 8,192-token context at
# prompt_logprobs 20 is 172,011 entries.
MAX_ENTRIES = 262_144


def prompt_logprobs_json(texts: TokenTexts, entries) -> list | None:
    """entries: the scheduler's ((token id, logprob, rank, ((id, logprob), ...)), ...) for
    prompt tokens 1 .. n-1 (None: not asked for)."""
    if entries is None:
        return None
    out: list = [None]
    for token_id, logprob, rank, top in entries:
        d = {str(token_id): _entry(texts, token_id, logprob, rank)}
        for r, (t, lp) in enumerate(top, start=1):
            d.setdefault(str(t), _entry(texts, t, lp, r))
        out.append(d)
    return out


def _entry(texts: TokenTexts, token_id: int, logprob: float, rank: int) -> dict:
    return {"logprob": logprob, "rank": rank, "decoded_token": texts.legacy(token_id)}


def check_size(prompt_len: int, *, prompt_logprobs: int | None = None,
               echo_logprobs: int | None = None, n: int = 1) -> None:
    """400 when the reply would hold more than MAX_ENTRIES prompt-logprob entries:
    (prompt tokens - 1) x (prompt_logprobs + 1) once, plus with echo and logprobs k every
    choice's prompt tokens x (k + 1)."""
    plp = (prompt_len - 1) * (prompt_logprobs + 1) if prompt_logprobs is not None else 0
    echo = n * prompt_len * (echo_logprobs + 1) if echo_logprobs is not None else 0
    if plp + echo <= MAX_ENTRIES:
        return
    parts = []
    if plp:
        parts.append(f"prompt_logprobs={prompt_logprobs} on a prompt of {prompt_len} tokens "
                     f"is {plp:,} entries ((tokens - 1) x (prompt_logprobs + 1))")
    if echo:
        parts.append(f"echo with logprobs={echo_logprobs} is {echo:,} (n x prompt tokens x "
                     "(logprobs + 1))")
    raise invalid("; ".join(parts) + f": this server returns at most {MAX_ENTRIES:,} prompt "
                  "logprob entries in one reply; ask for fewer alternatives or send a "
                  "shorter prompt", param="prompt_logprobs" if plp >= echo else "logprobs")
