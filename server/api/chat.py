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
from .harmony_constraint import harmony_constraint
from .reasoning_plan import ReasoningPlan, reasoning_plan, template_kwargs
from .structured import constraint_spec, off_loop, refuse_past_limits, request_grammar
from .textflow import encode_chat, message_dicts, render_chat_prompt, stop_set
from .textwork import json_reply, refuse_sure_overflow, text_work
from server.text import harmony
from server.text.reasoning import split as split_reasoning

router = APIRouter()


def chat_prompt_ids(state, messages, add_generation_prompt: bool = True,
                    plan: toolmod.ToolPlan | None = None,
                    template_kwargs: dict | None = None) -> list[int]:
    return chat_prompt(state, messages, add_generation_prompt, plan, template_kwargs)[1]


def chat_prompt(state, messages, add_generation_prompt: bool = True,
                plan: toolmod.ToolPlan | None = None,
                template_kwargs: dict | None = None) -> tuple[str, list[int]]:
    """-> (the rendered prompt's text, its token ids)."""
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
    return text, ids


def _token_entry(texts: TokenTexts, token_id: int, logprob) -> dict:
    token, raw = texts.chat(token_id)
    return {"token": token, "logprob": logprob, "bytes": raw}


def logprobs_block(texts: TokenTexts, tokens: list) -> dict:
    return {"content": [
        {**_token_entry(texts, t, lp),
         "top_logprobs": [_token_entry(texts, u, ulp) for u, ulp in top]}
        for t, lp, top in tokens]}


def refuse_grammars_past_limits(body, plan: toolmod.ToolPlan) -> None:
    """The body's grammar and a forced plan's call grammar checked against the grammar
    limits (a 400 invalid_grammar), before the prompt renders: tools past a limit are too
    large as a grammar before they are too large as the prompt."""
    spec = constraint_spec(body)
    if spec is not None:
        refuse_past_limits(*spec)
    if plan.forced:
        refuse_past_limits("lark", toolmod.plan_grammar(plan), "tools")


async def prepare(request, state, body: ChatRequest):
    """-> (the tool plan, the reply's compiled grammar or None, the prompt's ids, the
    reasoning plan): what a chat request needs before it starts; /v1/messages and
    /v1/responses come through here with the ChatRequest they translate to. The prompt is
    rendered first: whether the reply starts inside its reasoning decides where a grammar
    (structured outputs, or a forced plan's call grammar) begins."""
    plan = toolmod.plan(state, body)
    if plan.forced and constraint_spec(body) is not None:
        raise invalid(f"tool_choice {body.tool_choice!r} constrains the reply; it cannot "
                      "be combined with response_format or a grammar", param="tool_choice")
    await off_loop(refuse_grammars_past_limits, body, plan)
    text, ids = await text_work(request).run(chat_prompt, state, body.messages,
                                             body.add_generation_prompt is not False, plan,
                                             template_kwargs(body))
    thinking = reasoning_plan(state, body, text)
    if thinking.harmony:                # the grammar holds the reply's channel markup too
        return plan, await off_loop(harmony_constraint, state, body, plan), ids, thinking
    # a reasoning model's grammar applies from the end of its reasoning
    grammar = await off_loop(request_grammar, state, body, thinking.where)
    if plan.forced:
        grammar = (await off_loop(toolmod.compile_plan, state, plan, thinking.where)).grammar
    return plan, grammar, ids, thinking


@router.post("/v1/chat/completions")
async def chat_completions(request: Request):
    state, metrics = request.app.state.foldserve, request.app.state.metrics
    body = await parse_body(request, ChatRequest)
    check_model(state, body.model)
    refuse_unsupported(body)
    if body.top_logprobs is not None and not body.logprobs:
        raise invalid("top_logprobs needs logprobs=true", param="top_logprobs")
    plan, grammar, ids, thinking = await prepare(request, state, body)
    check_size(len(ids), prompt_logprobs=body.prompt_logprobs)
    logprobs = (body.top_logprobs or 0) if body.logprobs else None
    stops = await stop_set(text_work(request), stop_strings(body))
    rid, gens = start_generations(state, metrics, body, ids, chat=True, logprobs=logprobs,
                                  grammar=grammar, stops=stops, keep_special=thinking.harmony,
                                  thinking=thinking)
    head = {"id": rid, "created": int(time.time()), "model": state.model_name}

    if body.stream:
        opts = body.stream_options
        return sse_response(_stream(state, gens, head, body.logprobs,
                                    bool(opts and opts.include_usage), plan, thinking,
                                    continuous=bool(opts and opts.continuous_usage_stats)))

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
            if thinking.harmony:
                reasoning, answer, calls = harmony.parse(text)
                msg = {"role": "assistant", "content": answer}
                if calls:
                    msg["tool_calls"] = [toolmod.call_dict(c) for c in calls]
                    finish = "tool_calls" if finish == "stop" else finish
            else:
                reasoning, answer = split_reasoning(text, thinking.inside) if thinking.parser \
                    else (None, text)
                msg, finish = toolmod.message(answer, finish, plan)
            if thinking.parser and thinking.include:      # vLLM's two names for it
                msg["reasoning_content"] = msg["reasoning"] = reasoning
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
                  plan: toolmod.ToolPlan, thinking: ReasoningPlan, continuous: bool = False):
    """Chunks: the role, then reasoning deltas (reasoning_content and its alias reasoning)
    and content or tool-call deltas as the reply's parts come, then the finish. A piece's
    logprobs ride on the next delta it gives (text held back as a possible marker waits).
    continuous (stream_options.continuous_usage_stats): every chunk carries the usage so
    far; include_usage: a last chunk with the whole usage (else chunks carry null)."""
    head = {**head, "object": "chat.completion.chunk"}
    parsers = [plan.stream() if plan.parses and not thinking.harmony
               else None for _ in gens]
    splits = [thinking.stream() for _ in gens]
    calls = [0 for _ in gens]                       # harmony: the calls sent so far
    pending: list[list] = [[] for _ in gens]        # tokens whose logprobs are not sent yet
    texts = TokenTexts(state.tokenizer)

    def chunk(i: int, delta: dict, finish=None) -> dict:
        lp = None
        if want_logprobs and pending[i]:
            lp, pending[i] = logprobs_block(texts, pending[i]), []
        extra = {"usage": usage(gens)} if continuous else \
            {"usage": None} if include_usage else {}
        return {**head, "choices": [{"index": i, "delta": delta, "logprobs": lp,
                                     "finish_reason": finish}], **extra}

    def deltas(i: int, parts, cut: bool | None = None):
        tp = parsers[i]
        for part, text in parts:
            if part == "reasoning":
                if thinking.include:
                    yield {"reasoning_content": text, "reasoning": text}
            elif part == "call":                    # harmony: a whole call (a tools.Call)
                yield from toolmod.call_deltas([text], calls[i])
                calls[i] += 1
            elif tp is None:
                yield {"content": text}
            else:
                yield from tp.push(text)
        if cut is not None and tp is not None:
            yield from tp.finish(cut=cut)

    for i in range(len(gens)):
        yield chunk(i, {"role": "assistant", "content": ""})
    async for i, p in merged([g.pieces() for g in gens]):
        rs = splits[i]
        pending[i] += p.tokens
        if p.text:
            for d in deltas(i, [("content", p.text)] if rs is None else rs.push(p.text)):
                yield chunk(i, d)
        if p.error is not None:
            raise p.error
        if p.finish:
            finish = p.finish
            for d in deltas(i, rs.finish() if rs is not None else [], cut=finish == "length"):
                yield chunk(i, d)
            tp = parsers[i]
            if ((tp is not None and tp.count) or calls[i]) and finish == "stop":
                finish = "tool_calls"
            yield chunk(i, {}, finish=finish)
    if include_usage:
        yield {**head, "choices": [], "usage": usage(gens)}
