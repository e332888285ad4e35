"""Building one round (the scheduler's step 3): every decoding stream's next token (with
its drafts, a verify chunk), then prefill chunks under the token budget.

A round no stream decodes in may give a prompt `solo_chunk` tokens; a round others decode
in holds its prefill chunks' attention reads to `prefill_keys`, so a long prompt
interleaves with their decodes in small rounds (`prefill_take`). Drafts: a decoding
stream's chunk is its last token and its drafts (server/drafts/policy.py says how many).
Scheduling only: a row's bytes do not depend on the round it rides in.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from server.drafts.policy import round_drafts
from server.ranks.steps import EVERY_ROW, Chunk

KEYS_FLOOR = 64                    # prompt tokens a round gives a prefilling stream at least


def prefill_take(fed: int, left: int, cap: int, keys: int | None) -> int:
    """Prompt tokens to prefill this round for a stream with `fed` rows written and `left`
    to go: at most `cap` (its chunk, within the round's token budget) and, where `keys` is
    given (streams decode in this round), at most the n whose rows read n (fed + n) keys
    or fewer, the chunk's attention work; never under KEYS_FLOOR (nor over cap) so a long
    prompt still advances. Scheduling only: a row's bytes do not depend on its chunk."""
    n = min(cap, left)
    if keys is not None and n * (fed + n) > keys:
        lo, hi = 0, n                                # the largest n with n (fed + n) <= keys
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if mid * (fed + mid) <= keys:
                lo = mid
            else:
                hi = mid - 1
        n = min(n, max(lo, KEYS_FLOOR))
    return max(n, 0)


@dataclass
class Round:
    """A round's chunks and, chunk by chunk, whose it is, whether its last row draws a
    token, and its drafts (a verify chunk) or ()."""
    chunks: list = field(default_factory=list)
    owners: list = field(default_factory=list)      # the Active each chunk belongs to
    samples: list = field(default_factory=list)     # its last row draws a token
    drafted: list = field(default_factory=list)     # its drafts, or ()

    def add(self, chunk: Chunk, owner, sample: bool, drafts: tuple = ()) -> None:
        self.chunks.append(chunk)
        self.owners.append(owner)
        self.samples.append(sample)
        self.drafted.append(drafts)

    def rows(self) -> tuple[list, list]:
        """-> (first, last): each chunk's first row in the round's logits and the row its
        draw reads; a chunk gives no row, its last row's, or every row's (EVERY_ROW)."""
        first, last, o = [], [], 0
        for c in self.chunks:
            first.append(o)
            o += len(c.tokens) if c.logits == EVERY_ROW else int(bool(c.logits))
            last.append(o - 1)
        return first, last


def snap_cap(fed: int, page_rows: int) -> int:
    """Drafts a recurrent family's stream at `fed` valid rows may make (its verify chunk
    starting at position fed): no page boundary b with fed + 2 <= b <= fed + k, so a
    page-boundary state the chunk writes (SnapStep.PENDING, Engine._snap_at: the state at b,
    after positions < b) never stands on a draft that may be refused (the prompt cache
    attaches that state to the pages before b)."""
    b = -(-(fed + 2) // page_rows) * page_rows        # the first boundary >= fed + 2
    return b - fed - 1


def build_round(active, *, budget: int, context: int, prefill_chunk: int, solo_chunk: int,
                prefill_keys: int | None, drafting: bool, draft_tokens: int,
                draft_rows: int, snap_rows: int | None = None) -> Round:
    """The round for `active` (the running streams, in admission order). snap_rows: a
    recurrent family's page rows (its drafts kept within snap_cap; a stream with `replay`
    set re-feeds its accepted rows from there), None: not recurrent."""
    rnd = Round()
    active = list(active)
    dec = [a for a in active if not a.prefilling]
    for a in dec:                        # each drafting stream's row cost at its length
        if drafting and a.drafts is not None:
            a.drafts.at(a.length)
    guesses = round_drafts(
        [(a.drafts, a.out, min(a.req.params.max_tokens - len(a.out), context - a.length,
                               snap_cap(a.fed, snap_rows) + 1 if snap_rows else context))
         for a in dec], draft_tokens, min(draft_rows, budget),
        len(dec) < len(active)) if drafting else [()] * len(dec)
    for a, d in zip(dec, guesses):       # decodes first: one token each, and its drafts
        s = a.fed if a.replay is None else a.replay       # a replay re-feeds rows s .. fed - 1
        rnd.add(Chunk(a.stream, s, (*(a.token_at(p) for p in range(s, a.fed + 1)), *d),
                      EVERY_ROW if d else True), a, True, d)
        budget -= a.fed + 1 - s + len(d)
    decoding = bool(rnd.chunks)
    cap = prefill_chunk if decoding else solo_chunk
    keys = prefill_keys if decoding else None
    for a in active:                     # then prefill chunks under the budget
        if a.prefilling and budget > 0 and (keys is None or keys > 0):
            n = prefill_take(a.fed, len(a.req.prompt_ids) - a.fed, min(cap, budget), keys)
            if keys is not None:
                keys -= n * (a.fed + n)
            last = a.fed + n == len(a.req.prompt_ids)
            # prompt_logprobs: every prompt row's logits, the last one's also the draw's
            want = EVERY_ROW if a.req.params.prompt_logprobs is not None else last
            rnd.add(Chunk(a.stream, a.fed, tuple(a.req.prompt_ids[a.fed:a.fed + n]), want),
                    a, last)
            budget -= n
    return rnd
