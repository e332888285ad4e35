"""Prompt lookup (n-gram) drafts: find the reply's last n tokens earlier in the prompt or
the reply, and propose what followed them there. No weights; serves every family.

The longest n in [MIN_N, MAX_N] with an earlier occurrence wins, and of its occurrences
the latest (what the text did most recently), unless that one is too near the end to
offer k tokens after it (a run repeating itself): then the first. Two indexes map each
n-gram to the ends of its first and latest occurrences that have a continuation, kept up
as tokens arrive: O(MAX_N) a token.

`match` says how far back the chosen occurrence agrees with the text's end (its n-gram,
extended token by token up to MATCH_CAP): a copied line agrees far back, a chance n-gram
does not. The pace keeps its record per class of that length (server/drafts/pace.py), so a
long match may draft the whole window while a chance one drafts little or nothing. A
function of the prompt and the reply so far, like the proposal.

How far to draft is the pace's (server/drafts/pace.py): this proposes up to what it asks.
"""
from __future__ import annotations

MIN_N, MAX_N = 2, 4
MATCH_CAP = 16           # `match` counts back at most this far


class NgramSource:
    name = "ngram"

    def stream(self, prompt_ids) -> "NgramDrafts":
        return NgramDrafts(prompt_ids)


class NgramDrafts:
    def __init__(self, prompt_ids):
        self.toks: list = list(prompt_ids)
        self.latest: dict = {}               # n-gram -> end of its latest earlier occurrence
        self.first: dict = {}                # n-gram -> end of its first occurrence
        self.done = 0                        # n-grams ending before this are indexed
        self.reply = 0                       # tokens of the reply already in toks
        self.match = 0                       # the last proposal's match length (0: none)
        self._index()

    def _index(self) -> None:
        # an n-gram ending at e has a continuation once toks has e + 1
        t, latest, first = self.toks, self.latest, self.first
        for e in range(self.done, len(t) - 1):
            for n in range(MIN_N, MAX_N + 1):
                if e - n + 1 < 0:
                    break
                g = tuple(t[e - n + 1:e + 1])
                latest[g] = e
                first.setdefault(g, e)
        self.done = max(self.done, len(t) - 1)

    def propose(self, out: list, k: int) -> tuple:
        if len(out) > self.reply:
            self.toks += out[self.reply:]
            self.reply = len(out)
            self._index()
        t = self.toks
        self.match = 0
        if k < 1:
            return ()
        end = len(t) - 1
        for n in range(min(MAX_N, len(t)), MIN_N - 1, -1):
            g = tuple(t[len(t) - n:])
            e = self.latest.get(g)
            if e is not None:
                if end - e < k:              # too near the end: the first may offer more
                    e = self.first[g]
                m = n
                while m < MATCH_CAP and e - m >= 0 and t[e - m] == t[end - m]:
                    m += 1
                self.match = m
                return tuple(t[e + 1:e + 1 + k])
        return ()

    def verified(self, proposed: int, accepted: int) -> None:
        pass
