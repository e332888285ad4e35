"""POST /v1/completions: a prompt (text or token ids) in, text out, whole or streamed."""
from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .request_checks import check_model, parse_body
from .token_stream import Generation, collect
from .errors import invalid
from .sampling import refuse_unsupported
from .start import start_generation
from .schemas import CompletionRequest
from .sse import sse_response
from .textflow import check_token_ids, encode
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
    ids = await text_work(request).run(prompt_ids, state, body.prompt)
    gen = start_generation(state, metrics, body, ids, chat=False, logprobs=body.logprobs)
    req = gen.req
    head = {"id": req.id, "object": "text_completion", "created": int(time.time()),
            "model": state.model_name}
    want_logprobs = body.logprobs is not None

    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return sse_response(_stream(state, gen, head, want_logprobs, include_usage))

    result = await collect(request, gen)
    if result is None:
        return Response(status_code=499)    # the client left; nobody reads this
    text, tokens, finish, error = result
    if error is not None:
        return error.response()
    choice = {"index": 0, "text": text, "finish_reason": finish,
              "logprobs": logprobs_block(state.tokenizer, tokens, 0) if want_logprobs else None}
    return JSONResponse({**head, "choices": [choice], "usage": gen.usage()})


async def _stream(state, gen: Generation, head: dict, want_logprobs: bool, include_usage: bool):
    offset = 0
    extra = {"usage": None} if include_usage else {}
    async for p in gen.pieces():
        if p.error is not None:
            if p.text:
                yield {**head, "choices": [{"index": 0, "text": p.text, "logprobs": None,
                                            "finish_reason": None}], **extra}
            raise p.error
        lp = logprobs_block(state.tokenizer, p.tokens, offset) if want_logprobs else None
        offset += len(p.text)
        yield {**head, "choices": [{"index": 0, "text": p.text, "logprobs": lp,
                                    "finish_reason": p.finish}], **extra}
    if include_usage:
        yield {**head, "choices": [], "usage": gen.usage()}
