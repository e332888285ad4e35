"""MTP drafts: the checkpoint's own next-token layer (server/families/nextn.py) guesses the
tokens after the one just sampled. Control plane: the layer runs on the ranks as an
`MtpStep` (server/ranks/steps.py, server/engine/mtp_pass.py) right after each round; this
module builds that step and keeps each stream's guesses until the next round asks.

After a round, every stream that ran in it has new valid rows [start, fed) and knows the
token after each (the prompt, or the reply: a round samples the token after its last valid
row). The MTP layer writes its own KV row for each of those positions (layer n_layers of
the stream's pages: the plan counts it, server/shapes/kv_layout.py), reading the trunk's
hidden row of that position from the round just run; then, for a stream that drafts, it
chains `depth` guesses: the last row's arg-max, then one row on per guess. Rows past the
valid ones are the chain's and are rewritten by the next pass, which starts at the next
valid row.

What a stream drafts is still the pace's (server/drafts/pace.py: `Paced.wanted` is what
its next `propose` will ask), and the policy's (server/drafts/policy.py) may cut it; the
guesses are verified like any draft (server/drafts/verify.py), so drafted == plain.

A stream resumed from a kept prefix starts its MTP rows where it starts its own rows: the
prefix's MTP rows are those the stream that wrote it left (right where its tokens and the
next one agree; a guess's quality only).
"""
from __future__ import annotations

from server.ranks.steps import MtpChunk, MtpStep


class MtpSource:
    name = "mtp"
    engine_pass = True                # the scheduler runs `after_round` after each round

    def stream(self, prompt_ids) -> "MtpDrafts":
        return MtpDrafts()

    def after_round(self, driver, entries) -> None:
        """entries: [(stream, first position of the chunk, the tokens after each of its
        positions, the round row of its first new valid position, drafts wanted (-1: the
        pass deferred, MtpChunk.defer), its MtpDrafts or None, the reply's length now)] ->
        one MtpStep on every rank; each stream's guesses kept."""
        if not entries:
            return
        step = MtpStep(tuple(MtpChunk(s, start, tuple(toks), src, max(depth, 0), depth < 0)
                             for s, start, toks, src, depth, _, _ in entries))
        got = driver.run(step)
        for (_, _, _, _, depth, drafts, n_out), guess in zip(entries, got or ()):
            if drafts is not None:
                drafts.keep(n_out, tuple(guess))


class MtpDrafts:
    """One stream's guesses: those made when its reply had `at` tokens."""

    def __init__(self):
        self.at, self.guess = -1, ()
        self.made = 0                 # guesses made (the MTP pass's), all rounds

    def keep(self, n_out: int, guess: tuple) -> None:
        self.at, self.guess = n_out, guess
        self.made += len(guess)

    def propose(self, out: list, k: int) -> tuple:
        if k < 1 or self.at != len(out):
            return ()
        return self.guess[:k]

    def verified(self, proposed: int, accepted: int) -> None:
        pass
