"""prompt_logprobs as vLLM answers them: one entry per prompt token, None for the first
(nothing precedes it), else {token id as a string: {"logprob", "rank", "decoded_token"}}
holding the prompt token itself first, then the top `prompt_logprobs` alternatives
(ranks 1..k; the prompt token appears once when it is among them). On /v1/completions
each choice carries the list, on chat the response does (vLLM's places)."""
from __future__ import annotations


def prompt_logprobs_json(tok, entries) -> list | None:
    """entries: the scheduler's ((token id, logprob, rank, ((id, logprob), ...)), ...) for
    prompt tokens 1 .. n-1 (None: not asked for)."""
    if entries is None:
        return None
    out: list = [None]
    for token_id, logprob, rank, top in entries:
        d = {str(token_id): _entry(tok, token_id, logprob, rank)}
        for r, (t, lp) in enumerate(top, start=1):
            d.setdefault(str(t), _entry(tok, t, lp, r))
        out.append(d)
    return out


def _entry(tok, token_id: int, logprob: float, rank: int) -> dict:
    return {"logprob": logprob, "rank": rank, "decoded_token": tok.decode([token_id])}
