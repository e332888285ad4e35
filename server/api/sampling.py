"""From a validated body to SamplingParams, with the checks pydantic cannot express.

max_tokens defaults (documented in docs/api.md):
  completions: 16, as OpenAI's, cut to the room the context leaves after the prompt;
  chat: the whole room the context leaves after the prompt, as vLLM's.
"""
from __future__ import annotations

from server.requests import SamplingParams

from .errors import context_exceeded, from_exception, invalid
from .schemas import SamplingFields

COMPLETION_DEFAULT_MAX_TOKENS = 16


MAX_N = 16

# Stop strings: at most MAX_STOPS of at most MAX_STOP_CHARS characters each (so at most
# 16,384 in all). Matching is linear in the reply whatever they are (server/text/stops.py);
# the bound keeps the automaton's build (tens of ms at the bound, on a worker) and the
# tail held back while streaming (the longest stop less one) small. OpenAI takes 4 stops.
MAX_STOPS = 32
MAX_STOP_CHARS = 512


def refuse_unsupported(body: SamplingFields) -> None:
    if body.n is not None and body.n > MAX_N:
        raise invalid(f"n={body.n} is more than this server gives ({MAX_N} choices at most)",
                      param="n")
    if getattr(body, "best_of", None) not in (None, 1):
        raise invalid(f"best_of={body.best_of} is not supported; use best_of=1", param="best_of")
    if getattr(body, "echo", False) and getattr(body, "logprobs", None) is not None \
            and body.stream:
        raise invalid("echo=true with logprobs needs the prompt's logprobs, which are not "
                      "streamed (as prompt_logprobs); send stream=false", param="echo")
    if body.prompt_logprobs is not None and body.stream:
        raise invalid("prompt_logprobs is not available with stream=true (as in vLLM); "
                      "send stream=false", param="prompt_logprobs")
    if getattr(body, "suffix", None):
        raise invalid("suffix is not supported (no fill-in-the-middle)", param="suffix")
    if isinstance(body.stop, list) and any(s == "" for s in body.stop) or body.stop == "":
        raise invalid("stop strings must not be empty", param="stop")
    check_stops(stop_strings(body), "stop")


def check_stops(stops: list[str], param: str) -> None:
    """At most MAX_STOPS stop strings of at most MAX_STOP_CHARS characters (a 400 naming
    `param`: stop, or /v1/messages' stop_sequences)."""
    if len(stops) > MAX_STOPS:
        raise invalid(f"{param} holds {len(stops)} strings; this server takes at most "
                      f"{MAX_STOPS} stop strings", param=param)
    longest = max(stops, key=len, default="")
    if len(longest) > MAX_STOP_CHARS:
        raise invalid(f"{param} holds a string of {len(longest)} characters; this server "
                      f"takes stop strings of at most {MAX_STOP_CHARS} characters",
                      param=param)


def stop_strings(body: SamplingFields) -> list[str]:
    if body.stop is None:
        return []
    return [body.stop] if isinstance(body.stop, str) else list(body.stop)


def resolve_max_tokens(body: SamplingFields, *, prompt_len: int, context: int,
                       chat: bool) -> int:
    asked = body.max_completion_tokens if body.max_completion_tokens is not None else body.max_tokens
    room = context - prompt_len
    if asked is None:
        asked = room if chat else min(COMPLETION_DEFAULT_MAX_TOKENS, room)
        asked = max(asked, 1)   # a prompt that fills the context is refused below
    if prompt_len + asked > context:
        raise context_exceeded(context, prompt_len, asked)
    return asked


def check_fit(scheduler, prompt_len: int, max_tokens: int) -> None:
    """The scheduler's own word: a request that can never fit its pool is refused now."""
    try:
        scheduler.check(prompt_len, max_tokens)
    except Exception as e:
        if isinstance(e, ValueError) or hasattr(e, "status") or hasattr(e, "code"):
            raise from_exception(e) from e
        raise


def logit_bias(body: SamplingFields, vocab: int | None) -> tuple:
    """OpenAI's {"token id as a string": bias in [-100, 100]} -> ((id, bias), ...), sorted."""
    if not body.logit_bias:
        return ()
    out = []
    for key, bias in body.logit_bias.items():
        if not (key.isascii() and key.isdigit() and (key == "0" or key[0] != "0")):
            raise invalid(f"logit_bias keys are token ids as strings, got {key!r}",
                          param="logit_bias")
        tid = int(key)
        if tid < 0 or (isinstance(vocab, int) and vocab > 0 and tid >= vocab):
            raise invalid(f"logit_bias: token id {tid} is out of range (the vocabulary has "
                          f"{vocab} tokens)", param="logit_bias")
        out.append((tid, float(bias)))
    return tuple(sorted(out))


def choice_seed(seed: int | None, index: int) -> int | None:
    """Choice `index` of an n > 1 request draws as a single request with this seed would:
    seed + index (mod 2**64); without a seed every choice draws its own."""
    return None if seed is None else (seed + index) % 2**64


def sampling_params(body: SamplingFields, max_tokens: int, logprobs: int | None,
                    vocab: int | None = None) -> SamplingParams:
    d = SamplingParams()
    top_k = body.top_k if body.top_k not in (None, -1) else 0
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=d.temperature if body.temperature is None else float(body.temperature),
        top_p=d.top_p if body.top_p is None else float(body.top_p),
        top_k=top_k,
        min_p=d.min_p if body.min_p is None else float(body.min_p),
        presence_penalty=float(body.presence_penalty or 0.0),
        frequency_penalty=float(body.frequency_penalty or 0.0),
        repetition_penalty=d.repetition_penalty if body.repetition_penalty is None
        else float(body.repetition_penalty),
        seed=body.seed,
        stop_token_ids=tuple(body.stop_token_ids or ()),
        ignore_eos=bool(body.ignore_eos),
        logprobs=logprobs,
        logit_bias=logit_bias(body, vocab),
        min_tokens=min(int(body.min_tokens or 0), max_tokens),
        prompt_logprobs=body.prompt_logprobs,
    )
