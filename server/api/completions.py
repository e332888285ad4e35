"""POST /v1/completions: a prompt (text or token ids) in, text out, whole or streamed."""
from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .request_checks import check_model, parse_body
from .token_stream import collect_all, merged
from .errors import invalid
from .sampling import refuse_unsupported, stop_strings
from .prompt_logprob_json import prompt_logprobs_json
from .start import start_generations, usage
from .structured import off_loop, request_grammar
from .schemas import CompletionRequest
from .sse import sse_response
from .textflow import check_token_ids, encode, stop_set
from .textwork import refuse_sure_overflow, text_work

router = APIRouter()


def prompt_ids(state, prompt) -> list[int]:
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        if len(prompt) != 1:
            raise invalid(f"prompt holds {len(prompt)} prompts; this server takes one prompt "
                          "per request", param="prompt")
        prompt = prompt[0]
    if isinstance(prompt, str):
        if not prompt:
            raise invalid("prompt is empty; send some text or token ids", param="prompt")
        refuse_sure_overflow(state, prompt, "prompt")
        ids = encode(state.tokenizer, prompt, add_special_tokens=True)
    else:
        ids = list(prompt)
        check_token_ids(state.tokenizer, ids, "prompt")
    if not ids:
        raise invalid("prompt is empty; send some text or token ids", param="prompt")
    return ids


def echo_block(tok, ids: list, entries, k: int) -> dict:
    """echo with logprobs (OpenAI's legacy form): the prompt's own tokens first, the first
    with no logprob; entries are the scheduler's prompt_logprobs of tokens 1..n-1."""
    out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    offset = 0
    for i, token_id in enumerate(ids):
        text = tok.decode([token_id])
        out["tokens"].append(text)
        if i == 0 or entries is None or i - 1 >= len(entries):
            out["token_logprobs"].append(None)
            out["top_logprobs"].append(None)
        else:
            _, lp, _, top = entries[i - 1]
            out["token_logprobs"].append(lp)
            out["top_logprobs"].append({tok.decode([t]): v for t, v in top[:k]})
        out["text_offset"].append(offset)
        offset += len(text)
    return out


def joined(a: dict, b: dict) -> dict:
    return {key: a[key] + b[key] for key in a}


def logprobs_block(tok, tokens: list, offset: int) -> dict:
    out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for token_id, logprob, top in tokens:
        text = tok.decode([token_id])
        out["tokens"].append(text)
        out["token_logprobs"].append(logprob)
        out["top_logprobs"].append({tok.decode([t]): lp for t, lp in top})
        out["text_offset"].append(offset)
        offset += len(text)
    return out


@router.post("/v1/completions")
async def completions(request: Request):
    state, metrics = request.app.state.foldserve, request.app.state.metrics
    body = await parse_body(request, CompletionRequest)
    check_model(state, body.model)
    refuse_unsupported(body)
    asked_plp = body.prompt_logprobs is not None
    echo_lp = bool(body.echo) and body.logprobs is not None
    if echo_lp:                  # the prompt's logprobs, for its part of the logprobs block
        body = body.model_copy(update={"prompt_logprobs": max(body.logprobs,
                                                              body.prompt_logprobs or 0)})
    ids = await text_work(request).run(prompt_ids, state, body.prompt)
    grammar = await off_loop(request_grammar, state, body)
    stops = await stop_set(text_work(request), stop_strings(body))
    rid, gens = start_generations(state, metrics, body, ids, chat=False,
                                  logprobs=body.logprobs, grammar=grammar, stops=stops)
    head = {"id": rid, "object": "text_completion", "created": int(time.time()),
            "model": state.model_name}
    want_logprobs = body.logprobs is not None
    # echo: the prompt's text before each choice's reply (a token-id prompt decoded)
    echo = _prompt_text(state, body.prompt, ids) if body.echo else ""

    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return sse_response(_stream(state, gens, head, want_logprobs, include_usage, echo))

    results = await collect_all(request, gens)
    if results is None:
        return Response(status_code=499)    # the client left; nobody reads this
    choices = []
    tok, entries = state.tokenizer, gens[0].prompt_logprobs   # choice 0's, for every choice
    plp = {"prompt_logprobs": prompt_logprobs_json(tok, entries)} if asked_plp else {}
    head_lp = echo_block(tok, ids, entries, body.logprobs) if echo_lp else None
    for i, (text, tokens, finish, error) in enumerate(results):
        if error is not None:
            return error.response()
        lp = None
        if want_logprobs:
            lp = logprobs_block(tok, tokens, len(echo))
            if head_lp is not None:
                lp = joined(head_lp, lp)
        choices.append({"index": i, "text": echo + text, "finish_reason": finish,
                        "logprobs": lp, **plp})
    return JSONResponse({**head, "choices": choices, "usage": usage(gens)})


def _prompt_text(state, prompt, ids) -> str:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt
    return state.tokenizer.decode(ids)


async def _stream(state, gens, head: dict, want_logprobs: bool, include_usage: bool, echo: str):
    offsets = [0] * len(gens)
    extra = {"usage": None} if include_usage else {}
    if echo:
        for i in range(len(gens)):
            yield {**head, "choices": [{"index": i, "text": echo, "logprobs": None,
                                        "finish_reason": None}], **extra}
    async for i, p in merged([g.pieces() for g in gens]):
        if p.error is not None:
            if p.text:
                yield {**head, "choices": [{"index": i, "text": p.text, "logprobs": None,
                                            "finish_reason": None}], **extra}
            raise p.error
        lp = logprobs_block(state.tokenizer, p.tokens, offsets[i]) if want_logprobs else None
        offsets[i] += len(p.text)
        yield {**head, "choices": [{"index": i, "text": p.text, "logprobs": lp,
                                    "finish_reason": p.finish}], **extra}
    if include_usage:
        yield {**head, "choices": [], "usage": usage(gens)}
