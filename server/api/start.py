"""From a validated body and its prompt ids to running Generations: the part the
completions and chat endpoints share (limits, the fit check, admission, the requests).

n > 1 gives n requests, one per choice: choice i is the request a single call with seed
`choice_seed(seed, i)` would make (sampling.py), each with its own parse state when the
reply is constrained. Choices 1.. follow choice 0 (GenRequest.follows): the scheduler
holds them until choice 0's prompt is prefilled and kept, and they resume from its pages
(the prompt is prefilled once). The request takes one queue place, shared by its choices.
"""
from __future__ import annotations

import dataclasses
import time
import uuid

from server.requests import GenRequest
from server.text import StopSet

from .backlog import shares
from .request_checks import admit
from .textflow import check_token_ids
from .token_stream import Generation
from .sampling import (check_fit, choice_seed, resolve_max_tokens, sampling_params,
                       stop_strings)


def start_generations(state, metrics, body, ids: list, *, chat: bool, logprobs,
                      grammar=None, stops=None, keep_special: bool = False, thinking=None
                      ) -> tuple[str, list[Generation]]:
    """-> (the response id, one Generation per choice). stops: the body's stop strings
    compiled (textflow.stop_set), else they are compiled here. keep_special: the reply's
    special tokens stay in its text whatever skip_special_tokens says (a harmony reply's
    channel markup, which its parser takes out). thinking: the reply's ReasoningPlan, whose
    splitter counts each choice's reasoning tokens (usage's completion_tokens_details)."""
    check_token_ids(state.tokenizer, body.stop_token_ids or (), "stop_token_ids")
    max_tokens = resolve_max_tokens(body, prompt_len=len(ids), context=state.context, chat=chat)
    check_fit(state.scheduler, len(ids), max_tokens)
    ticket = admit(state)               # the request's place, shared by its choices
    params = sampling_params(body, max_tokens, logprobs,
                             getattr(state.tokenizer, "vocab_size", None))
    rid = f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}"
    n = body.n or 1
    eos = frozenset(getattr(state.tokenizer, "eos_ids", ()) or ())
    if stops is None:
        stops = StopSet(stop_strings(body))
    gens = []
    holds = [ticket] if n == 1 else shares(ticket, n)     # released as each choice ends
    for i in range(n):
        # choice 0 alone computes prompt_logprobs (every choice shows them)
        p = params if n == 1 else dataclasses.replace(
            params, seed=choice_seed(params.seed, i),
            prompt_logprobs=params.prompt_logprobs if i == 0 else None)
        req = GenRequest(id=rid if n == 1 else f"{rid}-{i}", prompt_ids=ids, params=p,
                         eos_ids=eos, arrival=time.monotonic(), grammar=grammar,
                         follows=None if i == 0 else gens[0].req.id,
                         draft=body.draft is not False)
        gens.append(Generation(state, metrics, req, stops,
                               include_stop=bool(body.include_stop_str_in_output),
                               skip_special=body.skip_special_tokens is not False
                               and not keep_special, index=i,
                               reasoning=thinking.stream() if thinking is not None else None))
        gens[-1].ticket = holds[i]
    return rid, gens


def start_generation(state, metrics, body, ids: list, *, chat: bool, logprobs,
                     grammar=None, stops=None, keep_special: bool = False,
                     thinking=None) -> Generation:
    return start_generations(state, metrics, body, ids, chat=chat, logprobs=logprobs,
                             grammar=grammar, stops=stops, keep_special=keep_special,
                             thinking=thinking)[1][0]


def usage(gens: list[Generation]) -> dict:
    """The prompt counted once, the completions summed (OpenAI's and vLLM's n > 1 usage)."""
    u = gens[0].usage()
    done = sum(g.completion_tokens for g in gens)
    if "completion_tokens_details" in u:
        u["completion_tokens_details"] = {"reasoning_tokens": sum(g.reasoning_tokens for g in gens)}
    return {**u, "completion_tokens": done, "total_tokens": u["prompt_tokens"] + done}
