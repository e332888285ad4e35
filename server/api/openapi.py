"""The OpenAPI document, as strict as the server: a body the schema allows is one the
server takes, a body it refuses is one the server refuses with a 4xx, and every status a
route can answer is listed with its body's schema (errors in OpenAI's shape, streams as
text/event-stream). tests/api/test_schemathesis.py holds the server to it.

The routes read raw bytes (so malformed JSON and wrong types get OpenAI-shaped 400s), so
the request bodies are put in here from the pydantic models of schemas.py; the checks the
routes make beyond those models (sampling.refuse_unsupported, textflow, tokenize) are
written into the document by `tighten`. Two rules stay out of every schema, as they count
the prompt's tokens: they plus max_tokens must fit the context (a 400, code
context_length_exceeded), and a reply holds at most prompt_logprob_json.MAX_ENTRIES
prompt-logprob entries (a 400 naming prompt_logprobs, or logprobs with echo).
"""
from __future__ import annotations

from .sampling import MAX_N, MAX_STOP_CHARS, MAX_STOPS

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from . import messages_reply as M
from . import messages_request as MQ
from . import responses as R
from . import responses_reply as RR
from . import responses_request as RQ
from .schemas import ChatRequest, CompletionRequest, DetokenizeRequest, TokenizeRequest
from .unsupported import CHAT_UNSUPPORTED, UNSUPPORTED

BODIES = {"/v1/completions": CompletionRequest, "/v1/chat/completions": ChatRequest,
          "/v1/messages": MQ.MessagesRequest, "/v1/messages/count_tokens": MQ.CountTokensRequest,
          "/v1/responses": RQ.ResponsesRequest,
          "/tokenize": TokenizeRequest, "/detokenize": DetokenizeRequest}

REPLIES = {  # (path, method) -> the 200 body, and the streamed event's (None: no stream)
    ("/v1/completions", "post"): (R.Completion, R.CompletionChunk),
    ("/v1/chat/completions", "post"): (R.ChatCompletion, R.ChatChunk),
    ("/v1/messages", "post"): (M.AnthropicMessage, M.MessageStreamEvent),
    ("/v1/messages/count_tokens", "post"): (M.TokenCount, None),
    ("/v1/responses", "post"): (RR.ResponseObject, RR.ResponseStreamEvent),
    ("/v1/models", "get"): (R.ModelList, None),
    ("/v1/models/{model_id}", "get"): (R.ModelCard, None),
    ("/health", "get"): (R.Health, None),
    ("/tokenize", "post"): (R.Tokens, None),
    ("/detokenize", "post"): (R.Detokenized, None),
}

ERRORS = {
    400: "Malformed JSON, a wrong type, an out-of-range value, a field this server does not "
         "serve, or a prompt past the context (code context_length_exceeded)",
    401: "The server has API keys (FOLDSERVE_API_KEY, --api-key-file, --api-key) and the "
         "bearer is missing or none of them (code invalid_api_key)",
    404: "The model is not the served one (code model_not_found), or no such route",
    413: "The body is past --max-body-bytes (code request_too_large)",
    415: "The body's Content-Type is missing or not JSON (application/json or "
         "application/*+json, a charset only UTF-8) (code unsupported_media_type)",
    431: "The request line and headers are past 16 KiB (code request_header_too_large); "
         "the connection is closed",
    500: "Only a bug in foldserve (code internal_error)",
    503: "The queue is full (code queue_full, header Retry-After) or a rank is gone "
         "(code rank_lost)",
}
ERRORS_BY_ROUTE = {
    "post": (400, 404, 413, 415, 500),
    "get": (404, 500),
}
GENERATING = ("/v1/completions", "/v1/chat/completions", "/v1/messages", "/v1/responses")
ANTHROPIC = ("/v1/messages", "/v1/messages/count_tokens")     # errors in Anthropic's shape
TYPED_STREAMS = ("/v1/messages", "/v1/responses")   # `event: TYPE` + data, no [DONE]

TYPED_SSE = ("One `event: TYPE` + `data: {json}` event per step, the data's type its name "
             "(Anthropic's or OpenAI's Responses events); an error after the stream opened "
             "is the route's error event, then the end (no [DONE])")
SSE = ("One `data: {json}` event per chunk (a completion or chat.completion.chunk object), "
       "then `data: [DONE]`; an error after the stream opened is one `data: {\"error\": "
       "{...}}` event, then `data: [DONE]`")


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _nullable(*branches: dict) -> dict:
    return {"anyOf": [*branches, {"type": "null"}]}


def id_pattern(vocab) -> str:
    """A regex for the decimal token ids 0 .. vocab - 1 (no sign, no leading zeros): the
    keys of logit_bias as sampling.logit_bias takes them."""
    if not (isinstance(vocab, int) and vocab > 0):
        return r"^(0|[1-9][0-9]*)$"
    top = str(vocab - 1)
    alts = ["0"] if top != "0" else []
    if len(top) > 1:                                    # every shorter number
        alts.append(f"[1-9][0-9]{{0,{len(top) - 2}}}" if len(top) > 2 else "[1-9]")
    for i, ch in enumerate(top):                        # same length, first smaller digit at i
        lo = "1" if i == 0 else "0"
        if ch > lo or (i == 0 and ch == lo and len(top) == 1):
            hi = chr(ord(ch) - 1)
            if hi >= lo:
                rest = len(top) - i - 1
                alts.append(top[:i] + f"[{lo}-{hi}]" + (f"[0-9]{{{rest}}}" if rest else ""))
    alts.append(top)
    return "^(" + "|".join(dict.fromkeys(alts)) + ")$"


def token_id(vocab) -> dict:
    s = {"type": "integer", "minimum": 0}
    if isinstance(vocab, int) and vocab > 0:
        s["maximum"] = vocab - 1
    return s


def sse_event(chunk: str) -> dict:
    """One server-sent event: its data is a chunk, an error, or the closing [DONE]."""
    return {"type": "object", "required": ["data"], "properties": {"data": {
        "type": "string",
        "if": {"const": "[DONE]"},
        "else": {"contentMediaType": "application/json",
                 "contentSchema": {"anyOf": [_ref(chunk), _ref("ErrorBody")]}}}}}


def typed_sse_event(event: str) -> dict:
    """One server-sent event of the Messages and Responses streams: named by its data's
    type (an error too: the route's own error event)."""
    return {"type": "object", "required": ["event", "data"], "properties": {
        "event": {"type": "string"},
        "data": {"type": "string", "contentMediaType": "application/json",
                 "contentSchema": _ref(event)}}}


def no_op_values(values: tuple) -> list:
    """unsupported.py's values that ask for nothing, as a JSON Schema enum: one of each
    number (1 and 1.0 are the same JSON number; the server takes both)."""
    out: list = []
    for v in values:
        if not any(v == o and isinstance(v, bool) == isinstance(o, bool) for o in out):
            out.append(v)
    return out


def refused_fields(props: dict, table: dict) -> None:
    """Fields other servers define and this one refuses (server/api/unsupported.py), unless
    sent with a value that asks for nothing: without them in the document, a body carrying
    one (say prompt_embeds) is schema-valid, the schema letting other fields through."""
    for field, (ok, why) in table.items():
        if field not in props:                           # one the model reads is tightened above
            props[field] = {"enum": no_op_values(ok), "description": "not supported (a 400, "
                            f"code unsupported_field, for any other value): {why}"}


def tighten(components: dict, vocab) -> None:
    """The routes' own checks, written into the request schemas."""
    tid = token_id(vocab)
    text = {"type": "string", "minLength": 1}
    stop_text = {**text, "maxLength": MAX_STOP_CHARS}   # sampling: MAX_STOPS, MAX_STOP_CHARS
    stop = _nullable(stop_text, {"type": "array", "items": stop_text, "maxItems": MAX_STOPS})
    for name in ("CompletionRequest", "ChatRequest"):
        props = components[name]["properties"]
        refused_fields(props, {**UNSUPPORTED, **(CHAT_UNSUPPORTED if name == "ChatRequest"
                                                 else {})})
        props["n"] = {**_nullable({"type": "integer", "minimum": 1, "maximum": MAX_N}),
                      "description": f"choices, 1..{MAX_N} (sampling.MAX_N)"}
        props["stop"] = stop                             # sampling: no empty stop string
        props["stop_token_ids"] = _nullable({"type": "array", "items": tid})   # start.py
        props["logit_bias"] = _nullable({                # sampling.logit_bias
            "type": "object", "propertyNames": {"pattern": id_pattern(vocab)},
            "additionalProperties": {"type": "number", "minimum": -100, "maximum": 100}})
        # sampling.refuse_unsupported: prompt_logprobs is not streamed (vLLM's rule)
        components[name].setdefault("allOf", []).append({
            "if": {"required": ["stream"], "properties": {"stream": {"const": True}}},
            "then": {"properties": {"prompt_logprobs": {"type": "null"}}}})
    comp = components["CompletionRequest"]["properties"]
    comp["prompt"] = {"anyOf": [
        text,                                            # completions.prompt_ids: not empty
        {"type": "array", "items": tid, "minItems": 1},
        {"type": "array", "items": text, "minItems": 1},   # several prompts: choices i*n+j
        {"type": "array", "items": {"type": "array", "items": tid, "minItems": 1},
         "minItems": 1}]}
    comp["best_of"] = _nullable({"type": "integer", "minimum": 1, "maximum": 1})
    # sampling.refuse_unsupported: echo with logprobs is not streamed (prompt logprobs)
    components["CompletionRequest"]["if"] = {"required": ["echo", "stream"],
                                             "properties": {"echo": {"const": True},
                                                            "stream": {"const": True}}}
    components["CompletionRequest"]["then"] = {"properties": {"logprobs": {"type": "null"}}}
    comp["suffix"] = _nullable({"type": "string", "maxLength": 0})
    chat = components["ChatRequest"]
    # chat.py: top_logprobs needs logprobs=true
    chat["if"] = {"required": ["top_logprobs"],
                  "properties": {"top_logprobs": {"type": "integer"}}}
    chat["then"] = {"required": ["logprobs"], "properties": {"logprobs": {"const": True}}}
    # textflow.message_dicts: parts are text parts; a tool message names its call
    components["TextPart"]["properties"] = {"type": {"type": "string", "enum": ["text"]},
                                            "text": {"type": "string"}}
    components["TextPart"]["required"] = ["type", "text"]
    msg = components["Message"]
    msg["if"] = {"properties": {"role": {"const": "tool"}}}
    msg["then"] = {"required": ["tool_call_id"],
                   "properties": {"tool_call_id": {"type": "string", "minLength": 1}}}
    # tokenize.py: exactly one of prompt and messages (null counts as left out)
    tok = components["TokenizeRequest"]
    tok["oneOf"] = [
        {"required": ["prompt"], "properties": {"prompt": {"type": "string"},
                                                "messages": {"type": "null"},
                                                "tools": {"type": "null"},
                                                "chat_template_kwargs": {"type": "null"}}},
        {"required": ["messages"], "properties": {"messages": {"type": "array", "minItems": 1},
                                                  "prompt": {"type": "null"}}}]
    components["DetokenizeRequest"]["properties"]["tokens"] = {"type": "array", "items": tid}
    tighten_agents(components)


def tighten_agents(components: dict) -> None:
    """The Messages and Responses routes' own checks, written into their schemas."""
    for name, table in (("CountTokensRequest", MQ.REFUSED), ("MessagesRequest", MQ.REFUSED),
                        ("ResponsesRequest", RQ.REFUSED)):
        props = components[name]["properties"]
        for field, (ok, why) in table.items():          # messages_request / responses_request
            props[field] = {"enum": no_op_values(ok), "description": "not supported (a 400, "
                            f"code unsupported_field, for any other value): {why}"}
    # messages.py: stop_sequences under stop's limits (sampling.check_stops)
    stop_text = {"type": "string", "minLength": 1, "maxLength": MAX_STOP_CHARS}
    components["MessagesRequest"]["properties"]["stop_sequences"] = _nullable(
        {"type": "array", "items": stop_text, "maxItems": MAX_STOPS})
    # messages.py: tool_use blocks in assistant messages, tool_result blocks in user messages
    msg = components["MessageIn"]
    msg["allOf"] = [
        {"if": {"properties": {"role": {"const": role}}},
         "then": {"properties": {"content": {"anyOf": [
             {"type": "string"},
             {"type": "array", "items": {"not": {"properties": {"type": {"const": other}},
                                                  "required": ["type"]}}}]}}}}
        for role, other in (("user", "tool_use"), ("assistant", "tool_result"))]
    # messages.py: tool_choice's name with type "tool", and only then
    components["ToolChoice"]["if"] = {"properties": {"type": {"const": "tool"}}}
    components["ToolChoice"]["then"] = {"required": ["name"],
                                        "properties": {"name": {"type": "string"}}}
    components["ToolChoice"]["else"] = {"properties": {"name": {"type": "null"}}}


def _responses(path: str, method: str, api_key: bool) -> dict:
    out = {}
    model, chunk = REPLIES[(path, method)]
    streams = chunk is not None
    content = {"application/json": {"schema": _ref(model.__name__)}}
    if path in ANTHROPIC:
        content = {"application/json": {"schema": _ref(model.__name__)}}
    if streams and path in TYPED_STREAMS:
        content["text/event-stream"] = {"schema": typed_sse_event(chunk.__name__),
                                        "description": TYPED_SSE}
    elif streams:
        content["text/event-stream"] = {"schema": sse_event(chunk.__name__),
                                        "description": SSE}
    out["200"] = {"description": "OK" + (" (a stream with \"stream\": true)" if streams else ""),
                  "content": content}
    if path == "/health":
        out["503"] = {"description": "A rank is gone (status unhealthy, the reason naming it) "
                                     "or the server shuts down (status stopping)",
                      "content": {"application/json": {"schema": _ref("Health")}}}
        return out
    codes = list(ERRORS_BY_ROUTE[method])
    if path in GENERATING:
        codes.append(503)
    if api_key:
        codes.append(401)
    if path == "/v1/models":
        codes.remove(404)
    error = "AnthropicErrorBody" if path in ANTHROPIC else "ErrorBody"
    for code in sorted(codes):
        out[str(code)] = {"description": ERRORS[code],
                          "content": {"application/json": {"schema": _ref(error)}}}
    return out


def build_document(app: FastAPI) -> dict:
    state = app.state.foldserve
    doc = get_openapi(title=app.title, version=app.version, summary=app.summary,
                      routes=app.routes)
    components = doc.setdefault("components", {}).setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):   # we answer 400, never 422
        components.pop(name, None)
    models = [*BODIES.values(), *(m for pair in REPLIES.values() for m in pair if m),
              R.ErrorBody, M.AnthropicErrorBody]
    for model in models:
        schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
        for name, sub in {**schema.pop("$defs", {}), model.__name__: schema}.items():
            if components.get(name, sub) != sub:    # two models of one name: one would be lost
                raise AssertionError(f"two request or reply models are named {name}")
            components[name] = sub
    tighten(components, getattr(state.tokenizer, "vocab_size", None))
    for path, model in BODIES.items():
        doc["paths"][path]["post"]["requestBody"] = {"required": True, "content": {
            "application/json": {"schema": _ref(model.__name__)}}}
    for (path, method) in REPLIES:
        doc["paths"][path][method]["responses"] = _responses(path, method, bool(state.api_keys))
    for ops in doc["paths"].values():           # any request's head may be too large
        for op in ops.values():
            op["responses"]["431"] = {"description": ERRORS[431], "content": {
                "application/json": {"schema": _ref("ErrorBody")}}}
    if state.api_keys:
        doc["components"]["securitySchemes"] = {
            "bearer": {"type": "http", "scheme": "bearer"},
            "x-api-key": {"type": "apiKey", "in": "header", "name": "x-api-key"}}
        for path, ops in doc["paths"].items():
            if path != "/health":
                for op in ops.values():
                    op["security"] = [{"bearer": []}, {"x-api-key": []}]   # either
    return doc


def install_openapi(app: FastAPI) -> None:
    def openapi() -> dict:
        if not app.openapi_schema:
            app.openapi_schema = build_document(app)
        return app.openapi_schema

    app.openapi = openapi
