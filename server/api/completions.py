"""POST /v1/completions: a prompt (text or token ids) in, text out, whole or streamed.

`prompt` may be a list of prompts (strings or token-id lists): each runs as its own
request (its own queue place, its own n choices); the reply's choices are numbered as
OpenAI numbers them, prompt i's choice j at index i * n + j, and the usage sums them."""
from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .request_checks import check_model, parse_body
from .token_stream import collect_all, merged
from .errors import invalid
from .sampling import refuse_unsupported, stop_strings
from .logprob_tokens import TokenTexts
from .prompt_logprob_json import check_size, prompt_logprobs_json
from .start import start_generations, usage
from .structured import off_loop, request_grammar
from .schemas import CompletionRequest
from .sse import sse_response
from .textflow import check_token_ids, encode, stop_set
from .textwork import json_reply, refuse_sure_overflow, text_work

router = APIRouter()


def prompts_of(prompt) -> list:
    """`prompt` as a list of single prompts (a string or a list of token ids each)."""
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        return list(prompt)
    return [prompt]


def prompt_ids(state, prompt, param: str = "prompt") -> list[int]:
    """One prompt's ids (a string or token ids; a one-element list of either too)."""
    if isinstance(prompt, list) and len(prompt) == 1 and not isinstance(prompt[0], int):
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise invalid("prompt is empty; send some text or token ids", param=param)
        refuse_sure_overflow(state, prompt, param)
        ids = encode(state.tokenizer, prompt, add_special_tokens=True)
    else:
        ids = list(prompt)
        check_token_ids(state.tokenizer, ids, param)
    if not ids:
        raise invalid("prompt is empty; send some text or token ids", param=param)
    return ids


def all_prompt_ids(state, prompt) -> list[list[int]]:
    many = prompts_of(prompt)
    if len(many) == 1:
        return [prompt_ids(state, many[0])]
    return [prompt_ids(state, p, f"prompt[{i}]") for i, p in enumerate(many)]


def echo_block(texts: TokenTexts, ids: list, entries, k: int) -> dict:
    """echo with logprobs (OpenAI's legacy form): the prompt's own tokens first, the first
    with no logprob; entries are the scheduler's prompt_logprobs of tokens 1..n-1."""
    out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    offset = 0
    for i, token_id in enumerate(ids):
        out["tokens"].append(texts.legacy(token_id))
        if i == 0 or entries is None or i - 1 >= len(entries):
            out["token_logprobs"].append(None)
            out["top_logprobs"].append(None)
        else:
            _, lp, _, top = entries[i - 1]
            out["token_logprobs"].append(lp)
            out["top_logprobs"].append({texts.legacy(t): v for t, v in top[:k]})
        out["text_offset"].append(offset)
        offset += len(texts.text(token_id))
    return out


def joined(a: dict, b: dict) -> dict:
    return {key: a[key] + b[key] for key in a}


def logprobs_block(texts: TokenTexts, tokens: list, offset: int) -> dict:
    out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for token_id, logprob, top in tokens:
        out["tokens"].append(texts.legacy(token_id))
        out["token_logprobs"].append(logprob)
        out["top_logprobs"].append({texts.legacy(t): lp for t, lp in top})
        out["text_offset"].append(offset)
        offset += len(texts.text(token_id))
    return out


@router.post("/v1/completions")
async def completions(request: Request):
    state, metrics = request.app.state.foldserve, request.app.state.metrics
    body = await parse_body(request, CompletionRequest)
    check_model(state, body.model)
    refuse_unsupported(body)
    asked_k = body.prompt_logprobs            # before echo's copy below
    asked_plp = asked_k is not None
    echo_lp = bool(body.echo) and body.logprobs is not None
    if echo_lp:                  # the prompt's logprobs, for its part of the logprobs block
        body = body.model_copy(update={"prompt_logprobs": max(body.logprobs,
                                                              body.prompt_logprobs or 0)})
    many = await text_work(request).run(all_prompt_ids, state, body.prompt)
    for ids in many:            # each prompt's reply part bounded, before any starts
        check_size(len(ids), prompt_logprobs=asked_k,
                   echo_logprobs=body.logprobs if echo_lp else None, n=body.n or 1)
    grammar = await off_loop(request_grammar, state, body)
    stops = await stop_set(text_work(request), stop_strings(body))    # shared by all
    groups, rid = [], None          # each prompt's Generations (its n choices)
    try:
        for ids in many:
            gid, gens = start_generations(state, metrics, body, ids, chat=False,
                                          logprobs=body.logprobs, grammar=grammar,
                                          stops=stops)
            rid = rid or gid
            groups.append(gens)
    except BaseException:
        for gens in groups:         # started nothing yet: give their queue places back
            for g in gens:
                if g.ticket is not None:
                    g.ticket.release()
        raise
    head = {"id": rid, "object": "text_completion", "created": int(time.time()),
            "model": state.model_name}
    want_logprobs = body.logprobs is not None
    # echo: each prompt's text before its choices' replies (a token-id prompt decoded)
    given = prompts_of(body.prompt)
    echoes = [_prompt_text(state, given[k], ids) if body.echo else ""
              for k, ids in enumerate(many)]
    flat = [g for gens in groups for g in gens]             # index i * n + j
    echo_of = [echoes[k] for k, gens in enumerate(groups) for _ in gens]

    if body.stream:
        opts = body.stream_options
        include_usage = bool(opts and opts.include_usage)
        continuous = bool(opts and opts.continuous_usage_stats)
        return sse_response(_stream(state, flat, groups, head, want_logprobs, include_usage,
                                    continuous, echo_of))

    results = await collect_all(request, flat)
    if results is None:
        return Response(status_code=499)    # the client left; nobody reads this
    for _, _, _, error in results:
        if error is not None:
            return error.response()
    # each prompt's choice 0 computed its prompt logprobs (start.py)
    entries = [gens[0].prompt_logprobs for gens in groups]

    def build() -> dict:
        texts = TokenTexts(state.tokenizer)
        choices = []
        i = 0
        for k, gens in enumerate(groups):
            plp = prompt_logprobs_json(texts, entries[k]) if asked_plp else None
            head_lp = echo_block(texts, many[k], entries[k], body.logprobs) if echo_lp \
                else None
            for j in range(len(gens)):
                text, tokens, finish, _ = results[i]
                lp = None
                if want_logprobs:
                    lp = logprobs_block(texts, tokens, len(echoes[k]))
                    if head_lp is not None:
                        lp = joined(head_lp, lp)
                # prompt_logprobs once a prompt: on its first choice (prompt_logprob_json.py)
                extra = {"prompt_logprobs": plp if j == 0 else None} if asked_plp else {}
                choices.append({"index": i, "text": echoes[k] + text,
                                "finish_reason": finish, "logprobs": lp, **extra})
                i += 1
        return {**head, "choices": choices, "usage": total_usage(groups)}

    if want_logprobs or asked_plp:
        return await json_reply(request, build)     # megabytes, possibly: on a worker
    return JSONResponse(build())


def total_usage(groups: list) -> dict:
    """Each prompt's usage (its prompt once, its choices summed), summed over the prompts."""
    out: dict = {}
    for gens in groups:
        u = usage(gens)
        for key in ("prompt_tokens", "completion_tokens", "total_tokens"):
            out[key] = out.get(key, 0) + u[key]
        cached = out.setdefault("prompt_tokens_details", {"cached_tokens": 0})
        cached["cached_tokens"] += u["prompt_tokens_details"]["cached_tokens"]
    return out


def _prompt_text(state, prompt, ids) -> str:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt
    return state.tokenizer.decode(ids)


async def _stream(state, gens, groups, head: dict, want_logprobs: bool, include_usage: bool,
                  continuous: bool, echoes: list[str]):
    """continuous (stream_options.continuous_usage_stats): every chunk carries the usage
    so far; include_usage: a last chunk with the whole usage (else chunks carry null)."""
    offsets = [0] * len(gens)
    texts = TokenTexts(state.tokenizer)

    def extra() -> dict:
        if continuous:
            return {"usage": total_usage(groups)}
        return {"usage": None} if include_usage else {}

    for i, echo in enumerate(echoes):
        if echo:
            yield {**head, "choices": [{"index": i, "text": echo, "logprobs": None,
                                        "finish_reason": None}], **extra()}
    async for i, p in merged([g.pieces() for g in gens]):
        if p.error is not None:
            if p.text:
                yield {**head, "choices": [{"index": i, "text": p.text, "logprobs": None,
                                            "finish_reason": None}], **extra()}
            raise p.error
        lp = logprobs_block(texts, p.tokens, offsets[i]) if want_logprobs else None
        offsets[i] += len(p.text)
        yield {**head, "choices": [{"index": i, "text": p.text, "logprobs": lp,
                                    "finish_reason": p.finish}], **extra()}
    if include_usage:
        yield {**head, "choices": [], "usage": total_usage(groups)}
