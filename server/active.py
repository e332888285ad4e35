"""A running request on rank 0: its stream, its rows written, its reply so far."""
from __future__ import annotations

from dataclasses import dataclass, field

from server.requests import GenRequest


@dataclass
class Active:
    req: GenRequest
    stream: int
    page_ids: tuple
    fed: int                       # rows written so far (prompt rows, then reply rows)
    sampler: object                  # the driver's sampler_state(): server/engine/sampler.py
    out: list = field(default_factory=list)
    cached: int = 0
    first_token_at: float | None = None
    admitted_at: float = 0.0
    prompt_lps: list = field(default_factory=list)   # prompt_logprobs so far (server/engine/prompt_logprobs.py)
    drafts: object = None            # its StreamDrafts (server/drafts/source.py), or None: plain
    mtp_kept: int = 0                # --draft mtp: rows whose MTP pass the ranks deferred (kept)
    # a recurrent family's stream whose last verify chunk had drafts refused: that chunk's
    # start, where its recurrent state is rolled back to; its next chunk starts there and
    # re-feeds the accepted rows (server/round_build.py); None: its state stands at `fed`
    replay: int | None = None

    @property
    def ids(self) -> list:
        return self.req.prompt_ids + self.out

    def token_at(self, i: int) -> int:
        """ids[i] without building ids (a decode round asks every stream for one token)."""
        n = len(self.req.prompt_ids)
        return self.req.prompt_ids[i] if i < n else self.out[i - n]

    @property
    def length(self) -> int:
        return len(self.req.prompt_ids) + len(self.out)

    @property
    def prefilling(self) -> bool:
        return self.fed < len(self.req.prompt_ids)
