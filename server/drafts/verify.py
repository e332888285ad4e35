"""Verifying a stream's drafts against the round's rows, exactly as plain decoding draws.

A verify chunk is the stream's last token and its drafts d_1..d_k at positions
fed .. fed + k, every row's logits wanted. Row j's inputs are the reply so far and
d_1..d_j; where the reply so far really is that (every earlier draft accepted), row j is
the row plain decoding would compute at that position (the kernels give a row the same
bytes whatever the round holds), so the token drawn from it, by the same sampler state in
the same order (penalties, bias, grammar, the per-request generator), is plain's token.
It is emitted; if it equals d_{j+1} the next row is valid too and the walk goes on, else
it stops: that token is the correction (or, past d_k, the bonus), and the rows after it
hold drafts that were not taken: never read (attention reads rows 0..p) and overwritten
by the next round, which starts writing right after the last accepted row.

The consumer stops the walk early when a token ends the reply, so no draw is made that
plain decoding would not make.
"""
from __future__ import annotations


def verify_walk(sampling, state, logits, first: int, drafts: tuple, best=None):
    """Yields (token, logprob, top logprobs) for rows first, first + 1, ... of `logits`:
    each row's token as the plain sampler draws it (best[row]: the round's arg-maxes, for a
    plain greedy state), recorded in `state`; stops after the first token that is not the
    next draft (or after the row past the last draft)."""
    for j in range(len(drafts) + 1):
        row = first + j
        if best is not None and state.plain_greedy:
            tok, lp, top = best[row], None, ()
            state.record(tok)
        else:
            tok, lp, top = sampling.sample(logits[row], state)
        yield tok, lp, top
        if j == len(drafts) or tok != drafts[j]:
            return
