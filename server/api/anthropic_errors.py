"""Errors in Anthropic's shape on the Messages routes (pure ASGI middleware, outermost).

Every refusal in this server is an ApiError rendered in OpenAI's shape, whoever makes it:
the routes, the body limit, the key check, routing (404, 405), the last-resort 500. On a
path under /v1/messages this middleware rewrites such a reply's body into Anthropic's
`{"type": "error", "error": {"type", "message"}}` (the field it names, OpenAI's `param`,
leading the message when the message does not say it), the status and headers kept, so
every error an Anthropic client meets there is one it parses. Streams (status 200) pass through;
an error inside one is already written in this shape by messages.py (`stream_error`).
"""
from __future__ import annotations

import json

PREFIX = "/v1/messages"

# Anthropic's error types by HTTP status
TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
         404: "not_found_error", 405: "invalid_request_error", 408: "timeout_error",
         413: "request_too_large", 429: "rate_limit_error", 500: "api_error",
         503: "overloaded_error", 529: "overloaded_error"}


def error_type(status: int) -> str:
    return TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


def anthropic_body(status: int, message: str) -> dict:
    return {"type": "error", "error": {"type": error_type(status), "message": message}}


def rewrite(status: int, body: bytes) -> bytes:
    """An OpenAI-shaped error body -> Anthropic's; any other body unchanged."""
    try:
        data = json.loads(body)
    except ValueError:
        return body
    err = data.get("error") if isinstance(data, dict) else None
    if not isinstance(err, dict) or not isinstance(err.get("message"), str):
        return body
    message, param = err["message"], err.get("param")
    if isinstance(param, str) and param not in message:     # the shape has no param: say it
        message = f"{param}: {message}"
    return json.dumps(anthropic_body(status, message), separators=(",", ":")).encode("ascii")


class AnthropicErrors:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith(PREFIX):
            return await self.app(scope, receive, send)
        start: dict | None = None
        chunks: list[bytes] = []

        async def send_rewritten(message):
            nonlocal start
            if message["type"] == "http.response.start" and message["status"] >= 400:
                start = message                 # held until the body is whole
                return
            if start is None or message["type"] != "http.response.body":
                return await send(message)
            chunks.append(message.get("body", b""))
            if message.get("more_body", False):
                return
            body = rewrite(start["status"], b"".join(chunks))
            headers = [(k, v) for k, v in start.get("headers", ()) if k.lower() != b"content-length"]
            headers.append((b"content-length", str(len(body)).encode()))
            await send({**start, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, send_rewritten)
