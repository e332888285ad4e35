"""What goes wrong between ranks, as errors a person can act on.

Every message names the rank, the number or field, and what to do about it.
"""
from __future__ import annotations


class RankError(RuntimeError):
    """Base of every error between ranks."""


class RankLost(RankError):
    """A peer died, closed its connection, stopped answering, or reported a failure."""

    def __init__(self, rank: int, detail: str):
        self.rank = rank
        self.detail = detail
        super().__init__(f"rank {rank} lost: {detail}")


class RankMismatch(RankError):
    """Ranks are out of step: a different protocol position, buffer size or page bytes."""


class FingerprintMismatch(RankError):
    """Ranks disagree on a fingerprint field; raised on every rank with the same message."""


class JoinError(RankError):
    """The ranks could not form a group: a bad hello, a rank twice, a port in use."""


class JoinTimeout(JoinError):
    """A rank did not arrive (or rank 0 could not be reached) within the join timeout."""
