"""API-key check (pure ASGI middleware): with --api-key set, the OpenAI and Anthropic routes
and /tokenize, /detokenize need `Authorization: Bearer KEY` or (as Anthropic's clients send
it) `x-api-key: KEY`; /health, /ping, /version and /metrics stay open for probes and
scrapers."""
from __future__ import annotations

import hmac

from .errors import ApiError

OPEN_PATHS = ("/health", "/metrics", "/docs", "/openapi.json", "/ping", "/version")


def needs_key(path: str) -> bool:
    return not path.startswith(OPEN_PATHS)


class BearerAuth:
    def __init__(self, app, api_key: str | None):
        self.app = app
        self.key = api_key.encode() if api_key else None

    async def __call__(self, scope, receive, send):
        if self.key is None or scope["type"] != "http" or not needs_key(scope["path"]):
            return await self.app(scope, receive, send)
        headers = dict(scope.get("headers") or ())
        header = headers.get(b"authorization", b"")
        scheme, _, given = header.partition(b" ")
        x_key = headers.get(b"x-api-key")
        if scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.key):
            return await self.app(scope, receive, send)
        if x_key is not None and hmac.compare_digest(x_key.strip(), self.key):
            return await self.app(scope, receive, send)
        message = ("Missing API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'"
                   if not header and x_key is None else "Incorrect API key provided")
        err = ApiError(401, message, code="invalid_api_key",
                       headers={"WWW-Authenticate": "Bearer"})
        await err.response()(scope, receive, send)
