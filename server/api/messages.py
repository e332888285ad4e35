"""POST /v1/messages and /v1/messages/count_tokens: Anthropic's Messages API, a thin layer
over the chat route's machinery.

A Messages body translates to the ChatRequest it means (`chat_request`): the system prompt
first, each message's text blocks as its content, an assistant's tool_use blocks as
tool_calls, a user's tool_result blocks as tool messages; tools as functions (input_schema
the parameters), tool_choice auto / any / tool / none as auto / required / named / none
(disable_parallel_tool_use: parallel_tool_calls false), stop_sequences as stop,
output_config.format as a json_schema response_format. The chat route's checks, template,
tool parser, grammar and scheduler then serve it. The reply's blocks (reply_blocks.py) come
back as Anthropic's content blocks, streamed as its events: message_start, then per block
content_block_start, content_block_delta (text_delta / input_json_delta),
content_block_stop, then message_delta (stop_reason, stop_sequence, usage) and
message_stop. Usage as Anthropic counts it: input_tokens are the prompt's tokens the prompt
cache did not hold, cache_read_input_tokens those it held.

Errors are in Anthropic's shape: anthropic_errors.py rewrites every refusal on these paths,
and an error inside a stream is an `error` event (`stream_error`).
"""
from __future__ import annotations

import json
import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from . import chat as chatmod
from .anthropic_errors import anthropic_body
from .errors import ApiError, invalid, validation_error
from .messages_request import CountTokensRequest, MessagesRequest
from .reply_blocks import Block, ReplyBlocks
from .request_checks import check_model, parse_body
from .schemas import ChatRequest
from .sampling import check_stops, stop_strings
from .sse import typed_sse_response
from .start import start_generation
from .textflow import stop_set
from .textwork import text_work
from .token_stream import collect

router = APIRouter()


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content or ())


def _messages(body) -> list[dict]:
    """The Messages body's conversation as chat messages."""
    out: list[dict] = []
    if body.system:
        out.append({"role": "system", "content": _text(body.system)})
    for i, m in enumerate(body.messages):
        if isinstance(m.content, str):
            out.append({"role": m.role, "content": m.content})
            continue
        if m.role == "assistant":
            texts, calls = [], []
            for j, b in enumerate(m.content):
                if b.type == "text":
                    texts.append(b.text)
                elif b.type == "tool_use":
                    calls.append({"id": b.id, "type": "function",
                                  "function": {"name": b.name, "arguments": b.input}})
                else:
                    raise invalid(f"messages[{i}].content[{j}]: a tool_result block belongs in "
                                  "a user message", param=f"messages[{i}].content[{j}].type")
            msg = {"role": "assistant", "content": "".join(texts)}
            out.append({**msg, "tool_calls": calls} if calls else msg)
            continue
        texts = []
        for j, b in enumerate(m.content):       # tool results and text, in their order
            if b.type == "text":
                texts.append(b.text)
            elif b.type == "tool_result":
                if texts:
                    out.append({"role": "user", "content": "".join(texts)})
                    texts = []
                result = _text(b.content)
                out.append({"role": "tool", "tool_call_id": b.tool_use_id,
                            "content": ("Error: " + result) if b.is_error else result})
            else:
                raise invalid(f"messages[{i}].content[{j}]: a tool_use block belongs in an "
                              "assistant message", param=f"messages[{i}].content[{j}].type")
        if texts or not m.content:
            out.append({"role": "user", "content": "".join(texts)})
    if body.messages[-1].role != "user":
        raise invalid("the last message must be the user's: continuing a final assistant "
                      "message (prefill) is not supported", param="messages",
                      code="unsupported_field")
    return out


def _tool_choice(body):
    tc = body.tool_choice
    if tc is None:
        return None, True
    parallel = not tc.disable_parallel_tool_use
    if tc.type == "tool":
        if not tc.name:
            raise invalid("tool_choice of type 'tool' needs the tool's name",
                          param="tool_choice.name")
        return {"type": "function", "function": {"name": tc.name}}, parallel
    if tc.name is not None:
        raise invalid(f"tool_choice.name goes with type 'tool', not {tc.type!r}",
                      param="tool_choice.name")
    return {"auto": "auto", "any": "required", "none": "none"}[tc.type], parallel


def chat_request(body) -> ChatRequest:
    """The ChatRequest a Messages (or count_tokens) body means."""
    d: dict = {"messages": _messages(body)}
    if body.tools:
        d["tools"] = [{"type": "function", "function": {
            k: v for k, v in (("name", t.name), ("description", t.description),
                              ("parameters", t.input_schema), ("strict", t.strict))
            if v is not None}} for t in body.tools]
    choice, parallel = _tool_choice(body)
    if choice is not None:
        d["tool_choice"] = choice
    d["parallel_tool_calls"] = parallel
    fmt = body.output_config.format if body.output_config else None
    if fmt is not None:
        d["response_format"] = {"type": "json_schema",
                                "json_schema": {"name": "output", "schema": fmt.schema_}}
    if isinstance(body, MessagesRequest):
        d["max_tokens"] = body.max_tokens
        for name in ("temperature", "top_p", "top_k"):
            if getattr(body, name) is not None:
                d[name] = getattr(body, name)
        if body.stop_sequences:
            check_stops(list(body.stop_sequences), "stop_sequences")   # stop's limits
            d["stop"] = list(body.stop_sequences)
    try:
        return ChatRequest.model_validate(d)
    except ValidationError as e:
        raise validation_error(e.errors(include_url=False)) from None


def message_id() -> str:
    return "msg_" + uuid.uuid4().hex[:24]


def tool_use_id(call_id: str | None) -> str:
    return "toolu_" + (call_id or uuid.uuid4().hex).removeprefix("call_")


def _input(arguments: str) -> dict:
    """A call's arguments as the object Anthropic's tool_use holds; a call cut by max_tokens
    (its JSON unfinished) holds {} (its text went out in the stream's input_json_delta)."""
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def content_block(b: Block) -> dict:
    if b.kind == "text":
        return {"type": "text", "text": b.text}
    return {"type": "tool_use", "id": tool_use_id(b.call_id), "name": b.name,
            "input": _input(b.text)}


def stop_reason(finish: str | None, stop_string: str | None, calls: int) -> tuple:
    """-> (stop_reason, stop_sequence)."""
    if finish == "length":
        return "max_tokens", None
    if stop_string is not None:
        return "stop_sequence", stop_string
    return ("tool_use" if calls else "end_turn"), None


def usage(gen) -> dict:
    cached = min(gen.cached_tokens, gen.prompt_tokens)
    return {"input_tokens": gen.prompt_tokens - cached, "output_tokens": gen.completion_tokens,
            "cache_creation_input_tokens": 0, "cache_read_input_tokens": cached}


def stream_error(e: ApiError) -> list[dict]:
    message = e.message if e.param is None or e.param in e.message else f"{e.param}: {e.message}"
    return [anthropic_body(e.status, message)]


@router.post("/v1/messages")
async def messages(request: Request):
    state, metrics = request.app.state.foldserve, request.app.state.metrics
    body = await parse_body(request, MessagesRequest)
    check_model(state, body.model)
    cb = chat_request(body)
    plan, grammar, ids, thinking = await chatmod.prepare(request, state, cb)
    stops = await stop_set(text_work(request), stop_strings(cb))
    gen = start_generation(state, metrics, cb, ids, chat=True, logprobs=None, grammar=grammar,
                           stops=stops, keep_special=thinking.harmony)
    mid = message_id()
    head = {"id": mid, "type": "message", "role": "assistant", "model": state.model_name}
    if body.stream:
        return typed_sse_response(_stream(gen, head, ReplyBlocks(plan, thinking)), stream_error)
    result = await collect(request, gen)
    if result is None:
        return Response(status_code=499)    # the client left; nobody reads this
    text, _, finish, error = result
    if error is not None:
        raise error
    blocks = ReplyBlocks(plan, thinking).whole(text, cut=finish == "length")
    reason, seq = stop_reason(finish, gen.stop_string, sum(b.kind == "call" for b in blocks))
    return JSONResponse({**head, "content": [content_block(b) for b in blocks if
                                             b.kind == "call" or b.text],
                         "stop_reason": reason, "stop_sequence": seq, "usage": usage(gen)})


async def _stream(gen, head: dict, rb: ReplyBlocks):
    yield {"type": "message_start", "message": {
        **head, "content": [], "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": gen.prompt_tokens, "output_tokens": 0,
                  "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}}
    index: dict[int, int] = {}          # id(block) -> its index among the content blocks

    def events(evs):
        for ev in evs:
            b = ev.block
            if ev.kind == "open":
                index[id(b)] = len(index)
                start = ({"type": "text", "text": ""} if b.kind == "text" else
                         {"type": "tool_use", "id": tool_use_id(b.call_id), "name": b.name,
                          "input": {}})
                yield {"type": "content_block_start", "index": index[id(b)],
                       "content_block": start}
            elif ev.kind == "delta":
                delta = ({"type": "text_delta", "text": ev.delta} if b.kind == "text" else
                         {"type": "input_json_delta", "partial_json": ev.delta})
                yield {"type": "content_block_delta", "index": index[id(b)], "delta": delta}
            else:
                yield {"type": "content_block_stop", "index": index[id(b)]}

    async for evs in rb.stream(gen):
        for e in events(evs):
            yield e
    reason, seq = stop_reason(gen.finish, gen.stop_string, len(rb.calls))
    yield {"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": seq},
           "usage": usage(gen)}
    yield {"type": "message_stop"}


@router.post("/v1/messages/count_tokens")
async def count_tokens(request: Request):
    state = request.app.state.foldserve
    body = await parse_body(request, CountTokensRequest)
    check_model(state, body.model)
    _, _, ids, _ = await chatmod.prepare(request, state, chat_request(body))
    return JSONResponse({"input_tokens": len(ids)})
