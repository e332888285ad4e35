"""POST /v1/chat/completions: messages through the model's chat template, then generate."""
from __future__ import annotations

import time

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from .request_checks import check_model, parse_body
from . import tools as toolmod
from .token_stream import collect_all, merged
from .errors import invalid
from .sampling import refuse_unsupported, stop_strings
from .logprob_tokens import TokenTexts
from .prompt_logprob_json import check_size, prompt_logprobs_json
from .start import start_generations, usage
from .schemas import ChatRequest
from .sse import sse_response
from .structured import off_loop, request_grammar
from .textflow import encode_chat, message_dicts, render_chat_prompt, stop_set
from .textwork import json_reply, refuse_sure_overflow, text_work

router = APIRouter()


def chat_prompt_ids(state, messages, add_generation_prompt: bool = True,
                    plan: toolmod.ToolPlan | None = None,
                    template_kwargs: dict | None = None) -> list[int]:
    msgs, extra = toolmod.prepare_messages(state, message_dicts(messages),
                                           plan or toolmod.ToolPlan("none"))
    reserved = {"messages", "add_generation_prompt", "bos_token", "eos_token"}
    extra = {**{k: v for k, v in (template_kwargs or {}).items() if k not in reserved}, **extra}
    text = render_chat_prompt(state, msgs, add_generation_prompt, **extra)
    refuse_sure_overflow(state, text, "messages")
    # the template writes its own bos (no second one), and its own markers: special tokens'
    # text inside the messages stays text (no forged turns)
    ids = encode_chat(state.tokenizer, text)
    if not ids:
        raise invalid("the messages render to an empty prompt", param="messages")
    return ids


def _token_entry(texts: TokenTexts, token_id: int, logprob) -> dict:
    token, raw = texts.chat(token_id)
    return {"token": token, "logprob": logprob, "bytes": raw}


def logprobs_block(texts: TokenTexts, tokens: list) -> dict:
    return {"content": [
        {**_token_entry(texts, t, lp),
         "top_logprobs": [_token_entry(texts, u, ulp) for u, ulp in top]}
        for t, lp, top in tokens]}


@router.post("/v1/chat/completions")
async def chat_completions(request: Request):
    state, metrics = request.app.state.foldserve, request.app.state.metrics
    body = await parse_body(request, ChatRequest)
    check_model(state, body.model)
    refuse_unsupported(body)
    if body.top_logprobs is not None and not body.logprobs:
        raise invalid("top_logprobs needs logprobs=true", param="top_logprobs")
    plan = await off_loop(toolmod.plan, state, body)
    grammar = await off_loop(request_grammar, state, body)
    if plan.grammar is not None:
        if grammar is not None:
            raise invalid(f"tool_choice {body.tool_choice!r} constrains the reply; it cannot "
                          "be combined with response_format or a grammar", param="tool_choice")
        grammar = plan.grammar
    ids = await text_work(request).run(chat_prompt_ids, state, body.messages,
                                       body.add_generation_prompt is not False, plan,
                                       body.chat_template_kwargs)
    check_size(len(ids), prompt_logprobs=body.prompt_logprobs)
    logprobs = (body.top_logprobs or 0) if body.logprobs else None
    stops = await stop_set(text_work(request), stop_strings(body))
    rid, gens = start_generations(state, metrics, body, ids, chat=True, logprobs=logprobs,
                                  grammar=grammar, stops=stops)
    head = {"id": rid, "created": int(time.time()), "model": state.model_name}

    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return sse_response(_stream(state, gens, head, body.logprobs, include_usage, plan))

    results = await collect_all(request, gens)
    if results is None:
        return Response(status_code=499)    # the client left; nobody reads this
    for _, _, _, error in results:
        if error is not None:
            return error.response()
    entries = gens[0].prompt_logprobs

    def build() -> dict:
        texts = TokenTexts(state.tokenizer)
        choices = []
        for i, (text, tokens, finish, _) in enumerate(results):
            msg, finish = toolmod.message(text, finish, plan)
            choices.append({"index": i, "message": msg,
                            "logprobs": logprobs_block(texts, tokens) if body.logprobs
                            else None, "finish_reason": finish})
        extra = {} if body.prompt_logprobs is None else {
            "prompt_logprobs": prompt_logprobs_json(texts, entries)}
        return {**head, "object": "chat.completion", "choices": choices,
                "usage": usage(gens), **extra}

    if body.logprobs or body.prompt_logprobs is not None:
        return await json_reply(request, build)     # megabytes, possibly: on a worker
    return JSONResponse(build())


async def _stream(state, gens, head: dict, want_logprobs: bool, include_usage: bool,
                  plan: toolmod.ToolPlan):
    head = {**head, "object": "chat.completion.chunk"}
    extra = {"usage": None} if include_usage else {}
    parsers = [toolmod.ToolStream() if plan.parses else None for _ in gens]
    texts = TokenTexts(state.tokenizer)

    def chunk(i: int, delta: dict, finish=None, lp=None) -> dict:
        return {**head, "choices": [{"index": i, "delta": delta, "logprobs": lp,
                                     "finish_reason": finish}], **extra}

    for i in range(len(gens)):
        yield chunk(i, {"role": "assistant", "content": ""})
    async for i, p in merged([g.pieces() for g in gens]):
        tp = parsers[i]
        if p.text:
            lp = logprobs_block(texts, p.tokens) if want_logprobs else None
            if tp is None:
                yield chunk(i, {"content": p.text}, lp=lp)
            else:
                for d in tp.push(p.text):
                    yield chunk(i, d, lp=lp)
                    lp = None
        if p.error is not None:
            raise p.error
        if p.finish:
            finish = p.finish
            if tp is not None:
                for d in tp.finish():
                    yield chunk(i, d)
                if tp.count and finish == "stop":
                    finish = "tool_calls"
            yield chunk(i, {}, finish=finish)
    if include_usage:
        yield {**head, "choices": [], "usage": usage(gens)}
