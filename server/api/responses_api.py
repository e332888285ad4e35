"""POST /v1/responses: OpenAI's Responses API, a thin layer over the chat route's machinery.

A Responses body translates to the ChatRequest it means (`chat_request`): `instructions` as
the system message, then the stored conversation `previous_response_id` names
(response_store.py), then `input` (a string is one user message; message items by role,
function_call items as the assistant's tool_calls, function_call_output items as tool
messages); function tools, tool_choice and parallel_tool_calls as the chat route takes them,
max_output_tokens as max_tokens, text.format (json_schema, json_object) as response_format.
The chat route's checks, template, tool parser, grammar and scheduler serve it. The reply's
blocks (reply_blocks.py) come back as output items: a message item (one output_text part)
for each stretch of text, a function_call item for each call. A reply cut by
max_output_tokens is status "incomplete" with incomplete_details.reason
"max_output_tokens" (its stream ends with response.incomplete, as OpenAI's).

Streamed: response.created, response.in_progress, then per item response.output_item.added,
(for a message) response.content_part.added, response.output_text.delta..., 
response.output_text.done, response.content_part.done, (for a call)
response.function_call_arguments.delta / .done, then response.output_item.done; last
response.completed (or response.incomplete) with the whole response and its usage. Every
event has a sequence_number from 0. An error inside the stream is an `error` event and then
response.failed.
"""
from __future__ import annotations

import json
import time
import uuid

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from server.requests import SamplingParams

from . import chat as chatmod
from .errors import ApiError, invalid, validation_error
from .reply_blocks import Block, ReplyBlocks
from .request_checks import check_model, parse_body
from .responses_request import FunctionCallItem, FunctionCallOutputItem, ResponsesRequest
from .schemas import ChatRequest
from .sse import typed_sse_response
from .start import start_generation
from .token_stream import collect

router = APIRouter()


def _part_text(content) -> str:
    if isinstance(content, str):
        return content
    return "".join(p.refusal if p.type == "refusal" else p.text for p in content)


def _arguments(text: str, i: int) -> str:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise invalid(f"input[{i}].arguments is not JSON: {e}",
                      param=f"input[{i}].arguments") from None
    if not isinstance(value, dict):
        raise invalid(f"input[{i}].arguments must be a JSON object",
                      param=f"input[{i}].arguments")
    return text


def input_messages(body: ResponsesRequest) -> list[dict]:
    """`input` as chat messages: a function_call joins the assistant message (or calls)
    right before it."""
    if isinstance(body.input, str):
        return [{"role": "user", "content": body.input}]
    out: list[dict] = []
    joins = False                   # the last message is an assistant's that a call may join
    for i, item in enumerate(body.input):
        if isinstance(item, FunctionCallItem):
            call = {"id": item.call_id, "type": "function",
                    "function": {"name": item.name, "arguments": _arguments(item.arguments, i)}}
            if joins:
                out[-1].setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
            joins = True
        elif isinstance(item, FunctionCallOutputItem):
            out.append({"role": "tool", "tool_call_id": item.call_id,
                        "content": _part_text(item.output)})
            joins = False
        else:
            out.append({"role": item.role, "content": _part_text(item.content)})
            joins = item.role == "assistant"
    return out


def output_messages(blocks: list[Block]) -> list[dict]:
    """The reply as the chat messages a continuation renders: one assistant message."""
    text = "".join(b.text for b in blocks if b.kind == "text")
    calls = [{"id": b.call_id, "type": "function",
              "function": {"name": b.name, "arguments": b.text}} for b in blocks
             if b.kind == "call"]
    msg = {"role": "assistant", "content": text}
    return [{**msg, "tool_calls": calls} if calls else msg]


def _response_format(body: ResponsesRequest) -> dict | None:
    fmt = body.text.format if body.text else None
    if fmt is None or fmt.type == "text":
        return None
    if fmt.type == "json_object":
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {
        k: v for k, v in (("name", fmt.name), ("schema", fmt.schema_),
                          ("description", fmt.description), ("strict", fmt.strict))
        if v is not None}}


def conversation(request: Request, body: ResponsesRequest) -> list[dict]:
    """The conversation so far (previous_response_id's) and this input; no instructions."""
    before: list[dict] = []
    if body.previous_response_id is not None:
        before = request.app.state.response_store.get(body.previous_response_id)
        if before is None:
            raise invalid(f"previous_response_id {body.previous_response_id!r} is not held "
                          "by this server: it keeps recent responses in memory only (and "
                          "not those sent with store=false); send the conversation's items "
                          "as input instead", param="previous_response_id",
                          code="previous_response_not_found")
    return before + input_messages(body)


def chat_request(body: ResponsesRequest, messages: list[dict]) -> ChatRequest:
    system = [{"role": "system", "content": body.instructions}] if body.instructions else []
    d: dict = {"messages": system + messages,
               "parallel_tool_calls": body.parallel_tool_calls is not False}
    if body.tools:
        d["tools"] = [{"type": "function", "function": t.model_dump(
            exclude_none=True, exclude={"type"})} for t in body.tools]
    tc = body.tool_choice
    if tc is not None:
        d["tool_choice"] = tc if isinstance(tc, str) else {"type": "function",
                                                           "function": {"name": tc.name}}
    rf = _response_format(body)
    if rf is not None:
        d["response_format"] = rf
    for ours, chats in (("max_output_tokens", "max_tokens"), ("temperature", "temperature"),
                        ("top_p", "top_p")):
        if getattr(body, ours) is not None:
            d[chats] = getattr(body, ours)
    try:
        return ChatRequest.model_validate(d)
    except ValidationError as e:
        raise validation_error(e.errors(include_url=False)) from None


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def text_item(item_id: str, text: str, status: str) -> dict:
    return {"type": "message", "id": item_id, "status": status, "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": [],
                         "logprobs": []}]}


def call_item(item_id: str, b: Block, status: str) -> dict:
    return {"type": "function_call", "id": item_id, "call_id": b.call_id, "name": b.name,
            "arguments": b.text, "status": status}


def usage(gen) -> dict:
    return {"input_tokens": gen.prompt_tokens,
            "input_tokens_details": {"cached_tokens": gen.cached_tokens},
            "output_tokens": gen.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": gen.reasoning_tokens},
            "total_tokens": gen.prompt_tokens + gen.completion_tokens}


class ResponseBody:
    """The response object, from created to its end; the stream's sequence numbers."""

    def __init__(self, state, body: ResponsesRequest):
        d = SamplingParams()
        self.id = _id("resp")
        self.seq = 0
        fmt = body.text.format if body.text and body.text.format else None
        self.obj = {
            "id": self.id, "object": "response", "created_at": int(time.time()),
            "status": "in_progress", "completed_at": None, "error": None,
            "incomplete_details": None, "instructions": body.instructions,
            "max_output_tokens": body.max_output_tokens, "model": state.model_name,
            "output": [], "parallel_tool_calls": body.parallel_tool_calls is not False,
            "previous_response_id": body.previous_response_id, "reasoning": None,
            "store": body.store is not False,
            "temperature": d.temperature if body.temperature is None else body.temperature,
            "text": {"format": fmt.model_dump(by_alias=True, exclude_none=True) if fmt
                     else {"type": "text"}},
            "tool_choice": (body.tool_choice if isinstance(body.tool_choice, str) else
                            body.tool_choice.model_dump() if body.tool_choice else
                            ("auto" if body.tools else "none")),
            "tools": [t.model_dump(exclude_none=True) | {"parameters": t.parameters,
                                                         "strict": t.strict}
                      for t in body.tools or ()],
            "top_p": d.top_p if body.top_p is None else body.top_p,
            "truncation": "disabled", "usage": None, "user": body.user,
            "metadata": body.metadata or {}}

    def event(self, kind: str, **fields) -> dict:
        ev = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return ev

    def finish(self, items: list[dict], finish: str | None, gen) -> dict:
        cut = finish == "length"
        self.obj.update(status="incomplete" if cut else "completed", output=items,
                        usage=usage(gen), completed_at=None if cut else int(time.time()),
                        incomplete_details={"reason": "max_output_tokens"} if cut else None)
        return self.obj

    def failed(self, e: ApiError) -> list[dict]:
        self.obj.update(status="failed", error={"code": e.code or "server_error",
                                                "message": e.message})
        return [self.event("error", code=e.code, message=e.message, param=e.param),
                self.event("response.failed", response=self.obj)]


def _items(blocks: list[Block], finish: str | None) -> list[dict]:
    out = []
    for k, b in enumerate(blocks):
        status = "incomplete" if finish == "length" and k == len(blocks) - 1 else "completed"
        out.append(text_item(_id("msg"), b.text, status) if b.kind == "text" else
                   call_item(_id("fc"), b, status))
    return out


@router.post("/v1/responses")
async def responses(request: Request):
    state, metrics = request.app.state.foldserve, request.app.state.metrics
    body = await parse_body(request, ResponsesRequest)
    check_model(state, body.model)
    convo = conversation(request, body)
    cb = chat_request(body, convo)
    plan, grammar, ids, thinking = await chatmod.prepare(request, state, cb)
    gen = start_generation(state, metrics, cb, ids, chat=True, logprobs=None, grammar=grammar,
                           keep_special=thinking.harmony, thinking=thinking)
    rb, resp = ReplyBlocks(plan, thinking), ResponseBody(state, body)
    store = request.app.state.response_store if body.store is not False else None
    if body.stream:
        return typed_sse_response(_stream(gen, rb, resp, convo, store), resp.failed)
    result = await collect(request, gen)
    if result is None:
        return Response(status_code=499)    # the client left; nobody reads this
    text, _, finish, error = result
    if error is not None:
        raise error
    blocks = [b for b in rb.whole(text, cut=finish == "length") if b.kind == "call" or b.text]
    obj = resp.finish(_items(blocks, finish), finish, gen)
    if store is not None:
        store.put(resp.id, convo + output_messages(blocks))
    return JSONResponse(obj)


async def _stream(gen, rb: ReplyBlocks, resp: ResponseBody, convo: list[dict], store):
    yield resp.event("response.created", response=dict(resp.obj))
    yield resp.event("response.in_progress", response=dict(resp.obj))
    items: list[dict] = []
    where: dict[int, tuple[int, str]] = {}      # id(block) -> (output_index, item id)

    def events(evs):
        for ev in evs:
            b = ev.block
            if ev.kind == "open":
                item_id = _id("msg" if b.kind == "text" else "fc")
                where[id(b)] = (len(where), item_id)
                n = where[id(b)][0]
                if b.kind == "text":
                    item = text_item(item_id, "", "in_progress") | {"content": []}
                    yield resp.event("response.output_item.added", output_index=n, item=item)
                    yield resp.event("response.content_part.added", item_id=item_id,
                                     output_index=n, content_index=0,
                                     part={"type": "output_text", "text": "",
                                           "annotations": [], "logprobs": []})
                else:
                    yield resp.event("response.output_item.added", output_index=n,
                                     item=call_item(item_id, Block("call", "", b.call_id,
                                                                   b.name), "in_progress"))
                continue
            n, item_id = where[id(b)]
            if ev.kind == "delta":
                if b.kind == "text":
                    yield resp.event("response.output_text.delta", item_id=item_id,
                                     output_index=n, content_index=0, delta=ev.delta,
                                     logprobs=[])
                else:
                    yield resp.event("response.function_call_arguments.delta",
                                     item_id=item_id, output_index=n, delta=ev.delta)
                continue
            status = "incomplete" if gen.finish == "length" else "completed"
            if b.kind == "text":
                item = text_item(item_id, b.text, status)
                yield resp.event("response.output_text.done", item_id=item_id, output_index=n,
                                 content_index=0, text=b.text, logprobs=[])
                yield resp.event("response.content_part.done", item_id=item_id,
                                 output_index=n, content_index=0, part=item["content"][0])
            else:
                item = call_item(item_id, b, status)
                yield resp.event("response.function_call_arguments.done", item_id=item_id,
                                 output_index=n, name=b.name, arguments=b.text)
            items.append(item)
            yield resp.event("response.output_item.done", output_index=n, item=item)

    async for evs in rb.stream(gen):
        for e in events(evs):
            yield e
    obj = resp.finish(items, gen.finish, gen)
    if store is not None:
        store.put(resp.id, convo + output_messages(rb.blocks))
    yield resp.event("response.incomplete" if gen.finish == "length"
                     else "response.completed", response=obj)
