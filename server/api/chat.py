"""POST /v1/chat/completions: messages through the model's chat template, then generate."""
from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .request_checks import check_model, parse_body
from .token_stream import Generation, collect
from .errors import invalid
from .sampling import refuse_unsupported
from .start import start_generation
from .schemas import ChatRequest
from .sse import sse_response
from .textflow import encode_chat, message_dicts, render_chat_prompt
from .textwork import refuse_sure_overflow, text_work

router = APIRouter()


def chat_prompt_ids(state, messages, add_generation_prompt: bool = True) -> list[int]:
    text = render_chat_prompt(state, message_dicts(messages), add_generation_prompt)
    refuse_sure_overflow(state, text, "messages")
    # the template writes its own bos (no second one), and its own markers: special tokens'
    # text inside the messages stays text (no forged turns)
    ids = encode_chat(state.tokenizer, text)
    if not ids:
        raise invalid("the messages render to an empty prompt", param="messages")
    return ids


def _token_entry(tok, token_id: int, logprob) -> dict:
    text = tok.decode([token_id])
    return {"token": text, "logprob": logprob, "bytes": list(text.encode("utf-8"))}


def logprobs_block(tok, tokens: list) -> dict:
    return {"content": [
        {**_token_entry(tok, t, lp), "top_logprobs": [_token_entry(tok, u, ulp) for u, ulp in top]}
        for t, lp, top in tokens]}


@router.post("/v1/chat/completions")
async def chat_completions(request: Request):
    state, metrics = request.app.state.foldserve, request.app.state.metrics
    body = await parse_body(request, ChatRequest)
    check_model(state, body.model)
    refuse_unsupported(body)
    if body.top_logprobs is not None and not body.logprobs:
        raise invalid("top_logprobs needs logprobs=true", param="top_logprobs")
    ids = await text_work(request).run(chat_prompt_ids, state, body.messages,
                                       body.add_generation_prompt is not False)
    logprobs = (body.top_logprobs or 0) if body.logprobs else None
    gen = start_generation(state, metrics, body, ids, chat=True, logprobs=logprobs)
    req = gen.req
    head = {"id": req.id, "created": int(time.time()), "model": state.model_name}

    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return sse_response(_stream(state, gen, head, body.logprobs, include_usage))

    result = await collect(request, gen)
    if result is None:
        return Response(status_code=499)    # the client left; nobody reads this
    text, tokens, finish, error = result
    if error is not None:
        return error.response()
    choice = {"index": 0, "message": {"role": "assistant", "content": text},
              "logprobs": logprobs_block(state.tokenizer, tokens) if body.logprobs else None,
              "finish_reason": finish}
    return JSONResponse({**head, "object": "chat.completion", "choices": [choice],
                         "usage": gen.usage()})


async def _stream(state, gen: Generation, head: dict, want_logprobs: bool, include_usage: bool):
    head = {**head, "object": "chat.completion.chunk"}
    extra = {"usage": None} if include_usage else {}

    def chunk(delta: dict, finish=None, lp=None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "logprobs": lp,
                                     "finish_reason": finish}], **extra}

    yield chunk({"role": "assistant", "content": ""})
    async for p in gen.pieces():
        if p.text:
            lp = logprobs_block(state.tokenizer, p.tokens) if want_logprobs else None
            yield chunk({"content": p.text}, lp=lp)
        if p.error is not None:
            raise p.error
        if p.finish:
            yield chunk({}, finish=p.finish)
    if include_usage:
        yield {**head, "choices": [], "usage": gen.usage()}
