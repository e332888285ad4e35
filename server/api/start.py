"""From a validated body and its prompt ids to a running Generation: the part the
completions and chat endpoints share (limits, the fit check, admission, the request)."""
from __future__ import annotations

import time
import uuid

from server.requests import GenRequest

from .request_checks import admit
from .token_stream import Generation
from .sampling import check_fit, resolve_max_tokens, sampling_params, stop_strings


def start_generation(state, metrics, body, ids: list, *, chat: bool, logprobs) -> Generation:
    max_tokens = resolve_max_tokens(body, prompt_len=len(ids), context=state.context, chat=chat)
    check_fit(state.scheduler, len(ids), max_tokens)
    ticket = admit(state)
    req = GenRequest(id=f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}", prompt_ids=ids,
                     params=sampling_params(body, max_tokens, logprobs),
                     eos_ids=frozenset(getattr(state.tokenizer, "eos_ids", ()) or ()),
                     arrival=time.monotonic())
    gen = Generation(state, metrics, req, stop_strings(body))
    gen.ticket = ticket                 # released when the generation ends
    return gen
