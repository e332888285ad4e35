"""How far a stream drafts: as far as pays, by what its drafts have fared.

A draft of k tokens costs a verify chunk of k + 1 rows, about 1 + k * row_cost one-row
rounds (`row_cost`: what one more row of a stream's chunk adds to a round, as a fraction
of a one-row round; measured per device, see server/drafts/policy.py), and yields
E(k) = 1 + a + a^2 + ... + a^k tokens, where a is the chance that a draft is taken given
the one before it was (counted over this stream's verify walks, the older ones weighing
less). The pace drafts the k that gives the most tokens per cost, and none where no k
beats a plain decode (E(k) / cost <= 1): on prose, whose matches rarely hold, it stops
spending rows on them; every PROBE rounds without drafts it tries one token, so a stream
that turns repetitive (a list, a copied block) is noticed.

The round decides too (`load`): beside other streams' rows a drafted row must pay at the
round's rate, not a lone stream's. A round of n rows costs 1 + (n - 1) * row_cost one-row
rounds and yields t tokens (its decodes, and the drafts already placed as each expects);
a stream's k drafts make it t - 1 + E(k) tokens for 1 + (n - 1 + k) * row_cost, drafted
only where that rate beats t / (1 + (n - 1) * row_cost). Alone (n = t = 1) that is the
rule above; among 16 decodes at row_cost 0.45 a drafted row needs a > 0.93: a round whose
rows already keep the cores busy drafts only what is nearly sure. Deterministic: the
round's counts and the stream's own record (its verify walks) decide, never a clock, so
the same requests draft the same rows (drafted == plain holds whatever is drafted).

A row's cost falls as the stream grows (its rows share their key reads, the weights' and
the keys' reads of a one-row round do not): `at` sets it from the stream's length (a
deterministic count) before each round.

The source's proposal may be shorter than asked (the match's continuation runs out);
what is counted is what it proposed and what was taken.

A source that says how good each proposal looks (`match`: the n-gram source's match
length, server/drafts/ngram.py) is asked for the whole cap first, and the stream keeps one
record a class of that length (shorter than LONG: a chance match, the 2-3 tokens a chance
n-gram shares; LONG up to MID: a short agreement; MID and past: a copied stretch), so a
copied stretch drafts far while the chance and short matches beside it draft little or
nothing (on the recorded editing reply of docs/receipts/2026-12-05-drafts36: 90 % of the
drafts of matches of 16 or more were taken, 58 % of 8-15, 25 % of 4-7, 37 % of 2-3). The
proposal is then cut to the k that pays by its class's record; the class and the record
are counts, never a clock.

Where the stream's rows are the whole round, k drafts are priced by the measured cost of a
chunk of k + 1 rows (`chunk_cost`, server/drafts/policy.py CHUNK_COST: a staircase, one
pass over the blocks up to 6 rows, two for 7-9), not by the line above.
"""
from __future__ import annotations

DECAY = 0.8            # the weight of the walks before the last
PROBE = 16             # rounds without drafts after which one token is tried
PRIOR = (1.0, 2.0)     # (taken, tried): a new stream starts at a = 0.5
LONG = 4               # a `match` this long or longer: past a chance match (the 4-gram)
MID = 8                # this long or longer: the copied-stretch class (4 .. MID - 1: a short one)


class Paced:
    """A StreamDrafts that drafts only as far as pays (the same interface)."""

    def __init__(self, source, row_cost, chunk_cost=None):
        """row_cost: a fraction, or a function of the keys the stream's rows read
        (server/drafts/policy.py ROW_COST), followed by `at`. chunk_cost: what a lone
        stream's verify chunk of 1, 2, ... rows costs in one-row rounds, measured (a
        staircase: the kernels take a chunk's rows in tiles, server/drafts/policy.py
        CHUNK_COST), used where the stream's rows are the round's (rows past its end cost
        row_cost each); None: 1 + k * row_cost there too."""
        self.source = source
        self.chunk = chunk_cost
        self.cost = row_cost if callable(row_cost) else None
        self.row_cost = row_cost(0) if callable(row_cost) else row_cost
        self.taken, self.tried = PRIOR       # the record of the current class
        self.idle = 0
        self.classed = hasattr(source, "match")
        self.cls = 0                         # the class of the last proposal
        self.records = {}                    # the other classes' (taken, tried)

    def _use(self, cls: int) -> None:
        """Make `cls`'s record the current one (taken, tried, rate, expect read it)."""
        if cls != self.cls:
            self.records[self.cls] = (self.taken, self.tried)
            self.taken, self.tried = self.records.pop(cls, PRIOR)
            self.cls = cls

    def at(self, keys: int) -> None:
        """The stream's rows now read `keys` keys: its row cost there (a fixed one stays)."""
        if self.cost is not None:
            self.row_cost = self.cost(keys)

    @property
    def rate(self) -> float:
        return self.taken / self.tried

    def expect(self, k: int) -> float:
        """Tokens a verify chunk with k drafts yields, by this stream's rate: E(k)."""
        a = min(self.rate, 0.999)
        return (1 - a ** (k + 1)) / (1 - a)

    def best(self, cap: int, load: tuple = (1, 1.0)) -> int:
        """The k in 0..cap that gives the round `load` = (rows, tokens: this stream's
        decode row counted in both) the most tokens per cost (0: where none beats the
        round without drafts)."""
        rows, tokens = load
        base = 1 + (rows - 1) * self.row_cost          # the round's cost, one-row rounds
        best, gain = 0, tokens / base
        stair = self.chunk if rows == 1 else None
        for k in range(1, cap + 1):
            if stair is not None:
                cost = stair[k] if k < len(stair) else stair[-1] + (k + 1 - len(stair)) * self.row_cost
            else:
                cost = base + k * self.row_cost
            g = (tokens - 1 + self.expect(k)) / cost
            if g > gain:
                best, gain = k, g
        return best

    def wanted(self, cap: int, load: tuple = (1, 1.0)) -> int:
        """What the next propose(out, cap, load) will ask its source for (no state
        changes): an MTP source makes that many guesses ahead (server/drafts/mtp.py)."""
        n = self.best(cap, load)
        if n == 0 and cap >= 1 and self.idle + 1 >= PROBE:
            n = 1
        return n

    def propose(self, out: list, k: int, load: tuple = (1, 1.0)) -> tuple:
        if self.classed:
            return self._propose_classed(out, k, load)
        n = self.best(k, load)
        if n == 0:
            self.idle += 1
            if self.idle < PROBE or k < 1:
                return ()
            n = 1
        self.idle = 0
        return tuple(self.source.propose(out, n))

    def _propose_classed(self, out: list, k: int, load: tuple) -> tuple:
        d = tuple(self.source.propose(out, k)) if k >= 1 else ()
        if not d:
            self.idle += 1
            return ()
        m = self.source.match
        self._use((m >= LONG) + (m >= MID))
        n = self.best(len(d), load)
        if n == 0:
            self.idle += 1
            if self.idle < PROBE:
                return ()
            n = 1
        self.idle = 0
        return d[:n]

    def verified(self, proposed: int, accepted: int) -> None:
        self.source.verified(proposed, accepted)
        self.taken = self.taken * DECAY + accepted
        self.tried = self.tried * DECAY + accepted + (accepted < proposed)
