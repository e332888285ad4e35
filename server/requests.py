"""What the front end hands the scheduler, and what flows back: plain data, no device."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


SHUTTING_DOWN = "shutting_down"   # TokenEvent.code of a request a shutdown ended (503)


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int = 16
    temperature: float = 1.0      # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0                # 0 = off
    min_p: float = 0.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    seed: int | None = None       # same seed, same reply
    stop_token_ids: tuple = ()
    ignore_eos: bool = False
    logprobs: int | None = None   # top logprobs to return per token (0 = only the chosen one)
    logit_bias: tuple = ()        # ((token_id, bias), ...), added to the logits before sampling
    min_tokens: int = 0           # eos and stop_token_ids are masked out until this many
    # top alternatives of each prompt token's logprob (None: none computed); such a request
    # prefills every prompt row's logits and never resumes from the prompt cache
    prompt_logprobs: int | None = None

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0 or self.top_k == 1


@dataclass
class GenRequest:
    id: str
    prompt_ids: list
    params: SamplingParams
    eos_ids: frozenset = frozenset()
    arrival: float = 0.0
    grammar: Any = None           # server.engine.grammar.Grammar: the reply must match it
    # n > 1: choice i > 0 names choice 0's id; the scheduler holds it until choice 0's
    # prompt is prefilled and kept, so it resumes from those pages (one prefill a prompt)
    follows: str | None = None
    draft: bool = True            # False: never drafted ("draft": false); drafts never change a reply


@dataclass(frozen=True)
class TokenEvent:
    """One generated token, or the end. finish_reason: None while running, else
    'stop' (eos or stop token), 'length' (max_tokens), 'abort' (cancelled), 'error'."""
    token_id: int | None
    logprob: float | None = None
    top_logprobs: tuple = ()       # ((token_id, logprob), ...)
    finish_reason: str | None = None
    error: str | None = None
    error_code: int = 0            # HTTP status suggested for errors (503 rank lost, 400 refused)
    code: str | None = None        # the API error's code, where the scheduler knows it (rank_lost)
    prompt_tokens: int = 0
    cached_tokens: int = 0         # prompt tokens resumed from the prompt cache
    # on the first token's event of a request with prompt_logprobs: for prompt tokens
    # 1 .. n-1, ((token_id, logprob, rank, ((id, logprob), ...)), ...)
    prompt_logprobs: tuple | None = None
