"""POST /v1/completions: a prompt (text or token ids) in, text out, whole or streamed."""
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
    ids = await text_work(request).run(prompt_ids, state, body.prompt)
    check_size(len(ids), prompt_logprobs=asked_k,
               echo_logprobs=body.logprobs if echo_lp else None, n=body.n or 1)
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
    for _, _, _, error in results:
        if error is not None:
            return error.response()
    entries = gens[0].prompt_logprobs       # choice 0 computed them (start.py)

    def build() -> dict:
        texts = TokenTexts(state.tokenizer)
        plp = prompt_logprobs_json(texts, entries) if asked_plp else None
        head_lp = echo_block(texts, ids, entries, body.logprobs) if echo_lp else None
        choices = []
        for i, (text, tokens, finish, _) in enumerate(results):
            lp = None
            if want_logprobs:
                lp = logprobs_block(texts, tokens, len(echo))
                if head_lp is not None:
                    lp = joined(head_lp, lp)
            # prompt_logprobs once: on choice 0 (prompt_logprob_json.py)
            extra = {"prompt_logprobs": plp if i == 0 else None} if asked_plp else {}
            choices.append({"index": i, "text": echo + text, "finish_reason": finish,
                            "logprobs": lp, **extra})
        return {**head, "choices": choices, "usage": usage(gens)}

    if want_logprobs or asked_plp:
        return await json_reply(request, build)     # megabytes, possibly: on a worker
    return JSONResponse(build())


def _prompt_text(state, prompt, ids) -> str:
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return prompt
    return state.tokenizer.decode(ids)


async def _stream(state, gens, head: dict, want_logprobs: bool, include_usage: bool, echo: str):
    offsets = [0] * len(gens)
    texts = TokenTexts(state.tokenizer)
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
        lp = logprobs_block(texts, p.tokens, offsets[i]) if want_logprobs else None
        offsets[i] += len(p.text)
        yield {**head, "choices": [{"index": i, "text": p.text, "logprobs": lp,
                                    "finish_reason": p.finish}], **extra}
    if include_usage:
        yield {**head, "choices": [], "usage": usage(gens)}
